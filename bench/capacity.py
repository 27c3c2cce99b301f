"""Capacity, from measurement: how many calls one core of a strictcall process answers on each
path, how many audit rows PostgreSQL takes, and how many Redis round trips a shared quota
costs a call. `python bench/capacity.py [--seconds S] [--runs N] [--connections C]`; `make
bench` runs it. Writes bench/CAPACITY-results.json and bench/CAPACITY.md.

Calls per core: each server is loaded by wrk (bench/http_load.py) in turns (run 1 of every
load, then run 2, ...), and its figure is its requests over the CPU seconds its own process
spent meanwhile (user + system of every thread, from /proc/PID/stat), so that it is a figure
per core that the load generator, the database, Redis and a stdio upstream (each read apart)
do not move. Paths: `strictcall serve` on /rpc (read_note; create_note, each request a call id
of its own) and on /mcp (read_note), `strictcall proxy` and `strictcall federate` on /mcp in
front of a small local stdio upstream (bench/stdio_payload.py, canned answers: what is measured
is the gateway), each on SQLite and on PostgreSQL (a database of the bench's own, dropped at
the end); and serve /rpc with a policy whose quotas are shared in Redis (a redis-server of the
bench's own, on a free port): a call under its quota and one over it.

Audit-write ceiling: the store's own batched audit write (`record_calls_async`, what the
server's audit writer awaits), by one writer and by three at once (three hosts), in batches
of 10, 100 and 1,000 rows (a server writes a batch every 50 ms, every 10 ms once one has
reached 100 rows: about 50 rows at 1,000 calls/s): rows per second, and rows per CPU second
of the PostgreSQL backends writing them (the database's figure per core).

Redis round trips per call: the script calls (EVALSHA, EVAL) Redis counted in INFO
commandstats over the load, over the calls answered; the bench's Redis serves nothing else.

Federate is profiled once (cProfile, on its event loop's thread, while wrk loads it) and the
top of the profile is written down beside its calls per core against serve's /mcp.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import pstats
import secrets
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

BENCH: Final = Path(__file__).resolve().parent
ROOT: Final = BENCH.parent
sys.path.insert(0, str(BENCH))

import http_load  # noqa: E402
import postgres_http  # noqa: E402
from http_load import HOST, N1_TEXT, Call, log  # noqa: E402

RESULTS_JSON: Final = BENCH / "CAPACITY-results.json"
RESULTS_MD: Final = BENCH / "CAPACITY.md"
VERSION: Final = "2026-07-28"
UPSTREAM_TOOL: Final = "text"
UPSTREAM_TEXT: Final = "Echo: hi"
AUDIT_BATCHES: Final = (10, 100, 1000)
AUDIT_WRITERS: Final = (1, 3)


def cli() -> list[str]:
    return [sys.executable, "-m", "strictcall"]


def pid_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid`, every thread of it (0.0 once it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    rest = raw[raw.rindex(")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def descendants_cpu_s(pid: int) -> float:
    """CPU seconds of the live descendants of `pid` (a stdio upstream, its sandbox): followed
    by parent, since a sandbox may start a session of its own."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parents[int(entry)] = int(raw[raw.rindex(")") + 2 :].split()[1])
    found = {pid}
    grew = True
    while grew:
        more = {child for child, parent in parents.items() if parent in found} - found
        grew = bool(more)
        found |= more
    return sum(pid_cpu_s(one) for one in found - {pid})


# --- what is loaded -----------------------------------------------------------------------------


@dataclass
class Load:
    """One load of a server: its name, the URL path, the wrk script, and the call checked
    before and after (None: a write, whose script counts its own failures)."""

    name: str
    path: str
    script: Path
    check: Call | None


@dataclass
class Server:
    """A server to start and the loads it takes."""

    name: str
    store: str  # "sqlite" or "postgresql"
    command: list[str]  # "{port}" is replaced by the port
    loads: list[Load]
    ready: Callable[[int], bool]
    redis: RedisCounter | None = None
    prime: Call | None = None
    """A call sent once after the start, its answer unread (a bucket spent, say)."""
    pid: int = 0
    port: int = 0


