"""strictcall serve on PostgreSQL, side by side in one run: `python bench/postgres_http.py`.

On a database of its own (`strictcall_bench_<random>` on the server at --admin-url, dropped at
the end), loaded by wrk in turns (a run of each target, then the next run), at --connections:

    reads   read_note of u1's note: strictcall serve on PostgreSQL (--workers 1 and 2), the bare
            endpoint doing the same indexed SELECT through psycopg on the same server stack
            (bench/bare_asgi.py --postgres --coalesced), on 8 threads through psycopg's pool,
            awaited on the loop through 8 AsyncConnections (--awaited), and so awaited but sent
            through libpq as a prepared statement (--awaited --libpq, strictcall's way),
            strictcall serve on SQLite (--workers 1 and 2)
    writes  create_note, every request with a call id of its own (so each is a new note): the
            same four strictcall servers; an answer that is not a success is counted

Reported per target: req/s, p50, p99, the server's CPU per request (its process group: every
worker) and, on PostgreSQL, the database's too (the CPU of the backends serving this database).
Prints a JSON document; `bench/run.py` runs it as part of `make bench`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import http_load
from http_load import HOST, log

ROOT = Path(__file__).resolve().parents[1]
METHOD = (
    "One wrk run per target and load, in turns, on a database of its own: reads (read_note)"
    " and writes (create_note, each request a new call id). Server CPU is the server's process"
    " group (every worker); DB CPU the PostgreSQL backends serving the bench's database. The"
    " bare endpoint is bench/bare_asgi.py --postgres --coalesced: the same indexed SELECT"
    " through psycopg on the same server stack, without any check, in three ways: through"
    " psycopg's pool on 8 threads; awaited on the loop through 8 AsyncConnections (--awaited);"
    " and so awaited, each SELECT sent through libpq as a statement prepared on its connection"
    " (--awaited --libpq, as strictcall sends its reads); the target is read against the"
    " fastest of the three."
)
ADMIN_URL = os.environ.get("STRICTCALL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
TEXT = "退款窗口为 7 天。"

_WRITE_LUA = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(token)s"
local made = {}
local n_threads = 0
function setup(thread)
  n_threads = n_threads + 1
  thread:set("tid", n_threads)
  table.insert(made, thread)
end
local counter = 0
failed = 0
function request()
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":"%(run)s-' .. tid .. '-' .. counter ..
    '","method":"tools/call","params":{"name":"create_note","arguments":{"text":"bench"}}}'
  return wrk.format(nil, nil, nil, body)
end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"result"', 1, true) then
    failed = failed + 1
  end
end
function done(summary, latency, requests)
  local f = 0
  for _, t in ipairs(made) do f = f + t:get("failed") end
  io.write(string.format(
    "WRK_JSON {\"requests\":%%d,\"duration_us\":%%d,\"bytes\":%%d,\"connect\":%%d,\"read\":%%d," ..
    "\"write\":%%d,\"status\":%%d,\"timeout\":%%d,\"p50_us\":%%d,\"p90_us\":%%d,\"p99_us\":%%d," ..
    "\"max_us\":%%d,\"mean_us\":%%.1f,\"failed\":%%d}\n",
    summary.requests, summary.duration, summary.bytes, summary.errors.connect,
    summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, f))
end
"""


@dataclass
class Target:
    """A server to load: how to start it and its read call."""

    name: str
    store: str  # "postgres" or "sqlite"
    command: list[str]
    read: http_load.Call
    token: str | None  # strictcall's (for writes); None: reads only
    workers: int = 1


@dataclass
class Live:
    target: Target
    server: http_load.Started
    port: int
    read_script: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/rpc"


def cli() -> list[str]:
    return [sys.executable, "-m", "strictcall"]


def prepare(db: str) -> dict[str, str]:
    """Tokens for u1 and u2 and a note of u1's in `db`, made by the operator's commands."""
    out: dict[str, str] = {}
    for identity in ("u1", "u2"):
        made = http_load._run([*cli(), "tokens", "create", "--identity", identity, "--db", db])
        if made.returncode != 0:
            raise RuntimeError(f"tokens create failed: {made.stderr.strip()[-300:]}")
        out[f"token_{identity}"] = made.stdout.strip().splitlines()[-1]
    added = http_load._run([*cli(), "notes", "add", "--owner", "u1", "--text", TEXT, "--db", db])
    if added.returncode != 0:
        raise RuntimeError(f"notes add failed: {added.stderr.strip()[-300:]}")
    out["note_u1"] = added.stdout.strip().splitlines()[-1]
    return out


