"""SIGINT to `strictcall serve --mcp-stdio` under load, many times: one JSON line per process.

    python tests/stdio_interrupts.py --rounds 200 --batch 4 --dir DIR

Each round is a server process driven as a host would: it is initialized, sent a burst of
tools/call lines (writes and reads), and interrupted once it has answered a random number of
them, while it is still answering the others. The line says its exit status, how long it took
to end after the signal, and whether it was cut short. The processes are forked from this one
after it has imported strictcall and the MCP SDK, so that 200 of them cost seconds, not
minutes; each child then runs the real command line, `strictcall.cli.parser.main`, and ends as a
process ends (sys.exit, with the interpreter's finalization).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from strictcall.cli.parser import main

# imported once here, before any fork, so that no child pays for it
for _module in (
    "strictcall.cli.commands",
    "strictcall.transports.mcp",
    "strictcall.services.notes",
    "strictcall.server.app",
):
    importlib.import_module(_module)

DEADLINE_S = 10.0
BURST = 150


def request_lines() -> bytes:
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "interrupts", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    for k in range(1, BURST + 1):
        if k % 3 == 0:
            params: dict[str, Any] = {"name": "create_note", "arguments": {"text": f"note {k}"}}
        else:
            params = {"name": ("list_notes", "count_notes")[k % 2], "arguments": {}}
        lines.append({"jsonrpc": "2.0", "id": k, "method": "tools/call", "params": params})
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


class Child:
    """A forked server process and the parent's ends of its pipes."""

    def __init__(self, db: Path, stderr_path: Path) -> None:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: the real command line on these pipes, ended as a process ends
            err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(stdin_r, 0)
            os.dup2(stdout_w, 1)
            os.dup2(err, 2)
            for fd in (stdin_r, stdin_w, stdout_r, stdout_w, err):
                os.close(fd)
            # the standard streams as a process started on these pipes would have them
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.exit(main(["serve", "--mcp-stdio", "--identity", "u1", "--db", str(db)]))
        os.close(stdin_r)
        os.close(stdout_w)
        self.pid = pid
        self.stdin: IO[bytes] = os.fdopen(stdin_w, "wb")
        self.stdout: IO[bytes] = os.fdopen(stdout_r, "rb")
        self.stderr_path = stderr_path

    def wait(self, deadline: float) -> int | None:
        """The exit status once the process has ended, or None at the deadline."""
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.002)
        return None


def drive(child: Child, rng: random.Random, results: list[dict[str, Any]]) -> None:
    """Load the child, interrupt it mid-burst, time its end."""
    writer = threading.Thread(target=_write, args=(child.stdin, request_lines()), daemon=True)
    writer.start()
    wanted = rng.randint(2, 40)  # the initialize answer, then some calls' answers
    answered = 0
    while answered < wanted and child.stdout.readline():
        answered += 1
    drain = threading.Thread(target=_drain, args=(child.stdout,), daemon=True)
    drain.start()
    sent = time.monotonic()
    os.kill(child.pid, signal.SIGINT)
    status = child.wait(sent + DEADLINE_S)
    seconds = time.monotonic() - sent
    if status is None:
        os.kill(child.pid, signal.SIGKILL)
        os.waitpid(child.pid, 0)
    stderr = child.stderr_path.read_text("utf-8", errors="replace")
    results.append(
        {
            "status": status,
            "seconds": round(seconds, 3),
            "answered_before": answered,
            "cut_short": "without finishing" in stderr,
            "traceback": "Traceback" in stderr or "Fatal" in stderr,
            "stderr": stderr[-2000:] if status != 130 or "Traceback" in stderr else "",
        }
    )
    writer.join(timeout=DEADLINE_S)
    drain.join(timeout=DEADLINE_S)


def _write(stream: IO[bytes], data: bytes) -> None:
    try:
        with stream:
            stream.write(data)
            stream.flush()
    except OSError:  # the child ended first
        pass


def _drain(stream: IO[bytes]) -> None:
    with stream:
        while stream.read(1 << 16):
            pass


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    done = 0
    while done < args.rounds:
        size = min(args.batch, args.rounds - done)
        # every child is forked while this process has no other thread
        children = [
            Child(args.dir / f"db-{i}.sqlite3", args.dir / f"err-{done + i}.log")
            for i in range(size)
        ]
        results: list[dict[str, Any]] = []
        drivers = [
            threading.Thread(target=drive, args=(child, random.Random(rng.random()), results))
            for child in children
        ]
        for driver in drivers:
            driver.start()
        for driver in drivers:
            driver.join()
        for result in results:
            print(json.dumps(result), flush=True)
        done += size
    return 0


if __name__ == "__main__":
    sys.exit(main_())
