"""The side-by-side benchmark of issue 6, one command: `make bench` (this script, project venv).

1. in-process, text in and text out, each process timing its own stdlib floor in the same rounds:
   strictcall's Gateway on in-memory notes and on the SQLite store (this venv), the MCP SDK's
   MCPServer.call_tool and FastMCP's server.call_tool (bench/.venv-peers, made here);
2. HTTP on 127.0.0.1 under wrk (installed here with apt-get when missing) at 16 and 64
   connections: `strictcall serve`, FastMCP streamable HTTP, a bare JSON endpoint on uvicorn;
3. start-up: `import strictcall`, `strictcall call` end to end, `strictcall serve` to /healthz.

Every figure's answer is checked before it is timed; a wrong one is reported WRONG, untimed.
Writes bench/RESULTS.md and bench/results.json, and prints the tables.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PEERS_VENV = BENCH / ".venv-peers"
PEERS_REQUIREMENTS = BENCH / "requirements-peers.txt"

sys.path.insert(0, str(BENCH))

import adapters  # noqa: E402
import container  # noqa: E402
import http_load  # noqa: E402
import mcp_wires  # noqa: E402
import ops  # noqa: E402
import postgres_http  # noqa: E402
import proxy_http  # noqa: E402
import startup  # noqa: E402
import stored_figures  # noqa: E402
from http_load import log  # noqa: E402
from reliability.progress import Progress  # noqa: E402

# The goals of issue 6, part 3.
GATEWAY_MAX_RATIO = 1.0
SQLITE_MAX_RATIO = 2.5
HTTP_MIN_VS_FASTMCP = 10.0
HTTP_MIN_VS_BARE = 1.0  # issue 18: strict, authenticated and audited, yet no slower
HTTP_MAX_P99_MS_AT_16 = 5.0
# The goals of issue 18.
BFCL_MAX_REFUSED_OVER_ACCEPTED = 1.2
BFCL_MAX_MEAN_US = 10.0
HTTP18_MIN_VS_BARE = 1.0
HTTP18_MAX_P99_MS_AT_64 = 5.0
MEMORY_RESULTS = BENCH / "memory-results.json"
SERVERS_RESULTS = BENCH / "servers-results.json"
IMPORT_MAX_MS = 100.0
HEALTHZ_MAX_S = 1.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="in-process rounds (default 7)")
    parser.add_argument("--batch", type=float, default=0.05, help="seconds per timed batch")
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--connections", default="16,64", help="wrk connection counts")
    parser.add_argument("--http-runs", type=int, default=3, help="wrk runs per count (median)")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (2 cores in all)")
    parser.add_argument("--warmup", type=int, default=1, help="seconds of wrk warm-up (0: none)")
    parser.add_argument("--startup-runs", type=int, default=10, help="runs per start-up figure")
    parser.add_argument("--serve-runs", type=int, default=3, help="server starts to time")
    parser.add_argument("--skip-peers", action="store_true", help="no peers venv, no peer rows")
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--skip-startup", action="store_true")
    parser.add_argument("--skip-ops", action="store_true", help="no operator figures (issue 16)")
    parser.add_argument("--ops-records", type=int, default=1_000_000, help="audit records")
    parser.add_argument(
        "--skip-postgres",
        action="store_true",
        help="no PostgreSQL and --workers part (bench/postgres_http.py)",
    )
    parser.add_argument(
        "--skip-servers", action="store_true", help="no server comparison (bench/servers.py)"
    )
    parser.add_argument(
        "--skip-memory", action="store_true", help="no memory under load (bench/memory.py)"
    )
    parser.add_argument(
        "--memory-minutes", type=float, default=10.0, help="minutes of load (bench/memory.py)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 3 rounds, 2 s wrk runs, 1 run each"
    )
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="write RESULTS.md again from results.json (the same run), measuring nothing",
    )
    parser.add_argument("--json", type=Path, default=BENCH / "results.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.http_runs, args.warmup = 3, 2, 1, 1
        args.startup_runs, args.serve_runs = 3, 1
        args.ops_records = 100_000
        args.memory_minutes = 0.5
    args.connection_counts = [int(c) for c in args.connections.split(",") if c.strip()]
    return args


# --- environment -------------------------------------------------------------------------------


def _run(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def ensure_peers_venv() -> str | None:
    """bench/.venv-peers with requirements-peers.txt installed; its python, or None."""
    python = PEERS_VENV / "bin" / "python"
    stamp = PEERS_VENV / ".requirements-sha256"
    want = hashlib.sha256(PEERS_REQUIREMENTS.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text().strip() == want:
        return str(python)
    base = shutil.which("python3") or sys.executable
    log(f"peers: creating {PEERS_VENV.relative_to(ROOT)} and installing {PEERS_REQUIREMENTS.name}")
    try:
        made = _run([base, "-m", "venv", str(PEERS_VENV)], 300)
        if made.returncode != 0:
            log(f"peers: venv failed: {made.stderr.strip()[-300:]}")
            return None
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        done = _run([*pip, "-r", str(PEERS_REQUIREMENTS)], 900)
    except subprocess.TimeoutExpired:
        log("peers: install timed out")
        return None
    if done.returncode != 0:
        log(f"peers: pip failed: {done.stderr.strip()[-500:]}")
        return None
    stamp.write_text(want + "\n")
    return str(python)


def ensure_wrk() -> str | None:
    """The wrk binary, installed from Debian's package when missing; its version, or None."""
    if shutil.which("wrk") is None:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            log("wrk: missing and cannot be installed here (needs root and apt-get)")
            return None
        log("wrk: installing Debian's package (apt-get update; apt-get install -y wrk)")
        try:
            _run(["apt-get", "update", "-qq"], 600)
            done = _run(["apt-get", "install", "-y", "-qq", "wrk"], 600)
        except subprocess.TimeoutExpired:
            log("wrk: install timed out")
            return None
        if done.returncode != 0 or shutil.which("wrk") is None:
            log(f"wrk: install failed: {done.stderr.strip()[-300:]}")
            return None
    out = _run(["wrk", "-v"], 30)
    first = (out.stdout or out.stderr).strip().splitlines()
    return first[0].split(" Copyright")[0] if first else "wrk (version unknown)"


