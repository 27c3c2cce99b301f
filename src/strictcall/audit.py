"""The server's audit log: one record per call, kept in memory and written in batches.

A commit per call would cost more than the call itself (~25 µs against ~4 µs for a read), so the
HTTP server appends records here and a background task writes them every `FLUSH_INTERVAL_S`, or
as soon as `MAX_BATCH` are waiting, in one transaction; the rest are written when the server
stops. What a kill -9 can lose is the last interval's audit records, never a note: writes to notes
commit before their answer is sent. While the store cannot take records they are kept (at most
`MAX_KEPT`, the oldest dropped first, and the loss logged) and written once it recovers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Final

from strictcall.store import AuditRecord, Store, StoreUnavailable

FLUSH_INTERVAL_S: Final = 0.05
MAX_BATCH: Final = 1024
MAX_KEPT: Final = 100_000

log = logging.getLogger("strictcall")


class AuditLog:
    """Audit records waiting to be written to a store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._pending: list[AuditRecord] = []

    @property
    def pending(self) -> int:
        """How many records wait to be written."""
        return len(self._pending)

    def record(self, entry: AuditRecord) -> None:
        """Keep one call's record; write the batch now if it is full."""
        self._pending.append(entry)
        if len(self._pending) >= MAX_BATCH:
            self.flush()

    def flush(self) -> None:
        """Write every waiting record; keep them if the store cannot take them now."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        try:
            self._store.record_calls(batch)
        except StoreUnavailable:
            kept = batch + self._pending
            if len(kept) > MAX_KEPT:
                log.warning(
                    "audit: %d records lost while the store is unavailable", len(kept) - MAX_KEPT
                )
                kept = kept[-MAX_KEPT:]
            self._pending = kept

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Write records in the background while the server runs, and the rest at its end."""
        task = asyncio.get_running_loop().create_task(self._flush_every_interval())
        try:
            yield
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
            self.flush()

    async def _flush_every_interval(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL_S)
            self.flush()
