"""The federation and proxy-overhead figures in bench/RESULTS.md: `make bench` runs
bench/proxy_overhead.py, bench/federation.py and bench/federation_memory.py after bench/run.py,
each writing its JSON beside its Markdown, then `bench/run.py --render-only` copies their key
figures here with each target judged (issues 19 and 28), so that one `make bench` leaves them
all in RESULTS.md. A file from an older run is shown with its commit; a missing one is said so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from federation_memory import TARGET_GROWTH, TARGET_MIB

BENCH = Path(__file__).resolve().parent
PROXY = BENCH / "proxy-results.json"
FEDERATION = BENCH / "federation-results.json"
FEDERATION_MEMORY = BENCH / "federation-memory-results.json"

FEDERATE_MIN_VS_CONTEXTFORGE = 10.0
"""Issue 28: the federation's req/s at least this many times ContextForge's."""
FEDERATE_MAX_P99_SHARE = 0.1
"""Issue 28: the federation's p99 under this share of ContextForge's."""
FEDERATE = "strictcall federate"
PROXY_WAY = "strictcall proxy"
FEDERATE_WAY = "strictcall federate (one upstream)"
REDACT_OFF_WAY = "strictcall proxy --redact off"


def lines() -> list[str]:
    """The three parts' sections, from their stored JSON."""
    return [
        "### What `strictcall proxy` adds to a call (bench/proxy_overhead.py; issues 19, 28, 38)",
        "",
        *_stored(PROXY, "proxy_overhead.py", proxy_lines),
        "",
        "### A federation against ContextForge (bench/federation.py; issue 28)",
        "",
        *_stored(FEDERATION, "federation.py", federation_lines),
        "",
        "### A federation's memory under load (bench/federation_memory.py; issue 28)",
        "",
        *_stored(FEDERATION_MEMORY, "federation_memory.py", memory_lines),
    ]


def _stored(path: Path, script: str, render: Any) -> list[str]:
    if not path.exists():
        return [f"Not measured: `python bench/{script}` writes {path.name} (`make bench` runs it)."]
    try:
        report = json.loads(path.read_text("utf-8"))
        found: list[str] = render(report)
    except (ValueError, KeyError, TypeError) as exc:
        return [f"{path.name} could not be read ({type(exc).__name__}): rerun bench/{script}."]
    return [f"From {path.name}, `bench/{script}` at {report.get('commit', '?')}.", "", *found]


def proxy_lines(report: dict[str, Any]) -> list[str]:
    """µs per call of each way, the proxy's added cost (issue 19), its CPU per call back to
    back (issue 38), a federation of one's (issue 28) and redaction's share of a 64 KiB text's
    call (issue 38), judged."""
    out = [
        f"{report['calls']} calls a round, {report['rounds']} rounds, {report['at']}; load"
        f" average {report['load_average'][0]} at the start, {report['load_average'][1]} at the"
        " end. Full table: bench/PROXY.md.",
        "",
        "| upstream | way | µs per call | added µs | CPU µs/call back to back | target |",
        "|---|---|---:|---:|---:|---|",
    ]
    for upstream in report["upstreams"]:
        for way, figures in upstream["ways"].items():
            target = ""
            if way == PROXY_WAY:
                met = "pass" if upstream["proxy_added_met"] else "MISSED"
                target = f"added ≤ {upstream['proxy_added_target_us']:.0f} µs: {met}"
                if upstream.get("proxy_cpu_met") is not None:
                    met = "pass" if upstream["proxy_cpu_met"] else "MISSED"
                    target += f"; CPU ≤ {upstream['proxy_cpu_target_us']:.0f} µs: {met}"
            elif way == REDACT_OFF_WAY and upstream.get("redaction_share") is not None:
                met = "pass" if upstream["redaction_share_met"] else "MISSED"
                target = (
                    f"redaction {100 * upstream['redaction_share']:.1f} % of the proxy's CPU,"
                    f" ≤ {100 * upstream['redaction_share_target']:.0f} %: {met}"
                )
            elif way == FEDERATE_WAY and upstream["federate_cpu_met"] is not None:
                met = "pass" if upstream["federate_cpu_met"] else "MISSED"
                target = f"CPU ≤ {upstream['federate_cpu_target_us']:.0f} µs: {met}"
            out.append(
                f"| {upstream['upstream']} | {way} | {_num(figures['us_per_call'])}"
                f" | {_num(figures['added_us'])} | {_num(figures['cpu_us_back_to_back'])}"
                f" | {target} |"
            )
    return out


def federation_lines(report: dict[str, Any]) -> list[str]:
    """strictcall federate against ContextForge on each upstream, judged at each load."""
    out = [
        f"{report['runs']} wrk runs of {report['duration_s']} s per target and load. Full"
        " tables: bench/FEDERATION.md.",
        "",
        "| upstream | target | conns | req/s | x ContextForge | p99 ms | p99 / ContextForge's"
        " | server CPU µs/req | issue 28 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    failures = []
    for upstream in report["upstreams"]:
        for row in upstream["rows"]:
            verdict = judge_federation(row) if row["target"] == FEDERATE else ""
            out.append(
                f"| {upstream['upstream']} | {row['target']} | {row['connections']}"
                f" | {row['req_s']:,} | {_num(row['x_contextforge_req_s'], 1)}"
                f" | {row['p99_ms']} | {_num(row['p99_over_contextforge'], 3)}"
                f" | {row['server_cpu_us_per_req']:,} | {verdict} |"
            )
        for failure in upstream.get("failures", []):
            failures.append(f"- {upstream['upstream']}: {failure['target']}: {failure['status']}")
    return [*out, "", *failures] if failures else out


def judge_federation(row: dict[str, Any]) -> str:
    missed = []
    times, share = row["x_contextforge_req_s"], row["p99_over_contextforge"]
    if times is None or share is None:
        missed.append("no ContextForge figure at this load")
    else:
        if times < FEDERATE_MIN_VS_CONTEXTFORGE:
            missed.append(f"{times:.1f}x < {FEDERATE_MIN_VS_CONTEXTFORGE:g}x")
        if share >= FEDERATE_MAX_P99_SHARE:
            missed.append(f"p99 {share:.3f} of ContextForge's >= {FEDERATE_MAX_P99_SHARE:g}")
    if row["non_2xx"] or row["socket_errors"]:
        missed.append("errors")
    goal = f"≥ {FEDERATE_MIN_VS_CONTEXTFORGE:g}x, p99 < {FEDERATE_MAX_P99_SHARE:g} of theirs"
    return f"{goal}: pass" if not missed else f"MISSED ({'; '.join(missed)})"


def memory_lines(report: dict[str, Any]) -> list[str]:
    """The federation's RSS at the start and the end of the load, judged."""
    verdict = "met" if report["met"] else "MISSED"
    return [
        f"{report['connections']} connections for {report['minutes']} minutes; load average"
        f" {report['load_average'][0]} before, {report['load_average'][1]} after.",
        "",
        f"- RSS {report['start_mib']} MiB after the first chunk, {report['end_mib']} MiB at the"
        f" end (peak {report['peak_mib']} MiB), growth {100 * report['growth']:.1f} %; target"
        f" under {TARGET_MIB:g} MiB and under {100 * TARGET_GROWTH:g} % growth: {verdict}; still"
        " serving at the end:"
        f" {report['alive_at_end']}; wrong answers after: {len(report['wrong_after'])}",
    ]


def _num(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"
