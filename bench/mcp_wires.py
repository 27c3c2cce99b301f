"""Issue 33's section of bench/RESULTS.md, judged by issue 44's targets: /mcp beside /rpc and
beside FastMCP's /mcp, and `strictcall proxy` over HTTP in front of a stdio upstream beside
`strictcall serve`'s /mcp, each target judged from the HTTP part's rows (bench/run.py) of the
same run.
"""

from __future__ import annotations

from typing import Any

MIN_VS_RPC = 0.9
"""/mcp's requests/s at least this share of /rpc's, at 16 and 64 connections (issue 44; 0.8
before it)."""
MAX_P99_MS_AT_64 = 5.0
"""/mcp's p99 at 64 connections under this (on a quiet machine)."""
MAX_CPU_VS_RPC = 1.15
"""/mcp's server CPU per request at most this many times /rpc's (issue 44; 1.3 before it)."""
PROXY_MIN_VS_SERVE = 0.8
"""The proxy's requests/s, less its upstream's time per call, at least this share of `serve`'s
/mcp on the same wire version and connections."""

RPC = "strictcall serve"
SERVE_MCP = "strictcall serve /mcp "
PROXY_MCP = "strictcall proxy /mcp "
FASTMCP = "FastMCP"
VERSIONS = ("2025-11-25", "2026-07-28")

METHOD = (
    "From the HTTP part above (the same wrk runs, the targets loaded in turns). /mcp: one"
    " read_note tools/call POSTed as a stateless remote host does (2025-11-25: no session;"
    " 2026-07-28: the envelope in `_meta`, `Mcp-Method`/`Mcp-Name` headers), on the same"
    f" `strictcall serve` setup as /rpc's. Targets: /mcp >= {MIN_VS_RPC}x /rpc's req/s at 16"
    f" and 64 connections, p99 < {MAX_P99_MS_AT_64:g} ms at 64 (on a quiet machine: the load"
    f' average is in "Machine"), server CPU per request <= {MAX_CPU_VS_RPC}x /rpc\'s.'
    ' "x FastMCP" divides by FastMCP\'s own /mcp (the 2026-07-28 POST its client sends).'
)

PROXY_METHOD = f"""\
`strictcall proxy` on HTTP (its own server, /mcp, bearer token, every call audited) in front
of a stdio upstream: strictcall's own stdio server with the same read_note on its own SQLite
file (`bench/proxy_http.py`), so that the call is the one `serve`'s /mcp answers with an
in-process tool. The upstream's own time is measured alone, over its pipe, before the load:
its round trip one call at a time, and its time and CPU per call with 16 calls in flight (as
the proxy sends them). "less upstream" takes that time per call (16 in flight) from the
proxy's time per request (1 / req/s): req/s less upstream = 1 / (1 / req/s - upstream's time
per call). Target: that >= {PROXY_MIN_VS_SERVE}x `serve`'s /mcp req/s on the same wire
version and connections. CPU: the proxy's own process group, which the upstream (a session of
its own) is not in: what the proxy spends per request beside what `serve` spends."""