def rpc_headers(token: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}


def tool_body(tool: str, arguments: dict[str, Any], *, mcp: bool, request_id: int = 1) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if mcp:
        params["_meta"] = http_load.MCP_ENVELOPE
    call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(call, ensure_ascii=False, separators=(",", ":")).encode()


def tool_headers(token: str, tool: str) -> dict[str, str]:
    return http_load.mcp_headers(token, VERSION) | {"Mcp-Name": tool}


def check_upstream_text(status: int, body: bytes) -> str | None:
    try:
        result = json.loads(body).get("result")
    except (ValueError, AttributeError):
        return f"HTTP {status}, not a JSON object: {body[:160]!r}"
    want = [{"type": "text", "text": UPSTREAM_TEXT}]
    if isinstance(result, dict) and result.get("content") == want and status == 200:
        return None if result.get("isError") is not True else "an error result"
    return f"HTTP {status}, not the upstream's text: {body[:200].decode('utf-8', 'replace')}"


def check_rate_limited(status: int, body: bytes) -> str | None:
    try:
        data = json.loads(body)["error"]["data"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}, not a refusal: {body[:200].decode('utf-8', 'replace')}"
    return None if status == 200 and data.get("code") == "rate_limited" else f"refused as {data}"


def healthy(port: int) -> bool:
    return http_load.answers(port, "GET", "/healthz")


def serve_server(db: str, store: str, workdir: Path) -> Server:
    """`strictcall serve` on `db`: /rpc reads and writes, /mcp reads."""
    made = postgres_http.prepare(db)
    token, note = made["token_u1"], made["note_u1"]
    rpc = Call(
        "valid",
        http_load.rpc_body(note),
        rpc_headers(token),
        http_load.check_rpc_note(note, N1_TEXT),
    )
    mcp = Call(
        "valid",
        http_load.mcp_body(note, VERSION),
        http_load.mcp_headers(token, VERSION),
        http_load.check_mcp_note(note, N1_TEXT),
    )
    tag = f"serve-{store}"
    loads = [
        Load(
            "serve /rpc read_note", "/rpc", http_load.wrk_script(rpc, workdir / f"{tag}-r.lua"), rpc
        ),
        Load(
            "serve /rpc create_note",
            "/rpc",
            postgres_http.write_script(token, workdir / f"{tag}-w.lua"),
            None,
        ),
        Load(
            "serve /mcp read_note", "/mcp", http_load.wrk_script(mcp, workdir / f"{tag}-m.lua"), mcp
        ),
    ]
    command = [*cli(), "serve", "--host", HOST, "--port", "{port}", "--db", db]
    return Server(f"strictcall serve, {store}", store, command, loads, healthy)


def gateway_token(db: str) -> str:
    made = http_load._run([*cli(), "tokens", "create", "--identity", "u1", "--db", db])
    if made.returncode != 0:
        raise RuntimeError(f"tokens create failed: {made.stderr.strip()[-300:]}")
    return made.stdout.strip().splitlines()[-1]


def upstream_command() -> list[str]:
    return [sys.executable, str(BENCH / "stdio_payload.py")]


def gateway_server(kind: str, db: str, store: str, workdir: Path) -> Server:
    """`strictcall proxy` or `strictcall federate` (`kind`) on `db`, in front of the canned
    stdio upstream, loaded on /mcp with its `text` tool."""
    token = gateway_token(db)
    call = Call(
        "valid",
        tool_body(UPSTREAM_TOOL, {}, mcp=True),
        tool_headers(token, UPSTREAM_TOOL),
        check_upstream_text,
    )
    if kind == "proxy":
        command = [*cli(), "proxy", "--upstream-cmd", shlex.join(upstream_command())]
    else:
        config = workdir / f"federation-{store}.toml"
        line = json.dumps(shlex.join(upstream_command()))
        config.write_text(f'[upstreams.up]\ncommand = {line}\nprefix = ""\n', encoding="utf-8")
        command = [*cli(), "federate", "--config", str(config)]
    command += ["--host", HOST, "--port", "{port}", "--db", db]
    script = http_load.wrk_script(call, workdir / f"{kind}-{store}.lua")
    load = Load(f"{kind} /mcp (stdio upstream)", "/mcp", script, call)
    return Server(
        f"strictcall {kind}, {store}",
        store,
        command,
        [load],
        lambda port: http_load.mcp_answers(port, call),
    )


