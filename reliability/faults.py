"""Store faults under a real server: `python reliability/faults.py`.

Each fault is injected under a running `strictcall serve`, calls are made while it lasts, then it
is cleared and the same write is retried with the same call id:

    locked     another connection holds BEGIN EXCLUSIVE on the database
    read-only  the database and its WAL made immutable (chattr +i: as root, file modes do not
               bind, the immutable flag does); skipped where chattr +i does not work
    disk full  the database on a 2 MiB tmpfs, filled to the last byte by another file;
               skipped where a tmpfs cannot be mounted (mount needs root)
    deleted    the database, its WAL and shared memory unlinked under the server, later put
               back from a backup taken just before

On PostgreSQL (`--db postgresql://...`, a database of its own: it is altered and its sessions
killed), on a server started with a 300 ms statement timeout:

    terminated         every session of the server killed (pg_terminate_backend)
    refusing           the database refuses connections (ALLOW_CONNECTIONS false) and the
                       server's sessions killed: as a database that is down or unreachable
    statement timeout  the write's call id held by another transaction past the timeout

During a fault every answer must be structured and retryable: store_unavailable at stage
execute, or (when the token itself cannot be checked) HTTP 503 auth_unavailable at stage auth;
/healthz must answer, 200 while the store serves and 503 while it cannot (a deleted file, a
database that refuses connections). Once the fault clears, the retried write must succeed,
exactly once. A killed session is replaced at once: its calls may succeed, or be refused as
retryable.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import orjson

from reliability import procs
from strictcall.errors import AUTH_UNAVAILABLE, STORE_UNAVAILABLE
from strictcall.storage import is_database_url, open_store
from strictcall.storage.sqlite import SQLiteStore

RECOVERY_DEADLINE_S = 20.0
AUDIT_DEADLINE_S = 3.0
READ_RECHECK_S = 0.6
"""Longer than the store's interval between checks that its file is still there (for reads)."""
PG_STATEMENT_TIMEOUT_MS = 300
"""The statement timeout of the server the PostgreSQL faults run under."""
TMPFS_SIZE = "2m"


@dataclass(frozen=True)
class Answer:
    """One call's answer as the fault report shows it."""

    tool: str
    status: int
    code: str | None  # None: a success
    stage: str | None
    retryable: bool | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.code is None

    @property
    def retryable_fault(self) -> bool:
        """store_unavailable at execute, or 503 auth_unavailable at auth, retryable."""
        kinds = {
            (200, STORE_UNAVAILABLE.code, STORE_UNAVAILABLE.stage.value),
            (503, AUTH_UNAVAILABLE.code, AUTH_UNAVAILABLE.stage.value),
        }
        return (self.status, self.code, self.stage) in kinds and self.retryable is True

    @property
    def refused_unread(self) -> bool:
        """Refused at the token check, before the body (and so the call's id) was read: it is
        audited without an id."""
        return self.status == 503 and self.code == AUTH_UNAVAILABLE.code

    def __str__(self) -> str:
        what = (
            "ok" if self.code is None else f"{self.code} ({self.stage}, retryable={self.retryable})"
        )
        return f"{self.tool}: HTTP {self.status} {what} in {self.seconds * 1000:.0f} ms"


@dataclass
class FaultResult:
    """What a fault did to the calls made while it lasted, and after."""

    fault: str
    skipped: str | None = None
    during: list[Answer] = field(default_factory=list)
    healthz_during: tuple[int, float] = (0, 0.0)
    recovered: Answer | None = None
    recovery_tries: int = 0
    copies: int = -1
    alive: bool = True
    unaudited: list[str] = field(default_factory=list)
    healthz_expected: tuple[int, ...] = (200,)
    must_refuse: bool = True

    @property
    def problems(self) -> list[str]:
        if self.skipped is not None:
            return []
        problems = [f"during: {a}" for a in self.during if not (a.ok or a.retryable_fault)]
        if not self.alive:
            problems.append("the server died")
        refused = any(a.retryable_fault for a in self.during if a.tool == "create_note")
        if self.must_refuse and not refused:
            problems.append("the write during the fault was not refused as retryable")
        if self.healthz_during[0] not in self.healthz_expected:
            problems.append(f"/healthz answered {self.healthz_during[0]} during the fault")
        if self.recovered is None or not self.recovered.ok:
            problems.append(f"no recovery: {self.recovered}")
        if self.copies < 0:
            problems.append("the list after the fault failed: the copies could not be counted")
        elif self.copies != 1:
            problems.append(f"the retried write is there {self.copies} times")
        if self.unaudited:
            problems.append(f"calls made during the fault never audited: {self.unaudited}")
        return problems


