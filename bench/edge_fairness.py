"""Another client's p50 while one caller attacks, as a ratio to its own idle p50 in the same
run (a shared machine's load weighs on both), against the target of 3x: 1 MiB nested-array
bodies on one and on four connections, 1 MiB valid bodies, 1,100 idle sockets from one
address, a flood of tokenless requests, batches past the limit and at it (another identity's),
and an upstream of a federation relisting 60,000 tools.

    .venv/bin/python bench/edge_fairness.py [CALLS]

Starts `strictcall serve --port 0` on a temporary SQLite file (stopped with SIGTERM whatever
happens), then `strictcall federate` on stdio for the relisting (`bench/upstream_budgets.py`'s);
prints one line per attack with the load average and writes bench/FAIRNESS.md.
"""

from __future__ import annotations

import multiprocessing
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
from typing import Protocol
from urllib.parse import urlsplit

import httpx

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'
DEADLINE_S = 60.0
TARGET_RATIO = 3.0
SETTLE_S = 3.0
ROUNDS = 3
BENCH = Path(__file__).resolve().parent


class Stop(Protocol):
    """What an attack watches: a threading or a multiprocessing event."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


def valid_body(size: int = (1 << 20) - 1000) -> bytes:
    """A 1 MiB tools/call that is valid JSON: read whole, refused at its arguments' shape."""
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes",'
        b'"arguments":{"x":"' + b"a" * (size - 120) + b'"}}}'
    )


def batch_body(count: int) -> bytes:
    return b"[" + b",".join([CALL] * count) + b"]"


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
    done = subprocess.run(
        [sys.executable, "-m", "strictcall", "tokens", "create", "--identity", "flooder",
         "--db", str(db)], capture_output=True, text=True, check=True,
    )  # fmt: skip
    os.environ["BENCH_FLOOD_TOKEN"] = done.stdout.strip().splitlines()[-1]
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


Attack = Callable[[Stop], None]


def beside(base: str, calls: int, attack: Attack, n: int) -> float:
    """The agent's p50 while `attack` runs on `n` threads of a process of its own (forked: the
    attacker's threads never take the agent's GIL, as a real other client's would not)."""
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    attacker = context.Process(target=_attack, args=(attack, n, stop))
    attacker.start()
    time.sleep(1.0)  # the attack under way (a bench, not a test: no assertion rests on it)
    try:
        return p50(base, calls)
    finally:
        stop.set()
        attacker.join(DEADLINE_S)
        if attacker.is_alive():
            attacker.kill()
        time.sleep(SETTLE_S)  # the server done with what the attack left, before the next idle


