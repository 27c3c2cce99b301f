"""The crash harness: `python reliability/crash.py [--rounds 10]`.

Each round, on one SQLite file that lives across rounds:

1. start `strictcall serve`; `--workers` connections send create_note calls, each with its own
   call id (the JSON-RPC id) and its own text;
2. once `kill_after` of them have been acknowledged (a success answer), kill -9 the server while
   the others are in flight;
3. check the file's integrity, restart the server on it, and check that every acknowledged note
   is there (read_note finds it, with its text);
4. retry every call id sent before the kill, acknowledged or not, with the same arguments: each
   answer is a success, an acknowledged one with the note first acknowledged;
5. count_notes equals the number of distinct call ids that ever succeeded, and list_notes holds
   each text exactly once: nothing was written twice.

Each round uses a fresh identity, so its counts start at 0. With `--db postgresql://...` the
rounds run on that database instead of a SQLite file (the integrity check is then PostgreSQL's
own business: "ok" is written for it). Prints a line per round and a summary; exits 1 if any
acknowledged write was lost or any call was applied twice.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import orjson

from reliability import procs
from reliability.progress import Progress
from strictcall import interpret_tool_reply
from strictcall.storage import is_database_url, open_store

BURST_DEADLINE_S = 60.0
MAX_CALLS_PER_WORKER = 2_000
BLIND_CALLS = 8


@dataclass
class CrashRound:
    """What one kill -9 did, and what was found after the restart."""

    identity: str
    sent: dict[str, str] = field(default_factory=dict)  # call id -> text, in sending order
    acked: dict[str, str] = field(default_factory=dict)  # call id -> note id acknowledged
    in_flight_at_kill: int = 0
    integrity: str = ""
    lost: list[str] = field(default_factory=list)
    replayed_differently: list[str] = field(default_factory=list)
    retry_failures: list[str] = field(default_factory=list)
    committed_unacked: int = 0
    notes_after: int = -1
    duplicate_texts: int = 0
    audit_missing: int = -1  # acknowledged calls without an audit record (reported, not failed)
    failed_reads: list[str] = field(default_factory=list)  # checks that could not read
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        problems = []
        if self.failed_reads:
            problems.append(f"reads for the checks failed: {self.failed_reads}")
        if self.integrity != "ok":
            problems.append(f"integrity_check: {self.integrity}")
        if self.lost:
            problems.append(f"{len(self.lost)} acknowledged notes lost")
        if self.replayed_differently:
            problems.append(f"{len(self.replayed_differently)} retries answered another note")
        if self.retry_failures:
            problems.append(f"{len(self.retry_failures)} retries failed: {self.retry_failures[:3]}")
        if self.notes_after != len(self.sent):
            problems.append(f"{self.notes_after} notes for {len(self.sent)} distinct call ids")
        if self.duplicate_texts:
            problems.append(f"{self.duplicate_texts} texts written twice")
        return problems


async def _burst(
    server: procs.HttpServer, token: str, crash: CrashRound, workers: int, kill_after: int
) -> None:
    """create_note calls from `workers` connections; kill -9 from another thread once
    `kill_after` are acknowledged, at whatever point the server and the client then are."""
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    deadline = time.monotonic() + BURST_DEADLINE_S
    acked_enough = threading.Event()
    killed = threading.Event()
    in_flight: set[str] = set()

    def killer() -> None:
        acked_enough.wait(timeout=BURST_DEADLINE_S)
        crash.in_flight_at_kill = len(in_flight)
        server.kill()
        killed.set()

    async def worker(k: int, client: httpx.AsyncClient) -> None:
        for i in range(MAX_CALLS_PER_WORKER):
            if killed.is_set() or time.monotonic() > deadline:
                return
            call_id = f"{crash.identity}-w{k}-{i}"
            text = f"crash note {call_id} ✓"
            crash.sent[call_id] = text
            in_flight.add(call_id)
            try:
                response = await client.post(
                    "/rpc",
                    content=procs.tool_call(call_id, "create_note", {"text": text}),
                    headers=headers,
                )
            except httpx.HTTPError:
                return  # the server is gone: this call is unacknowledged
            finally:
                in_flight.discard(call_id)
            reply = orjson.loads(response.content) if response.status_code == 200 else {}
            result = reply.get("result") if isinstance(reply, dict) else None
            if isinstance(result, dict) and result.get("text") == text:
                crash.acked[call_id] = result["note_id"]
                if len(crash.acked) >= kill_after:
                    acked_enough.set()

    blind = _send_blind(server, token, crash)
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    async with httpx.AsyncClient(base_url=server.base_url, limits=limits, timeout=30.0) as client:
        await asyncio.gather(*(worker(k, client) for k in range(workers)))
    acked_enough.set()
    thread.join(timeout=procs.STOP_DEADLINE_S * 2)
    blind.close()


def _send_blind(server: procs.HttpServer, token: str, crash: CrashRound) -> socket.socket:
    """Pipeline BLIND_CALLS create_note requests on a raw connection whose answers are never
    read: the server may commit them all, and the client acknowledges none (a client that died
    or timed out before the answer came, and retries later)."""
    host, port = server.base_url.removeprefix("http://").rsplit(":", 1)
    conn = socket.create_connection((host, int(port)), timeout=30)
    requests = []
    for i in range(BLIND_CALLS):
        call_id = f"{crash.identity}-blind-{i}"
        text = f"crash note {call_id} ✓"
        crash.sent[call_id] = text
        body = procs.tool_call(call_id, "create_note", {"text": text})
        head = (
            f"POST /rpc HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        requests.append(head.encode("ascii") + body)
    conn.sendall(b"".join(requests))
    return conn


def integrity_of(db: Path | str) -> str:
    """SQLite's own integrity check of the file (after the crash, before the restart); "ok" for
    a PostgreSQL database, whose server outlives the crash of a client."""
    if isinstance(db, str) and is_database_url(db):
        return "ok"
    with sqlite3.connect(db) as conn:
        row = conn.execute("PRAGMA integrity_check").fetchone()
    conn.close()
    return str(row[0])


def _verify(server: procs.HttpServer, token: str, crash: CrashRound) -> None:
    """After the restart: acknowledged notes there; retries replay; nothing twice."""
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=30.0) as client:

        def call(call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
            response = client.post("/rpc", content=procs.tool_call(call_id, tool, arguments))
            return orjson.loads(response.content)

        for call_id, note_id in crash.acked.items():
            reply = call(f"check-{call_id}", "read_note", {"note_id": note_id})
            if reply.get("result") != {"note_id": note_id, "text": crash.sent[call_id]}:
                crash.lost.append(call_id)
        list_id = f"list-before-{crash.identity}"
        listed = read_result(crash, call(list_id, "list_notes", {}), list_id)
        if listed is not None:
            existing = {note["text"] for note in listed}
            crash.committed_unacked = sum(
                1 for cid, text in crash.sent.items() if cid not in crash.acked and text in existing
            )
        for call_id, text in crash.sent.items():
            reply = call(call_id, "create_note", {"text": text})
            result = reply.get("result")
            if not isinstance(result, dict) or result.get("text") != text:
                error = reply.get("error", {}).get("data", {}).get("code")
                crash.retry_failures.append(f"{call_id}: {error}")
            elif call_id in crash.acked and result["note_id"] != crash.acked[call_id]:
                crash.replayed_differently.append(call_id)
        count_id = f"count-{crash.identity}"
        counted = read_result(crash, call(count_id, "count_notes", {}), count_id)
        crash.notes_after = counted if isinstance(counted, int) else -1
        list_id = f"list-{crash.identity}"
        listed = read_result(crash, call(list_id, "list_notes", {}), list_id)
        if listed is not None:
            texts = [note["text"] for note in listed]
            crash.duplicate_texts = len(texts) - len(set(texts))


def read_result(crash: CrashRound, reply: Any, call_id: str) -> Any:
    """The value of a successful reply to `call_id`; None, with the read counted as failed in
    `crash`, for anything else (an error, a reply to another id, not a reply). A failed read
    must fail the round: read as "no notes", it would let the checks pass with nothing to check.
    """
    read = interpret_tool_reply(reply, call_id)
    if read["status"] == "ok":
        return read["value"]
    crash.failed_reads.append(f"{call_id}: {read['status']}")
    return None


def run_round(
    db: Path | str, workdir: Path, index: int, *, workers: int, kill_after: int
) -> CrashRound:
    """One kill -9 during a burst of create_note calls, then the checks."""
    started = time.monotonic()
    crash = CrashRound(identity=f"crash-{index}")
    token = procs.create_token(db, crash.identity)
    server = procs.HttpServer(db, workdir / f"crash-{index}-a.log")
    try:
        asyncio.run(_burst(server, token, crash, workers, kill_after))
    finally:
        server.kill()
    crash.integrity = integrity_of(db)
    store = open_store(str(db))
    try:
        audited = {record.call_id for record in store.recent_calls(1_000_000)}
    finally:
        store.close()
    crash.audit_missing = sum(1 for call_id in crash.acked if call_id not in audited)
    restarted = procs.HttpServer(db, workdir / f"crash-{index}-b.log")
    try:
        _verify(restarted, token, crash)
    finally:
        restarted.stop()
    crash.seconds = time.monotonic() - started
    return crash


def round_line(crash: CrashRound) -> str:
    verdict = "; ".join(crash.problems) or "nothing lost, nothing twice"
    return (
        f"{crash.identity}: {len(crash.sent)} sent, {len(crash.acked)} acknowledged,"
        f" {crash.in_flight_at_kill} in flight at the kill,"
        f" {crash.committed_unacked} committed but unacknowledged,"
        f" {crash.audit_missing} acknowledged without an audit record;"
        f" after restart and retries {crash.notes_after} notes: {verdict} ({crash.seconds:.1f} s)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=16, help="connections in the burst")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--db", help="a postgresql:// URL to crash on (default: a SQLite file)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="strictcall-crash-") as tmp:
        db: Path | str = Path(tmp) / "crash.sqlite3" if args.db is None else args.db
        with Progress("crash: kill -9 rounds", total=args.rounds, unit="rounds") as progress:
            for index in range(args.rounds):
                crash = run_round(
                    db, Path(tmp), index, workers=args.workers, kill_after=rng.randint(5, 300)
                )
                rounds.append(crash)
                print(round_line(crash), flush=True)
                progress.advance()
    failed = [c for c in rounds if c.problems]
    print("== crash summary ==")
    print(
        f"{len(rounds)} kill -9 rounds: {sum(len(c.sent) for c in rounds)} create_note calls sent,"
        f" {sum(len(c.acked) for c in rounds)} acknowledged,"
        f" {sum(c.committed_unacked for c in rounds)} committed but unacknowledged;"
        f" {sum(c.audit_missing for c in rounds)} acknowledged calls without an audit record;"
        f" acknowledged writes lost: {sum(len(c.lost) for c in rounds)};"
        f" rounds with a problem: {len(failed)}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