def strictcall_target(db: str, store: str, workers: int) -> Target:
    made = prepare(db)
    token, note = made["token_u1"], made["note_u1"]
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    read = http_load.Call(
        "valid", http_load.rpc_body(note), headers, http_load.check_rpc_note(note, TEXT)
    )
    command = [*cli(), "serve", "--host", HOST, "--port", "{port}", "--db", db]
    if workers > 1:
        command += ["--workers", str(workers)]
    return Target(f"strictcall serve, {store}, --workers {workers}", store, command, read, token)


BARE_THREADS = "bare endpoint + the same SELECT (psycopg)"
BARE_AWAITED = "bare endpoint + the same SELECT, awaited (psycopg async)"
BARE_LIBPQ = "bare endpoint + the same SELECT, awaited, prepared (libpq)"


def bare_target(url: str, *, awaited: bool = False, libpq: bool = False) -> Target:
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench-token-u1"}
    read = http_load.Call(
        "valid", http_load.rpc_body("n1"), headers, http_load.check_rpc_note("n1", TEXT)
    )
    script = str(ROOT / "bench" / "bare_asgi.py")
    command = [sys.executable, script, "--host", HOST, "--port", "{port}"]
    command += ["--postgres", url, "--coalesced", *(["--awaited"] if awaited else [])]
    command += ["--libpq"] if libpq else []
    name = BARE_LIBPQ if libpq else BARE_AWAITED if awaited else BARE_THREADS
    return Target(name, "postgres", command, read, None)


@contextlib.contextmanager
def bench_database() -> Iterator[str]:
    import psycopg

    name = "strictcall_bench_" + secrets.token_hex(4)
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_cpu_s(database: str) -> float:
    """CPU seconds of the backends connected to `database` (live ones), from /proc."""
    import psycopg

    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,)
            ).fetchall()
        ]
    tck = os.sysconf("SC_CLK_TCK")
    ticks = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            raw = Path(f"/proc/{pid}/stat").read_text()
            rest = raw[raw.rindex(")") + 2 :].split()
            ticks += int(rest[11]) + int(rest[12])
    return ticks / tck


def load(
    live: Live, script: Path, conns: int, seconds: float, threads: int, database: str
) -> dict[str, Any]:
    pg = live.target.store == "postgres"
    cpu = http_load.group_cpu_s(live.server.proc.pid)
    db_cpu = database_cpu_s(database) if pg else 0.0
    client = _children_cpu_s()
    result = http_load.run_wrk(live.url, script, conns, seconds, threads)
    client = _children_cpu_s() - client
    cpu = http_load.group_cpu_s(live.server.proc.pid) - cpu
    requests = max(result["requests"], 1)
    result["server_cpu_us_per_req"] = cpu / requests * 1e6
    result["client_cpu_us_per_req"] = client / requests * 1e6
    if pg:
        result["db_cpu_us_per_req"] = (database_cpu_s(database) - db_cpu) / requests * 1e6
    log(
        f"  {live.target.name} c={conns}: {result['req_s']:,.0f} req/s, p99"
        f" {result['p99_us'] / 1000:.2f} ms, failed {result.get('failed', 0)},"
        f" non-2xx {result['status']}, socket errors {result['socket_errors']}"
    )
    return result


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children: wrk's, read around one run."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _healthy(port: int) -> Callable[[], bool]:
    return lambda: http_load.answers(port, "GET", "/healthz")


def write_script(token: str, path: Path) -> Path:
    run = secrets.token_hex(4)
    path.write_text(_WRITE_LUA % {"token": token, "run": run}, "utf-8")
    return path