class Rpc:
    """JSON-RPC calls to a server as one identity."""

    def __init__(self, base_url: str, token: str) -> None:
        self.client = httpx.Client(
            base_url=base_url,
            headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
            timeout=60.0,
        )

    def call(self, tool: str, arguments: dict[str, Any], call_id: str) -> tuple[Answer, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": call_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        started = time.monotonic()
        response = self.client.post("/rpc", content=orjson.dumps(body))
        seconds = time.monotonic() - started
        try:
            reply = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return Answer(tool, response.status_code, "not JSON", None, None, seconds), None
        error = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(error, dict):
            data = error.get("data", {})
            answer = Answer(
                tool,
                response.status_code,
                data.get("code"),
                data.get("stage"),
                data.get("retryable"),
                seconds,
            )
            return answer, None
        return Answer(tool, response.status_code, None, None, None, seconds), reply.get("result")

    def healthz(self) -> tuple[int, float]:
        started = time.monotonic()
        status = self.client.get("/healthz").status_code
        return status, time.monotonic() - started

    def close(self) -> None:
        self.client.close()


# --- the faults --------------------------------------------------------------------------------


@contextlib.contextmanager
def locked(db: Path) -> Iterator[None]:
    """Another connection holds the database's write lock (BEGIN EXCLUSIVE)."""
    conn = sqlite3.connect(db, timeout=10, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def chattr_unavailable(directory: Path) -> str | None:
    """Why `chattr +i` cannot make a file in `directory` unwritable here, or None if it can."""
    if shutil.which("chattr") is None:
        return "chattr is not installed (Debian's e2fsprogs)"
    probe = directory / "chattr-probe"
    probe.write_bytes(b"x")
    try:
        done = subprocess.run(["chattr", "+i", str(probe)], capture_output=True, check=False)
        if done.returncode != 0:
            return f"chattr +i failed here: {done.stderr.decode(errors='replace').strip()}"
        try:
            with probe.open("ab") as f:
                f.write(b"y")
        except PermissionError:
            return None
        return "chattr +i did not stop a write here"
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True, check=False)
        probe.unlink()


@contextlib.contextmanager
def read_only(db: Path) -> Iterator[None]:
    """The database and its WAL immutable (chattr +i), then writable again."""
    files = [str(path) for path in (db, Path(f"{db}-wal")) if path.exists()]
    subprocess.run(["chattr", "+i", *files], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)


def tmpfs_unavailable(mountpoint: Path) -> str | None:
    """Why a tmpfs cannot be mounted at `mountpoint`, or None once it is mounted there."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None:
        return "mount is not installed"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mountpoint)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        return f"mount -t tmpfs failed: {done.stderr.decode(errors='replace').strip()}"
    return None


def unmount(mountpoint: Path) -> None:
    subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, check=False)


@contextlib.contextmanager
def disk_full(directory: Path) -> Iterator[None]:
    """The file system of `directory` filled to the last byte by another file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 16, 1 << 10, 1):
            with contextlib.suppress(OSError):
                for _ in range((64 << 20) // chunk):  # bounded: far more than the tmpfs holds
                    os.write(fd, b"\0" * chunk)
        try:
            os.write(fd, b"\0")
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        else:
            raise RuntimeError("the file system did not fill up")
    finally:
        os.close(fd)
    try:
        yield
    finally:
        filler.unlink()


@contextlib.contextmanager
def deleted(db: Path) -> Iterator[None]:
    """The database, its WAL and shared memory unlinked; then put back from a backup."""
    backup = db.with_name(db.name + ".backup")
    source = sqlite3.connect(db)
    target = sqlite3.connect(backup)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        path.unlink(missing_ok=True)
    try:
        yield
    finally:
        shutil.copyfile(backup, db)  # a new file (inode): the store reopens it
        backup.unlink()


# --- PostgreSQL faults (on the harness's own database only) -----------------------------------


def _pg_admin(url: str) -> Any:
    """An autocommit connection to `url`'s database, for killing and fencing its sessions."""
    import psycopg  # only the PostgreSQL faults need the driver

    return psycopg.connect(url, autocommit=True, connect_timeout=5)


def _kill_sessions(conn: Any) -> int:
    rows = conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchall()
    return len(rows)


@contextlib.contextmanager
def terminated(url: str) -> Iterator[None]:
    """Every other session of the database killed, as an administrator or a failover would."""
    with _pg_admin(url) as conn:
        _kill_sessions(conn)
    yield


@contextlib.contextmanager
def refusing(url: str) -> Iterator[None]:
    """The database refuses new connections and its sessions are killed (down, or unreachable
    from the server); then it takes connections again."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    settings = conninfo_to_dict(url)
    name = settings["dbname"]
    # a database's own sessions cannot fence it: do it from the server's maintenance database
    with _pg_admin(make_conninfo("", **{**settings, "dbname": "postgres"})) as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            yield
        finally:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


@contextlib.contextmanager
def key_held(url: str, identity: str, call_id: str) -> Iterator[None]:
    """A transaction holds the idempotency key (identity, call id) uncommitted: a write with
    that key waits for it, here past the server's statement timeout."""
    import psycopg

    with psycopg.connect(url, connect_timeout=5) as conn:
        conn.execute(
            "INSERT INTO idempotency VALUES (%s, %s, 'held', 'n-held', 0)",
            (identity, orjson.dumps(call_id).decode()),
        )
        try:
            yield
        finally:
            conn.rollback()


def with_statement_timeout(url: str, ms: int) -> str:
    """`url` with sessions' statement timeout set to `ms` (libpq's options parameter)."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options=-c%20statement_timeout%3D{ms}"


def run_postgres(workdir: Path, url: str) -> list[FaultResult]:
    """The PostgreSQL faults, one after the other, on one server on `url`'s database."""
    results = []
    # an identity of this run's own: its call ids and notes start afresh, so that a second run
    # on the same database neither replays the first one's writes nor counts its copies
    identity = f"faulty-{secrets.token_hex(4)}"
    store = open_store(url)
    try:
        note = store.add_note(identity, "a note to read").note_id
        token = store.create_token(identity)
    finally:
        store.close()
    server_url = with_statement_timeout(url, PG_STATEMENT_TIMEOUT_MS)
    server = procs.HttpServer(server_url, workdir / "pg-faults-stderr.log")
    rpc = Rpc(server.base_url, token)
    try:
        warm, _ = rpc.call("read_note", {"note_id": note}, "warm-up")  # the token cache is warm
        assert warm.ok, warm
        # sessions are replaced at once on a quiet machine (calls ok, /healthz 200); on a busy
        # one the reconnection may take long enough to be seen (store_unavailable, 503)
        results.append(
            exercise(
                rpc,
                server,
                "terminated",
                terminated(url),
                note,
                must_refuse=False,
                healthz_expected=(200, 503),
            )
        )
        results.append(
            exercise(
                rpc,
                server,
                "refusing",
                refusing(url),
                note,
                lasting_s=READ_RECHECK_S,
                healthz_expected=(503,),
            )
        )
        held = key_held(url, identity, "statement-timeout-write")
        results.append(exercise(rpc, server, "statement timeout", held, note))
    finally:
        rpc.close()
        server.stop()
    return results


# --- exercising one fault ----------------------------------------------------------------------


def exercise(
    rpc: Rpc,
    server: procs.HttpServer,
    name: str,
    fault: contextlib.AbstractContextManager[None],
    own_note: str,
    *,
    lasting_s: float = 0.0,
    healthz_expected: tuple[int, ...] = (200,),
    must_refuse: bool = True,
) -> FaultResult:
    """Inject `fault`, call through it, clear it, retry the write until it succeeds; then wait
    (with a deadline) for the calls made during the fault to reach the audit log.

    With `lasting_s`, the fault lasts that long before a last read (how long a fault lasts is
    part of the fault, not a wait for readiness).
    """
    result = FaultResult(name, healthz_expected=healthz_expected, must_refuse=must_refuse)
    tag = name.replace(" ", "-")
    text = f"written through the {name} fault"
    with fault:
        answer, _ = rpc.call("create_note", {"text": text}, f"{tag}-write")
        result.during.append(answer)
        answer, _ = rpc.call("read_note", {"note_id": own_note}, f"{tag}-read")
        result.during.append(answer)
        if lasting_s:
            time.sleep(lasting_s)
            answer, _ = rpc.call("read_note", {"note_id": own_note}, f"{tag}-read-later")
            result.during.append(answer)
        result.healthz_during = rpc.healthz()
    deadline = time.monotonic() + RECOVERY_DEADLINE_S
    while time.monotonic() < deadline:
        result.recovery_tries += 1
        answer, _ = rpc.call("create_note", {"text": text}, f"{tag}-write")
        result.recovered = answer
        if answer.ok or not answer.retryable_fault:
            break
        time.sleep(0.05)  # bounded poll for the recovery
    listing, listed = rpc.call("list_notes", {}, f"{tag}-list")
    # a failed list must not read as "no copies": it leaves copies at -1, a problem of its own
    if listing.ok and isinstance(listed, list):
        result.copies = sum(1 for note in listed if note["text"] == text)
    result.alive = server.alive()
    ids = [f"{tag}-write", f"{tag}-read"] + ([f"{tag}-read-later"] if lasting_s else [])
    # the write's id is used again by the retries, so only the reads tell whether a call made
    # during the fault reached the audit under its id
    during = [i for i, a in zip(ids, result.during, strict=True) if not a.refused_unread]
    result.unaudited = wait_audited(server.db, [*during, f"{tag}-list"], during)
    return result


def wait_audited(db: Path | str, sentinel: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """Poll the audit log (with a deadline) until the calls in `sentinel` are all there, then
    say which of `wanted` are not: the audit is written in batches, in order."""
    deadline = time.monotonic() + AUDIT_DEADLINE_S
    missing = list(wanted)
    while time.monotonic() < deadline:
        store = open_store(str(db))
        try:
            audited = {record.call_id for record in store.recent_calls(10_000)}
        finally:
            store.close()
        missing = [call_id for call_id in wanted if call_id not in audited]
        if all(call_id in audited for call_id in sentinel) or not missing:
            break
        time.sleep(0.05)  # bounded poll: the audit log is written every 50 ms
    return missing


LOCK_STALL_S = 5.0
PROBE_EVERY_S = 0.1


@dataclass
class Stall:
    """How long /healthz took while another process held the database's write lock."""

    seconds: float = LOCK_STALL_S
    healthz_while_write_waits_s: float = 0.0
    healthz_s: list[float] = field(default_factory=list)
    probing_s: float = 0.0

    @property
    def stalled(self) -> int:
        """Probes that waited more than a second."""
        return sum(1 for seconds in self.healthz_s if seconds > 1.0)

    def __str__(self) -> str:
        ordered = sorted(self.healthz_s) or [0.0]
        return (
            f"database write-locked for {self.seconds:.0f} s by another process: /healthz took"
            f" {self.healthz_while_write_waits_s * 1000:.0f} ms while a create_note waited on the"
            f" lock; probed every {PROBE_EVERY_S * 1000:.0f} ms after that, /healthz took"
            f" p50 {ordered[len(ordered) // 2] * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms,"
            f" {self.stalled} of {len(self.healthz_s)} over 1 s: the server was stalled"
            f" {self.stalled_fraction:.0%} of the {self.probing_s:.1f} s probed"
        )

    @property
    def stalled_fraction(self) -> float:
        """The part of the probing time spent in probes that waited more than a second."""
        waited = sum(seconds for seconds in self.healthz_s if seconds > 1.0)
        return waited / self.probing_s if self.probing_s else 0.0


def measure_lock_stall(rpc: Rpc, db: Path, own_note: str, seconds: float = LOCK_STALL_S) -> Stall:
    """While another connection holds the write lock: time /healthz during a write that waits
    on the lock, then probe /healthz on a fixed schedule for `seconds` (a read first, so that
    an audit record waits to be written)."""
    stall = Stall(seconds=seconds)
    writer = Rpc(str(rpc.client.base_url), rpc.client.headers["Authorization"].split()[1])
    with locked(db):
        thread = threading.Thread(
            target=writer.call, args=("create_note", {"text": "stalled"}, "stall-write")
        )
        thread.start()
        time.sleep(0.2)  # the write is now waiting on the lock, inside the server
        stall.healthz_while_write_waits_s = rpc.healthz()[1]
        thread.join(timeout=procs.STOP_DEADLINE_S)
        rpc.call("read_note", {"note_id": own_note}, "stall-read")
        started = time.monotonic()
        for k in range(int(seconds / PROBE_EVERY_S)):
            time.sleep(max(0.0, started + k * PROBE_EVERY_S - time.monotonic()))
            stall.healthz_s.append(rpc.healthz()[1])
        stall.probing_s = time.monotonic() - started
    writer.close()
    return stall


def setup_store(directory: Path, identity: str) -> tuple[Path, str, str]:
    db = directory / "faults.sqlite3"
    store = SQLiteStore(db)
    try:
        note = store.add_note(identity, "a note to read").note_id
        token = store.create_token(identity)
    finally:
        store.close()
    return db, token, note


def run_on_disk(workdir: Path, faults: Sequence[str]) -> list[FaultResult]:
    """The locked, read-only and deleted faults, one after the other, on one server."""
    results = []
    db, token, note = setup_store(workdir, "faulty")
    server = procs.HttpServer(db, workdir / "faults-stderr.log")
    rpc = Rpc(server.base_url, token)
    try:
        for name in faults:
            if name == "locked":
                results.append(exercise(rpc, server, name, locked(db), note))
            elif name == "read-only":
                reason = chattr_unavailable(workdir)
                if reason is not None:
                    results.append(FaultResult(name, skipped=reason))
                else:
                    results.append(exercise(rpc, server, name, read_only(db), note))
            elif name == "deleted":
                results.append(
                    exercise(
                        rpc,
                        server,
                        name,
                        deleted(db),
                        note,
                        lasting_s=READ_RECHECK_S,
                        healthz_expected=(503,),
                    )
                )
    finally:
        rpc.close()
        server.stop()
    return results


def run_disk_full(workdir: Path) -> FaultResult:
    """The full-disk fault, on a server whose database lives on a small tmpfs."""
    mountpoint = workdir / "tmpfs"
    mountpoint.mkdir(exist_ok=True)
    reason = tmpfs_unavailable(mountpoint)
    if reason is not None:
        return FaultResult("disk full", skipped=reason)
    try:
        db, token, note = setup_store(mountpoint, "faulty")
        server = procs.HttpServer(db, workdir / "full-stderr.log")
        rpc = Rpc(server.base_url, token)
        try:
            return exercise(rpc, server, "disk full", disk_full(mountpoint), note)
        finally:
            rpc.close()
            server.stop()
    finally:
        unmount(mountpoint)


def run(
    workdir: Path, faults: Sequence[str] = ("locked", "read-only", "deleted", "disk full")
) -> list[FaultResult]:
    """Every fault named in `faults`."""
    results = run_on_disk(workdir, [f for f in faults if f != "disk full"])
    if "disk full" in faults:
        results.append(run_disk_full(workdir))
    return results


def print_results(results: Sequence[FaultResult]) -> None:
    print("== store faults ==")
    for result in results:
        if result.skipped is not None:
            print(f"{result.fault}: SKIPPED ({result.skipped})")
            continue
        print(f"{result.fault}:")
        for answer in result.during:
            print(f"   during  {answer}")
        status, seconds = result.healthz_during
        print(f"   during  /healthz: HTTP {status} in {seconds * 1000:.0f} ms")
        print(f"   after   {result.recovered} (retry {result.recovery_tries} of the same call id)")
        print(f"   after   the retried write is there {result.copies} time(s)")
        for problem in result.problems:
            print(f"   PROBLEM {problem}")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--db",
        help="a postgresql:// URL: run the PostgreSQL faults on that database (its own: its"
        " sessions are killed); default: the SQLite faults on temporary files",
    )
    args = parser.parse_args(argv)
    if args.db is not None:
        if not is_database_url(args.db):
            parser.error("--db takes a postgresql:// URL (the SQLite faults make their own files)")
        with tempfile.TemporaryDirectory(prefix="strictcall-faults-") as tmp:
            pg_results = run_postgres(Path(tmp), args.db)
            logs = Path(tmp, "pg-faults-stderr.log").read_text("utf-8", "replace")
        print_results(pg_results)
        if "Traceback" in logs:
            print("PROBLEM the server logged an exception:\n" + logs)
            return 1
        return 1 if any(r.problems for r in pg_results) else 0
    with tempfile.TemporaryDirectory(prefix="strictcall-faults-") as tmp:
        results = run(Path(tmp))
        stall_dir = Path(tmp) / "stall"
        stall_dir.mkdir()
        db, token, note = setup_store(stall_dir, "stalled")
        server = procs.HttpServer(db, Path(tmp) / "stall-stderr.log")
        rpc = Rpc(server.base_url, token)
        try:
            rpc.call("read_note", {"note_id": note}, "warm")  # an audit record to flush
            stall = measure_lock_stall(rpc, db, note)
        finally:
            rpc.close()
            server.stop()
        logs = "".join(p.read_text("utf-8", "replace") for p in Path(tmp).glob("*stderr.log"))
    print_results(results)
    print(f"stall: {stall}")
    logged = "Traceback" in logs
    if logged:
        print("PROBLEM the server logged an exception:\n" + logs)
    return 1 if logged or any(r.problems for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
