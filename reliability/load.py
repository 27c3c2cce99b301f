"""The load harness: `python reliability/load.py` (`make load`).

Starts a real `strictcall serve` on 127.0.0.1 and holds `--connections` (64) concurrent
connections for `--seconds` (60) with a mix of calls, each one JSON-RPC request:

    read     read_note of one's own note, count_notes, list_notes         -> ok
    invalid  unparsable text, wrong argument types, an unknown tool, a JSON-RPC 1.0 envelope,
             an unknown token                                              -> their codes
    cross    read_note / delete_note of another identity's note           -> forbidden_or_missing
    write    create_note, then delete_note of the note it made            -> ok

Every answer is checked (status, code); transport errors, 5xx and wrong answers are errors. The
server's RSS (/proc/PID/status) is read at the start, the middle and the end. After a graceful
stop the audit log must hold exactly one record per call sent, every identity's seeded notes must
still be there, and the server's stderr must be free of tracebacks and lost audit records.

With `--db postgresql://...` the server serves from that database (its own: the run adds
identities, notes and audit records to it) instead of a fresh SQLite file; with `--workers N`
from N processes (RSS is then the supervisor's).

Prints a summary; exits 1 on any error or when RSS grew by more than --max-rss-growth-mib.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import orjson

from reliability import procs
from reliability.progress import Progress
from strictcall.audit.sampling import UNSAMPLED
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    UNAUTHENTICATED,
    UNKNOWN_TOOL,
)
from strictcall.storage import open_store

IDENTITIES = 4
NOTES_EACH = 20
WARMUP_REQUESTS = 200

# (operation, weight); a write is two calls (create, then delete).
UNAUTHENTICATED_RATE: Final = 1_000_000
"""The server's budget of requests without a valid token per client address, in a load run."""

MIX = (("read", 40), ("invalid", 20), ("cross", 20), ("write", 20))


@dataclass
class Report:
    """What a load run measured."""

    seconds: float = 0.0
    connections: int = 0
    client: str = "httpx"
    calls: int = 0
    by_answer: Counter[str] = field(default_factory=Counter)
    by_operation: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    transport_errors: int = 0
    server_errors: int = 0
    wrong_answers: int = 0
    examples: list[str] = field(default_factory=list)
    rss_kib: dict[str, int] = field(default_factory=dict)
    warmup_calls: int = 0
    audit_records: int = -1
    audit_before: int = 0
    problems: list[str] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def rate(self) -> float:
        """Calls per second during the timed run (the warm-up left out)."""
        return (self.calls - self.warmup_calls) / self.seconds if self.seconds else 0.0

    @property
    def rss_growth_kib(self) -> int:
        return self.rss_kib.get("end", 0) - self.rss_kib.get("start", 0)

    @property
    def errors(self) -> int:
        return self.transport_errors + self.server_errors + self.wrong_answers + len(self.problems)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "connections": self.connections,
            "client": self.client,
            "calls": self.calls,
            "warmup_calls": self.warmup_calls,
            "calls_per_second": round(self.rate, 1),
            "latency_ms": {
                "p50": round(self.percentile(0.50), 2),
                "p90": round(self.percentile(0.90), 2),
                "p99": round(self.percentile(0.99), 2),
                "max": round(max(self.latencies_ms, default=0.0), 2),
            },
            "by_operation": dict(self.by_operation.most_common()),
            "by_answer": dict(self.by_answer.most_common()),
            "transport_errors": self.transport_errors,
            "server_errors": self.server_errors,
            "wrong_answers": self.wrong_answers,
            "rss_kib": self.rss_kib,
            "rss_growth_kib": self.rss_growth_kib,
            "audit_records": self.audit_records - self.audit_before,
            "problems": self.problems,
        }


@dataclass
class Caller:
    """One identity as the load sees it: its token and its seeded notes."""

    identity: str
    token: str
    notes: list[str]


