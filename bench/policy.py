"""What the policy costs (issue 27), three figures, each as ratios within one run:

1. HTTP: `strictcall serve` without a policy against the same server with a policy of 100 rules
   and quotas on every call (a rule's rate per identity and tool, a quota per identity, a global
   quota: three buckets a call, rates high enough never to refuse), loaded by wrk in turns at 16
   and 64 connections (bench/http_load.py's machinery). Goal: >= 0.95x the requests/s.
2. The shared state, by measurement: one take of a call's three buckets, atomically, in Redis
   (a Lua script: storage/quotas.py) and in PostgreSQL (a PL/pgSQL function over row locks, the
   best one statement does there), taking turns, round after round.
3. The added latency per call of quotas shared across servers: `Gateway.call` with the same
   policy, quotas kept in the process against quotas kept in Redis.

`python bench/policy.py [--quick]`; prints Markdown for bench/POLICY.md and writes
bench/policy-results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import http_load  # noqa: E402
from http_load import log  # noqa: E402

REDIS_URL = os.environ.get("STRICTCALL_BENCH_REDIS", "redis://127.0.0.1:6379/0")
PG_URL = os.environ.get("STRICTCALL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
GOAL = 0.95


def hundred_rules(shared: str | None = None, prefix: str = "bench:") -> str:
    """A policy of 100 rules, the caller's own last (each a different identity and tools), a
    rate on its rule and two quotas; every rate far above what a run can call."""
    head = "" if shared is None else f'[quotas]\nshared = "{shared}"\nkey_prefix = "{prefix}"\n\n'
    rules = [
        f'[[rule]]\nname = "agents-{n}"\nwho = ["agent-{n}", "group:team-{n % 7}"]\n'
        f'tools = ["read_note", "list_notes", "github__{n}_*"]\nrate = "600/minute"\n'
        for n in range(99)
    ]
    rules.append(
        '[[rule]]\nname = "u1"\nwho = ["u1", "u2"]\ntools = ["read_note", "list_notes"]\n'
        'rate = "100000000/second"\nmax_result_bytes = 65536\n'
    )
    quotas = (
        '[[quota]]\nname = "per-caller"\nper = "identity"\nrate = "100000000/second"\n\n'
        '[[quota]]\nname = "everyone"\nper = "global"\nrate = "100000000/second"\n'
    )
    return head + "\n".join(rules) + "\n" + quotas


# --- 1. HTTP ------------------------------------------------------------------------------------


def http_part(
    workdir: Path, connections: list[int], duration: float, runs: int, warmup: float
) -> dict[str, Any]:
    cli = [sys.executable, "-m", "strictcall"]
    (workdir / "without").mkdir(exist_ok=True)
    without = http_load.strictcall_target(cli, workdir / "without")
    policy = workdir / "policy.toml"
    policy.write_text(hundred_rules(), encoding="utf-8")
    (workdir / "with").mkdir(exist_ok=True)
    with_policy = http_load.strictcall_target(cli, workdir / "with")
    with_policy.name = "strictcall serve --policy (100 rules, 3 buckets a call)"
    with_policy.command = [*with_policy.command, "--policy", str(policy)]
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    shared_policy = workdir / "shared.toml"
    shared_policy.write_text(hundred_rules(REDIS_URL, prefix), encoding="utf-8")
    (workdir / "shared").mkdir(exist_ok=True)
    with_shared = http_load.strictcall_target(cli, workdir / "shared")
    with_shared.name = "strictcall serve --policy, quotas shared in Redis"
    with_shared.command = [*with_shared.command, "--policy", str(shared_policy)]
    try:
        plain, judged, shared = http_load.load_targets(
            [without, with_policy, with_shared], workdir, connections, duration, runs, 2, warmup
        )
    finally:
        _forget_keys(prefix)
    rows = []
    for floor, load in zip(plain["loads"], judged["loads"], strict=True):
        ratio = load["req_s"] / floor["req_s"]
        paired = statistics.median(
            w / f for f, w in zip(floor["req_s_each"], load["req_s_each"], strict=True)
        )
        rows.append(
            {
                "connections": load["connections"],
                "without_req_s": floor["req_s"],
                "with_req_s": load["req_s"],
                "without_each": floor["req_s_each"],
                "with_each": load["req_s_each"],
                "without_p99_ms": floor["p99_ms"],
                "with_p99_ms": load["p99_ms"],
                "without_cpu_us": floor["server_cpu_us_per_req"],
                "with_cpu_us": load["server_cpu_us_per_req"],
                "ratio": ratio,
                "paired_ratio": paired,
                "ok": ratio >= GOAL,
            }
        )
    for row, load in zip(rows, shared["loads"], strict=True):
        row["shared_req_s"] = load["req_s"]
        row["shared_p50_ms"] = load["p50_ms"]
        row["shared_cpu_us"] = load["server_cpu_us_per_req"]
    for row, load in zip(rows, judged["loads"], strict=True):
        row["with_p50_ms"] = load["p50_ms"]
    statuses = [plain.get("status"), judged.get("status"), shared.get("status")]
    return {"status": statuses, "loads": rows}


def _forget_keys(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


# --- 2. the shared state -------------------------------------------------------------------------

PG_TAKE = """
CREATE TABLE IF NOT EXISTS {table} (key text PRIMARY KEY, tat double precision NOT NULL);
CREATE OR REPLACE FUNCTION {table}_take(keys text[], intervals float8[], bursts int[])
RETURNS int[] AS $$
DECLARE
  now_ms float8 := extract(epoch from clock_timestamp()) * 1000;
  t float8; after float8; news float8[] := '{{}}';
