"""What `strictcall proxy` adds to a tools/call: the same call to the same upstream MCP server,
through the official client, directly and through the proxy, timed in the same rounds.

    .venv/bin/python bench/proxy_overhead.py [--calls N] [--rounds R]

Upstreams: @modelcontextprotocol/server-everything's `echo` (node; tests/upstreams, `npm ci`
there first) and the tests' FastMCP server's `read_note`. Each round times N calls direct, then
N through the proxy (`strictcall proxy --upstream-cmd ... --stdio`), one at a time, each call's
answer checked; a figure is the median over the rounds of each round's median per call.
Target (issue 19): added cost <= max(10 % of the direct round trip, 50 µs).
Writes bench/PROXY.md and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
EVERYTHING_JS = (
    ROOT / "tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
FASTMCP_NOTES = ROOT / "tests/upstreams/fastmcp_notes.py"
TARGET_SHARE = 0.10
TARGET_FLOOR_US = 50.0


def upstreams() -> list[tuple[str, list[str], str, dict[str, Any], Callable[[Any], bool]]]:
    """(label, command, tool, arguments, check of the result)."""
    found = []
    node = shutil.which("node")
    if node is not None and EVERYTHING_JS.exists():
        found.append(
            (
                "server-everything (node) echo",
                [node, str(EVERYTHING_JS), "stdio"],
                "echo",
                {"message": "hi"},
                lambda r: "Echo: hi" in r.content[0].text,
            )
        )
    else:
        print("skipped server-everything: no node, or no `npm ci` in tests/upstreams")
    found.append(
        (
            "FastMCP 4 (python) read_note",
            [sys.executable, str(FASTMCP_NOTES)],
            "read_note",
            {"note_id": "n1"},
            lambda r: r.structured_content["note_id"] == "n1",
        )
    )
    return found


async def timed_calls(
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    check: Callable[[Any], bool],
    n: int,
) -> list[int]:
    times = []
    for _ in range(n):
        started = time.perf_counter_ns()
        result = await session.call_tool(tool, arguments)
        times.append(time.perf_counter_ns() - started)
        if result.is_error or not check(result):
            raise SystemExit(f"WRONG answer from {tool}: {result}")
    return times


async def measure(
    command: list[str],
    tool: str,
    arguments: dict[str, Any],
    check: Callable[[Any], bool],
    calls: int,
    rounds: int,
    db: str,
) -> tuple[list[float], list[float]]:
    direct_params = StdioServerParameters(
        command=command[0], args=command[1:], env=dict(os.environ)
    )
    proxy_params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "strictcall",
            "proxy",
            "--upstream-cmd",
            shlex.join(command),
            "--stdio",
            "--identity",
            "bench",
            "--db",
            db,
        ],
        env=dict(os.environ),
    )
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(direct_params, errlog=quiet) as (r1, w1),
            ClientSession(r1, w1) as direct,
            stdio_client(proxy_params, errlog=quiet) as (r2, w2),
            ClientSession(r2, w2) as proxied,
        ):
            await direct.initialize()
            await proxied.initialize()
            await direct.list_tools()
            await proxied.list_tools()
            await timed_calls(direct, tool, arguments, check, 50)  # warm-up
            await timed_calls(proxied, tool, arguments, check, 50)
            direct_us, proxy_us = [], []
            proxy_pid = _child_pid("strictcall")
            cpu_before = _cpu_s(proxy_pid)
            for _ in range(rounds):
                d = await timed_calls(direct, tool, arguments, check, calls)
                p = await timed_calls(proxied, tool, arguments, check, calls)
                direct_us.append(statistics.median(d) / 1000)
                proxy_us.append(statistics.median(p) / 1000)
            cpu_after = _cpu_s(proxy_pid)
    cpu_us = None
    if cpu_before is not None and cpu_after is not None:
        cpu_us = (cpu_after - cpu_before) / (calls * rounds) * 1e6
    return direct_us, proxy_us, cpu_us


def _child_pid(word: str) -> int | None:
    """This process's child whose command line holds `word` (Linux /proc), or None."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == os.getpid() and word in (entry / "cmdline").read_text():
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def _cpu_s(pid: int | None) -> float | None:
    """The CPU time (user + system) `pid` has used, in seconds, or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, command, tool, arguments, check in upstreams():
            direct_us, proxy_us, cpu_us = anyio.run(
                measure,
                command,
                tool,
                arguments,
                check,
                args.calls,
                args.rounds,
                str(Path(tmp) / "audit.sqlite3"),
            )
            direct = statistics.median(direct_us)
            proxied = statistics.median(proxy_us)
            added = proxied - direct
            allowed = max(TARGET_SHARE * direct, TARGET_FLOOR_US)
            cpu = "n/a" if cpu_us is None else f"{cpu_us:.0f}"
            rows.append(
                f"| {label} | {direct:.0f} | {proxied:.0f} | {added:.0f} | "
                f"{100 * added / direct:.0f} % | {cpu} | ≤ {allowed:.0f} µs: "
                f"{'pass' if added <= allowed else 'MISS'} |"
            )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    ).stdout.strip()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join(
        [
            "# What `strictcall proxy` adds to a call",
            "",
            f"Latest run: {now}, strictcall at {commit}; {time.monotonic() - started:.0f} s;"
            f" load average at the end {load} (2 cores, shared). Written by"
            " `bench/proxy_overhead.py`; do not edit by hand.",
            "",
            f"One tools/call at a time through the official MCP client (`ClientSession.call_tool`"
            f" over stdio), {args.calls} calls per round, {args.rounds} rounds; each figure is the"
            " median of the rounds' medians, in µs per call. Direct: the client talks to the"
            " upstream. Proxied: the client talks to `strictcall proxy --stdio`, which talks to"
            " the same upstream through the same client (a second process hop, a second MCP"
            " session, the gateway's checks and the audit record). Proxy CPU: the CPU time the"
            " proxy process used per call (user + system, from /proc), which a busy machine"
            " inflates less than the wall-clock figures.",
            "",
            "| upstream and tool | direct µs | proxied µs | added µs | added / direct"
            " | proxy CPU µs/call | target |",
            "|---|---:|---:|---:|---:|---:|---|",
            *rows,
            "",
        ]
    )
    (BENCH / "PROXY.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