QUOTA_POLICY: Final = """[quotas]
shared = "{url}"
key_prefix = "{prefix}"

[[rule]]
name = "readers"
who = ["*"]
tools = ["read_note"]
rate = "100000000/minute"
burst = 1000000

[[rule]]
name = "listers"
who = ["*"]
tools = ["list_notes"]
rate = "1/hour"
burst = 1

[[quota]]
name = "everyone"
per = "global"
rate = "100000000/minute"
burst = 1000000
tools = ["read_note", "list_notes"]
"""
"""read_note under its quotas (a rule's bucket per identity and tool, and one global bucket:
two buckets a call, taken in one script); list_notes over its rule's (refused)."""


def quota_server(db: str, workdir: Path, redis: RedisCounter) -> Server:
    """`strictcall serve` on PostgreSQL (`db`) with a policy whose quotas are shared in
    `redis`, as several hosts would run."""
    made = postgres_http.prepare(db)
    token, note = made["token_u1"], made["note_u1"]
    policy = workdir / "quota-policy.toml"
    policy.write_text(QUOTA_POLICY.format(url=redis.url, prefix=redis.prefix), encoding="utf-8")
    read = Call(
        "valid",
        http_load.rpc_body(note),
        rpc_headers(token),
        http_load.check_rpc_note(note, N1_TEXT),
    )
    over = Call(
        "over",
        tool_body("list_notes", {}, mcp=False),
        rpc_headers(token),
        check_rate_limited,
    )
    loads = [
        Load(
            "serve /rpc read_note, shared quota",
            "/rpc",
            http_load.wrk_script(read, workdir / "quota-r.lua"),
            read,
        ),
        Load(
            "serve /rpc over its shared quota",
            "/rpc",
            http_load.wrk_script(over, workdir / "quota-o.lua"),
            over,
        ),
    ]
    command = [*cli(), "serve", "--host", HOST, "--port", "{port}", "--db", db]
    command += ["--policy", str(policy)]
    name = "strictcall serve, postgresql, shared quota"
    return Server(name, "postgresql", command, loads, healthy, redis, prime=over)


# --- Redis of the bench's own --------------------------------------------------------------------


