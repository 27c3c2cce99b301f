"""Resident memory under load: `strictcall serve` on each store beside FastMCP, for minutes.

    .venv/bin/python bench/memory.py [--minutes 10] [--connections 64] [--no-fastmcp]
                                     [--no-postgres]

The servers are started as `make bench` starts them (bench/http_load.py: a fresh SQLite file,
and a fresh PostgreSQL database made and dropped by this run, tokens and notes made by the
operator CLI; FastMCP from bench/.venv-peers), checked, then loaded at the same time by one
wrk each (the valid read_note call, `--connections`
connections) in chunks of `--chunk` seconds, for `--minutes` minutes. After each chunk the
resident memory (VmRSS, summed over the server's process group) is read from /proc. "Start" is
the figure after the first chunk (the server has met every kind of work once); "end" is the
last; growth is end ÷ start - 1. Prints one JSON document (every sample, req/s per chunk).
Both servers are checked again after the load and stopped whatever happens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import http_load
from postgres_http import bench_database

BENCH = Path(__file__).resolve().parent
PEERS_PYTHON = BENCH / ".venv-peers" / "bin" / "python"
TARGET_MIB = 100.0
TARGET_GROWTH = 0.05


def group_rss_kib(pgid: int) -> int:
    """VmRSS of every live process in the process group, in KiB."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[2]) != pgid:
                continue
            for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--chunk", type=int, default=30, help="seconds per wrk run")
    parser.add_argument("--no-fastmcp", action="store_true")
    parser.add_argument("--no-postgres", action="store_true", help="the SQLite store only")
    args = parser.parse_args(argv)
    script = Path(sys.executable).parent / "strictcall"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "strictcall"]
    report: dict[str, Any] = {
        "minutes": args.minutes,
        "connections": args.connections,
        "chunk_s": args.chunk,
        "commit": http_load.commit_of(BENCH.parent),
        "load_average_start": os.getloadavg(),
        "targets": [],
    }
    with tempfile.TemporaryDirectory(prefix="strictcall-memory-") as tmp:
        workdir = Path(tmp)
        with contextlib.ExitStack() as stack:
            targets = [http_load.strictcall_target(cli, workdir)]
            if not args.no_postgres:
                url = stack.enter_context(bench_database())
                targets.append(http_load.strictcall_target(cli, workdir, url))
            if not args.no_fastmcp and PEERS_PYTHON.exists():
                targets.append(http_load.fastmcp_target(str(PEERS_PYTHON), BENCH))
            live = []
            for target in targets:
                out: dict[str, Any] = {"target": target.name, "samples": []}
                report["targets"].append(out)
                if target.unavailable is not None:
                    out["status"] = f"not available: {target.unavailable}"
                    continue
                one = http_load._start(target, workdir, out, stack)
                out["idle_kib"] = group_rss_kib(one.server.proc.pid)
                live.append(one)
            began = time.monotonic()
            with ThreadPoolExecutor(len(live) or 1) as pool:
                while time.monotonic() - began < args.minutes * 60:
                    results = pool.map(
                        lambda one: http_load.run_wrk(
                            one.url, one.script, args.connections, args.chunk, 1
                        ),
                        live,
                    )
                    for one, result in zip(live, results, strict=True):
                        sample = {
                            "t_s": round(time.monotonic() - began),
                            "rss_kib": group_rss_kib(one.server.proc.pid),
                            "req_s": round(result["req_s"]),
                            "p99_ms": result["p99_us"] / 1000,
                            "non_2xx": result["status"],
                            "socket_errors": result["socket_errors"],
                        }
                        one.out["samples"].append(sample)
                        http_load.log(f"memory: {one.target.name} {sample}")
            for one in live:
                wrong = http_load._check_calls(one.target, one.port)
                samples = one.out["samples"]
                start, end = samples[0]["rss_kib"], samples[-1]["rss_kib"]
                growth = end / start - 1
                one.out.update(
                    status="WRONG after load: " + "; ".join(wrong) if wrong else "ok",
                    start_mib=round(start / 1024, 1),
                    end_mib=round(end / 1024, 1),
                    peak_mib=round(max(s["rss_kib"] for s in samples) / 1024, 1),
                    growth=round(growth, 4),
                    under_100_mib=max(s["rss_kib"] for s in samples) / 1024 < TARGET_MIB,
                    growth_under_5_percent=growth < TARGET_GROWTH,
                    requests=sum(s["req_s"] * args.chunk for s in samples),
                )
    report["load_average_end"] = os.getloadavg()
    report["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
