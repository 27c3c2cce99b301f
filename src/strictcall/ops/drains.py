"""Audit records kept for a later count: what the metrics and the page's counts share. A wire
hands each record to an appender (one list append); a drain takes the list's records in place
(appends made meanwhile stay), every `DRAIN_EVERY_S` while the server runs, every
`BUSY_DRAIN_EVERY_S` after a drain of `BUSY_DRAIN` records or more (many small drains stall the
loop less than one large one), and at `MAX_PENDING` records should no lifespan drain them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Final

from strictcall.core.record import AuditRecord

DRAIN_EVERY_S: Final = 1.0
BUSY_DRAIN_EVERY_S: Final = 0.05
BUSY_DRAIN: Final = 500
"""After a drain of this many records or more, the next comes after `BUSY_DRAIN_EVERY_S`: a
second's records at 20,000 calls/s took the loop ~15 ms in one go (every request waiting
then), a twentieth of them under a millisecond, for the same work in all."""
MAX_PENDING: Final = 50_000
"""Records kept uncounted at most (a server without its lifespan, never scraped or read)."""


def drain_interval_after(drained: int) -> float:
    """How long the next drain waits after one of `drained` records: less under load."""
    return BUSY_DRAIN_EVERY_S if drained >= BUSY_DRAIN else DRAIN_EVERY_S


def appender(pending: list[AuditRecord], drain: Callable[[], int]) -> Callable[[AuditRecord], None]:
    """What a wire calls with each record: an append to `pending`, and `drain` at
    `MAX_PENDING` records."""
    append = pending.append

    def observe(entry: AuditRecord) -> None:
        append(entry)
        if len(pending) >= MAX_PENDING:
            drain()

    return observe


def taken(pending: list[AuditRecord]) -> list[AuditRecord]:
    """The records in `pending`, removed from it in place (appends made meanwhile stay)."""
    batch = pending[:]
    del pending[: len(batch)]
    return batch


@asynccontextmanager
async def draining(drain: Callable[[], int]) -> AsyncIterator[None]:
    """Call `drain` every `DRAIN_EVERY_S` (`BUSY_DRAIN_EVERY_S` while busy) while the server
    runs, and once more when it stops."""

    async def drain_every_interval() -> None:
        interval = DRAIN_EVERY_S
        while True:
            await asyncio.sleep(interval)
            interval = drain_interval_after(drain())

    task = asyncio.get_running_loop().create_task(drain_every_interval())
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        drain()