class RedisCounter:
    """A redis-server of the bench's own on a free port, and its script calls and CPU."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        import redis

        self.port = http_load.free_port()
        self.url = f"redis://{HOST}:{self.port}/0"
        self.prefix = f"strictcall-bench:{secrets.token_hex(4)}:"
        command = [binary, "--port", str(self.port), "--bind", HOST, "--save", ""]
        command += ["--appendonly", "no", "--dir", str(workdir)]
        self.started = http_load.Started(command, workdir / "redis.log")
        self.client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)

        def answers() -> bool:
            try:
                return bool(self.client.ping())
            except redis.RedisError:
                return False

        http_load.wait_until(answers, self.started, 30.0)

    def scripts(self) -> int:
        """Script calls (EVALSHA and EVAL) Redis has answered since it started."""
        stats = self.client.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))

    def cpu_s(self) -> float:
        return pid_cpu_s(self.started.proc.pid)

    def close(self) -> None:
        self.client.close()
        self.started.stop()


# --- one load ----------------------------------------------------------------------------------


def load_once(
    server: Server, load: Load, conns: int, seconds: float, threads: int, database: str | None
) -> dict[str, Any]:
    """One wrk run of `load`; requests, wall, and the CPU of each part."""
    group = descendants_cpu_s(server.pid)
    own = pid_cpu_s(server.pid)
    pg = database is not None and server.store == "postgresql"
    db_cpu = postgres_http.database_cpu_s(database) if pg and database else 0.0
    redis_cpu = server.redis.cpu_s() if server.redis else 0.0
    scripts = server.redis.scripts() if server.redis else 0
    wrk_cpu = postgres_http._children_cpu_s()
    url = f"http://{HOST}:{server.port}{load.path}"
    result = http_load.run_wrk(url, load.script, conns, seconds, threads)
    wrk_cpu = postgres_http._children_cpu_s() - wrk_cpu
    own = pid_cpu_s(server.pid) - own
    group = descendants_cpu_s(server.pid) - group
    requests = max(int(result["requests"]), 1)
    out: dict[str, Any] = {
        "requests": requests,
        "req_s": result["req_s"],
        "p99_ms": result["p99_us"] / 1000,
        "cpu_s": own,
        "upstream_cpu_s": max(group, 0.0),
        "wrk_cpu_s": wrk_cpu,
        "failed": int(result.get("failed", 0)) + int(result["status"]) + result["socket_errors"],
    }
    if pg and database:
        out["db_cpu_s"] = postgres_http.database_cpu_s(database) - db_cpu
    if server.redis is not None:
        out["redis_scripts"] = server.redis.scripts() - scripts
        out["redis_cpu_s"] = server.redis.cpu_s() - redis_cpu
    log(
        f"  {load.name}, {server.store}: {result['req_s']:,.0f} req/s,"
        f" {requests / max(own, 1e-9):,.0f} calls per CPU second, failed {out['failed']}"
    )
    return out


def summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs of one load, as the model reads them: totals over the runs (calls per CPU
    second is all the requests over all the CPU), and the median req/s."""
    requests = sum(s["requests"] for s in samples)

    def per_call_us(key: str) -> float | None:
        if not all(key in s for s in samples):
            return None
        return sum(s[key] for s in samples) / requests * 1e6

    cpu_us = per_call_us("cpu_s") or 0.0
    out: dict[str, Any] = {
        "runs": len(samples),
        "requests": requests,
        "failed": sum(s["failed"] for s in samples),
        "req_s": round(statistics.median(s["req_s"] for s in samples), 1),
        "p99_ms": round(statistics.median(s["p99_ms"] for s in samples), 2),
        "cpu_us_per_call": round(cpu_us, 1),
        "calls_per_core_s": round(1e6 / cpu_us) if cpu_us else None,
        "calls_per_core_s_each": [
            round(s["requests"] / s["cpu_s"]) if s["cpu_s"] else None for s in samples
        ],
        "upstream_cpu_us_per_call": round(per_call_us("upstream_cpu_s") or 0.0, 1),
        "wrk_cpu_us_per_call": round(per_call_us("wrk_cpu_s") or 0.0, 1),
    }
    db = per_call_us("db_cpu_s")
    if db is not None:
        out["db_cpu_us_per_call"] = round(db, 1)
    if all("redis_scripts" in s for s in samples):
        out["redis_round_trips_per_call"] = round(
            sum(s["redis_scripts"] for s in samples) / requests, 3
        )
        out["redis_cpu_us_per_call"] = round(per_call_us("redis_cpu_s") or 0.0, 1)
    return out


@contextlib.contextmanager
def started(
    server: Server, workdir: Path, stack: contextlib.ExitStack
) -> Iterator[http_load.Started]:
    port = http_load.free_port()
    command = [part.replace("{port}", str(port)) for part in server.command]
    log(f"capacity: starting {server.name} on {HOST}:{port}")
    slug = server.name.replace(" ", "-").replace(",", "")
    running = stack.enter_context(http_load.running(command, workdir / f"{slug}.log"))
    http_load.wait_until(lambda: server.ready(port), running, 60.0)
    server.pid, server.port = running.proc.pid, port
    if server.prime is not None:
        http_load.request(port, "POST", "/rpc", server.prime.body, server.prime.headers, 10)
    for load in server.loads:
        wrong = check_load(server, load)
        if wrong is not None:
            raise RuntimeError(f"{server.name}, {load.name} answered wrongly: {wrong}")
    yield running


def check_load(server: Server, load: Load) -> str | None:
    if load.check is None:
        return None
    status, body = http_load.request(
        server.port, "POST", load.path, load.check.body, load.check.headers, timeout=10
    )
    return load.check.check(status, body)


