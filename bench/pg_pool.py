"""The loop's PostgreSQL connections (issue 25): strictcall's hand-built `LoopPool` (prepared
statements sent through libpq, the socket watched once per session, the note reads of one
turn of the loop sent as one statement) against psycopg_pool's `AsyncConnectionPool` with
prepared statements (`prepare=True`), with and without pipeline mode.

Two reads, as a server's event loop awaits them: a note by (owner, id), and a token lookup
that misses the cache (an unknown token is looked up every time); and one write, a note created
once per call id (its claim and insert in one statement, one commit), a quarter as many calls.
Each at 16 and 64 calls at once, against the real PostgreSQL (`$STRICTCALL_TEST_PG`, default
127.0.0.1:5432), in a fresh database dropped after. Every variant has 8 connections
(`LOOP_CONNECTIONS`) and runs in the same process, in turns, several rounds: the figures are
ratios within one run (the machine is shared; the load average is printed), in calls per
second and in this process's CPU per call (what the server's loop pays, the scarcer thing on a
busy machine).

Variants:
- `loop`: the store's own awaited calls (`read_note_async`, `identity_for_token_async`), as a
  server makes them (note reads of one turn batched);
- `loop-single`: the same pool and libpq session, one statement per read (no batching): the
  pool and session alone against psycopg_pool's;
- `psycopg_pool`: `AsyncConnectionPool`, `await conn.execute(sql, params, prepare=True)`;
- `psycopg_pool+pipeline`: the same, each call's statement sent in pipeline mode.

`python bench/pg_pool.py [--rounds 5] [--calls 4000]`
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import psycopg  # noqa: E402
from psycopg_pool import AsyncConnectionPool  # noqa: E402

import pg  # noqa: E402  (tests/pg.py: a fresh database, dropped after)
from strictcall.storage import IdempotencyKey, hash_token  # noqa: E402
from strictcall.storage.postgres import LOOP_CONNECTIONS, PostgresStore  # noqa: E402
from strictcall.storage.postgres.session import first_bytes, text_pair  # noqa: E402
from strictcall.storage.postgres.statements import (  # noqa: E402
    CREATE,
    READ_NOTE_PREPARED,
    TOKEN_IDENTITY_PREPARED,
    bytes_of,
)
from strictcall.storage.sql import POSTGRES  # noqa: E402

OWNERS = 50
NOTES_PER_OWNER = 4

Call = Callable[[int], Awaitable[Any]]


async def run(call: Call, calls: int, concurrency: int) -> tuple[float, float]:
    """`calls` calls of `call`, `concurrency` at once: (calls per second, CPU µs per call)."""
    next_call = iter(range(calls))

    async def worker() -> None:
        for n in next_call:
            await call(n)

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return calls / wall, cpu / calls * 1e6


async def variants(
    url: str, notes: list[tuple[str, str]]
) -> tuple[dict[str, dict[str, Call]], Callable[[], Awaitable[None]]]:
    """The calls of each variant, by read, and what closes them."""
    store = PostgresStore(url)
    await store.count_notes_async("warm")  # the loop's pool, made on this loop
    loop_pool = store._loop_pool()
    assert loop_pool is not None
    pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
        url,
        kwargs={"autocommit": True},
        min_size=LOOP_CONNECTIONS,
        max_size=LOOP_CONNECTIONS,
        open=False,
    )
    await pool.open(wait=True)

    def unknown(n: int) -> str:
        return f"sc_unknown_{n}"

    async def pooled(sql: str, params: tuple[str, ...], pipeline: bool) -> Any:
        async with pool.connection() as conn:
            if pipeline:
                async with conn.pipeline():
                    cursor = await conn.execute(sql, params, prepare=True)
                    return await cursor.fetchone()
            cursor = await conn.execute(sql, params, prepare=True)
            return await cursor.fetchone()

    def note_read(pipeline: bool) -> Call:
        return lambda n: pooled(POSTGRES.read_note, notes[n % len(notes)], pipeline)

    def token_read(pipeline: bool) -> Call:
        return lambda n: pooled(POSTGRES.token_identity, (hash_token(unknown(n)),), pipeline)

    run_id = secrets.token_hex(4)  # every call id new: each call claims and inserts

    def key(n: int) -> IdempotencyKey:
        return IdempotencyKey(f"{run_id}-{n}-{secrets.token_hex(4)}", "fp")

    async def create_pooled(n: int, pipeline: bool) -> Any:
        k = key(n)
        params = {
            "owner": "writer",
            "call_id": k.call_id,
            "fingerprint": k.fingerprint,
            "text": bytes_of("t"),
            "note_id": "n" + secrets.token_hex(8),
            "now": time.time(),
        }
        async with pool.connection() as conn:
            if pipeline:
                async with conn.pipeline():
                    cursor = await conn.execute(CREATE, params, prepare=True)
                    return await cursor.fetchone()
            cursor = await conn.execute(CREATE, params, prepare=True)
            return await cursor.fetchone()

    calls: dict[str, dict[str, Call]] = {
        "loop": {
            "note": lambda n: store.read_note_async(*notes[n % len(notes)]),
            "token": lambda n: store.identity_for_token_async(unknown(n)),
            "write": lambda n: store.create_note_async("writer", "t", key(n)),
        },
        "loop-single": {
            "note": lambda n: loop_pool.fetch(
                READ_NOTE_PREPARED, notes[n % len(notes)], first_bytes
            ),
            "token": lambda n: loop_pool.fetch(
                TOKEN_IDENTITY_PREPARED, (hash_token(unknown(n)),), text_pair
            ),
        },
        "psycopg_pool": {
            "note": note_read(False),
            "token": token_read(False),
            "write": lambda n: create_pooled(n, False),
        },
        "psycopg_pool+pipeline": {
            "note": note_read(True),
            "token": token_read(True),
            "write": lambda n: create_pooled(n, True),
        },
    }

    async def close() -> None:
        await pool.close()
        store.close()

    return calls, close


async def bench(url: str, rounds: int, count: int) -> dict[tuple[str, str, int], list[Any]]:
    store = PostgresStore(url)
    notes = [
        (owner, store.add_note(owner, f"note {n} of {owner}").note_id)
        for owner in (f"u{i}" for i in range(OWNERS))
        for n in range(NOTES_PER_OWNER)
    ]
    store.close()
    calls, close = await variants(url, notes)
    results: dict[tuple[str, str, int], list[Any]] = {}
    try:
        for by_read in calls.values():  # warm: every statement prepared everywhere
            for call in by_read.values():
                await run(call, 200, 16)
        for round_ in range(rounds):
            order = list(calls) if round_ % 2 == 0 else list(reversed(calls))
            for read in ("note", "token", "write"):
                for concurrency in (16, 64):
                    for name in order:
                        if read not in calls[name]:
                            continue  # "loop-single": the writes are the loop's own already
                        times = count if read != "write" else count // 4
                        figures = await run(calls[name][read], times, concurrency)
                        results.setdefault((read, name, concurrency), []).append(figures)
            print(f"round {round_ + 1}/{rounds} done, load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        await close()
    return results


def report(results: dict[tuple[str, str, int], list[Any]]) -> None:
    print(
        f"\n{'read':6} {'variant':22} {'conc':>4} {'calls/s':>9} {'x loop':>7}"
        f" {'cpu µs/call':>12} {'x loop':>7}"
    )
    for (read, name, concurrency), figures in results.items():
        rate = statistics.median(f[0] for f in figures)
        cpu = statistics.median(f[1] for f in figures)
        base = results[(read, "loop", concurrency)]
        base_rate = statistics.median(f[0] for f in base)
        base_cpu = statistics.median(f[1] for f in base)
        print(
            f"{read:6} {name:22} {concurrency:>4} {rate:>9.0f} {rate / base_rate:>7.2f}"
            f" {cpu:>12.1f} {cpu / base_cpu:>7.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=4000)
    args = parser.parse_args()
    if importlib.util.find_spec("uvloop") is not None:  # as `strictcall serve` runs
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    loop_kind = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    print(
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start, {loop_kind},"
        f" {args.rounds} rounds of {args.calls} calls per figure, medians"
    )
    with pg.fresh_database() as url:
        results = asyncio.run(bench(url, args.rounds, args.calls))
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    report(results)


if __name__ == "__main__":
    main()