def _attack(attack: Attack, n: int, stop: Stop) -> None:
    threads = [threading.Thread(target=attack, args=(stop,)) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    nested, valid = nested_body(), valid_body()
    over, at = batch_body(101), batch_body(100)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, server(Path(tmp) / "bench.sqlite3") as base:
        parts = urlsplit(base)
        headers = {"Authorization": f"Bearer {os.environ['BENCH_TOKEN']}"}
        flooder = {"Authorization": f"Bearer {os.environ['BENCH_FLOOD_TOKEN']}"}

        def posting(body: bytes, who: dict[str, str]) -> Attack:
            def attack(stop: Stop) -> None:
                with httpx.Client(base_url=base, headers=who, timeout=DEADLINE_S) as client:
                    while not stop.is_set():
                        client.post("/rpc", content=body)

            return attack

        def tokenless(stop: Stop) -> None:
            with httpx.Client(base_url=base, timeout=DEADLINE_S) as client:
                while not stop.is_set():
                    client.post("/rpc", content=CALL)

        held: list[socket.socket] = []

        def idle_sockets(stop: Stop) -> None:
            for _ in range(1100):
                sock = socket.socket()
                sock.bind(("127.0.0.2", 0))
                sock.connect((parts.hostname, parts.port))
                held.append(sock)
            stop.wait()
            for sock in held:
                sock.close()

        p50(base, calls)  # warm: the first calls pay for connections and caches
        print(f"load average {os.getloadavg()}")
        attacks = (
            ("1 MiB nested bodies, 1 connection", posting(nested, headers), 1),
            ("1 MiB nested bodies, 4 connections", posting(nested, headers), 4),
            ("1 MiB valid bodies, 4 connections", posting(valid, headers), 4),
            ("1,100 idle sockets from 127.0.0.2", idle_sockets, 1),
            ("tokenless requests, 4 connections", tokenless, 4),
            ("batches of 101 calls (refused), 4 connections", posting(over, flooder), 4),
            ("batches of 100 calls (run), 4 connections", posting(at, flooder), 4),
        )
        for name, attack, n in attacks:
            idles, durings = [], []
            for _ in range(ROUNDS):
                idles.append(p50(base, calls))  # just before: the load of the moment in both
                durings.append(beside(base, calls, attack, n))
            rows.append((name, durings, idles))
            print(f"{name}: {shown(durings, idles)} (load {os.getloadavg()[0]:.2f})")
    rows.append(relisting())
    print(f"{rows[-1][0]}: {shown(rows[-1][1], rows[-1][2])}")
    write_page(rows)


Row = tuple[str, list[float], list[float]]
"""An attack, the agent's p50 during each round of it and idle just before each (seconds)."""


def ratio(durings: list[float], idles: list[float]) -> float:
    """The median over the rounds of p50 during / p50 idle."""
    return statistics.median(d / i for d, i in zip(durings, idles, strict=True))


def shown(durings: list[float], idles: list[float]) -> str:
    during, idle = statistics.median(durings), statistics.median(idles)
    return f"p50 {during * 1e3:.2f} ms, idle {idle * 1e3:.2f} ms: {ratio(durings, idles):.1f}x"


def relisting(seconds: float = 5.0) -> Row:
    """A federation's other upstream's tools/call p50 while one upstream relists 60,000 tools
    again and again, and idle (`bench/upstream_budgets.py`'s phases)."""
    sys.path.insert(0, str(BENCH))
    from upstream_budgets import MANY, ListingFederation, timed, until

    with tempfile.TemporaryDirectory() as tmp:
        federation = ListingFederation(
            Path(tmp),
            {"loud": {"tools": ["one"]}, "calm": {"tools": ["quiet"]}},
            prefixes={"loud": "loud", "calm": "calm"},
            pinning=False,
        )
        try:
            federation.peer.initialize()
            timed(federation, 0.5)  # warm
            idle = timed(federation, seconds)["call_p50_ms"] / 1e3
            stop = threading.Event()

            def relist() -> None:
                wave = 0
                while not stop.is_set():
                    wave += 1
                    federation.relist("loud", {"tools": ["one"], "many": MANY, "w": wave})
                    time.sleep(0.3)

            relister = threading.Thread(target=relist)
            relister.start()
            try:
                until(lambda: "max_tools" in federation.stderr(), "the relisting is refused")
                during = timed(federation, seconds)["call_p50_ms"] / 1e3
            finally:
                stop.set()
                relister.join()
        finally:
            federation.close()
    return ("an upstream relisting 60,000 tools (federation, stdio)", [during], [idle])


def write_page(rows: list[Row]) -> None:
    load = Path("/proc/loadavg").read_text().split()[:3]
    lines = [
        "# Another client's latency during attacks",
        "",
        "`python bench/edge_fairness.py`: another client's tools/call p50 (200 calls, one"
        " after another) while one caller attacks, against that client's own idle p50 just"
        " before it (the shared machine's load of the moment weighs on both), in"
        f" {ROUNDS} rounds (the ratio is the median of the rounds'; the federation's"
        " relisting: one round of 5 s each); the attack runs in a process of its own. Target"
        f" {TARGET_RATIO:g}x idle. Load average at the end {' '.join(load)} (2 cores, shared"
        " by several sessions). Written by the script; do not edit by hand.",
        "",
        "| attack | p50 during | p50 idle | ratio | verdict |",
        "|---|---|---|---|---|",
    ]
    missed = []
    for name, durings, idles in rows:
        during, idle, times = (
            statistics.median(durings),
            statistics.median(idles),
            ratio(durings, idles),
        )
        verdict = "met"
        if times > TARGET_RATIO:
            verdict = f"missed ({times:.1f}x > {TARGET_RATIO:g}x)"
            missed.append(f"{name} ({times:.1f}x)")
        rounds = ", ".join(f"{d / i:.1f}x" for d, i in zip(durings, idles, strict=True))
        lines.append(
            f"| {name} | {during * 1e3:.2f} ms | {idle * 1e3:.2f} ms | {times:.1f}x ({rounds})"
            f" | {verdict} |"
        )
    lines += ["", f"Missed: {'; '.join(missed)}." if missed else "Every target met.", ""]
    (BENCH / "FAIRNESS.md").write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