BEGIN
  FOR i IN 1..array_length(keys, 1) LOOP
    INSERT INTO {table} VALUES (keys[i], 0) ON CONFLICT DO NOTHING;
    SELECT tat INTO t FROM {table} WHERE key = keys[i] FOR UPDATE;
    IF t < now_ms THEN t := now_ms; END IF;
    after := t + intervals[i];
    IF after - now_ms - intervals[i] * bursts[i] > 0 THEN
      RETURN ARRAY[i - 1, ceil(after - now_ms - intervals[i] * bursts[i])::int];
    END IF;
    news := news || after;
  END LOOP;
  FOR i IN 1..array_length(keys, 1) LOOP
    UPDATE {table} SET tat = news[i] WHERE key = keys[i];
  END LOOP;
  RETURN ARRAY[-1, 0];
END $$ LANGUAGE plpgsql;
"""


def state_part(calls: int, rounds: int) -> dict[str, Any]:
    """µs per take of three buckets: Redis' script against PostgreSQL's function, in turns."""
    import psycopg
    import redis

    from strictcall.core.quota import Bucket
    from strictcall.storage.quotas import RedisBuckets

    tag = uuid.uuid4().hex[:8]
    buckets = [
        Bucket(f"bench-{tag}:{name}", 0.000001, 10**9, name, False)
        for name in ("rule", "identity", "global")
    ]
    shared = RedisBuckets(REDIS_URL)
    table = f"strictcall_bench_quota_{tag}"
    conn = psycopg.connect(PG_URL, autocommit=True)
    conn.execute(PG_TAKE.format(table=table).encode())
    keys = [b.key for b in buckets]
    intervals = [b.interval_ms for b in buckets]
    bursts = [b.burst for b in buckets]
    statement = f"SELECT {table}_take(%s, %s, %s)".encode()
    times: dict[str, list[float]] = {"redis": [], "postgres": []}
    try:
        for _ in range(rounds):
            started = time.perf_counter()
            for _ in range(calls):
                assert shared.take(buckets) is None
            times["redis"].append((time.perf_counter() - started) / calls * 1e6)
            started = time.perf_counter()
            for _ in range(calls):
                row = conn.execute(statement, (keys, intervals, bursts)).fetchone()
                assert row is not None and row[0][0] == -1
            times["postgres"].append((time.perf_counter() - started) / calls * 1e6)
    finally:
        conn.execute(f"DROP FUNCTION {table}_take; DROP TABLE {table}".encode())
        conn.close()
        shared.close()
        client = redis.Redis.from_url(REDIS_URL)
        client.delete(*keys)
        client.close()
    return {
        "redis_us": statistics.median(times["redis"]),
        "postgres_us": statistics.median(times["postgres"]),
        "redis_each": [round(t, 1) for t in times["redis"]],
        "postgres_each": [round(t, 1) for t in times["postgres"]],
    }


# --- 3. added latency per call ------------------------------------------------------------------


def latency_part(calls: int, rounds: int) -> dict[str, Any]:
    """µs per `Gateway.call`: no policy, the 100 rules with quotas in the process, the same
    with quotas in Redis; in turns."""
    import redis

    from strictcall import Gateway, Tool
    from strictcall.core.policy import PolicyHolder, parse_policy
    from strictcall.storage.quotas import RedisBuckets

    def handler(ctx: Any, args: dict[str, Any]) -> dict[str, Any]:
        return {"note_id": args["note_id"], "text": "x"}

    tool = Tool(
        name="read_note",
        description="Read a note.",
        input_schema={
            "type": "object",
            "properties": {"note_id": {"type": "string"}},
            "required": ["note_id"],
        },
        output_schema={
            "type": "object",
            "properties": {"note_id": {"type": "string"}, "text": {"type": "string"}},
            "required": ["note_id", "text"],
        },
        handler=handler,
    )
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    gateways = {
        "none": Gateway([tool]),
        "local": Gateway([tool], policy=PolicyHolder(parse_policy(hundred_rules()))),
        "redis": Gateway(
            [tool],
            policy=PolicyHolder(
                parse_policy(hundred_rules(REDIS_URL, prefix)), shared=RedisBuckets
            ),
        ),
    }
    raw = '{"name":"read_note","arguments":{"note_id":"n1"}}'
    times: dict[str, list[float]] = {name: [] for name in gateways}
    try:
        for _ in range(rounds):
            for name, gateway in gateways.items():
                assert gateway.call(raw, "u1", "c")["ok"] is True
                started = time.perf_counter()
                for _ in range(calls):
                    gateway.call(raw, "u1", "c")
                times[name].append((time.perf_counter() - started) / calls * 1e6)
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
        client.close()
    out = {f"{name}_us": statistics.median(t) for name, t in times.items()}
    out["added_local_us"] = out["local_us"] - out["none_us"]
    out["added_shared_us"] = out["redis_us"] - out["local_us"]
    return out


def table(result: dict[str, Any]) -> list[str]:
    out = [
        f"Load average at the start: {result['load_before']}; at the end: {result['load_after']}"
        f" ({result['cores']} cores).",
        "",
        "| connections | without a policy: req/s, p99, server CPU/req | 100 rules and quotas:"
        " req/s, p99, server CPU/req | ratio (medians; median of paired runs) | goal >= 0.95x |",
        "|---|---|---|---|---|",
    ]
    for row in result.get("http", {}).get("loads", []):
        out.append(
            f"| {row['connections']} | {row['without_req_s']:,.0f}, {row['without_p99_ms']:.1f} ms,"
            f" {row['without_cpu_us']:.0f} µs | {row['with_req_s']:,.0f},"
            f" {row['with_p99_ms']:.1f} ms, {row['with_cpu_us']:.0f} µs"
            f" | {row['ratio']:.3f}x; {row['paired_ratio']:.3f}x"
            f" | {'met' if row['ok'] else '**missed**'} |"
        )
    loads = result.get("http", {}).get("loads", [])
    if loads and "shared_req_s" in loads[0]:
        out += [
            "",
            "| connections | quotas in the process: req/s, p50 | quotas shared in Redis:"
            " req/s, p50, server CPU/req | p50 added by the shared state |",
            "|---|---|---|---|",
        ]
        for row in loads:
            out.append(
                f"| {row['connections']} | {row['with_req_s']:,.0f}, {row['with_p50_ms']:.2f} ms"
                f" | {row['shared_req_s']:,.0f}, {row['shared_p50_ms']:.2f} ms,"
                f" {row['shared_cpu_us']:.0f} µs"
                f" | {row['shared_p50_ms'] - row['with_p50_ms']:+.2f} ms |"
            )
    state = result.get("state")
    if state:
        out += [
            "",
            "| one take of a call's three buckets, atomic | µs (median of rounds) | rounds |",
            "|---|---:|---|",
            f"| Redis, a Lua script | {state['redis_us']:.0f} | {state['redis_each']} |",
            f"| PostgreSQL, a PL/pgSQL function | {state['postgres_us']:.0f}"
            f" | {state['postgres_each']} |",
        ]
    lat = result.get("latency")
    if lat:
        out += [
            "",
            "| `Gateway.call`, read_note | µs per call |",
            "|---|---:|",
            f"| no policy | {lat['none_us']:.1f} |",
            f"| 100 rules, quotas in the process | {lat['local_us']:.1f}"
            f" (+{lat['added_local_us']:.1f}) |",
            f"| 100 rules, quotas shared in Redis | {lat['redis_us']:.1f}"
            f" (+{lat['added_shared_us']:.1f} over the process's) |",
        ]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short runs (a smoke test)")
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    duration, runs, warmup = (2.0, 1, 1.0) if args.quick else (8.0, 5, 3.0)
    calls, rounds = (300, 3) if args.quick else (3000, 7)
    result: dict[str, Any] = {
        "cores": os.cpu_count(),
        "load_before": [round(x, 1) for x in os.getloadavg()],
    }
    if not args.skip_http:
        with tempfile.TemporaryDirectory() as tmp:
            log("policy: HTTP, without and with the policy, in turns")
            result["http"] = http_part(Path(tmp), [16, 64], duration, runs, warmup)
    log("policy: the shared state, Redis against PostgreSQL")
    result["state"] = state_part(calls, rounds)
    log("policy: the added latency per call")
    result["latency"] = latency_part(calls * 3, rounds)
    result["load_after"] = [round(x, 1) for x in os.getloadavg()]
    (BENCH / "policy-results.json").write_text(json.dumps(result, indent=2) + "\n")
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
