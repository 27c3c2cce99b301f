"""The server's audit log: one record per call, kept in memory and written in batches.

A commit per call would cost more than the call itself (~25 µs against ~4 µs for a read), so the
HTTP server appends records here and a background task writes them every `FLUSH_INTERVAL_S`, in
one transaction, on a worker thread; the rest are written when the server stops. Under load
(`BUSY_BATCH` records or more in the last batch) it writes every `BUSY_FLUSH_INTERVAL_S`
instead: a row costs the same in a batch of 200 as of 1,400 (~2.6 µs on SQLite), and the
smaller batch's burst (~0.6 ms against ~4 ms) is what the server's loop waits for when the
writer takes its core on a 2-core machine. What a kill -9
can lose is the last interval's audit records, never a note: writes to notes commit before their
answer is sent. While the store cannot take records they are kept (at most
`MAX_KEPT`, the oldest dropped first) and written once it recovers; a loss is logged once when
it begins and once, with its count, when the store takes records again; those still waiting
when the server stops with the store down are lost, said in one line with their count (and
counted in `lost_total`). `pending` counts the batch being written too, so the page and /metrics
read the same figure whenever they read it. `on_fault` is told once
per outage of the writes (not once per retry), `on_written` after each batch the store took.

With `retention_s` set (`--audit-retention`), the writer removes rows older than it, and with
`max_rows` (`--audit-max-rows`) the oldest rows beyond the newest `max_rows`, at start and then
every `PRUNE_EVERY_S`, `PRUNE_BATCH` rows per short statement on a worker thread, yielding
between statements, so a large backlog never holds the store's lock or the loop for long.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from strictcall.storage import AuditRecord, AuditStore, AwaitedNotes, StoreUnavailable

FLUSH_INTERVAL_S: Final = 0.05
BUSY_FLUSH_INTERVAL_S: Final = 0.01
BUSY_BATCH: Final = 100
MAX_KEPT: Final = 100_000
PRUNE_EVERY_S: Final = 60.0
PRUNE_BATCH: Final = 5_000
DEFAULT_RETENTION_S: Final = 30 * 86_400.0
"""How long the servers keep audit rows unless told otherwise: a month covers the usual look
back after an incident (and a monthly review), while a flood of refused requests (~1.8 GB an
hour measured) can no longer grow the table without end."""

log = logging.getLogger("strictcall")


@runtime_checkable
class PrunesAudit(Protocol):
    """A store that can remove old audit rows in bounded batches (SQLite, PostgreSQL)."""

    def prune_audit(self, before: float, limit: int) -> int: ...

    def prune_audit_over(self, keep: int, limit: int) -> int: ...


@dataclass(frozen=True, slots=True)
class AuditRetention:
    """How much of the audit log a server keeps: rows at most `age_s` seconds old and at most
    the `max_rows` newest (None: no bound of that kind)."""

    age_s: float | None = DEFAULT_RETENTION_S
    max_rows: int | None = None

    def __post_init__(self) -> None:
        if self.age_s is not None and not self.age_s > 0:
            raise ValueError("audit retention must be positive")
        if self.max_rows is not None and self.max_rows < 1:
            raise ValueError("the audit's row cap is at least 1")


KEEP_ALL: Final = AuditRetention(None)
"""Every audit row kept: what a server built without a retention does."""


def prune(store: PrunesAudit, retention_s: float, *, now: float | None = None) -> int:
    """Remove every audit row older than `retention_s`, `PRUNE_BATCH` at a time (in this
    thread); how many went."""
    before = (time.time() if now is None else now) - retention_s
    return _removed_in_batches(lambda n: store.prune_audit(before, n))


def _removed_in_batches(remove: Callable[[int], int]) -> int:
    """Call `remove(PRUNE_BATCH)` until a batch comes back short (each a short statement of
    its own); the rows removed."""
    removed = 0
    while True:
        n = remove(PRUNE_BATCH)
        removed += n
        if n < PRUNE_BATCH:
            return removed


def interval_after(batch: int) -> float:
    """How long the writer waits after taking a batch of `batch` records: less under load."""
    return BUSY_FLUSH_INTERVAL_S if batch >= BUSY_BATCH else FLUSH_INTERVAL_S


class AuditLog:
    """Audit records waiting to be written to a store."""

    def __init__(
        self,
        store: AuditStore,
        *,
        on_fault: Callable[[StoreUnavailable], None] | None = None,
        on_written: Callable[[], None] | None = None,
        retention: AuditRetention | None = None,
    ) -> None:
        """`on_fault`: told when the store begins refusing batches, with the store's fault
        (once, until it takes one again: a metric counts outages, not retries); `on_written`:
        told after each batch the store took; `retention`: the rows kept while running, the
        rest removed (None: `KEEP_ALL`)."""
        kept = KEEP_ALL if retention is None else retention
        self._store = store
        self._retention_s = kept.age_s
        self._max_rows = kept.max_rows
        self._pruned_at = 0.0
        self._pending: list[AuditRecord] = []
        self._writing = 0
        """Records taken for the batch being written now (still waiting: it may fail)."""
        self._lost = 0
        self._lost_total = 0
        self._failing = False
        self._on_fault = on_fault
        self._on_written = on_written

    @property
    def pending(self) -> int:
        """How many records wait to be written, the batch being written now among them (the
        page and /metrics read the same count, whenever they read it)."""
        return len(self._pending) + self._writing

    @property
    def lost(self) -> int:
        """How many records were dropped since the store last took a batch."""
        return self._lost

    @property
    def lost_total(self) -> int:
        """How many records were dropped since the log was made."""
        return self._lost_total

    def record(self, entry: AuditRecord) -> None:
        """Keep one call's record until the next write."""
        self._pending.append(entry)
        if len(self._pending) > MAX_KEPT:
            if not self._lost:  # once, not once per record: an outage must not flood the log
                log.warning("audit: the store cannot take records; dropping the oldest")
            self._lost += len(self._pending) - MAX_KEPT
            self._lost_total += len(self._pending) - MAX_KEPT
            del self._pending[: len(self._pending) - MAX_KEPT]

    def flush(self) -> None:
        """Write every waiting record now, in this thread; keep them if the store cannot."""
        self._keep(self._write(self._take()))

    def _take(self) -> list[AuditRecord]:
        batch, self._pending = self._pending, []
        self._writing = len(batch)
        return batch

    def _write(self, batch: list[AuditRecord]) -> list[AuditRecord]:
        """Write `batch`; what could not be written."""
        if not batch:
            return []
        try:
            self._store.record_calls(batch)
        except StoreUnavailable as exc:
            self._faulted(exc)
            return batch
        self._written()
        return []

    def _faulted(self, exc: StoreUnavailable) -> None:
        if not self._failing:
            self._failing = True
            if self._on_fault is not None:
                self._on_fault(exc)

    def _written(self) -> None:
        self._failing = False
        if self._on_written is not None:
            self._on_written()

    def _keep(self, unwritten: list[AuditRecord]) -> None:
        self._writing = 0
        if unwritten:
            self._pending[:0] = unwritten
        elif self._lost:
            log.warning("audit: %d records lost while the store could not take them", self._lost)
            self._lost = 0

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Write records in the background while the server runs, and the rest at its end (a
        batch being written then is finished first, so that none is lost or written twice)."""
        stop = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._flush_every_interval(stop))
        try:
            yield
        finally:
            stop.set()
            await task
            self.flush()
            self._drop_at_stop()

    def _drop_at_stop(self) -> None:
        """The records the store could not take by the end: lost, said in one line (and
        counted in `lost_total`)."""
        left = len(self._pending)
        if not left:
            return
        self._pending = []
        self._lost += left
        self._lost_total += left
        log.warning(
            "audit: %d %s lost at stop: the store could not take them",
            left,
            "record" if left == 1 else "records",
        )

    async def _flush_every_interval(self, stop: asyncio.Event) -> None:
        """Take the waiting records on the loop, write them on a worker thread: a write that
        waits on a database lock must not stall the loop. A store whose writes can be awaited
        (PostgreSQL) is awaited on the loop instead, without a thread."""
        awaited = self._store if isinstance(self._store, AwaitedNotes) else None
        interval = FLUSH_INTERVAL_S
        while not stop.is_set():
            with suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await stop.wait()
            await self._prune_when_due()
            batch = self._take()
            interval = interval_after(len(batch))
            if not batch:
                continue
            if awaited is None:
                self._keep(await asyncio.to_thread(self._write, batch))
                continue
            try:
                await awaited.record_calls_async(batch)
            except StoreUnavailable as exc:
                self._faulted(exc)
                self._keep(batch)
            else:
                self._written()
                self._keep([])

    async def _prune_when_due(self) -> None:
        """At start and every `PRUNE_EVERY_S`, remove rows past the retention and beyond the
        row cap, one bounded batch per worker thread hop (the loop serves calls between them);
        a store fault waits for the next turn."""
        store = self._store
        if (self._retention_s is None and self._max_rows is None) or not isinstance(
            store, PrunesAudit
        ):
            return
        now = time.monotonic()
        if self._pruned_at and now - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = now
        try:
            if self._retention_s is not None:
                before = time.time() - self._retention_s
                removed = await _in_batches(lambda n: store.prune_audit(before, n))
                if removed:
                    log.info("audit: removed %d records older than the retention", removed)
            if self._max_rows is not None:
                keep = self._max_rows
                removed = await _in_batches(lambda n: store.prune_audit_over(keep, n))
                if removed:
                    log.info("audit: removed %d records beyond the row cap", removed)
        except StoreUnavailable:
            return


async def _in_batches(remove: Callable[[int], int]) -> int:
    """`_removed_in_batches` on a worker thread, off the loop."""
    return await asyncio.to_thread(_removed_in_batches, remove)
