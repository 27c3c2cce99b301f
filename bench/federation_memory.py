"""A federation's resident memory under load: `python bench/federation_memory.py [--minutes 10]
[--connections 64] [--chunk 30]`.

`strictcall federate` over HTTP in front of three stdio upstreams (an official MCP SDK server
and a FastMCP server from tests/upstreams, server-everything from npm), loaded by wrk with
`--connections` connections, the requests going round the three upstreams' tools (2025-11-25,
no session), in chunks of `--chunk` seconds for `--minutes` minutes. After each chunk the
federation's own resident memory (VmRSS of its process, not its upstreams') is read from
/proc. "Start" is the figure after the first chunk, "end" the last; growth is end / start - 1.
Issue 28's targets: under 120 MiB, growing under 5 %. Writes bench/FEDERATION-MEMORY.md and
prints the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import http_load
from http_load import HOST

BENCH = Path(__file__).resolve().parent
UPSTREAMS = BENCH.parent / "tests" / "upstreams"
EVERYTHING_JS = UPSTREAMS / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
TARGET_MIB = 120.0
TARGET_GROWTH = 0.05
CALLS = [
    ("sdk_read_note", {"note_id": "n1"}),
    ("fast_read_note", {"note_id": "n1"}),
    ("every_echo", {"message": "hi"}),
]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def answers_wrong(port: int, token: str) -> list[str]:
    """The calls of the load not answered with a success (each checked once)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {token}",
    }
    wrong = []
    for name, arguments in CALLS:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        status, answer = http_load.request(
            port, "POST", "/mcp", json.dumps(body).encode(), headers, timeout=30
        )
        result = json.loads(answer).get("result") if status == 200 else None
        if not isinstance(result, dict) or result.get("isError") is not False:
            wrong.append(f"{name}: HTTP {status} {answer[:160]!r}")
    return wrong


def wrk_script(token: str, path: Path) -> Path:
    bodies = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            }
        )
        for name, arguments in CALLS
    ]
    lua = [
        'wrk.method = "POST"',
        'wrk.headers["Content-Type"] = "application/json"',
        'wrk.headers["Accept"] = "application/json, text/event-stream"',
        'wrk.headers["Mcp-Protocol-Version"] = "2025-11-25"',
        f'wrk.headers["Authorization"] = "Bearer {token}"',
        "local bodies = {" + ", ".join(f"[==[{body}]==]" for body in bodies) + "}",
        "local turn = 0",
        "request = function()",
        "  turn = turn % #bodies + 1",
        "  return wrk.format(nil, nil, nil, bodies[turn])",
        "end",
    ]
    path.write_text("\n".join(lua) + "\n" + http_load._DONE_HOOK, "utf-8")
    return path


def main(args: argparse.Namespace) -> dict[str, Any]:
    node = "node"
    sdk = shlex.join([sys.executable, str(UPSTREAMS / "sdk_notes.py")])
    fast = shlex.join([sys.executable, str(UPSTREAMS / "fastmcp_notes.py")])
    every = shlex.join([node, str(EVERYTHING_JS), "stdio"])
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        db = workdir / "federation.sqlite3"
        cli = [sys.executable, "-m", "strictcall"]
        made = subprocess.run(
            [*cli, "tokens", "create", "--identity", "u1", "--db", str(db)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        token = made.stdout.strip().splitlines()[-1]
        config = workdir / "federation.toml"
        config.write_text(
            f"[upstreams.sdk]\ncommand = {json.dumps(sdk)}\n"
            f"[upstreams.fast]\ncommand = {json.dumps(fast)}\n"
            f"[upstreams.every]\ncommand = {json.dumps(every)}\n",
            encoding="utf-8",
        )
        port = http_load.free_port()
        command = [*cli, "federate", "--config", str(config), "--host", HOST, "--port", str(port)]
        with http_load.running([*command, "--db", str(db)], workdir / "federate.log") as server:
            http_load.wait_until(lambda: http_load.answers(port, "GET", "/healthz"), server, 120.0)
            wrong = answers_wrong(port, token)
            if wrong:
                raise RuntimeError(f"wrong answers before the load: {wrong}")
            script = wrk_script(token, workdir / "load.lua")
            url = f"http://{HOST}:{port}/mcp"
            samples: list[dict[str, Any]] = []
            chunks = max(2, round(args.minutes * 60 / args.chunk))
            for _ in range(chunks):
                result = http_load.run_wrk(url, script, args.connections, args.chunk, 2)
                samples.append(
                    {
                        "at_s": round(time.monotonic(), 1),
                        "rss_kib": rss_kib(server.proc.pid),
                        "req_s": round(result["req_s"]),
                        "non_2xx": result["status"],
                        "socket_errors": result["socket_errors"],
                    }
                )
                http_load.log(f"  rss {samples[-1]['rss_kib'] / 1024:.1f} MiB, {samples[-1]}")
            alive = server.alive()
            wrong_after = answers_wrong(port, token)
    start, end = samples[0]["rss_kib"] / 1024, samples[-1]["rss_kib"] / 1024
    growth = end / start - 1
    report = {
        "commit": http_load.commit_of(BENCH.parent),
        "minutes": args.minutes,
        "connections": args.connections,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "start_mib": round(start, 1),
        "end_mib": round(end, 1),
        "peak_mib": round(max(s["rss_kib"] for s in samples) / 1024, 1),
        "growth": round(growth, 4),
        "met": end < TARGET_MIB and growth < TARGET_GROWTH and not wrong_after,
        "alive_at_end": alive,
        "wrong_after": wrong_after,
        "samples": samples,
    }
    write_markdown(report, args.markdown)
    return report


def write_markdown(report: dict[str, Any], path: Path) -> None:
    rates = [s["req_s"] for s in report["samples"]]
    errors = sum(s["non_2xx"] + s["socket_errors"] for s in report["samples"])
    verdict = "met" if report["met"] else "MISSED"
    lines = [
        "# A federation's resident memory under load",
        "",
        f"`python bench/federation_memory.py` at {report['commit']}: `strictcall federate` over"
        " HTTP in front of three stdio upstreams (an MCP SDK server, a FastMCP server,"
        f" server-everything), {report['connections']} connections for {report['minutes']}"
        " minutes, the calls going round the three; load average"
        f" {report['load_average'][0]} before, {report['load_average'][1]} after (2 cores,"
        " shared). Written by the script; do not edit by hand.",
        "",
        f"- the federation's own RSS: {report['start_mib']} MiB after the first chunk,"
        f" {report['end_mib']} MiB at the end (peak {report['peak_mib']} MiB), growth"
        f" {100 * report['growth']:.1f} %; target under {TARGET_MIB:g} MiB and under"
        f" {100 * TARGET_GROWTH:g} %: {verdict}",
        f"- req/s per chunk: {min(rates):,}-{max(rates):,}; non-2xx and socket errors: {errors};"
        f" still serving at the end: {report['alive_at_end']}; every call answered right"
        f" before and after: {not report['wrong_after']}",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--chunk", type=float, default=30.0, help="seconds per wrk run")
    parser.add_argument("--markdown", type=Path, default=BENCH / "FEDERATION-MEMORY.md")
    parser.add_argument(
        "--json",
        type=Path,
        default=BENCH / "federation-memory-results.json",
        help="the report as JSON, which bench/run.py copies into RESULTS.md",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_args()
    report = main(arguments)
    arguments.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
