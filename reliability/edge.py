"""The edge under hostile clients: an agent's latency alone, then beside 200 clients that send
their headers one byte at a time, on a real `strictcall serve` (default limits: headers within
10 s). Prints what held as JSON: the agent's p50/p99 in both runs, its failures, and how long
the server took to cut the slow clients off.

    .venv/bin/python reliability/edge.py [--slow 200] [--calls 2000] [--header-timeout 10]
                                         [--db postgresql://...]

With `--db` the server serves from that PostgreSQL database (default: a SQLite file of its own).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from reliability.procs import HttpServer, create_token, tool_call

SLOW_BYTE_S = 0.5


def agent_latencies(base_url: str, token: str, calls: int) -> tuple[list[float], int]:
    """`calls` sequential count_notes calls: their latencies (ms) and how many failed."""
    body = tool_call("agent", "count_notes", {})
    headers = {"Authorization": f"Bearer {token}"}
    latencies = []
    failed = 0
    with httpx.Client(timeout=30) as client:
        for _ in range(calls):
            started = time.perf_counter()
            answer = client.post(base_url + "/rpc", content=body, headers=headers)
            latencies.append((time.perf_counter() - started) * 1000)
            if answer.status_code != 200 or answer.json().get("result") != 0:
                failed += 1
    return latencies, failed


def slow_client(base_url: str, stop: threading.Event, cut: list[float]) -> None:
    """Trickle a request's headers until the server closes; record when it did."""
    parts = urlsplit(base_url)
    started = time.monotonic()
    request = b"POST /rpc HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.settimeout(SLOW_BYTE_S)
        for byte in request:
            if stop.is_set():
                return
            try:
                sock.sendall(bytes([byte]))
                sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                pass
            cut.append(time.monotonic() - started)
            return


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * share))], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--header-timeout", type=float, default=10.0)
    parser.add_argument("--db", help="a postgresql:// URL to serve from (default: a SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db: Path | str = Path(folder) / "edge.sqlite3" if args.db is None else args.db
        token = create_token(db, "agent")
        server = HttpServer(
            db, Path(folder) / "stderr.log", ("--header-timeout", str(args.header_timeout))
        )
        try:
            print(f"agent alone: {args.calls} calls", flush=True)
            alone, alone_failed = agent_latencies(server.base_url, token, args.calls)
            stop = threading.Event()
            cut: list[float] = []
            threads = [
                threading.Thread(target=slow_client, args=(server.base_url, stop, cut))
                for _ in range(args.slow)
            ]
            for thread in threads:
                thread.start()
            print(f"agent beside {args.slow} slow clients: {args.calls} calls", flush=True)
            beside, beside_failed = agent_latencies(server.base_url, token, args.calls)
            deadline = time.monotonic() + args.header_timeout * 3
            while len(cut) < len(threads) and time.monotonic() < deadline:
                time.sleep(0.1)
            stop.set()
            for thread in threads:
                thread.join()
        finally:
            server.stop()
    print(
        json.dumps(
            {
                "agent_alone_ms": {"p50": percentile(alone, 0.5), "p99": percentile(alone, 0.99)},
                "agent_beside_slow_ms": {
                    "p50": percentile(beside, 0.5),
                    "p99": percentile(beside, 0.99),
                },
                "agent_failed": alone_failed + beside_failed,
                "slow_clients": args.slow,
                "slow_clients_cut_off": len(cut),
                "cut_off_after_s": {
                    "min": round(min(cut), 2) if cut else None,
                    "median": round(statistics.median(cut), 2) if cut else None,
                    "max": round(max(cut), 2) if cut else None,
                },
                "header_timeout_s": args.header_timeout,
                "store": "sqlite" if args.db is None else "postgresql",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
