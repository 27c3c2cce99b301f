"""Audit retention: rows older than the retention removed in bounded batches, newer kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from strictcall.audit.log import PRUNE_BATCH, AuditLog, prune
from strictcall.storage import AuditRecord
from strictcall.storage.postgres import PostgresStore
from strictcall.storage.sqlite import SQLiteStore

NOW = 1_000_000.0
RETENTION_S = 3600.0


def _rows(n: int, at: float) -> list[AuditRecord]:
    return [
        AuditRecord(at, f"c{at}-{i}", "u", "t", "ok", None, None, 1, None, None) for i in range(n)
    ]


def _check(store: SQLiteStore | PostgresStore) -> None:
    old = _rows(PRUNE_BATCH + 1, NOW - RETENTION_S - 1)  # past the edge by a second
    edge = _rows(2, NOW - RETENTION_S)  # exactly at the retention: kept
    store.record_calls(old + edge)
    assert prune(store, RETENTION_S, now=NOW) == PRUNE_BATCH + 1
    assert store.audit_size() == len(edge)
    assert prune(store, RETENTION_S, now=NOW) == 0


def test_sqlite_removes_rows_past_the_retention_in_batches(tmp_path: Path) -> None:
    _check(SQLiteStore(tmp_path / "audit.sqlite3"))


def test_postgres_removes_rows_past_the_retention_in_batches(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        _check(store)
    finally:
        store.close()


def test_a_retention_that_is_not_positive_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        AuditLog(SQLiteStore(tmp_path / "a.sqlite3"), retention_s=0)