def measure_paths(
    servers: list[Server], conns: int, seconds: float, runs: int, threads: int, database: str
) -> dict[str, dict[str, Any]]:
    """Every load of every server, in turns, `runs` times; a summary per (load, store)."""
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for server in servers:  # warm-up: pools filled, token caches and pins warm
        for load in server.loads:
            http_load.run_wrk(
                f"http://{HOST}:{server.port}{load.path}", load.script, conns, 1, threads
            )
    for _ in range(runs):
        for server in servers:
            for load in server.loads:
                key = (load.name, server.store)
                samples.setdefault(key, []).append(
                    load_once(server, load, conns, seconds, threads, database)
                )
    for server in servers:
        for load in server.loads:
            wrong = check_load(server, load)
            if wrong is not None:
                raise RuntimeError(f"after load, {server.name}, {load.name}: {wrong}")
    return {f"{name}, {store}": summarise(rows) for (name, store), rows in samples.items()}


# --- the audit-write ceiling ---------------------------------------------------------------------


def audit_ceiling(url: str, database: str, seconds: float) -> list[dict[str, Any]]:
    """The store's batched audit write, by 1 and 3 writers at once, in batches of 100 and
    1,000: rows/s and rows per CPU second of the database's backends."""
    from strictcall.core.record import AuditRecord
    from strictcall.storage.postgres import PostgresStore

    rows: list[dict[str, Any]] = []
    for writers in AUDIT_WRITERS:
        for size in AUDIT_BATCHES:
            stores = [PostgresStore(url) for _ in range(writers)]
            try:
                now = time.time()
                batch = [
                    AuditRecord(now, f"cap-{n}", "u1", "read_note", "ok", None, None, 120)
                    for n in range(size)
                ]

                async def writer(store: PostgresStore, batch: list[AuditRecord] = batch) -> int:
                    end = time.monotonic() + seconds
                    written = 0
                    while time.monotonic() < end:
                        await store.record_calls_async(batch)
                        written += len(batch)
                    return written

                async def all_writers(
                    stores: list[PostgresStore] = stores, batch: list[AuditRecord] = batch
                ) -> list[int]:
                    for store in stores:  # connections opened before the clock starts
                        await store.record_calls_async(batch[:1])
                    return await asyncio.gather(*(writer(s) for s in stores))

                db_cpu = postgres_http.database_cpu_s(database)
                own = time.process_time()
                wall = time.perf_counter()
                written = sum(asyncio.run(all_writers()))
                wall = time.perf_counter() - wall
                own = time.process_time() - own
                db_cpu = postgres_http.database_cpu_s(database) - db_cpu
            finally:
                for store in stores:
                    store.close()
            row = {
                "writers": writers,
                "batch": size,
                "rows": written,
                "rows_s": round(written / wall),
                "db_cpu_us_per_row": round(db_cpu / written * 1e6, 2),
                "rows_per_db_core_s": round(written / db_cpu) if db_cpu else None,
                "writer_cpu_us_per_row": round(own / written * 1e6, 2),
            }
            log(
                f"  audit: {writers} writer(s), batches of {size}: {row['rows_s']:,} rows/s,"
                f" {row['rows_per_db_core_s']} rows per database CPU second"
            )
            rows.append(row)
    return rows


# --- federate, profiled --------------------------------------------------------------------------


