"""In-process, text in and text out: strictcall's Gateway against the stdlib floor.

Run by bench/run.py with the project's venv; prints one JSON document. Rows:

- gateway on in-memory notes: `Gateway.call_text(raw, identity, call_id)` with a read_note
  `Tool` over a dict (the seed's schemas), valid, wrong-typed and cross-owner calls;
- gateway on the SQLite store: `strictcall.services.notes.notes_gateway(SQLiteStore(path))`, notes
  seeded for u1 and u2 in a temp dir ("not available" until both modules exist);
- a reference: the floor plus one sqlite3 SELECT on an indexed table of its own, so that the
  SQLite row can be read as (floor + database) + strictcall.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

import harness
from harness import CALL_ID, INVALID, N1_TEXT, NOTES, Target


def answer_check(
    note_id: str, text: str
) -> Any:  # a checker of Gateway answers (bytes of {"ok", "call_id", ...})
    expected_ok = {"ok": True, "call_id": CALL_ID, "result": {"note_id": note_id, "text": text}}

    def check(case: str, out: Any) -> str | None:
        if not isinstance(out, bytes | str):
            return f"answer is {type(out).__name__}, not JSON text"
        answer = json.loads(out)
        if case == "valid":
            return None if answer == expected_ok else f"not the note: {_short(out)}"
        code = answer.get("error", {}).get("code") if answer.get("ok") is False else None
        wanted = "invalid_arguments" if case == "invalid" else "forbidden_or_missing"
        return None if code == wanted else f"expected {wanted}: {_short(out)}"

    return check


def _short(out: bytes | str) -> str:
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
    return text[:200]


def in_memory_gateway() -> Any:
    """A Gateway with one read_note Tool over the in-memory notes (the seed's schemas)."""
    from strictcall import Gateway, Tool, ToolContext

    try:  # the seed's declared schemas, so the bench checks what the product checks
        from strictcall.services.demo import READ_NOTE_INPUT, READ_NOTE_OUTPUT

        input_schema: dict[str, Any] = dict(READ_NOTE_INPUT)
        output_schema: dict[str, Any] = dict(READ_NOTE_OUTPUT)
    except ImportError:
        input_schema = {
            "type": "object",
            "properties": {"note_id": {"type": "string", "minLength": 1}},
            "required": ["note_id"],
            "additionalProperties": False,
        }
        output_schema = {
            "type": "object",
            "properties": {"note_id": {"type": "string"}, "text": {"type": "string"}},
            "required": ["note_id", "text"],
            "additionalProperties": False,
        }

    def owns(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        return arguments["note_id"] in NOTES.get(ctx.identity, {})

    def read(ctx: ToolContext, arguments: dict[str, Any]) -> Any:
        note_id = arguments["note_id"]
        return {"note_id": note_id, "text": NOTES[ctx.identity][note_id]}

    def same_note(arguments: dict[str, Any], result: Any) -> bool:
        return bool(result["note_id"] == arguments["note_id"])

    return Gateway(
        [
            Tool(
                name="read_note",
                description="Read one of the caller's notes by its id.",
                input_schema=input_schema,
                output_schema=output_schema,
                handler=read,
                authorize=owns,
                result_matches=same_note,
            )
        ]
    )


def in_memory_target() -> Target:
    call_text = in_memory_gateway().call_text
    calls = {
        label: (lambda raw=raw, ident=ident: call_text(raw, ident, CALL_ID))
        for label, raw, ident in harness.CASES
    }
    return Target(
        "strictcall gateway, in-memory notes",
        "Gateway.call_text(raw, identity, call_id), read_note Tool over a dict",
        calls,
        answer_check("n1", N1_TEXT),
    )


# --- SLOT: strictcall gateway on the SQLite store ----------------------------------------------
# Waits for `strictcall.storage.sqlite.SQLiteStore(path)` and
# `strictcall.services.notes.notes_gateway(store)`
# returning a Gateway with read_note/list_notes/count_notes/create_note/delete_note.


def sqlite_target(workdir: Path) -> tuple[Target, Any]:
    """The notes gateway on a fresh SQLite file with u1's and u2's notes; and the store."""
    what = "notes_gateway(SQLiteStore(tmp)).call_text(raw, identity, call_id)"
    try:
        from strictcall.services.notes import notes_gateway
        from strictcall.storage.sqlite import SQLiteStore
    except ImportError as exc:
        missing = (
            "waits for strictcall.storage.sqlite.SQLiteStore(path) and "
            f"strictcall.services.notes.notes_gateway(store) ({exc})"
        )
        return Target(
            "strictcall gateway, SQLite store", what, {}, _never, unavailable=missing
        ), None
    store = SQLiteStore(workdir / "notes.sqlite3")
    gateway = notes_gateway(store)
    note_id = _seed_note(store, gateway, "u1", N1_TEXT)
    _seed_note(store, gateway, "u2", NOTES["u2"]["n2"])
    valid = json.dumps({"name": "read_note", "arguments": {"note_id": note_id}})
    call_text = gateway.call_text
    calls = {
        "valid": lambda: call_text(valid, "u1", CALL_ID),
        "invalid": lambda: call_text(INVALID, "u1", CALL_ID),
        "cross_owner": lambda: call_text(valid, "u2", CALL_ID),
    }
    target = Target("strictcall gateway, SQLite store", what, calls, answer_check(note_id, N1_TEXT))
    return target, store


def _seed_note(store: Any, gateway: Any, owner: str, text: str) -> str:
    """Add a note: the store's operator path if it has one, else create_note via the gateway."""
    add = getattr(store, "add_note", None)
    if add is not None:
        return str(add(owner, text).note_id)
    raw = json.dumps({"name": "create_note", "arguments": {"text": text}})
    answer = json.loads(gateway.call_text(raw, owner, f"seed-{owner}"))
    return str(answer["result"]["note_id"])


def _never(case: str, out: Any) -> str | None:
    return "not available"


def sqlite_floor_target(workdir: Path) -> Target:
    """Reference: the floor with the lookup done by one indexed sqlite3 SELECT."""
    conn = sqlite3.connect(workdir / "floor.sqlite3", check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, owner TEXT NOT NULL, text TEXT)")
    for owner, notes in NOTES.items():
        for note_id, text in notes.items():
            conn.execute("INSERT INTO notes VALUES (?, ?, ?)", (note_id, owner, text))
    conn.commit()

    def call(raw: str, identity: str) -> str:
        call = json.loads(raw)
        note_id = call["arguments"]["note_id"]
        row = conn.execute(
            "SELECT text FROM notes WHERE id = ? AND owner = ?", (note_id, identity)
        ).fetchone()
        if row is None:
            return json.dumps({"ok": False, "call_id": CALL_ID, "error": {"code": "not_found"}})
        return json.dumps(
            {"ok": True, "call_id": CALL_ID, "result": {"note_id": note_id, "text": row[0]}}
        )

    calls = {
        label: (lambda raw=raw, ident=ident: call(raw, ident))
        for label, raw, ident in harness.CASES
    }
    return Target(
        "reference: floor + sqlite3 SELECT",
        "the floor, lookup by one indexed SELECT (no checks)",
        calls,
        harness.floor_is_right,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=float, default=0.05, help="seconds per timed batch")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="strictcall-bench-") as tmp:
        workdir = Path(tmp)
        targets = [in_memory_target()]
        store = None
        try:
            sqlite, store = sqlite_target(workdir)
            targets.append(sqlite)
        except Exception as exc:  # the slot exists but does not work yet: say so, go on
            targets.append(
                Target(
                    "strictcall gateway, SQLite store",
                    "notes_gateway(SQLiteStore(tmp))",
                    {},
                    _never,
                    unavailable=f"failed to set up: {type(exc).__name__}: {str(exc)[:200]}",
                )
            )
        targets.append(sqlite_floor_target(workdir))
        try:
            rows = harness.run_rounds(
                targets, [c for c, _, _ in harness.CASES], args.rounds, args.batch
            )
        finally:
            close = getattr(store, "close", None)
            if close is not None:
                close()
    harness.emit({"process": "strictcall", "python": harness.python_version(), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
