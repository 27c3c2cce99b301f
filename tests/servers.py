"""Real servers for the tests: `strictcall serve` started as a process on 127.0.0.1, on a
SQLite file (a path) or a PostgreSQL database (a URL)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from prometheus_client.parser import text_string_to_metric_families

from strictcall.storage import AuditRecord, open_store

START_DEADLINE_S = 60.0  # a bound, not a wait: spawning workers on a loaded machine is slow
STOP_DEADLINE_S = 20.0

_LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARNING|ERROR) ")
"""A log line's UTC time and level, as every server's log line begins."""


def unstamped(line: str) -> str:
    """A log line without its time and level."""
    return STAMP.sub("", line, count=1)


@dataclass
class RunningServer:
    """A started server: its base URL and process."""

    base_url: str
    process: subprocess.Popen[str]
    db: Path | str
    lines: list[str] = field(default_factory=list)
    output: queue.Queue[str | None] | None = None
    """The rest of its output (stdout and stderr), line by line; None at the end."""

    def output_after_exit(self) -> list[str]:
        """Every line the server wrote after it had started, once it has exited."""
        assert self.output is not None and self.process.poll() is not None
        rest = []
        while (line := self.output.get(timeout=STOP_DEADLINE_S)) is not None:
            rest.append(line)
        return rest

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the server and wait for it to exit; returns its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=STOP_DEADLINE_S)


def ctrl_c_as_at_a_terminal() -> None:
    """In the child, before it runs: SIGINT's default action, as a terminal's foreground job
    has it, even when this suite was started with SIGINT ignored (`setsid bash -c ... &`),
    which a child would inherit (and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def children(pid: int) -> set[int]:
    """The processes `pid` started that still run (from /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text()
        found.update(int(child) for child in text.split())
    return found


def running(pid: int) -> bool:
    """Whether process `pid` still runs (neither gone nor a zombie left unreaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def strictcall(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the strictcall command line to completion."""
    return subprocess.run(
        [sys.executable, "-m", "strictcall", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def create_token(db: Path | str, identity: str) -> str:
    """A new token for `identity`, made with the operator's command."""
    done = strictcall("tokens", "create", "--identity", identity, "--db", str(db))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def start_server(
    db: Path | str,
    *extra: str,
    prefix: Sequence[str] = (),
    db_url: str | None = None,
    command: str = "serve",
) -> RunningServer:
    """Start `strictcall serve --port 0` on `db` and wait, with a deadline, until it listens;
    with --demo, also until it has printed its curl lines. `prefix` runs the command through
    another (`ip netns exec NS`, say); `db_url` is the URL the server opens, when it reaches
    `db` by another address than the tests; `command` another server than serve (`federate`,
    its `--config` in `extra`)."""
    argv = [sys.executable, "-m", "strictcall", command, "--port", "0"]
    process = subprocess.Popen(
        [*prefix, *argv, "--db", str(db) if db_url is None else db_url, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    lines = lines_of(process.stdout)
    deadline = time.monotonic() + START_DEADLINE_S
    seen: list[str] = []
    wanted_curls = 2 if "--demo" in extra else 0
    base_url = None
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        match = _LISTENING.search(line)
        if match:
            base_url = match.group(1)
        if base_url is not None and sum("curl" in s for s in seen) >= wanted_curls:
            return RunningServer(base_url, process, db, seen, lines)
    process.kill()
    process.wait(timeout=STOP_DEADLINE_S)
    raise AssertionError(f"server did not start: {seen!r}")


def lines_of(stream: IO[str]) -> queue.Queue[str | None]:
    """The stream's lines as they come, from a reader thread; None at the end."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        with stream:
            for line in stream:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


AUDIT_DEADLINE_S = 10.0


def recent_audit(
    db: Path | str, count: int, until: Callable[[list[AuditRecord]], bool]
) -> list[AuditRecord]:
    """The `count` newest audit records, once `until` holds for them: a server writes its audit
    log in batches, a moment after the calls (polled with a deadline)."""
    deadline = time.monotonic() + AUDIT_DEADLINE_S
    while True:
        store = open_store(str(db))
        try:
            recent = store.recent_calls(count)
        finally:
            store.close()
        if until(recent) or time.monotonic() > deadline:
            return recent
        time.sleep(0.02)


def metric(text: str, name: str, **labels: str) -> float:
    """The value of the sample `name` with `labels` (0 when there is none)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0
