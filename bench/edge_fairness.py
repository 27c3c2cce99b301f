"""Another client's p50 while one caller attacks the HTTP edge, as a ratio to its own idle p50
in the same run (a shared machine's load weighs on both): 1 MiB nested-array bodies on one and
on four connections, 1,100 idle sockets from one address, a flood of tokenless requests.

    .venv/bin/python bench/edge_fairness.py [CALLS]

Starts `strictcall serve --port 0` on a temporary SQLite file, prints one line per attack with
the load average, and stops the server (SIGTERM) whatever happens.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'
DEADLINE_S = 60.0


def nested_body(size: int = (1 << 20) - 1000) -> bytes:
    inner = b"[]," * ((size - 100) // 3)
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes",'
        b'"arguments":{"x":[' + inner + b"[]]}}}"
    )


@contextmanager
def server(db: Path) -> Iterator[str]:
    done = subprocess.run(
        [sys.executable, "-m", "strictcall", "tokens", "create", "--identity", "agent",
         "--db", str(db)], capture_output=True, text=True, check=True,
    )  # fmt: skip
    os.environ["BENCH_TOKEN"] = done.stdout.strip().splitlines()[-1]
    process = subprocess.Popen(
        [sys.executable, "-m", "strictcall", "serve", "--port", "0", "--db", str(db),
         "--header-timeout", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            match = re.search(r"listening on (http://[0-9.]+:\d+)", process.stdout.readline())
            if match:
                yield match.group(1)
                return
        raise RuntimeError("the server did not start")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


def p50(base: str, calls: int) -> float:
    headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
    took = []
    with httpx.Client(base_url=base, headers=headers, timeout=DEADLINE_S) as agent:
        for _ in range(calls):
            started = time.monotonic()
            assert agent.post("/rpc", content=CALL).status_code == 200
            took.append(time.monotonic() - started)
    return statistics.median(took)


def beside(base: str, calls: int, attack: Callable[[threading.Event], None], n: int) -> float:
    stop = threading.Event()
    threads = [threading.Thread(target=attack, args=(stop,)) for _ in range(n)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # the attack under way (a bench, not a test: no assertion rests on it)
    try:
        return p50(base, calls)
    finally:
        stop.set()
        for thread in threads:
            thread.join(DEADLINE_S)


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    body = nested_body()
    with tempfile.TemporaryDirectory() as tmp, server(Path(tmp) / "bench.sqlite3") as base:
        parts = urlsplit(base)
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}

        def heavy(stop: threading.Event) -> None:
            with httpx.Client(base_url=base, headers=headers, timeout=DEADLINE_S) as client:
                while not stop.is_set():
                    client.post("/rpc", content=body)

        def tokenless(stop: threading.Event) -> None:
            with httpx.Client(base_url=base, timeout=DEADLINE_S) as client:
                while not stop.is_set():
                    client.post("/rpc", content=CALL)

        held: list[socket.socket] = []

        def idle_sockets(stop: threading.Event) -> None:
            for _ in range(1100):
                sock = socket.socket()
                sock.bind(("127.0.0.2", 0))
                sock.connect((parts.hostname, parts.port))
                held.append(sock)
            stop.wait()
            for sock in held:
                sock.close()

        idle = p50(base, calls)
        print(f"load average {os.getloadavg()}; agent p50 idle {idle * 1e3:.2f} ms")
        for name, attack, n in (
            ("1 MiB nested bodies, 1 connection", heavy, 1),
            ("1 MiB nested bodies, 4 connections", heavy, 4),
            ("1,100 idle sockets from 127.0.0.2", idle_sockets, 1),
            ("tokenless requests, 4 connections", tokenless, 4),
        ):
            during = beside(base, calls, attack, n)
            print(
                f"{name}: p50 {during * 1e3:.2f} ms = {during / idle:.1f}x idle"
                f" (load {os.getloadavg()[0]:.2f})"
            )


if __name__ == "__main__":
    main()
