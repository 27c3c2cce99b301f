"""/mcp beside /rpc over HTTP, in one run: `python bench/mcp_http.py [--duration S] [--runs N]`.

Three `strictcall serve` processes on one SQLite file (its u1 and u2 notes and tokens), each
loaded by wrk in turns (bench/http_load.py: run 1 of every target at every connection count,
then run 2, ...) with one read_note call: POST /rpc, POST /mcp on the handshake era
(2025-11-25, no session, as a stateless host posts it) and POST /mcp on 2026-07-28 (the
envelope in `_meta`, `Mcp-Method`/`Mcp-Name` headers). Reported per target and load: req/s,
p50, p99 and the server's CPU per request, and each /mcp row against /rpc's. Writes
bench/MCP.md and prints the JSON; `bench/run.py` loads the same /mcp rows beside its others.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import http_load

BENCH = Path(__file__).resolve().parent
VERSIONS = ("2025-11-25", "2026-07-28")


def main(args: argparse.Namespace) -> dict[str, Any]:
    cli = [sys.executable, "-m", "strictcall"]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        targets = [
            http_load.strictcall_target(cli, workdir),
            *(http_load.strictcall_mcp_target(cli, workdir, version) for version in VERSIONS),
        ]
        results = http_load.load_targets(
            targets, workdir, args.connections, args.duration, args.runs, 1, 1
        )
    rows: list[dict[str, Any]] = []
    floor = {load["connections"]: load for load in results[0].get("loads", [])}
    for result in results:
        for load in result.get("loads", []):
            rpc = floor.get(load["connections"])
            rows.append(
                {
                    "target": result["target"],
                    "connections": load["connections"],
                    "req_s": round(load["req_s"]),
                    "p50_ms": round(load["p50_ms"], 2),
                    "p99_ms": round(load["p99_ms"], 2),
                    "server_cpu_us_per_req": round(load["server_cpu_us_per_req"]),
                    "x_rpc_req_s": None if rpc is None else round(load["req_s"] / rpc["req_s"], 2),
                    "x_rpc_cpu": None
                    if rpc is None
                    else round(load["server_cpu_us_per_req"] / rpc["server_cpu_us_per_req"], 2),
                    "non_2xx": load["non_2xx"],
                }
            )
    report = {
        "commit": http_load.commit_of(BENCH.parent),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "duration_s": args.duration,
        "runs": args.runs,
        "rows": rows,
        "failures": [
            {"target": r["target"], "status": r.get("status"), "note": r.get("note")}
            for r in results
            if r.get("status") not in (None, "ok")
        ],
    }
    write_markdown(report, args.markdown)
    return report


def write_markdown(report: dict[str, Any], path: Path) -> None:
    lines = [
        "# /mcp beside /rpc over HTTP",
        "",
        f"`python bench/mcp_http.py` at {report['commit']}; {report['runs']} wrk runs of "
        f"{report['duration_s']} s per target and load, in turns; load average "
        f"{report['load_average'][0]} before, {report['load_average'][1]} after (2 cores).",
        "",
        "| target | conns | req/s | x /rpc | p50 ms | p99 ms | server CPU µs/req | x /rpc |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['target']} | {row['connections']} | {row['req_s']:,} | "
            f"{row['x_rpc_req_s']} | {row['p50_ms']} | {row['p99_ms']} | "
            f"{row['server_cpu_us_per_req']} | {row['x_rpc_cpu']} |"
        )
    for failure in report["failures"]:
        lines.append(f"\n{failure['target']}: {failure['status']} ({failure['note']})")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per wrk run")
    parser.add_argument("--runs", type=int, default=3, help="wrk runs per target and load")
    parser.add_argument("--connections", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--markdown", type=Path, default=BENCH / "MCP.md")
    return parser.parse_args(argv)


if __name__ == "__main__":
    print(json.dumps(main(parse_args()), indent=2))