def strictcall_cli() -> list[str]:
    script = Path(sys.executable).parent / "strictcall"
    return [str(script)] if script.exists() else [sys.executable, "-m", "strictcall"]


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "loadavg_start": _loadavg(),
        "kernel": platform.release(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def versions(python: str) -> dict[str, str | None]:
    code = (
        "import json, importlib.metadata as m, importlib.util as u\n"
        "out = {}\n"
        "for n in ('strictcall','mcp','fastmcp','uvicorn','pydantic','orjson','jsonschema_rs',"
        "'uvloop','httptools','starlette'):\n"
        "    try: out[n] = m.version(n)\n"
        "    except Exception: out[n] = None\n"
        "print(json.dumps(out))\n"
    )
    done = _run([python, "-c", code], 60)
    try:
        found: dict[str, str | None] = json.loads(done.stdout)
    except ValueError:
        found = {}
    version = _run([python, "-c", "import sys; print(sys.version.split()[0])"], 60)
    found["python"] = version.stdout.strip() or None
    return found


def git_revision() -> str:
    head = _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], 30).stdout.strip()
    dirty = _run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"], 30).stdout.strip()
    return f"{head or 'unknown'}{' + uncommitted src/ changes' if dirty else ''}"


# --- the three parts ---------------------------------------------------------------------------


def in_process(python: str, script: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        python,
        str(BENCH / script),
        "--rounds",
        str(args.rounds),
        "--batch",
        str(args.batch),
    ]
    log(f"in-process: {script} ({args.rounds} rounds)")
    try:
        done = _run(command, 900)
    except subprocess.TimeoutExpired:
        return {"error": f"{script} timed out"}
    if done.returncode != 0:
        return {"error": f"{script} exited {done.returncode}: {done.stderr.strip()[-500:]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def http_part(
    args: argparse.Namespace, peers_python: str | None, workdir: Path
) -> list[dict[str, Any]]:
    cli = strictcall_cli()
    uvicorn_here = _run([sys.executable, "-c", "import uvicorn"], 60).returncode == 0
    bare_python = sys.executable if uvicorn_here else peers_python
    targets = [
        http_load.strictcall_target(cli, workdir),
        http_load.strictcall_mcp_target(cli, workdir, "2025-11-25"),
        http_load.strictcall_mcp_target(cli, workdir, "2026-07-28"),
        *(proxy_http.proxy_target(cli, workdir, version) for version in mcp_wires.VERSIONS),
    ]
    if peers_python is not None:
        targets.append(http_load.fastmcp_target(peers_python, BENCH))
    else:
        targets.append(_no_target("FastMCP streamable HTTP", "the peers venv could not be made"))
    if bare_python is not None:
        targets.append(http_load.bare_target(bare_python, BENCH))
        targets.append(http_load.bare_target(bare_python, BENCH, sqlite=True))
        if bare_python == sys.executable:
            targets.append(http_load.bare_target(bare_python, BENCH, coalesced=True))
    else:
        targets.append(_no_target("bare JSON endpoint", "no venv with uvicorn"))
    return http_load.load_targets(
        targets,
        workdir,
        args.connection_counts,
        args.duration,
        args.http_runs,
        args.threads,
        args.warmup,
    )


def proxy_upstream_part(workdir: Path) -> dict[str, Any]:
    """The proxy's stdio upstream alone (`proxy_http.upstream_time`), for issue 33's verdict."""
    try:
        return proxy_http.upstream_time(strictcall_cli(), workdir)
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def postgres_part(args: argparse.Namespace, wrk: str | None, workdir: Path) -> dict[str, Any]:
    """strictcall serve on PostgreSQL against the bare same-SELECT endpoint, and --workers 1
    against 2 on both stores (bench/postgres_http.py), at the first connection count."""
    if args.skip_postgres:
        return {"skipped": "--skip-postgres"}
    if wrk is None:
        return {"skipped": "wrk is not available"}
    conns = args.connection_counts[0]
    try:
        return postgres_http.run(conns, args.duration, 1, max(args.threads, 2), workdir)
    except Exception as exc:  # no server at the URL, no driver: said in the results
        return {"skipped": f"{type(exc).__name__}: {str(exc)[:300]}"}


def ops_part(args: argparse.Namespace, wrk: str | None, workdir: Path) -> dict[str, Any]:
    """The operator's figures (bench/ops.py): the cost of metrics and spans at the first
    connection count, the page with `--ops-records` audit records."""
    try:
        return ops.run(
            workdir,
            records=args.ops_records,
            page_runs=20,
            connections=args.connection_counts[:1],
            duration=args.duration,
            runs=args.http_runs,
            threads=args.threads,
            warmup=args.warmup,
            skip_http=args.skip_http or wrk is None,
        )
    except Exception as exc:
        log(f"ops: failed: {type(exc).__name__}: {str(exc)[:300]}")
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def _no_target(name: str, why: str) -> http_load.HttpTarget:
    return http_load.HttpTarget(name, "", [], "", [], lambda port: False, unavailable=why)


def script_part(script: str, out: Path, options: list[str], skip: str | None) -> dict[str, Any]:
    """Run `bench/<script>` (its own processes, its own loads) and keep its JSON document in
    `out`, which the tables below read; what happened, for the report."""
    if skip is not None:
        return {"skipped": skip}
    log(f"{script} {' '.join(options)}")
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *options],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"skipped": f"{script} exited {done.returncode}: {done.stderr.strip()[-300:]}"}
    out.write_text(done.stdout, "utf-8")
    return {"written": out.name}


