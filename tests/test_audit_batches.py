"""The audit log's batches: written more often under load, every record once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from strictcall.audit.log import (
    BUSY_BATCH,
    BUSY_FLUSH_INTERVAL_S,
    FLUSH_INTERVAL_S,
    AuditLog,
    interval_after,
)
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import SQLiteStore

DEADLINE_S = 30.0


def test_the_writer_waits_less_after_a_busy_batch() -> None:
    assert BUSY_FLUSH_INTERVAL_S < FLUSH_INTERVAL_S
    assert interval_after(0) == FLUSH_INTERVAL_S
    assert interval_after(BUSY_BATCH - 1) == FLUSH_INTERVAL_S
    assert interval_after(BUSY_BATCH) == BUSY_FLUSH_INTERVAL_S
    assert interval_after(10 * BUSY_BATCH) == BUSY_FLUSH_INTERVAL_S


def test_records_kept_while_running_are_written_once_in_busy_and_quiet_batches(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "audit.sqlite3")
    audit = AuditLog(store)
    bursts = [3 * BUSY_BATCH, 1, 2 * BUSY_BATCH, 5]

    async def scenario() -> None:
        async with audit.running():
            sent = 0
            for burst in bursts:
                for _ in range(burst):
                    audit.record(AuditRecord.of_call(f"c{sent}", "u1", "read_note", None, 1))
                    sent += 1
                deadline = time.monotonic() + DEADLINE_S
                while audit.pending and time.monotonic() < deadline:
                    await asyncio.sleep(BUSY_FLUSH_INTERVAL_S)
                assert audit.pending == 0

    try:
        asyncio.run(scenario())
        calls = store.recent_calls(10 * sum(bursts))
    finally:
        store.close()
    assert sorted(record.call_id for record in calls if record.call_id is not None) == sorted(
        f"c{n}" for n in range(sum(bursts))
    )