def run(connections: int, seconds: float, runs: int, threads: int, workdir: Path) -> dict[str, Any]:
    with bench_database() as url:
        database = url.rsplit("/", 1)[1]
        sqlite = str(workdir / "bench.sqlite3")
        targets = [
            strictcall_target(url, "postgres", 1),
            strictcall_target(url, "postgres", 2),
            bare_target(url),
            bare_target(url, awaited=True),
            bare_target(url, awaited=True, libpq=True),
            strictcall_target(sqlite, "sqlite", 1),
            strictcall_target(sqlite, "sqlite", 2),
        ]
        results: dict[str, dict[str, list[dict[str, Any]]]] = {
            t.name: {"reads": [], "writes": []} for t in targets
        }
        with contextlib.ExitStack() as stack:
            lives: list[Live] = []
            for target in targets:
                port = http_load.free_port()
                command = [part.replace("{port}", str(port)) for part in target.command]
                log(f"postgres bench: starting {target.name} on {HOST}:{port}")
                server = stack.enter_context(
                    http_load.running(command, workdir / f"{len(lives)}.log", None)
                )
                http_load.wait_until(_healthy(port), server, 60.0)
                status, body = http_load.request(
                    port, "POST", "/rpc", target.read.body, target.read.headers
                )
                wrong = target.read.check(status, body)
                if wrong is not None:
                    raise RuntimeError(f"{target.name} answered wrongly: {wrong}")
                script = http_load.wrk_script(target.read, workdir / f"read-{port}.lua")
                lives.append(Live(target, server, port, script))
            for live in lives:  # warm-up: pools filled, token caches warm
                http_load.run_wrk(live.url, live.read_script, connections, 1, threads)
            for _ in range(runs):
                for live in lives:
                    results[live.target.name]["reads"].append(
                        load(live, live.read_script, connections, seconds, threads, database)
                    )
                for live in lives:
                    if live.target.token is None:
                        continue
                    script = write_script(live.target.token, workdir / f"w-{live.port}.lua")
                    results[live.target.name]["writes"].append(
                        load(live, script, connections, seconds, threads, database)
                    )
    return {
        "connections": connections,
        "seconds": seconds,
        "runs": runs,
        "targets": {name: _summary(kinds) for name, kinds in results.items()},
    }


