"""`strictcall audit` answers an operator's questions (--identity, --tool, --since, --errors,
--json) with the same columns in every mode, and no field a caller chose (call id, tool name,
identity) reaches the terminal raw in any command: a call id holding ESC[2J and a newline
neither clears the screen nor forges an audit line."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from servers import ctrl_c_as_at_a_terminal, strictcall
from strictcall.errors import INVALID_ARGUMENTS, UNKNOWN_TOOL, Reason, Stage
from strictcall.storage import AuditRecord, open_store

DEADLINE_S = 20.0
FORGED_ID = "c\x1b[2J\n  2026-01-01T00:00:00Z  ok     -  forged\x1b[1;1H\r\x07\u202e\x9b"
FORGED_TOOL = "t\x1b]0;title\x07\nforged"
FORGED_IDENTITY = "u\x1b[31m\nred"


def record(db: Path | str, *records: AuditRecord) -> None:
    store = open_store(str(db))
    try:
        store.record_calls(records)
    finally:
        store.close()


def ok(at: float, identity: str = "u1", call_id: str = "c1") -> AuditRecord:
    return AuditRecord(at, call_id, identity, "count_notes", "ok", None, None, 40)


def shape(at: float, identity: str = "u2") -> AuditRecord:
    return AuditRecord(
        at, "c2", identity, "read_note", "error", INVALID_ARGUMENTS.code, str(Stage.SHAPE), 50,
        str(Reason.TYPE), "/arguments/note_id",
    )  # fmt: skip


def forged(at: float) -> AuditRecord:
    return AuditRecord(
        at, FORGED_ID, FORGED_IDENTITY, FORGED_TOOL, "error", UNKNOWN_TOOL.code,
        str(Stage.ROUTE), 30,
    )  # fmt: skip


def assert_no_control_text(text: str) -> None:
    """Nothing that a terminal acts on: no C0 or C1 control but the line ends, no bidi
    override, and every line one of the command's own (no forged line)."""
    for line in text.splitlines():
        assert line.isprintable(), repr(line)
    assert "\x1b" not in text and "\r" not in text and "\x9b" not in text
    assert not any(line.lstrip().startswith("2026-01-01T00:00:00Z") for line in text.splitlines())


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A store of each kind holding five records, one forged, one two hours old."""
    path: Path | str = tmp_path / "s.sqlite3"
    if request.param == "postgres":
        path = str(request.getfixturevalue("pg_url"))
    now = time.time()
    record(
        path,
        shape(now - 7200, "u2"),  # two hours ago
        ok(now - 30, "u1"),
        shape(now - 20, "u2"),
        ok(now - 10, "u2", "c9"),
        forged(now - 5),
    )
    return path


def lines_of(*args: str) -> list[str]:
    done = strictcall("audit", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_audit_filters_by_identity_tool_since_and_errors(db: Path | str) -> None:
    as_json = [json.loads(line) for line in lines_of("--json", "--db", str(db))]
    assert len(as_json) == 5
    u2 = [json.loads(line) for line in lines_of("--json", "--identity", "u2", "--db", str(db))]
    assert [r["identity"] for r in u2] == ["u2", "u2", "u2"]
    recent_u2 = lines_of("--json", "--identity", "u2", "--since", "1m", "--db", str(db))
    assert [json.loads(line)["call_id"] for line in recent_u2] == ["c9", "c2"]  # newest first
    refused = lines_of("--json", "--identity", "u2", "--since", "1m", "--errors", "--db", str(db))
    assert [json.loads(line)["code"] for line in refused] == [INVALID_ARGUMENTS.code]
    by_tool = lines_of("--json", "--tool", "read_note", "--db", str(db))
    assert {json.loads(line)["tool"] for line in by_tool} == {"read_note"}
    assert len(by_tool) == 2
    errors = lines_of("--json", "--errors", "--db", str(db))
    assert {json.loads(line)["outcome"] for line in errors} == {"error"}
    assert len(errors) == 3


def test_audit_json_is_one_object_a_line_with_every_column(db: Path | str) -> None:
    rows = [json.loads(line) for line in lines_of("--json", "--db", str(db))]
    columns = {"at", "time", "outcome", "stage", "code", "tool", "identity", "latency_us"}
    for row in rows:
        assert columns | {"call_id", "reason", "pointer"} <= row.keys()
    assert {r["call_id"] for r in rows} >= {FORGED_ID}  # the value kept, escaped as JSON


def test_plain_audit_shows_reason_and_pointer_as_follow_does(db: Path | str) -> None:
    plain = [line for line in lines_of("--errors", "--db", str(db)) if "read_note" in line]
    assert plain and all("/arguments/note_id" in line for line in plain)
    assert all(str(Reason.TYPE) in line for line in plain)


def test_a_since_the_command_cannot_read_is_a_usage_error(db: Path | str) -> None:
    done = strictcall("audit", "--since", "yesterday", "--db", str(db))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args",
    [["audit"], ["audit", "--json"], ["audit", "--errors"], ["stats"], ["stats", "--json"]],
    ids=["audit", "audit-json", "audit-errors", "stats", "stats-json"],
)
def test_a_forged_call_id_cannot_reach_the_terminal(db: Path | str, args: list[str]) -> None:
    done = strictcall(*args, "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert_no_control_text(done.stdout)
    assert "\\x1b" in done.stdout or "\\u001b" in done.stdout  # shown, escaped


def test_a_forged_call_id_cannot_reach_the_terminal_in_follow(db: Path | str) -> None:
    command = [sys.executable, "-m", "strictcall", "audit", "--follow", "--limit", "1"]
    with subprocess.Popen(
        [*command, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=ctrl_c_as_at_a_terminal,
    ) as process:
        stdout = process.stdout
        assert stdout is not None
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            for line in stdout:
                lines.put(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            assert "outcome" in lines.get(timeout=DEADLINE_S)  # the columns' headers
            first = lines.get(timeout=DEADLINE_S)  # the last call: the forged one
            record(db, forged(time.time()))
            second = lines.get(timeout=DEADLINE_S)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                status = process.wait(timeout=DEADLINE_S)
            finally:  # the deadline ends the child too: `with Popen` would wait on it for ever
                if process.poll() is None:
                    process.kill()
                    process.wait()
            reader.join(timeout=DEADLINE_S)
        assert status == 0
        for line in (first, second):
            assert_no_control_text(line)
            assert "\\x1b[2J" in line
        assert lines.empty()  # one line a record: the newline in the id forged none


def test_a_notes_text_cannot_reach_the_terminal_raw(tmp_path: Path) -> None:
    db = tmp_path / "n.sqlite3"
    text = "é \x1b[2J\n  forged\x9b\u202e"  # a model wrote it through create_note
    store = open_store(str(db))
    try:
        store.add_note("u1", text)
    finally:
        store.close()
    done = strictcall("notes", "list", "--owner", "u1", "--db", str(db))
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    note_id, shown = line.split("\t")
    assert note_id.isprintable() and shown.isprintable()  # nothing a terminal acts on
    assert "é" in shown  # and readable
    assert json.loads(shown) == text
