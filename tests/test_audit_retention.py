"""Audit retention: rows older than the retention, or beyond the row cap, removed in bounded
batches, the rest kept; by the store and by a running `strictcall serve`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from servers import start_server, strictcall
from strictcall.audit.log import (
    DEFAULT_RETENTION_S,
    PRUNE_BATCH,
    AuditLog,
    AuditRetention,
    PrunesAudit,
    prune,
)
from strictcall.cli.arguments import EXIT_USAGE
from strictcall.storage import AuditRecord, open_store
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
        AuditLog(SQLiteStore(tmp_path / "a.sqlite3"), retention=AuditRetention(0))


def _check_cap(store: SQLiteStore | PostgresStore) -> None:
    rows = [
        AuditRecord(NOW + i, f"r{i}", "u", "t", "ok", None, None, 1, None, None)
        for i in range(PRUNE_BATCH + 3)
    ]
    store.record_calls(rows)
    assert store.prune_audit_over(len(rows), PRUNE_BATCH) == 0  # at the cap: nothing goes
    assert store.prune_audit_over(2, PRUNE_BATCH) == PRUNE_BATCH  # one bounded batch
    assert store.prune_audit_over(2, PRUNE_BATCH) == 1
    assert store.prune_audit_over(2, PRUNE_BATCH) == 0
    assert [r.call_id for r in store.recent_calls(10)] == [rows[-1].call_id, rows[-2].call_id]


def test_sqlite_keeps_the_newest_rows_of_its_cap_in_batches(tmp_path: Path) -> None:
    _check_cap(SQLiteStore(tmp_path / "audit.sqlite3"))


def test_postgres_keeps_the_newest_rows_of_its_cap_in_batches(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        _check_cap(store)
    finally:
        store.close()


def test_a_row_cap_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        AuditLog(SQLiteStore(tmp_path / "a.sqlite3"), retention=AuditRetention(None, 0))


# --- a running server ------------------------------------------------------------------------

DEADLINE_S = 30.0
MARGIN_S = 120.0
"""How far from the retention's edge the rows are: the server's clock runs on meanwhile."""


def _fresh(db: str, rows: list[AuditRecord]) -> None:
    """The audit log of `db` holding exactly `rows` (the module's servers share one store)."""
    store = open_store(db)
    assert isinstance(store, PrunesAudit)
    try:
        store.prune_audit(time.time() + 10 * DEFAULT_RETENTION_S, 10**9)
        store.record_calls(rows)
    finally:
        store.close()


def _kept_once(db: str, size: int) -> list[str]:
    """The call ids left once the audit log has shrunk to `size` rows or fewer (polled with a
    deadline), newest first."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        store = open_store(db)
        try:
            left = store.audit_size()
            ids = [str(r.call_id) for r in store.recent_calls(left + 1)]
        finally:
            store.close()
        if left <= size or time.monotonic() > deadline:
            return ids
        time.sleep(0.05)


def _row(call_id: str, at: float) -> AuditRecord:
    return AuditRecord(at, call_id, "u", "t", "ok", None, None, 1, None, None)


def test_a_running_server_removes_rows_past_its_retention_and_keeps_the_rest(
    service_db: str,
) -> None:
    now = time.time()
    _fresh(
        service_db,
        [
            _row("old-1", now - 3600 - MARGIN_S),
            _row("old-2", now - 3600 - MARGIN_S),
            _row("young", now - 3600 + MARGIN_S),
            _row("new", now),
        ],
    )
    server = start_server(service_db, "--audit-retention", "1h")
    try:
        assert _kept_once(service_db, 2) == ["new", "young"]
    finally:
        assert server.stop() == 0


def test_a_server_keeps_thirty_days_of_audit_rows_by_default(service_db: str) -> None:
    now = time.time()
    month = DEFAULT_RETENTION_S
    assert month == 30 * 86_400
    _fresh(service_db, [_row("old", now - month - MARGIN_S), _row("young", now - month + MARGIN_S)])
    server = start_server(service_db)
    try:
        assert _kept_once(service_db, 1) == ["young"]
    finally:
        assert server.stop() == 0


def test_a_running_server_keeps_exactly_its_row_cap(service_db: str) -> None:
    now = time.time()
    _fresh(service_db, [_row(f"r{i}", now - 86_400 * 400 + i) for i in range(10)])
    server = start_server(service_db, "--audit-retention", "none", "--audit-max-rows", "4")
    try:
        assert _kept_once(service_db, 4) == ["r9", "r8", "r7", "r6"]  # a year old: kept all
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("command", ["serve", "proxy", "federate"])
@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--audit-retention", "0"),
        ("--audit-retention", "0s"),
        ("--audit-retention", "-5m"),
        ("--audit-retention", "12x7"),
        ("--audit-retention", ""),
        ("--audit-max-rows", "0"),
        ("--audit-max-rows", "1.5"),
        ("--audit-max-rows", "ten7"),
    ],
)
def test_a_bad_audit_bound_is_refused_at_start(
    command: str, flag: str, value: str, tmp_path: Path
) -> None:
    done = strictcall(command, f"{flag}={value}", "--db", str(tmp_path / "n.sqlite3"))
    assert done.returncode == EXIT_USAGE
    assert done.stderr.splitlines()[-1].startswith(f"strictcall {command}: error: argument {flag}")
    if len(value) > 2:  # never echoed
        assert value not in done.stderr
    assert not (tmp_path / "n.sqlite3").exists()