def servers_part(args: argparse.Namespace, wrk: str | None) -> dict[str, Any]:
    """The same app on uvicorn (strictcall's protocol, the stock one) and granian, each store,
    one and two workers (bench/servers.py; granian from the `bench` extra)."""
    skip = "--skip-servers" if args.skip_servers else None
    if wrk is None:
        skip = "wrk is not available"
    elif skip is None and importlib.util.find_spec("granian") is None:
        skip = "granian is not installed (pip install -e '.[bench]'; `make bench` does)"
    options = ["--duration", str(args.duration), "--runs", str(min(args.http_runs, 2))]
    options += ["--connections", args.connections, "--warmup", str(args.warmup)]
    if args.skip_postgres:
        options.append("--no-postgres")
    return script_part("servers.py", SERVERS_RESULTS, options, skip)


def memory_part(args: argparse.Namespace, wrk: str | None) -> dict[str, Any]:
    """strictcall serve's resident memory on each store beside FastMCP under 64 connections
    for `--memory-minutes` (bench/memory.py)."""
    skip = "--skip-memory" if args.skip_memory else None
    if wrk is None:
        skip = "wrk is not available"
    options = ["--minutes", str(args.memory_minutes)]
    if args.memory_minutes < 2:
        options += ["--chunk", "5"]
    if args.skip_postgres:
        options.append("--no-postgres")
    return script_part("memory.py", MEMORY_RESULTS, options, skip)