def seed(db: Path | str) -> list[Caller]:
    """Identities load-0..3, each with NOTES_EACH notes and a token."""
    store = open_store(str(db))
    try:
        callers = []
        for k in range(IDENTITIES):
            identity = f"load-{k}"
            notes = [
                store.add_note(identity, f"note {i} of {identity}").note_id
                for i in range(NOTES_EACH)
            ]
            callers.append(Caller(identity, store.create_token(identity), notes))
    finally:
        store.close()
    return callers


class TransportError(Exception):
    """The request got no HTTP answer (connection refused, reset, or closed mid-answer)."""


Post = Callable[[bytes, dict[str, str]], Awaitable[tuple[int, bytes]]]
"""POST /rpc with a body and headers: (status, body), or TransportError."""


def httpx_poster(client: httpx.AsyncClient) -> Post:
    """POST /rpc through httpx's connection pool."""

    async def post(body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        try:
            response = await client.post("/rpc", content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise TransportError(type(exc).__name__) from None
        return response.status_code, response.content

    return post


class RawConnection:
    """One keep-alive HTTP/1.1 connection to the server, for a client light enough that the
    server, not the client, sets the pace: requests with Content-Length, answers read by their
    Content-Length (which strictcall serve always sends)."""

    def __init__(self, base_url: str) -> None:
        host, port = base_url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        try:
            if self._streams is None:
                self._streams = await asyncio.open_connection(self.host, self.port)
            reader, writer = self._streams
            head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            writer.write(
                f"POST /rpc HTTP/1.1\r\nHost: {self.host}\r\n{head}"
                f"Content-Length: {len(body)}\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
            status_line, *lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
            status = int(status_line.split()[1])
            length = 0
            for line in lines:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            return status, await reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            await self.close()
            raise TransportError(type(exc).__name__) from None

    async def close(self) -> None:
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


class Load:
    """The workers' shared state: callers, the report, and the ids of calls."""

    def __init__(self, callers: list[Caller], report: Report) -> None:
        self.callers = callers
        self.report = report
        self._ids = itertools.count()

    def next_id(self) -> str:
        return f"load-{next(self._ids)}"

    async def call(
        self, post: Post, operation: str, token: str, body: bytes, status: int, code: str | None
    ) -> Any:
        """Send one call and check its answer: HTTP `status`, and `code` (None: a result)."""
        report = self.report
        headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
        started = time.perf_counter()
        try:
            got_status, content = await post(body, headers)
        except TransportError as exc:
            report.calls += 1
            report.transport_errors += 1
            self._example(f"{operation}: transport error {exc}")
            return None
        report.latencies_ms.append((time.perf_counter() - started) * 1000)
        report.calls += 1
        report.by_operation[operation] += 1
        if got_status >= 500:
            report.server_errors += 1
            self._example(f"{operation}: HTTP {got_status}")
            return None
        try:
            reply = orjson.loads(content)
        except orjson.JSONDecodeError:
            reply = None
        got = _code_of(reply)
        report.by_answer[got or "ok"] += 1
        if got_status != status or got != code:
            report.wrong_answers += 1
            self._example(f"{operation}: HTTP {got_status} {got}, expected {status} {code}")
            return None
        return reply.get("result") if isinstance(reply, dict) else None

    def _example(self, text: str) -> None:
        if len(self.report.examples) < 10:
            self.report.examples.append(text)

    async def one(self, rng: random.Random, caller: Caller, post: Post) -> None:
        """One operation of the mix."""
        operation = rng.choices([m[0] for m in MIX], [m[1] for m in MIX])[0]
        token = caller.token
        if operation == "read":
            kind = rng.randrange(3)
            if kind == 0:
                body = procs.tool_call(
                    self.next_id(), "read_note", {"note_id": rng.choice(caller.notes)}
                )
            else:
                body = procs.tool_call(self.next_id(), ("count_notes", "list_notes")[kind - 1], {})
            await self.call(post, operation, token, body, 200, None)
        elif operation == "invalid":
            kind = rng.randrange(5)
            if kind == 0:
                await self.call(
                    post, operation, token, b'{"jsonrpc":"2.0","id":', 200, INVALID_JSON.code
                )
            elif kind == 1:
                body = procs.tool_call(self.next_id(), "read_note", {"note_id": 5})
                await self.call(post, operation, token, body, 200, INVALID_ARGUMENTS.code)
            elif kind == 2:
                body = procs.tool_call(self.next_id(), "drop_notes", {})
                await self.call(post, operation, token, body, 200, UNKNOWN_TOOL.code)
            elif kind == 3:
                body = b'{"jsonrpc":"1.0","id":1,"method":"tools/call"}'
                await self.call(post, operation, token, body, 200, INVALID_REQUEST.code)
            else:
                body = procs.tool_call(self.next_id(), "count_notes", {})
                await self.call(post, operation, "sc_unknown", body, 401, UNAUTHENTICATED.code)
        elif operation == "cross":
            other = rng.choice([c for c in self.callers if c is not caller])
            tool = rng.choice(("read_note", "delete_note"))
            body = procs.tool_call(self.next_id(), tool, {"note_id": rng.choice(other.notes)})
            await self.call(post, operation, token, body, 200, FORBIDDEN_OR_MISSING.code)
        else:
            text = f"load write {rng.random()}"
            body = procs.tool_call(self.next_id(), "create_note", {"text": text})
            note = await self.call(post, operation, token, body, 200, None)
            if isinstance(note, dict) and note.get("text") == text:
                body = procs.tool_call(self.next_id(), "delete_note", {"note_id": note["note_id"]})
                await self.call(post, operation, token, body, 200, None)
            elif note is not None:
                self.report.wrong_answers += 1


def _code_of(reply: Any) -> str | None:
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        data = reply["error"].get("data")
        return str(data.get("code")) if isinstance(data, dict) else "error"
    if isinstance(reply, dict) and "result" in reply:
        return None
    return "not a reply"


async def drive(
    server: procs.HttpServer,
    callers: list[Caller],
    seconds: float,
    connections: int,
    report: Report,
    client: str = "httpx",
) -> None:
    """The warm-up, then `connections` workers for `seconds`, with RSS read along the way."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    raw = [RawConnection(server.base_url) for _ in range(connections)]
    async with httpx.AsyncClient(base_url=server.base_url, limits=limits, timeout=60.0) as pool:
        posters = [httpx_poster(pool)] * connections if client == "httpx" else [c.post for c in raw]
        load = Load(callers, report)
        rng = random.Random(1)
        for index in range(WARMUP_REQUESTS):
            await load.one(rng, callers[index % len(callers)], posters[0])
        report.warmup_calls = report.calls
        report.latencies_ms.clear()
        report.rss_kib["start"] = server.rss_kib()
        started = time.monotonic()
        deadline = started + seconds

        async def worker(k: int) -> None:
            worker_rng = random.Random(k)
            caller = callers[k % len(callers)]
            while time.monotonic() < deadline:
                await load.one(worker_rng, caller, posters[k])

        async def middle() -> None:
            await asyncio.sleep(seconds / 2)  # a measurement point, not a readiness wait
            report.rss_kib["middle"] = server.rss_kib()

        async def ticker(progress: Progress) -> None:
            while time.monotonic() < deadline:
                await asyncio.sleep(PROGRESS_EVERY_S)  # how often to say so, not a wait
                progress.update(min(time.monotonic() - started, seconds))

        what = f"load: {connections} connections"
        with Progress(what, total=seconds, unit="s") as progress:
            await asyncio.gather(
                middle(), ticker(progress), *(worker(k) for k in range(connections))
            )
        report.seconds = time.monotonic() - started
        report.rss_kib["end"] = server.rss_kib()
    for connection in raw:
        await connection.close()


PROGRESS_EVERY_S = 0.5


def run(
    seconds: float,
    connections: int,
    workdir: Path,
    client: str = "httpx",
    *,
    db: str | None = None,
    workers: int = 1,
) -> Report:
    """One load run against a fresh server and store in `workdir` (or the database at `db`, a
    URL, which must hold no audit records yet); `client` is "httpx" (its async pool) or "raw"
    (one light keep-alive connection per worker)."""
    report = Report(connections=connections, client=client)
    store_db: Path | str = workdir / "load.sqlite3" if db is None else db
    callers = seed(store_db)
    # every connection comes from 127.0.0.1, one client address standing for many callers: its
    # bad-token calls must reach the token lookup (401), not the per-address budget (429)
    extra: tuple[str, ...] = ("--max-unauthenticated-rate", str(UNAUTHENTICATED_RATE))
    if workers > 1:
        extra += ("--workers", str(workers))
    server = procs.HttpServer(store_db, workdir / "load-stderr.log", extra)
    try:
        asyncio.run(drive(server, callers, seconds, connections, report, client))
        if not server.alive():
            report.problems.append("the server died")
    finally:
        status = server.stop()
    if status != 0:
        report.problems.append(f"the server exited {status} on SIGTERM")
    stderr = server.stderr_text()
    if "Traceback" in stderr:
        report.problems.append("the server logged an exception")
    if "lost" in stderr:
        report.problems.append("the server lost audit records")
    store = open_store(str(store_db))
    try:
        # a row counting the tokenless refusals of a second that were not written one by one
        # (`unsampled:N`) stands for those N calls
        report.audit_records = sum(
            int(row.reason[len(UNSAMPLED) :])
            if row.reason is not None and row.reason.startswith(UNSAMPLED)
            else 1
            for row in store.recent_calls(10 * max(report.calls, 1))
        )
        for caller in callers:
            kept = {note.note_id for note in store.list_notes(caller.identity)}
            if not set(caller.notes) <= kept:
                report.problems.append(f"{caller.identity} lost seeded notes")
    finally:
        store.close()
    # Warm-up calls are audited too: count every call this run sent.
    sent = report.calls
    if report.audit_records != sent:
        report.problems.append(f"audit holds {report.audit_records} records for {sent} calls")
    return report


def print_report(report: Report, max_growth_mib: float) -> None:
    summary = report.as_dict()
    latency = summary["latency_ms"]
    print("== load summary ==")
    print(
        f"{summary['seconds']} s, {report.connections} connections ({report.client} client):"
        f" {report.calls - report.warmup_calls} calls ({summary['calls_per_second']}/s),"
        f" after a warm-up of {report.warmup_calls} calls"
    )
    print("operations: " + ", ".join(f"{k} {v}" for k, v in report.by_operation.most_common()))
    print("answers:    " + ", ".join(f"{k} {v}" for k, v in report.by_answer.most_common()))
    print(
        f"latency ms: p50 {latency['p50']}  p90 {latency['p90']}  p99 {latency['p99']}"
        f"  max {latency['max']}"
    )
    print(
        f"errors: transport {report.transport_errors}, HTTP 5xx {report.server_errors},"
        f" wrong answers {report.wrong_answers}"
    )
    rss = report.rss_kib
    print(
        f"server RSS (KiB): start {rss.get('start')}, middle {rss.get('middle')},"
        f" end {rss.get('end')}; growth {report.rss_growth_kib:+d} KiB (limit {max_growth_mib} MiB)"
    )
    print(f"audit: {report.audit_records} records for {report.calls} calls")
    for example in report.examples:
        print(f"  e.g. {example}")
    for problem in report.problems:
        print(f"PROBLEM: {problem}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long (default 60)")
    parser.add_argument("--connections", type=int, default=64, help="concurrent connections")
    parser.add_argument(
        "--max-rss-growth-mib", type=float, default=64.0, help="RSS growth that fails the run"
    )
    parser.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="one light keep-alive connection per worker (default: the server sets the pace),"
        " or httpx's async pool (the client's CPU sets it)",
    )
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here")
    parser.add_argument(
        "--db", help="a postgresql:// URL of an empty database to serve from (default: SQLite)"
    )
    parser.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.connections < 1:
        parser.error("--seconds and --connections must be positive")
    with tempfile.TemporaryDirectory(prefix="strictcall-load-") as tmp:
        report = run(
            args.seconds,
            args.connections,
            Path(tmp),
            args.client,
            db=args.db,
            workers=args.workers,
        )
    if report.rss_growth_kib > args.max_rss_growth_mib * 1024:
        report.problems.append(f"RSS grew by {report.rss_growth_kib} KiB")
    print_report(report, args.max_rss_growth_mib)
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