def profile_federate(db: str, workdir: Path, conns: int, seconds: float, threads: int) -> list[str]:
    """Federate (SQLite) under cProfile while wrk loads it; the top of the profile by own time,
    and the share of the loop thread's time by part of the code."""
    (workdir / "profiled").mkdir(exist_ok=True)
    server = gateway_server("federate", db, "sqlite", workdir / "profiled")
    out = workdir / "federate.prof"
    wrapper = workdir / "profiled_federate.py"
    wrapper.write_text(  # profiled from SIGUSR1 to SIGUSR2: the load, not the start-up
        "import cProfile, signal\n"
        "from strictcall.cli.parser import main\n"
        "profile = cProfile.Profile()\n"
        "signal.signal(signal.SIGUSR1, lambda *_: profile.enable())\n"
        "def written(*_):\n"
        "    profile.disable()\n"
        f"    profile.dump_stats({str(out)!r})\n"
        "signal.signal(signal.SIGUSR2, written)\n"
        "main()\n",
        encoding="utf-8",
    )
    server.command = [sys.executable, str(wrapper), *server.command[3:]]
    with contextlib.ExitStack() as stack, started(server, workdir, stack) as process:
        load = server.loads[0]
        url = f"http://{HOST}:{server.port}{load.path}"
        http_load.run_wrk(url, load.script, conns, 1, threads)  # warm: pins, caches
        os.kill(server.pid, signal.SIGUSR1)
        http_load.run_wrk(url, load.script, conns, seconds, threads)
        os.kill(server.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while not out.exists() and process.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the dump is written at once; a loaded machine may take a moment
    if not out.exists():
        return ["(the profile was not written)"]
    stats = pstats.Stats(str(out))
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in entries.values()) or 1.0
    by_part: dict[str, float] = {}
    for (filename, _, _), value in entries.items():
        by_part[_part_of(filename)] = by_part.get(_part_of(filename), 0.0) + value[2]
    top = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:12]
    lines = ["By part of the code (own time, the loop's thread):", ""]
    lines += [
        f"- {part}: {share / total:.0%}"
        for part, share in sorted(by_part.items(), key=lambda kv: kv[1], reverse=True)[:10]
    ]
    lines += ["", "Functions with the most own time:", ""]
    for (filename, line, name), value in top:
        lines.append(f"- {value[2] / total:.1%} `{_short(filename)}:{line}({name})`")
    return lines


def _part_of(filename: str) -> str:
    if "strictcall" in filename and "site-packages" not in filename:
        rest = filename.split("strictcall/", 1)[-1]
        return "strictcall " + rest.rsplit("/", 1)[0] if "/" in rest else "strictcall " + rest
    if "site-packages" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if filename.startswith(("~", "<")):
        return "builtins (C)"
    return "stdlib " + Path(filename).name


