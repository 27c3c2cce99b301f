"""The SQLite store on real files: notes scoped to owners, tokens as hashes, audit, idempotency,
and faults answered as StoreUnavailable."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from strictcall.storage import (
    AuditRecord,
    IdempotencyKey,
    StoreBusy,
    StoreUnavailable,
    hash_token,
)
from strictcall.storage.sqlite import BUSY_TIMEOUT_MS, SCHEMA_VERSION, SQLiteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "s.sqlite3")
    yield opened
    opened.close()


def test_new_file_gets_the_versioned_schema_in_wal_mode(store: SQLiteStore) -> None:
    assert store.schema_version() == SCHEMA_VERSION
    conn = sqlite3.connect(store.path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_tokens_are_kept_only_as_hashes(store: SQLiteStore) -> None:
    token = store.create_token("u1")
    assert store.identity_for_token(token) == "u1"
    assert store.identity_for_token(token + "x") is None
    assert store.identity_for_token("") is None
    conn = sqlite3.connect(store.path)
    try:
        rows = conn.execute("SELECT hash, identity FROM tokens").fetchall()
    finally:
        conn.close()
    assert rows == [(hash_token(token), "u1")]
    assert token.encode() not in store.path.read_bytes()


def test_a_deleted_file_is_unavailable_until_it_is_back(tmp_path: Path) -> None:
    path = tmp_path / "gone.sqlite3"
    store = SQLiteStore(path)
    try:
        note = store.add_note("u1", "keep")
        backup = tmp_path / "backup.sqlite3"
        conn = sqlite3.connect(path)
        conn.execute(f"VACUUM INTO '{backup}'")
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{path}{suffix}").exists():
                os.remove(f"{path}{suffix}")
        with pytest.raises(StoreUnavailable):
            store.create_note("u1", "lost?", IdempotencyKey('"x"', "fp"))
        os.replace(backup, path)
        created = store.create_note("u1", "after", IdempotencyKey('"y"', "fp"))
        assert store.read_note("u1", created.note_id) == created
        assert store.read_note("u1", note.note_id) == note
    finally:
        store.close()


def test_a_read_only_file_answers_unavailable_for_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite3"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.close()
    store = SQLiteStore(path)
    try:
        store._conn.execute("PRAGMA query_only = ON")  # as a read-only mount refuses writes
        with pytest.raises(StoreUnavailable):
            store.add_note("u1", "x")
        assert store.count_notes("u1") == 0
        store._conn.execute("PRAGMA query_only = OFF")
        assert store.add_note("u1", "x").text == "x"
    finally:
        store.close()


def test_a_locked_database_answers_unavailable_then_recovers(tmp_path: Path) -> None:
    path = tmp_path / "locked.sqlite3"
    store = SQLiteStore(path)
    try:
        store._conn.execute("PRAGMA busy_timeout = 50")
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailable):
            store.add_note("u1", "x")
        locker.execute("ROLLBACK")
        locker.close()
        assert store.add_note("u1", "x").text == "x"
    finally:
        store.close()


def test_a_store_that_cannot_be_opened_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable):
        SQLiteStore(tmp_path / "missing-dir" / "db.sqlite3")


def test_a_version_1_file_is_migrated_and_keeps_its_notes(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    store = SQLiteStore(path)
    note = store.add_note("u1", "old")
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX notes_by_owner_id")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    reopened = SQLiteStore(path)
    try:
        assert reopened.schema_version() == SCHEMA_VERSION
        assert reopened.read_note("u1", note.note_id) == note
    finally:
        reopened.close()


def test_a_file_from_a_newer_strictcall_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreUnavailable):
        SQLiteStore(path)


def test_without_sqlites_json_functions_a_batch_is_written_row_by_row(
    store: SQLiteStore,
) -> None:
    assert store.json_rows is True  # this machine's SQLite has them
    store.json_rows = False  # as on a SQLite built without them
    batch = [
        AuditRecord(1.5, "007", "u1", "read_note", "ok", None, None, 0),
        AuditRecord(2.0, None, None, None, "error", "unauthenticated", "auth", 7),
    ]
    store.record_calls(batch)
    assert store.recent_calls(10) == batch[::-1]


def test_an_empty_batch_of_audit_records_writes_nothing(store: SQLiteStore) -> None:
    store.record_calls([])
    assert store.audit_size() == 0


# --- writes that must not wait (run inline on an event loop) ------------------------------------


def test_a_write_that_must_not_wait_is_refused_at_once_while_another_connection_writes(
    store: SQLiteStore,
) -> None:
    other = sqlite3.connect(store.path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the database's write lock, held elsewhere
        started = time.monotonic()
        with pytest.raises(StoreBusy):
            store.create_note("u1", "not now", IdempotencyKey("k1", "f"), wait=False)
        with pytest.raises(StoreBusy):
            store.delete_note("u1", "n-none", IdempotencyKey("k2", "f"), wait=False)
        assert time.monotonic() - started < BUSY_TIMEOUT_MS / 1000 / 2  # did not wait for it
        other.execute("ROLLBACK")
    finally:
        other.close()
    assert store.list_notes("u1") == []  # nothing written
    # the connection waits for the lock again as before, and writes
    assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
    note = store.create_note("u1", "now", IdempotencyKey("k1", "f"), wait=False)
    assert store.read_note("u1", note.note_id) == note


def test_a_write_that_must_not_wait_gives_up_soon_when_another_write_of_the_store_lasts(
    store: SQLiteStore,
) -> None:
    holding = threading.Event()
    release = threading.Event()

    def long_write() -> None:
        with store._writing():
            holding.set()
            release.wait(10)

    writer = threading.Thread(target=long_write)
    writer.start()
    try:
        assert holding.wait(10)
        started = time.monotonic()
        with pytest.raises(StoreBusy):
            store.create_note("u1", "not now", IdempotencyKey("k1", "f"), wait=False)
        assert time.monotonic() - started < BUSY_TIMEOUT_MS / 1000 / 2
    finally:
        release.set()
        writer.join(10)
    assert store.create_note("u1", "now", IdempotencyKey("k1", "f"), wait=False).text == "now"
