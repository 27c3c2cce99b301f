"""50 per-identity instances of a small stdio server under load, through a real
`strictcall federate` over MCP HTTP: the gateway's RSS (its own process, VmRSS from /proc, and
apart from it its children's total), and every instance reaped after its idle time.

    .venv/bin/python bench/instances.py [--identities N] [--calls N] [--idle S]

The upstream is tests/upstreams/hostile_upstream.py (the standard library only), unsandboxed
so that the figure is the gateway's and not bubblewrap's. Writes bench/instances-results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "upstreams" / "hostile_upstream.py"
RESULTS = ROOT / "bench" / "instances-results.json"
LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")
TARGET_RSS_MIB = 200


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, parent in parents.items() if parent in frontier]
        found += kids
        frontier = kids
    return found


def _memory(pid: int) -> dict[str, float]:
    kids = _descendants(pid)
    total = 0
    for kid in kids:
        try:
            total += _rss_kib(kid)
        except OSError:
            continue
    return {
        "gateway_rss_mib": round(_rss_kib(pid) / 1024, 1),
        "children": len(kids),
        "children_rss_mib": round(total / 1024, 1),
    }


async def _calls(base_url: str, token: str, calls: int) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(base_url + "/mcp", http_client=http)) as client,
    ):
        for _ in range(calls):
            answer = await client.call_tool("small_list", {"path": "/"})
            assert answer.is_error is False, answer


async def _load(base_url: str, tokens: list[str], calls: int) -> None:
    async with anyio.create_task_group() as group:
        for token in tokens:
            group.start_soon(_calls, base_url, token, calls)


def main(identities: int, calls: int, idle_s: float) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="strictcall-instances-"))
    db = tmp / "federation.sqlite3"
    cli = [sys.executable, "-m", "strictcall"]
    tokens = [
        subprocess.run(
            [*cli, "tokens", "create", "--identity", f"u{i}", "--db", str(db)],
            capture_output=True, text=True, check=True,
        ).stdout.strip().splitlines()[-1]
        for i in range(identities)
    ]  # fmt: skip
    config = tmp / "federation.toml"
    command = json.dumps(f"{sys.executable} {HOSTILE}")
    config.write_text(
        f'[upstreams.small]\ncommand = {command}\nsandbox = "none"\n'
        f'instances = "per-identity"\nmax_instances = {identities}\nidle = {idle_s}\n',
        encoding="utf-8",
    )
    stderr = (tmp / "stderr").open("wb")
    process = subprocess.Popen(
        [*cli, "federate", "--config", str(config), "--port", "0", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=stderr, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        match = LISTENING.search(process.stdout.readline())
        assert match is not None, (tmp / "stderr").read_text()
        base_url = match.group(1)
        idle = _memory(process.pid)
        began = time.perf_counter()
        anyio.run(_load, base_url, tokens, calls)
        took = time.perf_counter() - began
        loaded = _memory(process.pid)
        ended = time.monotonic()
        deadline = ended + idle_s + 60
        while time.monotonic() < deadline:
            text = httpx2.get(base_url + "/metrics", timeout=30).text
            running = re.search(r'^strictcall_upstream_instances\{upstream="small"\} (\S+)$',
                                text, re.M)  # fmt: skip
            if running is not None and float(running.group(1)) == 0:
                break
            time.sleep(0.2)
        reaped_after_s = time.monotonic() - ended
        stops = re.search(
            r'^strictcall_upstream_instance_idle_stops_total\{upstream="small"\} (\S+)$', text, re.M
        )
        after = _memory(process.pid)
        return {
            "identities": identities,
            "calls": identities * calls,
            "seconds": round(took, 2),
            "before": idle,
            "under_load": loaded,
            "after_idle": after,
            "idle_s": idle_s,
            "all_reaped_within_s_of_last_call": round(reaped_after_s, 2),
            "instances_running_after": None if running is None else float(running.group(1)),
            "idle_stops": None if stops is None else float(stops.group(1)),
            "target_gateway_rss_mib": f"< {TARGET_RSS_MIB}",
            "met": loaded["gateway_rss_mib"] < TARGET_RSS_MIB
            and running is not None
            and float(running.group(1)) == 0,
            "load_1m": os.getloadavg()[0],
        }
    finally:
        process.terminate()
        process.wait(timeout=60)
        stderr.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--identities", type=int, default=50)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--idle", type=float, default=5.0)
    args = parser.parse_args()
    found = main(args.identities, args.calls, args.idle)
    RESULTS.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(found, indent=2))
