"""What the operator's view costs (issue 16), two figures:

1. /metrics and spans: `strictcall serve` with its metrics and its OpenTelemetry tracer (the
   default: the API installed, no SDK, so tracing is off) against the same app built without
   them (`build_app(observe=False)`, bench/ops_serve.py), loaded by wrk in turns at the same
   connection counts (bench/http_load.py's machinery). Goal: at most 3 % fewer req/s at 16.
2. The page with 1,000,000 audit records, all in the last hour (the worst case for its
   window), written through the store's own batch write: the page's work in-process (the
   store's queries and the rendering) and GET / and GET /ops/stats.json on a real server on
   that file. Goal: under 100 ms.

`python bench/ops.py` on its own, or part of `make bench` (bench/run.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import http_load  # noqa: E402
from http_load import log  # noqa: E402
from reliability.progress import Progress  # noqa: E402

MAX_COST = 0.03
PAGE_MAX_MS = 100.0
BATCH = 20_000

_TOOLS = ("read_note", "list_notes", "count_notes", "create_note", "delete_note", None)
_FAILURES = (
    ("shape", "invalid_arguments", "type", "/arguments/note_id"),
    ("shape", "invalid_arguments", "unexpected_member", "/arguments/*"),
    ("shape", "invalid_arguments", "missing_member", "/arguments/text"),
    ("resource", "forbidden_or_missing", None, None),
    ("route", "unknown_tool", None, None),
    ("parse", "invalid_json", "syntax", None),
    ("execute", "store_unavailable", None, None),
    ("auth", "unauthenticated", None, None),
)


def generate(path: Path, records: int, spread_s: float = 3500.0) -> float:
    """`records` audit records over the last `spread_s` seconds, one in five a failure,
    written in batches by the store's own write; the seconds it took."""
    from strictcall.storage import AuditRecord
    from strictcall.storage.sqlite import SQLiteStore

    store = SQLiteStore(path)
    began = time.perf_counter()
    now = time.time()
    try:
        with Progress("ops: writing audit records", total=records, unit="records") as progress:
            for start in range(0, records, BATCH):
                batch = []
                for i in range(start, min(start + BATCH, records)):
                    at = now - spread_s + spread_s * i / records
                    tool = _TOOLS[i % len(_TOOLS)]
                    identity = f"agent-{i % 50}"
                    if i % 5:
                        batch.append(AuditRecord(at, f"c{i}", identity, tool, "ok", None, None, 80))
                    else:
                        stage, code, reason, pointer = _FAILURES[(i // 5) % len(_FAILURES)]
                        batch.append(
                            AuditRecord(
                                at, f"c{i}", identity, tool, "error", code, stage, 60, reason,
                                pointer,
                            )
                        )  # fmt: skip
                store.record_calls(batch)
                progress.advance(len(batch))
    finally:
        store.close()
    return time.perf_counter() - began


def page_in_process(path: Path, runs: int) -> dict[str, float]:
    """The page's work without HTTP: the store's three queries, and those plus rendering."""
    from strictcall.ops.page import render_page
    from strictcall.ops.stats import breakdown
    from strictcall.storage.sqlite import SQLiteStore

    store = SQLiteStore(path)
    try:
        queries, whole = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            stats = breakdown(store)
            t1 = time.perf_counter()
            render_page(stats, {})
            t2 = time.perf_counter()
            queries.append((t1 - t0) * 1000)
            whole.append((t2 - t0) * 1000)
        assert stats.calls > 0, "the window holds no calls"
        return {
            "calls_in_window": stats.calls,
            "queries_ms": statistics.median(queries),
            "page_ms": statistics.median(whole),
            "page_max_ms": max(whole),
        }
    finally:
        store.close()


def page_over_http(path: Path, workdir: Path, runs: int) -> dict[str, float]:
    """GET / and GET /ops/stats.json on a real server on that file, with an operator's token
    (bench/ops_serve.py asks for one even on loopback, as a server elsewhere would)."""
    from strictcall.storage.sqlite import SQLiteStore

    store = SQLiteStore(path)
    try:
        auth = {"Authorization": "Bearer " + store.create_operator_token("bench")}
    finally:
        store.close()
    port = http_load.free_port()
    command = [sys.executable, str(BENCH / "ops_serve.py"), "--db", str(path), "--port", str(port)]
    out: dict[str, float] = {}
    with http_load.running(command, workdir / "ops-page-server.log") as server:
        http_load.wait_until(lambda: http_load.answers(port, "GET", "/healthz"), server, 30)
        for name, route in (("http_page", "/"), ("http_stats_json", "/ops/stats.json")):
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                status, body = http_load.request(port, "GET", route, headers=auth, timeout=10)
                times.append((time.perf_counter() - t0) * 1000)
                assert status == 200, (status, body[:200])
            out[f"{name}_ms"] = statistics.median(times)
            out[f"{name}_max_ms"] = max(times)
    return out


def page_part(records: int, runs: int, workdir: Path, db: Path | None = None) -> dict[str, Any]:
    """The page's figures on `db` (made with `records` records when None)."""
    path = workdir / "ops-1m.sqlite3" if db is None else db
    written_s = generate(path, records) if db is None else 0.0
    result: dict[str, Any] = {"records": records, "write_s": written_s}
    log("ops: timing the page's work in-process")
    result.update(page_in_process(path, runs))
    log("ops: timing GET / and GET /ops/stats.json on a server")
    result.update(page_over_http(path, workdir, runs))
    result["ok"] = max(result["http_page_ms"], result["http_stats_json_ms"]) < PAGE_MAX_MS
    return result


def _target(name: str, workdir: Path, plain: bool) -> http_load.HttpTarget:
    where = workdir / ("plain" if plain else "observed")
    where.mkdir(exist_ok=True)
    db = http_load.prepare_strictcall_db(http_load_cli(), where)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {db['token_u1']}"}
    note_id = db["note_u1"]
    command = [sys.executable, str(BENCH / "ops_serve.py"), "--db", db["path"], "--port", "{port}"]
    return http_load.HttpTarget(
        name,
        "bench/ops_serve.py",
        [*command, "--plain"] if plain else command,
        "/rpc",
        [
            http_load.Call(
                "valid",
                http_load.rpc_body(note_id),
                headers,
                http_load.check_rpc_note(note_id, http_load.N1_TEXT),
            )
        ],
        lambda port: http_load.answers(port, "GET", "/healthz"),
    )


def http_load_cli() -> list[str]:
    script = Path(sys.executable).parent / "strictcall"
    return [str(script)] if script.exists() else [sys.executable, "-m", "strictcall"]


def overhead_part(
    workdir: Path, connections: list[int], duration: int, runs: int, threads: int, warmup: int
) -> dict[str, Any]:
    """req/s with metrics and spans against without, loaded in turns."""
    targets = [
        _target("without metrics and spans", workdir, plain=True),
        _target("with metrics and spans (tracing off)", workdir, plain=False),
    ]
    plain, observed = http_load.load_targets(
        targets, workdir, connections, duration, runs, threads, warmup
    )
    rows = []
    for floor, load in zip(plain["loads"], observed["loads"], strict=True):
        cost = 1 - load["req_s"] / floor["req_s"]
        rows.append(
            {
                "connections": load["connections"],
                "plain_req_s": floor["req_s"],
                "observed_req_s": load["req_s"],
                "plain_req_s_each": floor["req_s_each"],
                "observed_req_s_each": load["req_s_each"],
                "plain_cpu_us": floor["server_cpu_us_per_req"],
                "observed_cpu_us": load["server_cpu_us_per_req"],
                "paired_cost": statistics.median(
                    1 - o / f for f, o in zip(floor["req_s_each"], load["req_s_each"], strict=True)
                ),
                "cost": cost,
                "ok": cost <= MAX_COST if load["connections"] == 16 else None,
            }
        )
    return {"status": [plain.get("status"), observed.get("status")], "loads": rows}


def table(result: dict[str, Any]) -> list[str]:
    """The two figures as Markdown."""
    out = [
        "| connections | without: req/s, server CPU per request"
        " | with metrics and spans: req/s, server CPU per request"
        " | cost (medians; median of paired runs) | goal |",
        "|---|---|---|---|---|",
    ]
    for row in result.get("overhead", {}).get("loads", []):
        goal = "-" if row["ok"] is None else ("met" if row["ok"] else "**missed**")
        out.append(
            f"| {row['connections']} | {row['plain_req_s']:,.0f}, {row['plain_cpu_us']:.0f} µs"
            f" | {row['observed_req_s']:,.0f}, {row['observed_cpu_us']:.0f} µs"
            f" | {100 * row['cost']:+.1f} %; {100 * row['paired_cost']:+.1f} %"
            f" | <= 3 %: {goal} |"
        )
    page = result.get("page")
    if page:
        out += [
            "",
            f"The page with {page['records']:,} audit records, {page['calls_in_window']:,} of them"
            f" in the last hour (written in {page['write_s']:.0f} s):",
            "",
            "| figure | median (ms) | max (ms) |",
            "|---|---|---|",
            f"| the store's queries (in-process) | {page['queries_ms']:.1f} | - |",
            f"| queries and rendering (in-process) | {page['page_ms']:.1f}"
            f" | {page['page_max_ms']:.1f} |",
            f"| GET / on a server | {page['http_page_ms']:.1f} | {page['http_page_max_ms']:.1f} |",
            f"| GET /ops/stats.json on a server | {page['http_stats_json_ms']:.1f}"
            f" | {page['http_stats_json_max_ms']:.1f} |",
            "",
            f"Goal: under {PAGE_MAX_MS:.0f} ms: {'met' if page['ok'] else '**missed**'}.",
        ]
    return out


def run(
    workdir: Path,
    *,
    records: int,
    page_runs: int,
    connections: list[int],
    duration: int,
    runs: int,
    threads: int,
    warmup: int,
    skip_http: bool = False,
    db: Path | None = None,
) -> dict[str, Any]:
    """Both figures (the page's alone with `skip_http`)."""
    result: dict[str, Any] = {"page": page_part(records, page_runs, workdir, db)}
    if not skip_http:
        result["overhead"] = overhead_part(workdir, connections, duration, runs, threads, warmup)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--page-runs", type=int, default=20)
    parser.add_argument("--connections", default="16")
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--skip-http", action="store_true", help="the page only, no wrk")
    parser.add_argument("--db", type=Path, help="time the page on this file (made before)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="strictcall-ops-") as tmp:
        try:
            result = run(
                Path(tmp),
                records=args.records,
                page_runs=args.page_runs,
                connections=[int(c) for c in args.connections.split(",")],
                duration=args.duration,
                runs=args.runs,
                threads=args.threads,
                warmup=args.warmup,
                skip_http=args.skip_http,
                db=args.db,
            )
        finally:
            http_load.stop_all()
    print("\n".join(table(result)))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