def lines(http: list[dict[str, Any]], upstream: dict[str, Any] | None) -> list[str]:
    """The section's text: both tables and each target's verdict."""
    by_name = {result["target"]: result for result in http}
    rpc = _loads(by_name.get(RPC))
    fast = next((_loads(r) for name, r in by_name.items() if name.startswith(FASTMCP)), {})
    out = [
        METHOD,
        "",
        "| wire | conns | req/s | x /rpc | x FastMCP /mcp | p50 ms | p99 ms | server CPU µs/req"
        " | x /rpc | targets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for conns, load in sorted(rpc.items()):
        out.append(_row("POST /rpc", load, None, fast.get(conns), "reference"))
    for conns, load in sorted(fast.items()):
        out.append(_row("FastMCP /mcp 2026-07-28", load, rpc.get(conns), None, "reference"))
    verdicts: list[str] = []
    for version in VERSIONS:
        result = by_name.get(SERVE_MCP + version)
        if result is None:
            continue
        if result.get("status") != "ok":
            verdicts.append(f"/mcp {version}: {result.get('status')} ({result.get('note', '')})")
        for conns, load in sorted(_loads(result).items()):
            judged = judge_mcp(load, rpc.get(conns), result.get("status") == "ok")
            out.append(_row(f"POST /mcp {version}", load, rpc.get(conns), fast.get(conns), judged))
            verdicts.append(f"/mcp {version} at {conns} connections: {judged}")
    out += ["", *(f"- {verdict}" for verdict in verdicts)]
    out += ["", "### `strictcall proxy` over HTTP, a stdio upstream", "", PROXY_METHOD, ""]
    out += proxy_lines(by_name, upstream)
    return out


def judge_mcp(load: dict[str, Any], rpc: dict[str, Any] | None, ok: bool) -> str:
    """pass, or MISSED with each missed target's figure."""
    missed = []
    if not ok or load["non_2xx"] or load["socket_errors"]:
        missed.append("errors or wrong answers")
    if rpc is None:
        return "not judged (no /rpc row)"
    share = load["req_s"] / rpc["req_s"] if rpc["req_s"] else 0.0
    if share < MIN_VS_RPC:
        missed.append(f"req/s {share:.2f}x /rpc < {MIN_VS_RPC}x")
    cpu = _cpu_ratio(load, rpc)
    if cpu is None or cpu > MAX_CPU_VS_RPC:
        missed.append(f"CPU {_x(cpu)} /rpc > {MAX_CPU_VS_RPC}x")
    if load["connections"] == 64 and load["p99_ms"] >= MAX_P99_MS_AT_64:
        missed.append(f"p99 {load['p99_ms']:.2f} ms >= {MAX_P99_MS_AT_64:g} ms")
    goals = f">= {MIN_VS_RPC}x /rpc req/s, CPU <= {MAX_CPU_VS_RPC}x" + (
        f", p99 < {MAX_P99_MS_AT_64:g} ms" if load["connections"] == 64 else ""
    )
    return f"{goals}: pass" if not missed else f"MISSED ({'; '.join(missed)})"


def proxy_lines(by_name: dict[str, dict[str, Any]], upstream: dict[str, Any] | None) -> list[str]:
    """The proxy's table, against `serve`'s /mcp at the same version and connections."""
    if upstream is None or "error" in upstream:
        why = "not run" if upstream is None else upstream["error"]
        return [f"The upstream's own time was not measured ({why}): the proxy is not judged."]
    per_call_us = float(upstream["us_per_call_in_flight"])
    out = [
        f"The upstream alone: round trip {upstream['round_trip_us']:.0f} µs one call at a time;"
        f" {per_call_us:.0f} µs and {upstream['cpu_us_per_call']:.0f} µs of CPU per call with"
        f" {upstream['depth']} in flight.",
        "",
        "| wire | conns | req/s | p50 ms | p99 ms | proxy CPU µs/req | req/s less upstream"
        " | serve /mcp req/s | x serve /mcp | CPU x serve /mcp | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    verdicts = []
    for version in VERSIONS:
        result = by_name.get(PROXY_MCP + version + " (stdio upstream)")
        serve = _loads(by_name.get(SERVE_MCP + version))
        if result is None:
            continue
        if result.get("status") != "ok":
            verdicts.append(f"proxy {version}: {result.get('status')} ({result.get('note', '')})")
        for conns, load in sorted(_loads(result).items()):
            theirs = serve.get(conns)
            less = less_upstream(load["req_s"], per_call_us)
            share = None if less is None or theirs is None else less / theirs["req_s"]
            met = (
                share is not None
                and share >= PROXY_MIN_VS_SERVE
                and result.get("status") == "ok"
                and not load["non_2xx"]
                and not load["socket_errors"]
            )
            verdict = (
                f">= {PROXY_MIN_VS_SERVE}x: pass"
                if met
                else f"MISSED ({_x(share)} < {PROXY_MIN_VS_SERVE}x)"
                if share is not None
                else "not judged (no serve /mcp row, or upstream slower than the proxy's rate)"
            )
            serve_req_s = None if theirs is None else theirs["req_s"]
            out.append(
                f"| proxy /mcp {version} | {conns} | {load['req_s']:,.0f} | {load['p50_ms']:.2f}"
                f" | {load['p99_ms']:.2f} | {load['server_cpu_us_per_req']:,.0f}"
                f" | {_count(less)} | {_count(serve_req_s)}"
                f" | {_x(share)} | {_x(_cpu_ratio(load, theirs))} | {verdict} |"
            )
            verdicts.append(f"proxy {version} at {conns} connections: {verdict}")
    return [*out, "", *(f"- {verdict}" for verdict in verdicts)]


def less_upstream(req_s: float, upstream_us: float) -> float | None:
    """Requests/s with the upstream's time per call taken from each request's; None when the
    upstream's time is all of it (nothing left to judge)."""
    if req_s <= 0:
        return None
    left = 1.0 / req_s - upstream_us / 1e6
    return None if left <= 0 else 1.0 / left


def _loads(result: dict[str, Any] | None) -> dict[int, dict[str, Any]]:
    if result is None:
        return {}
    return {load["connections"]: load for load in result.get("loads", [])}


def _cpu_ratio(load: dict[str, Any], other: dict[str, Any] | None) -> float | None:
    if other is None or not other["server_cpu_us_per_req"]:
        return None
    return float(load["server_cpu_us_per_req"] / other["server_cpu_us_per_req"])


def _row(
    wire: str,
    load: dict[str, Any],
    rpc: dict[str, Any] | None,
    fast: dict[str, Any] | None,
    verdict: str,
) -> str:
    vs_rpc = None if rpc is None or not rpc["req_s"] else load["req_s"] / rpc["req_s"]
    vs_fast = None if fast is None or not fast["req_s"] else load["req_s"] / fast["req_s"]
    return (
        f"| {wire} | {load['connections']} | {load['req_s']:,.0f} | {_x(vs_rpc)} | {_x(vs_fast)}"
        f" | {load['p50_ms']:.2f} | {load['p99_ms']:.2f} | {load['server_cpu_us_per_req']:,.0f}"
        f" | {_x(_cpu_ratio(load, rpc))} | {verdict} |"
    )


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"
