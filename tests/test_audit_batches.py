"""The audit log's batches: written more often under load, every record once."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

import pytest

from strictcall.audit.log import (
    BUSY_BATCH,
    BUSY_FLUSH_INTERVAL_S,
    FLUSH_INTERVAL_S,
    AuditLog,
    interval_after,
)
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import BUSY_TIMEOUT_MS, SQLiteStore

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


def locked(path: Path) -> sqlite3.Connection:
    """Another connection holding the database's write lock until it is closed: the audit's
    batches wait on it (up to the store's busy timeout), then fail."""
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_the_waiting_count_holds_the_batch_being_written(tmp_path: Path) -> None:
    path = tmp_path / "audit.sqlite3"
    store = SQLiteStore(path)
    audit = AuditLog(store)
    seen: list[int] = []

    async def scenario() -> None:
        async with audit.running():
            holder = locked(path)
            try:
                for n in range(4):
                    audit.record(AuditRecord.of_call(f"c{n}", "u1", "read_note", None, 1))
                # the writer takes them, waits on the lock, fails, keeps them, tries again:
                # whenever the page or /metrics reads, 4 wait
                until = time.monotonic() + 3 * BUSY_TIMEOUT_MS / 1000
                while time.monotonic() < until:
                    seen.append(audit.pending)
                    await asyncio.sleep(0.005)
            finally:
                holder.close()
            deadline = time.monotonic() + DEADLINE_S
            while audit.pending and time.monotonic() < deadline:
                await asyncio.sleep(BUSY_FLUSH_INTERVAL_S)

    try:
        asyncio.run(scenario())
        written = store.recent_calls(10)
    finally:
        store.close()
    assert seen and set(seen) == {4}
    assert audit.pending == 0 and len(written) == 4


def test_a_stop_while_the_store_cannot_take_records_says_how_many_are_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.sqlite3"
    store = SQLiteStore(path)
    audit = AuditLog(store)
    holder = locked(path)

    async def scenario() -> None:
        async with audit.running():
            for n in range(3):
                audit.record(AuditRecord.of_call(f"c{n}", "u1", "read_note", None, 1))

    try:
        with caplog.at_level(logging.WARNING, logger="strictcall"):
            asyncio.run(scenario())
    finally:
        holder.close()
        store.close()
    assert (audit.pending, audit.lost_total) == (0, 3)
    lines = [r for r in caplog.records if r.name == "strictcall" and r.args]
    assert [r.args[0] for r in lines if isinstance(r.args, tuple)] == [3]
