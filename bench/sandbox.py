"""Stdio upstreams in bubblewrap: start-up against unsandboxed, the gateway's CPU per call in
both, and 50 per-identity instances under load (the gateway's RSS, every one reaped).

    .venv/bin/python bench/sandbox.py [--starts N] [--calls N] [--identities N]

Start-ups are taken in turns (none, bwrap, none, ...) so that the machine's load falls on both
alike; the ratio is of the medians. The upstream is tests/upstreams/hostile_upstream.py (the
standard library only: what is timed is the start, not an import) and server-everything (node)
when it is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import anyio

from strictcall.services.proxy.instances import Instances, PerIdentity
from strictcall.services.proxy.spawn import Spawn
from strictcall.services.proxy.upstream import Upstream, UpstreamSpec

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "upstreams" / "hostile_upstream.py"
EVERYTHING = (
    ROOT / "tests/upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


_QUIET = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115  # the run's whole life


def _upstream(command: tuple[str, ...], sandbox: str) -> Upstream:
    spec = UpstreamSpec(command=command, spawn=Spawn(sandbox=sandbox))
    return Upstream(spec, lambda listing: None, errlog=_QUIET)


async def _start_s(command: tuple[str, ...], sandbox: str) -> float:
    upstream = _upstream(command, sandbox)
    began = time.perf_counter()
    async with upstream.running():
        took = time.perf_counter() - began
    return took


async def _call_cpu_us(command: tuple[str, ...], sandbox: str, calls: int) -> float:
    upstream = _upstream(command, sandbox)
    async with upstream.running():
        for _ in range(20):
            await upstream.call("list", {"path": "/"})
        began = time.process_time()
        for _ in range(calls):
            await upstream.call("list", {"path": "/"})
        return (time.process_time() - began) / calls * 1e6


async def _instances(command: tuple[str, ...], sandbox: str, identities: int) -> dict[str, object]:
    shared = _upstream(command, sandbox)
    instances = Instances(shared, PerIdentity(identities, 3.0), errlog=_QUIET)
    async with shared.running(), instances.lifespan():
        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for index in range(identities):
                for _ in range(5):
                    group.start_soon(instances.call, f"u{index}", "list", {"path": "/"})
        took = time.perf_counter() - began
        peak = instances.running
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        deadline = time.monotonic() + 60
        while instances.running and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        return {
            "identities": identities,
            "calls": identities * 5,
            "seconds": round(took, 2),
            "peak_instances": peak,
            "gateway_max_rss_mib": round(rss_mib, 1),
            "running_after_idle": instances.running,
            "reaped": instances.reaped,
        }


async def main(starts: int, calls: int, identities: int) -> dict[str, object]:
    python = (sys.executable, str(HOSTILE))
    results: dict[str, object] = {"load_1m": os.getloadavg()[0]}
    commands = {"python-stdlib": python}
    if EVERYTHING.exists():
        commands["node-everything"] = ("node", str(EVERYTHING), "stdio")
    for label, command in commands.items():
        times: dict[str, list[float]] = {"none": [], "bwrap": []}
        for _ in range(starts):
            for sandbox in ("none", "bwrap"):
                times[sandbox].append(await _start_s(command, sandbox))
        none, bwrap = statistics.median(times["none"]), statistics.median(times["bwrap"])
        results[f"start_{label}"] = {
            "none_median_s": round(none, 4),
            "bwrap_median_s": round(bwrap, 4),
            "ratio": round(bwrap / none, 3),
            "target": "<= 1.5",
        }
    cpu = {sb: await _call_cpu_us(python, sb, calls) for sb in ("none", "bwrap")}
    results["call_cpu_us"] = {k: round(v, 1) for k, v in cpu.items()}
    results["per_identity"] = await _instances(python, "bwrap", identities)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=9)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--identities", type=int, default=50)
    args = parser.parse_args()
    found = anyio.run(main, args.starts, args.calls, args.identities)
    print(json.dumps(found, indent=2))
