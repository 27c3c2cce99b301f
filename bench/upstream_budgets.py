"""One upstream cannot stall the others: `python bench/upstream_budgets.py [--seconds 5]`.

`strictcall federate` on stdio in front of two hand-written upstreams
(tests/upstreams/listing_upstream.py), "loud" and "calm", with the default budgets. Each phase
times sequential tools/call of calm's tool (and tools/list) from the host's side for `--seconds`:

- idle: nothing else happens (the floor, in this same run);
- relisting: loud relists 60,000 small tools (one line under the 8 MiB cap), again and again
  (its file rewritten every 0.3 s), while the calls run; the federation's peak resident
  memory (VmHWM of its own process, not the upstreams') is read from /proc;
- flood: loud sends 200,000 notifications/message while the calls run.

Targets (issue 41): peak RSS < 200 MiB; calm's p50 during each attack <= 3x idle. Prints the
JSON and writes bench/upstream-budgets-results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "tests"))

from listing_federation import ListingFederation  # noqa: E402
from stdio_peer import until  # noqa: E402

TARGET_RSS_MIB = 200.0
TARGET_RATIO = 3.0
MANY = 60_000
FLOOD = 200_000


def vm(pid: int, key: str) -> float:
    """A /proc/PID/status figure in MiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def cpu_s(pid: int) -> float:
    """The CPU seconds (user + system) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(federation: ListingFederation, seconds: float) -> dict[str, float]:
    """calm's tools/call and tools/list p50 (ms), called in turn for `seconds`, and the share
    of one core the federation's own process used meanwhile."""
    pid = federation.peer.process.pid
    cpu_before, wall_before = cpu_s(pid), time.monotonic()
    call_ms: list[float] = []
    list_ms: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end or len(call_ms) < 20:
        start = time.perf_counter()
        result = federation.peer.call("calm_quiet", {})
        call_ms.append((time.perf_counter() - start) * 1000)
        assert result["isError"] is False, result
        start = time.perf_counter()
        federation.peer.request("tools/list")
        list_ms.append((time.perf_counter() - start) * 1000)
    return {
        "call_p50_ms": statistics.median(call_ms),
        "list_p50_ms": statistics.median(list_ms),
        "call_max_ms": max(call_ms),
        "calls": len(call_ms),
        "federation_cpu_share": (cpu_s(pid) - cpu_before) / (time.monotonic() - wall_before),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0, help="of each phase")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        federation = ListingFederation(
            Path(tmp),
            {"loud": {"tools": ["one"]}, "calm": {"tools": ["quiet"]}},
            prefixes={"loud": "loud", "calm": "calm"},
            pinning=False,
        )
        pid = federation.peer.process.pid
        try:
            federation.peer.initialize()
            timed(federation, 0.5)  # warm
            rss_idle = vm(pid, "VmRSS")
            idle = timed(federation, args.seconds)

            stop = threading.Event()
            waves = [0]

            def relist() -> None:
                while not stop.is_set():
                    waves[0] += 1
                    federation.relist("loud", {"tools": ["one"], "many": MANY, "w": waves[0]})
                    time.sleep(0.3)

            relister = threading.Thread(target=relist)
            relister.start()
            until(lambda: "max_tools" in federation.stderr(), "the relisting is refused")
            relisting = timed(federation, args.seconds)
            stop.set()
            relister.join()
            peak = vm(pid, "VmHWM")

            federation.relist("loud", {"tools": ["one"], "flood": FLOOD, "wave": 1})
            until(lambda: "notifications_per_second" in federation.stderr(), "the flood")
            flood = timed(federation, args.seconds)
            dropped = sum(
                int(line.rsplit(": ", 1)[1].split()[0])
                for line in federation.stderr().splitlines()
                if "notifications_per_second" in line
            )
        finally:
            federation.close()
    load = Path("/proc/loadavg").read_text().split()[:3]
    results: dict[str, Any] = {
        "load_at_end": load,
        "rss_idle_mib": round(rss_idle, 1),
        "rss_peak_mib": round(peak, 1),
        "relistings_of_60000": waves[0],
        "idle": idle,
        "relisting": relisting,
        "flood": flood,
        "notifications_dropped": dropped,
        "relisting_call_ratio": relisting["call_p50_ms"] / idle["call_p50_ms"],
        "relisting_list_ratio": relisting["list_p50_ms"] / idle["list_p50_ms"],
        "flood_call_ratio": flood["call_p50_ms"] / idle["call_p50_ms"],
    }
    results["verdicts"] = {
        "rss_under_200_mib": peak < TARGET_RSS_MIB,
        "relisting_p50_within_3x": results["relisting_call_ratio"] <= TARGET_RATIO,
        "relisting_list_p50_within_3x": results["relisting_list_ratio"] <= TARGET_RATIO,
        "flood_p50_within_3x": results["flood_call_ratio"] <= TARGET_RATIO,
    }
    text = json.dumps(results, indent=2)
    (BENCH / "upstream-budgets-results.json").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