def startup_part(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    cli = strictcall_cli()
    log(f"start-up: import and call x{args.startup_runs}, serve x{args.serve_runs}")
    return {
        "import": startup.import_time(sys.executable, args.startup_runs),
        "call": startup.cli_call(cli, args.startup_runs),
        "serve": startup.serve_ready(cli, workdir, args.serve_runs),
    }


# --- verdicts and tables -----------------------------------------------------------------------


def _verdict(ok: bool, goal: str) -> str:
    return f"{goal}: {'pass' if ok else 'FAIL'}"


def inprocess_goal(row: dict[str, Any]) -> str:
    name = row["target"]
    if name.startswith("strictcall gateway, in-memory"):
        goal, limit = f"≤ {GATEWAY_MAX_RATIO:.1f}x", GATEWAY_MAX_RATIO
    elif name.startswith("strictcall gateway, SQLite"):
        goal, limit = f"≤ {SQLITE_MAX_RATIO:.1f}x", SQLITE_MAX_RATIO
    else:
        return ""
    if row["status"] != "ok":
        return f"{goal}: FAIL ({row['status']})"
    return _verdict(row["ratio"] <= limit, goal)


def _fmt_us(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def inprocess_table(processes: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| process | system | call | µs/call (median) | min-max | x floor (same rounds) | target |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    notes = []
    for proc in processes:
        if "error" in proc:
            lines.append(
                f"| {proc.get('process', '?')} | — | — | — | — | — | {proc['error'][:120]} |"
            )
            continue
        for row in proc["rows"]:
            label = proc["process"]
            goal = inprocess_goal(row)
            if row["status"] != "ok":
                lines.append(
                    f"| {label} | {row['target']} | {row['case']} | {row['status']} | | | {goal} |"
                )
                notes.append(
                    f"- {row['target']} ({row['case']}): {row['status']}: {row.get('note', '')}"
                )
                continue
            lines.append(
                f"| {label} | {row['target']} | {row['case']} | {_fmt_us(row['us'])} | "
                f"{_fmt_us(row['us_min'])}-{_fmt_us(row['us_max'])} | "
                f"{row['ratio']:.2f}x | {goal} |"
            )
    return lines + (["", *sorted(set(notes))] if notes else [])


def http_table(results: list[dict[str, Any]]) -> list[str]:
    fast = next((r for r in results if r["target"].startswith("FastMCP")), None)
    bare = next((r for r in results if r["target"].startswith("bare")), None)
    lines = [
        "| system | conns | req/s (median) | p50 ms | p99 ms | non-2xx / socket errors | "
        "server CPU µs/req | x bare | x FastMCP | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    notes = []
    for result in results:
        name = result["target"]
        if result["status"] != "ok" and not result["loads"]:
            goal = "all HTTP goals: FAIL" if name == "strictcall serve" else ""
            lines.append(f"| {name} | — | {result['status']} | | | | | | | {goal} |")
            notes.append(f"- {name}: {result['status']}: {result.get('note', '')}")
            continue
        if result["status"] != "ok":
            notes.append(f"- {name}: {result['status']}: {result.get('note', '')}")
        for load in result["loads"]:
            conns = load["connections"]
            vs_bare = _ratio(load, bare, conns)
            vs_fast = _ratio(load, fast, conns)
            goal = ""
            if name == "strictcall serve":
                goal = http_goal(load, vs_bare, vs_fast, result["status"] == "ok")
            lines.append(
                f"| {name} | {conns} | {load['req_s']:,.0f} | {load['p50_ms']:.2f} | "
                f"{load['p99_ms']:.2f} | {load['non_2xx']} / {load['socket_errors']} | "
                f"{load['server_cpu_us_per_req']:,.0f} | {_x(vs_bare)} | {_x(vs_fast)} | {goal} |"
            )
        if "ready_s" in result:
            notes.append(f"- {name}: answered {result['ready_s']:.2f} s after its process started.")
    return lines + (["", *notes] if notes else [])


def _ratio(load: dict[str, Any], other: dict[str, Any] | None, conns: int) -> float | None:
    if other is None or other.get("status") != "ok":
        return None
    for theirs in other["loads"]:
        if theirs["connections"] == conns and theirs["req_s"] > 0:
            return float(load["req_s"] / theirs["req_s"])
    return None


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def http_goal(load: dict[str, Any], vs_bare: float | None, vs_fast: float | None, ok: bool) -> str:
    failed = []
    if not ok:
        failed.append("wrong answer")
    if vs_fast is None or vs_fast < HTTP_MIN_VS_FASTMCP:
        failed.append(f"≥ {HTTP_MIN_VS_FASTMCP:.0f}x FastMCP")
    if vs_bare is None or vs_bare < HTTP_MIN_VS_BARE:
        failed.append(f"≥ {HTTP_MIN_VS_BARE}x bare")
    if load["connections"] == 16 and load["p99_ms"] >= HTTP_MAX_P99_MS_AT_16:
        failed.append(f"p99 < {HTTP_MAX_P99_MS_AT_16:.0f} ms")
    if load["non_2xx"] or load["socket_errors"]:
        failed.append("no errors")
    goals = f"≥ 10x FastMCP, ≥ {HTTP_MIN_VS_BARE}x bare, no errors" + (
        ", p99 < 5 ms" if load["connections"] == 16 else ""
    )
    return f"{goals}: pass" if not failed else f"FAIL ({', '.join(failed)})"


def startup_table(result: dict[str, Any]) -> list[str]:
    lines = ["| what | figure | target |", "|---|---:|---|"]
    imp, call, serve = result["import"], result["call"], result["serve"]
    if imp["status"] == "ok":
        cumulative = imp["importtime_cumulative_ms"]
        extra = f" (-X importtime cumulative {cumulative:.1f} ms)" if cumulative is not None else ""
        lines.append(
            f"| `import strictcall` (wall, less `python -c pass` = "
            f"{imp['python_bare_ms']:.1f} ms){extra} "
            f"| {imp['ms']:.1f} ms | {_verdict(imp['ms'] < IMPORT_MAX_MS, '< 100 ms')} |"
        )
    else:
        lines.append(
            f"| `import strictcall` | {imp['status']}: {imp.get('note', '')} | < 100 ms: FAIL |"
        )
    if call["status"] == "ok":
        lines.append(f"| `strictcall call --identity u1 RAW`, end to end | {call['ms']:.1f} ms | |")
    else:
        lines.append(f"| `strictcall call` | {call['status']}: {call.get('note', '')} | |")
    if serve["status"] == "ok":
        lines.append(
            f"| `strictcall serve`: process start → /healthz 200 | {serve['s'] * 1000:.0f} ms | "
            f"{_verdict(serve['s'] < HEALTHZ_MAX_S, '< 1 s')} |"
        )
    else:
        lines.append(
            f"| `strictcall serve`: process start → /healthz 200 | {serve['status']}: "
            f"{serve.get('note', '')} | < 1 s: FAIL |"
        )
    return lines


INPROCESS_METHOD = """\
Median over {rounds} rounds; each round times, per input, the floor and then every target, and
a row's x floor is the median of its per-round ratios to the floor on the same input in the
same process (the strictcall and the peers processes each have their own floor row).
Floor: stdlib `json.loads`, dict lookups, `json.dumps` of the answer, no checks.
Inputs: `valid` = u1 reads n1; `invalid` = `note_id: 123`; `cross_owner` = u2 reads u1's n1
(strictcall only: the peers' call_tool has no caller identity).
Peers: text in by `json.loads`, `await call_tool(name, arguments)` on an `async def` tool, text
out as the MCP result's JSON (`model_dump_json`), a raised refusal as an isError result's JSON
(so they pay for text in and out, unlike the anchors' objects-only 3.5x and 39x rows);
FastMCP's per-refusal WARNING log is off. The SQLite rows read the note id the store made
(17 characters, not `n1`)."""

HTTP_METHOD = """\
wrk -t{threads}, {duration:g} s per run, median of {runs} run(s) at each connection count after
a warm-up, the targets loaded in turns (run 1 of each, then run 2, ...) while all are up, so
that a shared machine's changing load weighs on all alike; the valid call only (the invalid
and cross-owner answers are checked before and after the load). Errors: wrk's non-2xx/3xx
count and socket errors (connect, read, write, timeout), summed over the runs. Server CPU:
user+system time of the server's process group during a run, per request.
- strictcall serve: POST /rpc, JSON-RPC 2.0 tools/call, bearer token, SQLite store, every
  call audited; uvicorn with uvloop and httptools, through strictcall's protocol that writes
  each answer in one send() (`strictcall.server._uvicorn`).
- strictcall serve /mcp, strictcall proxy /mcp: see issue 33's section below.
- FastMCP: the POST fastmcp.Client 4.x sends (2026-07-28 wire, `Mcp-Method`/`Mcp-Name`
  headers, no session), answer checked.
- bare: a raw ASGI app on uvicorn (`bench/bare_asgi.py`: loads, token and note lookups, dumps;
  no checks), with the project venv's uvicorn when it has one (else the peers'), uvicorn's
  default loop and HTTP parser: the row the "x bare" column and the 1.0x target divide by.
- reference rows (no target): the same bare app with its note read by one indexed sqlite3
  SELECT (`--sqlite`: what the database read alone costs over HTTP), and on strictcall's
  coalesced writes (`--coalesced`: what that protocol alone is worth)."""

RERUN = """\
    make bench                                   # or: .venv/bin/python bench/run.py
    .venv/bin/python bench/run.py --quick        # a smoke run, about a minute
    .venv/bin/python bench/run.py --help         # rounds, wrk duration and counts, skips
    .venv/bin/python bench/profile_gateway.py    # the gateway's call, step by step, in µs
    .venv/bin/python bench/profile_wires.py --in-place   # /rpc and /mcp in process, µs/call
    .venv/bin/python bench/run.py --render-only  # RESULTS.md again from results.json and the
                                                 # proxy's and federation's *-results.json

The peers (mcp, fastmcp, and uvicorn with uvloop and httptools, the stack strictcall serve
uses: `bench/requirements-peers.txt`) are installed by the command into `bench/.venv-peers`;
they are not dependencies of the package. wrk is Debian's package, installed with apt-get
when missing. Raw figures: `bench/results.json`."""


def render(report: dict[str, Any], args: argparse.Namespace) -> str:
    m, v, pv = report["machine"], report["versions"], report.get("peer_versions") or {}

    def pkgs(found: dict[str, Any], names: tuple[str, ...]) -> str:
        return ", ".join(f"{name} {found.get(name)}" for name in names)

    out = [
        "# Benchmark results: one read_note call, strictcall side by side with the peers",
        "",
        f"Latest run: {m['date']}, strictcall at {report['revision']}; "
        f"{report['elapsed_s']:.0f} s in all. Written by `bench/run.py`; do not edit by hand.",
        "",
        "## Rerun",
        "",
        RERUN,
        "",
        "## Machine",
        "",
        f"- {m['nproc']} cores: {m['cpu']}; kernel {m['kernel']}",
        f"- load average (1, 5, 15 min): {m['loadavg_start']} at the start, "
        f"{report['loadavg_end']} at the end (a shared machine: expect ±5-20 %)",
        *_busy_warning(m["loadavg_start"], report["loadavg_end"], m["nproc"]),
        "",
        "## Versions",
        "",
        "- project venv: "
        + pkgs(
            v,
            ("python", "strictcall", "pydantic", "orjson", "jsonschema_rs", "uvicorn"),
        )
        + ", "
        + pkgs(v, ("uvloop", "httptools")),
        "- peers venv: "
        + pkgs(pv, ("python", "mcp", "fastmcp", "uvicorn", "starlette", "pydantic"))
        + ", "
        + pkgs(pv, ("uvloop", "httptools")),
        f"- {report['wrk'] or 'wrk: not available'}",
        "",
        "## In-process, text in and text out",
        "",
        INPROCESS_METHOD.format(rounds=args.rounds),
        "",
        *inprocess_table(report["in_process"]),
        "",
        "## The agent loop adapters",
        "",
        ADAPTERS_METHOD.format(rounds=args.rounds),
        "",
        *adapters_lines(report["adapters"]),
        "",
        "## HTTP on 127.0.0.1 (wrk)",
        "",
        HTTP_METHOD.format(threads=args.threads, duration=args.duration, runs=args.http_runs),
        "",
        *http_table(report["http"]),
        "",
        "## /mcp at /rpc's speed, and the proxy over HTTP (issue 33)",
        "",
        *mcp_wires.lines(report["http"], report.get("proxy_upstream")),
        "",
        "## The proxy's and the federation's figures (issues 19 and 28)",
        "",
        *stored_figures.lines(),
        "",
        "## PostgreSQL and --workers (issue 13)",
        "",
        postgres_http.METHOD,
        "",
        *(
            postgres_http.table(report["postgres"])
            if "targets" in report.get("postgres", {})
            else [f"Not run: {report.get('postgres', {}).get('skipped', 'no result')}."]
        ),
        "",
        "## Refusals on the BFCL corpus",
        "",
        BFCL_METHOD,
        "",
        *bfcl_lines(report.get("bfcl", {"error": "not run"})),
        "",
        "## The targets of issue 18",
        "",
        *issue18_lines(report),
        "",
        "## Start-up",
        "",
        f"Medians of {args.startup_runs} runs ({args.serve_runs} server starts).",
        "",
        *startup_table(report["startup"]),
        "",
        "## The container image (issue 34)",
        "",
        *(
            container.lines(json.loads(container.RESULTS.read_text("utf-8")))
            if container.RESULTS.exists()
            else ["Not measured: run `python bench/container.py IMAGE` after `make image`."]
        ),
        "",
    ]
    if report.get("ops") is not None:
        out += [
            "## Operators: metrics, spans and the page (issue 16)",
            "",
            ops.__doc__.split("\n\n")[1].strip() if ops.__doc__ else "",
            "",
            *(
                ops.table(report["ops"])
                if "error" not in report["ops"]
                else [f"not measured: {report['ops']['error']}"]
            ),
            "",
        ]
    return "\n".join(out)


ADAPTERS_METHOD = (
    "One read_note call handed over as a provider's turn (`strictcall.transports.providers`), "
    "against "
    "`Gateway.call` on the same call in the same {rounds} rounds, in the thread's CPU time, "
    "which of each pair runs first alternating from round to round (medians of the per-round "
    "ratios; `bench/adapters.py`). "
    "An adapter also writes the value as JSON text for the model, which `Gateway.call` does not: "
    "`Gateway.call_text` shows what writing costs. Goal: each adapter <= "
    f"{adapters.TARGET_RATIO}x `Gateway.call`."
)


def adapters_lines(result: dict[str, Any]) -> list[str]:
    if "error" in result:
        return [f"Not measured: {result['error']}"]
    return adapters.table(result["rows"])[2:]  # the method above replaces its title


def bfcl_part(args: argparse.Namespace) -> dict[str, Any]:
    log(f"BFCL: bench/bfcl.py ({args.rounds} rounds)")
    command = [sys.executable, str(BENCH / "bfcl.py"), "--rounds", str(args.rounds)]
    try:
        done = _run(command, 900)
    except subprocess.TimeoutExpired:
        return {"error": "bench/bfcl.py timed out"}
    if done.returncode != 0:
        return {"error": f"bench/bfcl.py exited {done.returncode}: {done.stderr.strip()[-500:]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


BFCL_METHOD = (
    "`bench/bfcl.py`: the Berkeley Function Calling Leaderboard's function schemas and "
    "ground-truth calls (the `bfcl-eval` wheel from PyPI), each kept call also broken twice in "
    "one place; `Gateway.call_text` on every call, accepted and refused calls timed in turns, in "
    "process CPU time (mean µs per call, median over rounds)."
)


def bfcl_lines(result: dict[str, Any]) -> list[str]:
    if "error" in result:
        return [f"Not measured: {result['error']}"]
    mean = result["mean_us"]
    ratio = result["refused_over_accepted"]
    lines = [
        "| calls | count | mean µs/call | target |",
        "|---|---:|---:|---|",
        f"| accepted (ground truth) | {result['accepted_calls']:,} | {mean['accepted']:.2f} | |",
        f"| refused (mutated) | {result['refused_calls']:,} | {mean['refused']:.2f} | "
        f"{_verdict(ratio <= BFCL_MAX_REFUSED_OVER_ACCEPTED, '≤ 1.2x accepted')} "
        f"({ratio:.2f}x) |",
        f"| all | {result['accepted_calls'] + result['refused_calls']:,} | {mean['all']:.2f} | "
        f"{_verdict(mean['all'] <= BFCL_MAX_MEAN_US, '≤ 10 µs mean')} |",
        "",
        f"- {result['functions']:,} distinct functions, {result['functions_on_quick_path']:,} "
        "of them covered by the quick describer; "
        f"{result['refusals_on_quick_path']:,} of {result['refused_calls']:,} refusals "
        "described on the quick path; "
        f"{result['ground_truth_dropped']} ground-truth calls dropped (their converted schema "
        "refuses them, or they name no listed function).",
        "- refused ÷ accepted per round: "
        + ", ".join(f"{r:.2f}" for r in result["refused_over_accepted_per_round"]),
    ]
    if result.get("problems"):
        lines.append("- WRONG answers: " + "; ".join(result["problems"]))
    return lines


def issue18_lines(report: dict[str, Any]) -> list[str]:
    """Each target of issue 18 with pass or FAIL, from this run where it measures it and
    from the stored runs of bench/memory.py and bench/servers.py otherwise (said so)."""
    lines = ["| target | measured | verdict |", "|---|---|---|"]
    bfcl = report.get("bfcl", {})
    if "mean_us" in bfcl:
        ratio = bfcl["refused_over_accepted"]
        lines.append(
            f"| BFCL: refused ≤ 1.2x accepted | {ratio:.2f}x | "
            + ("pass" if ratio <= BFCL_MAX_REFUSED_OVER_ACCEPTED else f"FAIL: {WHY['bfcl_ratio']}")
            + " |"
        )
        mean = bfcl["mean_us"]["all"]
        floor = _floor_us(report)
        scaled = (
            "" if floor is None else f" ({mean * ANCHOR_FLOOR_US / floor:.1f} µs at quiet speed)"
        )
        lines.append(
            f"| BFCL: all calls ≤ 10 µs mean | {mean:.2f} µs{scaled} | "
            + ("pass" if mean <= BFCL_MAX_MEAN_US else f"FAIL: {WHY['bfcl_mean']}")
            + " |"
        )
    for process in report.get("in_process", []):
        for row in process.get("rows", []):
            if row["target"].startswith("strictcall gateway, in-memory") and row["case"] == "valid":
                ok = row.get("status") == "ok" and row["ratio"] <= GATEWAY_MAX_RATIO
                measured = f"{row['ratio']:.3f}x" if "ratio" in row else row["status"]
                lines.append(
                    f"| valid in-memory call ≤ 1.0x the floor | {measured} | "
                    f"{'pass' if ok else 'FAIL'} |"
                )
    serve = next((r for r in report.get("http", []) if r["target"] == "strictcall serve"), None)
    bare = next((r for r in report.get("http", []) if r["target"].startswith("bare")), None)
    for load in [] if serve is None else serve["loads"]:
        conns = load["connections"]
        vs_bare = _ratio(load, bare, conns)
        ok = vs_bare is not None and vs_bare >= HTTP18_MIN_VS_BARE
        lines.append(
            f"| `strictcall serve` ≥ 1.0x the bare endpoint's req/s, {conns} connections | "
            f"{_x(vs_bare)} | {'pass' if ok else 'FAIL: ' + _why_http(report, load, bare)} |"
        )
        if conns == 64:
            ok = load["p99_ms"] < HTTP18_MAX_P99_MS_AT_64
            bare_p99 = _p99_at(bare, conns)
            why = WHY["p99"] + (
                ""
                if bare_p99 is None
                else f" (the bare endpoint's p99 in this run: {bare_p99:.2f} ms)"
            )
            lines.append(
                f"| p99 < 5 ms at 64 connections | {load['p99_ms']:.2f} ms | "
                f"{'pass' if ok else 'FAIL: ' + why} |"
            )
    lines += _stored_memory_lines(report)
    lines += [
        "| `make fuzz N=1000000` completes; atheris from one command | see docs/RELIABILITY.md "
        "| see there |",
    ]
    lines += _stored_servers_lines(report)
    if SERVERS_RESULTS.exists():
        lines += ["", server_choice(json.loads(SERVERS_RESULTS.read_text("utf-8")))]
    return lines


def _in_process_us(report: dict[str, Any], target: str) -> float | None:
    """The valid call's µs in the strictcall process's in-process table, for `target`."""
    for process in report.get("in_process", []):
        if process.get("process") != "strictcall":
            continue
        for row in process.get("rows", []):
            if row["target"].startswith(target) and row["case"] == "valid" and "us" in row:
                return float(row["us"])
    return None


def _why_http(report: dict[str, Any], load: dict[str, Any], bare: dict[str, Any] | None) -> str:
    """Why `strictcall serve` answers fewer requests than the bare endpoint, in this run's
    figures: the server CPU per request of each, and the in-process cost of the call."""
    cpu = load.get("server_cpu_us_per_req")
    bare_load = next(
        (x for x in (bare or {}).get("loads", []) if x["connections"] == load["connections"]),
        None,
    )
    bare_cpu = None if bare_load is None else bare_load.get("server_cpu_us_per_req")
    call = _in_process_us(report, "strictcall gateway, SQLite store")
    floor = _in_process_us(report, "floor")
    if cpu is None or bare_cpu is None or call is None or floor is None:
        return WHY["http_ratio"]
    return (
        f"the server's CPU per request is {cpu:.0f} µs against the bare endpoint's "
        f"{bare_cpu:.0f}: in process, strictcall's call with its SQLite read costs {call:.1f} µs "
        f"against {floor:.1f} for the bare work (json.loads, dict lookups, json.dumps), and over "
        "HTTP it also looks the token up, counts the call and keeps its audit record; the HTTP "
        "path around the call (answered in place, no task) costs about what uvicorn's ASGI path "
        "costs the bare app (measured apart, per thread: ~19 µs of user CPU a request for each, "
        "6-8 µs in the kernel)"
    )


def _p99_at(row: dict[str, Any] | None, connections: int) -> float | None:
    for load in [] if row is None else row.get("loads", []):
        if load["connections"] == connections:
            return float(load["p99_ms"])
    return None


ANCHOR_FLOOR_US = 3.97
"""The stdlib floor on a quiet machine of this kind (../shared/anchors.md)."""

WHY = {
    "bfcl_ratio": "every refusal is now described on the quick path (was 2,784 of 6,000); "
    "located refusals are kept once built, a list expected (an enum's, an object's members) "
    "too; what is left is the quick describer's walk in Python (~1-2 µs) after the "
    "validator's own check has failed, against an accepted call whose handler answers a "
    "constant",
    "bfcl_mean": "the machine was shared (see the load average above): this run's stdlib "
    "floor took about twice its quiet time, and the figure scaled by that is shown beside it",
    "http_ratio": "POST /rpc is answered in place (no task, no ASGI messages), but each call "
    "is still authenticated (a token hashed), read from SQLite (a query and its two file "
    "locks) and audited (a row written on another thread, ~3 µs), which the bare endpoint "
    "does not do: server CPU per request above; the server itself is chosen below",
    "p99": "each answer is written in place, one request after another on one thread; a "
    "request that arrives behind a batch of others waits for all of them, and the audit batch's "
    "thread and the collector's young generations take the thread now and then",
}

SERVER_KEPT = (
    "uvicorn with strictcall's protocol stays: its edge guard (a deadline for headers, a minimum "
    "body rate, a connection cap answered 503) has no counterpart in granian, which has a header "
    "read timeout and a backpressure limit but no body-rate deadline and no 503 cap; granian's "
    "Rust I/O threads run beside the Python thread on the second core, which the load generator "
    "(and, on a shared machine, other work) also wants. uvicorn's private protocol class stays "
    "pinned (`<0.55`), tests/test_dependencies.py failing loudly when it changes."
)
SERVER_KINDS = {
    "strictcall's protocol": "strictcall serve (uvicorn, strictcall's protocol), ",
    "uvicorn's stock protocol": "strictcall app on uvicorn, stock httptools protocol, ",
    "granian": "strictcall app on granian (ASGI), --workers 1, ",
}
SERVER_KINDS_2 = {
    "strictcall serve --workers 2": "strictcall serve --workers 2, ",
    "granian --workers 2": "strictcall app on granian (ASGI), --workers 2, ",
}


def server_choice(stored: dict[str, Any]) -> str:
    """The server choice, in figures from the stored run of bench/servers.py: per store, each
    server's req/s at every connection count and its CPU per request, and which wins each."""
    rows = {r["target"]: r for r in stored["results"] if r.get("loads")}
    sentences = []
    for store in ("SQLite", "PostgreSQL"):
        for kinds in (SERVER_KINDS, SERVER_KINDS_2):
            found = {k: rows.get(prefix + store) for k, prefix in kinds.items()}
            found = {k: r for k, r in found.items() if r is not None}
            if len(found) < 2:
                continue
            parts = []
            for kind, row in found.items():
                rates = " / ".join(f"{load['req_s']:,.0f}" for load in row["loads"])
                cpu = statistics.median(load["server_cpu_us_per_req"] for load in row["loads"])
                parts.append(f"{kind} {rates} req/s, {cpu:.0f} µs CPU per request")
            fastest = max(found, key=lambda k: sum(load["req_s"] for load in found[k]["loads"]))
            cheapest = min(
                found,
                key=lambda k: statistics.median(
                    load["server_cpu_us_per_req"] for load in found[k]["loads"]
                ),
            )
            steadiest = min(found, key=lambda k: found[k]["loads"][-1]["p99_ms"])
            conns = " / ".join(str(load["connections"]) for load in found[fastest]["loads"])
            sentences.append(
                f"{store} (at {conns} connections): {'; '.join(parts)}: the most requests "
                f"answered by {fastest}, the least CPU per request by {cheapest}, the lowest "
                f"p99 at {found[steadiest]['loads'][-1]['connections']} connections by "
                f"{steadiest}."
            )
    return "Server choice. " + " ".join(sentences) + " " + SERVER_KEPT


def _floor_us(report: dict[str, Any]) -> float | None:
    for process in report.get("in_process", []):
        for row in process.get("rows", []):
            if row["target"] == "floor" and row["case"] == "valid" and "us" in row:
                return float(row["us"])
    return None


def _source(report: dict[str, Any], part: str, stored: dict[str, Any], script: str) -> str:
    """Where a part's figures come from: this run, or a stored run of `script` (its commit)."""
    if "written" in (report.get(part) or {}):
        return f"bench/{script} in this run"
    return f"stored run of bench/{script} at {stored.get('commit', 'an earlier commit')}"


def _stored_memory_lines(report: dict[str, Any]) -> list[str]:
    if not MEMORY_RESULTS.exists():
        return ["| memory under load | not measured (run bench/memory.py) | — |"]
    stored = json.loads(MEMORY_RESULTS.read_text("utf-8"))
    source = _source(report, "memory", stored, "memory.py")
    lines = []
    for target in stored["targets"]:
        if "start_mib" not in target:
            continue
        name = target["target"]
        verdict = "pass" if target["under_100_mib"] and target["growth_under_5_percent"] else "FAIL"
        if not name.startswith("strictcall"):
            verdict = "(the peer, for comparison)"
        lines.append(
            f"| {name}: RSS < 100 MiB and < 5 % growth over {stored['minutes']:g} min at "
            f"{stored['connections']} connections ({source}, bench/memory-results.json) | "
            f"{target['start_mib']} → {target['end_mib']} MiB "
            f"({target['growth'] * 100:+.1f} %), peak {target['peak_mib']} MiB, "
            f"{target['requests']:,} requests | {verdict} |"
        )
    return lines


def _stored_servers_lines(report: dict[str, Any]) -> list[str]:
    if not SERVERS_RESULTS.exists():
        return []
    stored = json.loads(SERVERS_RESULTS.read_text("utf-8"))
    source = _source(report, "servers", stored, "servers.py")
    lines = [
        "",
        f"The HTTP server, chosen by measurement ({source}, bench/servers-results.json; the "
        "same app on each server, on each store):",
        "",
        "| server | conns | req/s (median) | each run | p99 ms | server CPU µs/req |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for result in stored["results"]:
        for load in result["loads"]:
            lines.append(
                f"| {result['target']} | {load['connections']} | {load['req_s']:,.0f} | "
                f"{', '.join(f'{r:,}' for r in load['req_s_each'])} | {load['p99_ms']:.1f} | "
                f"{load['server_cpu_us_per_req']:,.0f} |"
            )
    return lines


def _busy_warning(start: str, end: str, cores: int | None) -> list[str]:
    """A warning when other work shared the cores: absolute figures are then inflated, while
    the in-process ratios (same rounds) and the HTTP ratios hold up better."""
    try:
        peak = max(float(start.split()[0]), float(end.split()[0]))
    except (ValueError, IndexError):
        return []
    if cores is None or peak <= cores / 2:
        return []
    return [
        f"- **busy machine**: a 1-minute load of {peak:.1f} on {cores} cores means other work "
        "shared the cores; trust the ratios more than the absolute figures, or rerun when idle"
    ]


def _skipped_http(why: str) -> list[dict[str, Any]]:
    return [
        {"target": name, "status": "not run", "note": why, "loads": []}
        for name in ("strictcall serve", "FastMCP streamable HTTP", "bare JSON endpoint")
    ]


def _skipped_startup(why: str) -> dict[str, Any]:
    skipped = {"status": "not run", "note": why}
    return {"import": skipped, "call": skipped, "serve": skipped}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render_only:
        stored: dict[str, Any] = json.loads(args.json.read_text("utf-8"))
        args.results.write_text(render(stored, args), "utf-8")
        log(f"wrote {args.results} from {args.json}")
        return 0
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    began = time.perf_counter()
    report: dict[str, Any] = {"machine": machine(), "revision": git_revision()}
    try:
        peers_python = None if args.skip_peers else ensure_peers_venv()
        report["wrk"] = None if args.skip_http else ensure_wrk()
        report["versions"] = versions(sys.executable)
        report["peer_versions"] = versions(peers_python) if peers_python else {}
        parts = Progress(
            "bench: parts (in-process, HTTP, PostgreSQL, start-up, operators, servers, memory)",
            total=7,
        )
        parts.__enter__()
        processes = [in_process(sys.executable, "inprocess_strictcall.py", args)]
        if peers_python is not None:
            processes.append(in_process(peers_python, "inprocess_peers.py", args))
        elif not args.skip_peers:
            processes.append({"process": "peers", "error": "the peers venv could not be made"})
        report["in_process"] = processes
        report["adapters"] = in_process(sys.executable, "adapters.py", args)
        report["bfcl"] = bfcl_part(args)
        parts.advance()
        with tempfile.TemporaryDirectory(prefix="strictcall-bench-") as tmp:
            workdir = Path(tmp)
            if args.skip_http:
                report["http"] = _skipped_http("--skip-http")
            elif report["wrk"] is None:
                report["http"] = _skipped_http("wrk is not available")
            else:
                report["proxy_upstream"] = proxy_upstream_part(workdir)
                report["http"] = http_part(args, peers_python, workdir)
            parts.advance()
            report["postgres"] = postgres_part(args, report["wrk"], workdir)
            parts.advance()
            if args.skip_startup:
                report["startup"] = _skipped_startup("--skip-startup")
            else:
                report["startup"] = startup_part(args, workdir)
            parts.advance()
            report["ops"] = None if args.skip_ops else ops_part(args, report["wrk"], workdir)
            parts.advance()
            report["servers"] = servers_part(args, report["wrk"])
            parts.advance()
            report["memory"] = memory_part(args, report["wrk"])
            parts.finish()
    finally:
        http_load.stop_all()
    report["loadavg_end"] = _loadavg()
    report["elapsed_s"] = time.perf_counter() - began
    text = render(report, args)
    args.results.write_text(text, "utf-8")
    args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", "utf-8")
    print(text)
    log(f"wrote {args.results} and {args.json} in {report['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