def _summary(kinds: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    import statistics

    out: dict[str, Any] = {}
    for kind, samples in kinds.items():
        if not samples:
            continue

        def med(key: str, samples: list[dict[str, Any]] = samples) -> float | None:
            values = [s[key] for s in samples if key in s]
            return float(statistics.median(values)) if values else None

        out[kind] = {
            "req_s": med("req_s"),
            "req_s_each": [round(s["req_s"]) for s in samples],
            "p50_ms": (med("p50_us") or 0) / 1000,
            "p99_ms": (med("p99_us") or 0) / 1000,
            "server_cpu_us_per_req": med("server_cpu_us_per_req"),
            "db_cpu_us_per_req": med("db_cpu_us_per_req"),
            "client_cpu_us_per_req": med("client_cpu_us_per_req"),
            "failed": sum(s.get("failed", 0) + s["status"] + s["socket_errors"] for s in samples),
            "requests": sum(s["requests"] for s in samples),
        }
    return out


@dataclass
class Ratios:
    """The issue's targets, as measured."""

    vs_bare: float | None
    """Against the fastest of the bare endpoints (the floor the target is read against)."""
    vs_bare_threads: float | None
    vs_bare_awaited: float | None
    vs_bare_libpq: float | None
    p99_ms: float | None
    writes_s: float | None
    workers_pg: float | None
    workers_sqlite: float | None
    ceiling_pg: float | None
    """The most --workers 2 can give over --workers 1 on this machine's cores (reads, PG)."""
    ceiling_sqlite: float | None
    """The same on SQLite."""
    reach_pg: float | None
    """What every core's worth at two workers' own CPU per request (server, database, wrk)
    gives over one worker's req/s (reads, PG): two smaller batches cost more per request."""
    reach_sqlite: float | None
    """The same on SQLite."""


def ratios(report: dict[str, Any]) -> Ratios:
    t = report["targets"]

    def get(name: str, kind: str, key: str) -> float | None:
        value = t.get(name, {}).get(kind, {}).get(key)
        return None if value is None else float(value)

    def div(a: float | None, b: float | None) -> float | None:
        return None if a is None or not b else a / b

    pg1, pg2 = "strictcall serve, postgres, --workers 1", "strictcall serve, postgres, --workers 2"
    sq1, sq2 = "strictcall serve, sqlite, --workers 1", "strictcall serve, sqlite, --workers 2"
    threads = get(BARE_THREADS, "reads", "req_s")
    awaited = get(BARE_AWAITED, "reads", "req_s")
    libpq = get(BARE_LIBPQ, "reads", "req_s")
    floors = [floor for floor in (threads, awaited, libpq) if floor is not None]
    return Ratios(
        vs_bare=div(get(pg1, "reads", "req_s"), max(floors) if floors else None),
        vs_bare_threads=div(get(pg1, "reads", "req_s"), threads),
        vs_bare_awaited=div(get(pg1, "reads", "req_s"), awaited),
        vs_bare_libpq=div(get(pg1, "reads", "req_s"), libpq),
        p99_ms=get(pg1, "reads", "p99_ms"),
        writes_s=get(pg1, "writes", "req_s"),
        workers_pg=div(get(pg2, "reads", "req_s"), get(pg1, "reads", "req_s")),
        workers_sqlite=div(get(sq2, "reads", "req_s"), get(sq1, "reads", "req_s")),
        ceiling_pg=workers_ceiling(t.get(pg1, {}).get("reads"), os.cpu_count() or 1),
        ceiling_sqlite=workers_ceiling(
            t.get(sq1, {}).get("reads"), os.cpu_count() or 1, in_process=True
        ),
        reach_pg=cores_reach(t.get(pg2, {}).get("reads"), get(pg1, "reads", "req_s")),
        reach_sqlite=cores_reach(
            t.get(sq2, {}).get("reads"), get(sq1, "reads", "req_s"), in_process=True
        ),
    )


def cores_reach(
    row: dict[str, Any] | None, one_req_s: float | None, *, in_process: bool = False
) -> float | None:
    """Every core's worth of requests at `row`'s own CPU per request (its servers, the
    database's backends unless `in_process`, wrk), over `one_req_s`."""
    if row is None or not one_req_s:
        return None
    parts = [row.get("server_cpu_us_per_req"), row.get("client_cpu_us_per_req")]
    if not in_process:
        parts.append(row.get("db_cpu_us_per_req"))
    if any(part is None for part in parts):
        return None
    total = sum(float(part) for part in parts if part is not None)
    return None if not total else (os.cpu_count() or 1) * 1e6 / total / one_req_s


def workers_ceiling(
    row: dict[str, Any] | None, cores: int, *, in_process: bool = False
) -> float | None:
    """How much a second worker can add at most, from one worker's CPU per request: one
    worker serves at most one core's worth (1 / server CPU per request); all the processes
    together (the servers, PostgreSQL's backends, wrk) at most every core's worth
    (cores / their CPU per request summed). Two workers: the lesser of twice the first and the
    second, over the first. `in_process`: the store runs in the server (SQLite), no DB CPU."""
    if row is None:
        return None
    server = row.get("server_cpu_us_per_req")
    db = 0.0 if in_process else row.get("db_cpu_us_per_req")
    everyone = [server, db, row.get("client_cpu_us_per_req")]
    if server is None or not server or any(part is None for part in everyone):
        return None
    total = sum(float(part) for part in everyone if part is not None)
    one = 1 / float(server)
    return min(2 * one, cores / total) / one


def table(report: dict[str, Any]) -> list[str]:
    """The results as Markdown lines."""
    lines = [
        "| target | load | req/s (runs) | p50 ms | p99 ms | server CPU µs/req | DB CPU µs/req"
        " | wrk CPU µs/req |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, kinds in report["targets"].items():
        for kind, row in kinds.items():
            db_cpu = row["db_cpu_us_per_req"]
            each = ", ".join(map(str, row["req_s_each"]))
            lines.append(
                f"| {name} | {kind} | {row['req_s']:,.0f} ({each})"
                f" | {row['p50_ms']:.2f} | {row['p99_ms']:.2f}"
                f" | {row['server_cpu_us_per_req']:.0f}"
                f" | {'-' if db_cpu is None else f'{db_cpu:.0f}'}"
                f" | {_n(row.get('client_cpu_us_per_req'))} |"
            )
    r = ratios(report)

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("PASS" if ok else "MISS")

    lines += [
        "",
        "| target (issue 13) | measured | verdict |",
        "|---|---:|---|",
        f"| reads on PostgreSQL >= 0.9x the bare same-SELECT endpoint at {report['connections']}"
        f" connections (the fastest bare: threads {_x(r.vs_bare_threads)}, awaited"
        f" {_x(r.vs_bare_awaited)}, awaited through libpq {_x(r.vs_bare_libpq)})"
        f" | {_x(r.vs_bare)} |"
        f" {verdict(None if r.vs_bare is None else r.vs_bare >= 0.9)} |",
        f"| p99 < 10 ms (reads, PostgreSQL) | {_ms(r.p99_ms)} |"
        f" {verdict(None if r.p99_ms is None else r.p99_ms < 10)} |",
        f"| create_note on PostgreSQL >= 1,000 acknowledged/s | {_n(r.writes_s)}/s |"
        f" {verdict(None if r.writes_s is None else r.writes_s >= 1000)} |",
        f"| --workers 2 >= 1.5x --workers 1, PostgreSQL (reads; at most {_x(r.ceiling_pg)} on"
        f" {os.cpu_count()} cores from one worker's CPU per request of server, database and"
        f" wrk, {_x(r.reach_pg)} from two workers' own)"
        f" | {_x(r.workers_pg)} |"
        f" {verdict(None if r.workers_pg is None else r.workers_pg >= 1.5)} |",
        f"| --workers 2 >= 1.5x --workers 1, SQLite (reads; at most {_x(r.ceiling_sqlite)} on"
        f" {os.cpu_count()} cores from one worker's CPU per request of server and wrk,"
        f" {_x(r.reach_sqlite)} from two workers' own)"
        f" | {_x(r.workers_sqlite)} |"
        f" {verdict(None if r.workers_sqlite is None else r.workers_sqlite >= 1.5)} |",
    ]
    lines += ["", *where_it_goes(report)]
    return lines


def where_it_goes(report: dict[str, Any]) -> list[str]:
    """Where a read's CPU goes, from this run's figures: strictcall against the bare endpoints
    and against itself on SQLite."""
    t = report["targets"]

    def cpu(name: str, key: str) -> float | None:
        value = t.get(name, {}).get("reads", {}).get(key)
        return None if value is None else float(value)

    pg1 = "strictcall serve, postgres, --workers 1"
    sq1 = "strictcall serve, sqlite, --workers 1"
    server, db, wrk = (
        cpu(pg1, k) for k in ("server_cpu_us_per_req", "db_cpu_us_per_req", "client_cpu_us_per_req")
    )
    if server is None:
        return []
    parts = [
        f"Where a read goes (CPU per request, this run): strictcall on PostgreSQL {_n(server)} µs"
        f" in the server, {_n(db)} in PostgreSQL, {_n(wrk)} in wrk"
    ]
    for name, label in (
        (BARE_LIBPQ, "the bare endpoint awaited through libpq"),
        (BARE_AWAITED, "awaited through psycopg's cursors"),
        (BARE_THREADS, "on threads"),
    ):
        if cpu(name, "server_cpu_us_per_req") is not None:
            parts.append(
                f"{label} {_n(cpu(name, 'server_cpu_us_per_req'))} µs in the server,"
                f" {_n(cpu(name, 'db_cpu_us_per_req'))} in PostgreSQL"
            )
    if cpu(sq1, "server_cpu_us_per_req") is not None:
        parts.append(
            f"strictcall on SQLite {_n(cpu(sq1, 'server_cpu_us_per_req'))} µs in all (its own"
            " work per call: HTTP, token, checks, audit, metrics, and the read in process)"
        )
    return ["; ".join(parts) + "."]


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0, help="per wrk run (whole seconds)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--json", type=Path, help="write the report here too")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="strictcall-pg-bench-") as tmp:
        try:
            report = run(args.connections, args.seconds, args.runs, args.threads, Path(tmp))
        finally:
            http_load.stop_all()
    report["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    report["wall_s"] = round(time.monotonic() - started, 1)
    text = json.dumps(report, indent=2)
    if args.json is not None:
        args.json.write_text(text + "\n")
    print("\n".join(table(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