def _short(filename: str) -> str:
    for marker in ("src/", "site-packages/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return Path(filename).name if filename.startswith("/") else filename


# --- the model ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizing:
    """What `calls_s` calls a second need, by the model."""

    calls_s: float
    hosts: int
    cores_per_host: int
    host_cores_busy: float
    database_rows_s: float
    database_cores_busy: float
    redis_ops_s: float
    redis_cores_busy: float


def size(
    model: dict[str, Any],
    path: str,
    calls_s: float,
    cores_per_host: int,
    *,
    busy: float = 0.6,
    spare_hosts: int = 1,
    writes: bool = False,
    quota: bool = False,
) -> Sizing:
    """Hosts of `cores_per_host` cores busy at most `busy` of the time (and `spare_hosts` more,
    for one down), the database's audit rows a second (and one note row each for `writes`),
    and, with a shared `quota`, Redis round trips a second, for `calls_s` calls a second on
    `path` (a key of `model["paths"]`)."""
    per_core = float(model["paths"][path]["calls_per_core_s"])
    quota_us = float(model["quota"]["cpu_us_per_call"]) if quota else 0.0
    host_cores = calls_s * (1 / per_core + quota_us / 1e6)
    hosts = math.ceil(host_cores / (cores_per_host * busy)) + spare_hosts
    in_process = path.endswith(", sqlite")  # one host, its store a file of its own
    rows_s = 0.0 if in_process else calls_s * (2 if writes else 1)
    measured = model["paths"][path].get("db_cpu_us_per_call")  # the call's reads, writes, audit
    if in_process:
        db_cores = 0.0
    elif measured is None:
        db_cores = calls_s / float(model["audit"]["rows_per_db_core_s"])
    else:
        db_cores = calls_s * float(measured) / 1e6
    rt = float(model["quota"]["redis_round_trips_per_call"]) if quota else 0.0
    redis_ops = calls_s * rt
    redis_cores = calls_s * float(model["quota"]["redis_cpu_us_per_call"]) / 1e6 if quota else 0.0
    return Sizing(
        calls_s,
        hosts,
        cores_per_host,
        round(host_cores, 2),
        rows_s,
        round(db_cores, 2),
        redis_ops,
        round(redis_cores, 2),
    )


def model_of(paths: dict[str, dict[str, Any]], audit: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures a sizing reads: calls per core per path, the audit ceiling (the best rows
    per database core of the batched writes) and the quota's cost per call."""
    under = paths.get("serve /rpc read_note, shared quota, postgresql", {})
    bare = paths.get("serve /rpc read_note, postgresql", {})
    over = paths.get("serve /rpc over its shared quota, postgresql", {})
    quota_us = float(under.get("cpu_us_per_call", 0.0)) - float(bare.get("cpu_us_per_call", 0.0))
    ceilings = [row for row in audit if row["rows_per_db_core_s"]]
    best = max(ceilings, key=lambda row: row["rows_per_db_core_s"]) if ceilings else {}
    return {
        "paths": paths,
        "audit": {
            "rows_per_db_core_s": best.get("rows_per_db_core_s"),
            "rows_s": max((row["rows_s"] for row in audit), default=None),
            "rows": audit,
        },
        "quota": {
            "cpu_us_per_call": round(max(quota_us, 0.0), 1),
            "refused_cpu_us_per_call": over.get("cpu_us_per_call"),
            "redis_round_trips_per_call": under.get("redis_round_trips_per_call"),
            "redis_round_trips_per_refused_call": over.get("redis_round_trips_per_call"),
            "redis_cpu_us_per_call": under.get("redis_cpu_us_per_call"),
        },
    }


# --- the report ----------------------------------------------------------------------------------


def markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    model = report["model"]
    lines = [
        "# Capacity: calls per core, the audit's ceiling, Redis per call",
        "",
        "Written by `bench/capacity.py` (`make bench`); what each figure is, is said in its"
        " docstring. docs/capacity.md turns these figures into a sizing.",
        "",
        f"Machine: {m['nproc']} cores ({m['cpu']}), kernel {m['kernel']}, {m['date']}; load"
        f" average {m['loadavg_start']} at the start and {report['loadavg_end']} at the end"
        " (a machine shared with other work: calls per CPU second is the steady figure, req/s"
        f" is not). Revision {report['revision']}. wrk: {report['connections']} connections,"
        f" {report['runs']} runs of {report['seconds']:g} s per load, in turns.",
        "",
        "| path | store | calls per core-second (runs) | server CPU µs/call | upstream CPU"
        " µs/call | database CPU µs/call | req/s here | p99 ms | failed |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, row in model["paths"].items():
        name, store = key.rsplit(", ", 1)
        each = ", ".join(f"{v:,}" for v in row["calls_per_core_s_each"] if v is not None)
        db = row.get("db_cpu_us_per_call")
        lines.append(
            f"| {name} | {store} | {row['calls_per_core_s']:,} ({each}) | {row['cpu_us_per_call']}"
            f" | {row['upstream_cpu_us_per_call'] or '-'} | {'-' if db is None else db}"
            f" | {row['req_s']:,.0f} | {row['p99_ms']} | {row['failed']} |"
        )
    q = model["quota"]
    lines += [
        "",
        "A shared quota (two buckets a call, one script): Redis round trips per call"
        f" {q['redis_round_trips_per_call']} under the quota and"
        f" {q['redis_round_trips_per_refused_call']} over it; {q['cpu_us_per_call']} µs of the"
        f" server's CPU per call more than without a policy; {q['redis_cpu_us_per_call']} µs of"
        " Redis' CPU per call.",
        "",
        "The audit's batched writes to PostgreSQL (`record_calls_async`, one transaction a batch):",
        "",
        "| writers | batch | rows/s here | database CPU µs/row | rows per database core-second"
        " | writer CPU µs/row |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in model["audit"]["rows"]:
        lines.append(
            f"| {row['writers']} | {row['batch']} | {row['rows_s']:,} | {row['db_cpu_us_per_row']}"
            f" | {row['rows_per_db_core_s']:,} | {row['writer_cpu_us_per_row']} |"
        )
    example = report["example"]
    lines += [
        "",
        f"Sizing example (the model, docs/capacity.md): {example['calls_s']:,.0f} calls/s of"
        f" create_note on serve /rpc, PostgreSQL, with a shared quota, on hosts of"
        f" {example['cores_per_host']} cores kept under 60 % busy, one spare: {example['hosts']}"
        f" hosts ({example['host_cores_busy']} cores busy in all); PostgreSQL"
        f" {example['database_rows_s']:,.0f} rows/s ({example['database_cores_busy']} cores);"
        f" Redis {example['redis_ops_s']:,.0f} ops/s ({example['redis_cores_busy']} cores).",
    ]
    profile = report.get("federate_profile")
    if profile:
        lines += ["", "## Where federate's time goes", "", *report["federate_profile_why"], ""]
        lines += profile
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import run as bench_run

    report: dict[str, Any] = {
        "machine": bench_run.machine(),
        "revision": http_load.commit_of(ROOT),
        "connections": args.connections,
        "seconds": args.seconds,
        "runs": args.runs,
    }
    if bench_run.ensure_wrk() is None:
        raise RuntimeError("wrk is not available")
    redis = RedisCounter(workdir)
    try:
        with postgres_http.bench_database() as url:
            database = url.rsplit("/", 1)[1]
            sqlite = str(workdir / "serve.sqlite3")
            servers = [
                serve_server(sqlite, "sqlite", workdir),
                serve_server(url, "postgresql", workdir),
                gateway_server("proxy", str(workdir / "proxy.sqlite3"), "sqlite", workdir),
                gateway_server("proxy", url, "postgresql", workdir),
                gateway_server("federate", str(workdir / "federate.sqlite3"), "sqlite", workdir),
                gateway_server("federate", url, "postgresql", workdir),
                quota_server(url, workdir, redis),
            ]
            with contextlib.ExitStack() as stack:
                for server in servers:
                    stack.enter_context(started(server, workdir, stack))
                paths = measure_paths(
                    servers, args.connections, args.seconds, args.runs, args.threads, database
                )
            audit = audit_ceiling(url, database, args.audit_seconds)
    finally:
        redis.close()
    model = model_of(paths, audit)
    report["model"] = model
    example = size(
        model,
        "serve /rpc create_note, postgresql",
        args.example_calls,
        args.example_cores,
        writes=True,
        quota=True,
    )
    report["example"] = example.__dict__
    serve_mcp = paths.get("serve /mcp read_note, sqlite", {}).get("calls_per_core_s")
    federate = paths.get("federate /mcp (stdio upstream), sqlite", {}).get("calls_per_core_s")
    if serve_mcp and federate:
        report["federate_profile_why"] = [
            f"Federate answers {federate:,} calls per core-second against serve /mcp's"
            f" {serve_mcp:,} ({federate / serve_mcp:.2f}x): profiled once with cProfile"
            f" ({args.seconds:g} s under wrk; cProfile slows what it watches, the shares are"
            " what it says)."
        ]
        report["federate_profile"] = profile_federate(
            str(workdir / "profiled.sqlite3"), workdir, args.connections, args.seconds, args.threads
        )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0, help="per wrk run (whole seconds)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads")
    parser.add_argument("--audit-seconds", type=float, default=2.0)
    parser.add_argument("--example-calls", type=float, default=5000.0)
    parser.add_argument("--example-cores", type=int, default=4)
    parser.add_argument("--json", type=Path, default=RESULTS_JSON)
    parser.add_argument("--markdown", type=Path, default=RESULTS_MD)
    args = parser.parse_args(argv)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="strictcall-capacity-") as tmp:
        try:
            report = run(args, Path(tmp))
        finally:
            http_load.stop_all()
    report["loadavg_end"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    report["wall_s"] = round(time.monotonic() - began, 1)
    args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", "utf-8")
    text = markdown(report)
    args.markdown.write_text(text, "utf-8")
    print(text)
    log(f"wrote {args.json} and {args.markdown} in {report['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
