"""The Store contract, on every store: notes scoped to owners, tokens as hashes, audit,
idempotency per (identity, call id), and the database's own faults as StoreUnavailable."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from strictcall.storage import (
    AuditRecord,
    IdempotencyConflict,
    IdempotencyKey,
    SchemaTooNew,
    Store,
    StoreBusy,
    StoreUnavailable,
    hash_token,
    open_store,
)
from strictcall.storage.sqlite import SQLiteStore


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    db = str(tmp_path / "s.sqlite3")
    if request.param == "postgres":
        db = request.getfixturevalue("pg_url")
    opened = open_store(db)
    yield opened
    opened.close()


def raw_rows(store: Store, sql: str) -> list[tuple[object, ...]]:
    """Rows as the database holds them, read around the store."""
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    from strictcall.storage.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    with store.connection() as pg:
        return pg.execute(sql).fetchall()


def test_a_url_opens_postgresql_and_a_path_opens_sqlite(store: Store) -> None:
    kind = type(store).__name__
    assert kind in ("SQLiteStore", "PostgresStore")
    assert store.healthy() is True


def test_notes_are_scoped_to_their_owner(store: Store) -> None:
    mine = store.add_note("u1", "mine")
    assert store.read_note("u1", mine.note_id) == mine
    assert store.read_note("u2", mine.note_id) is None
    assert store.read_note("u1", "n-missing") is None
    assert store.list_notes("u2") == []
    assert store.count_notes("u2") == 0
    key = IdempotencyKey('"d1"', "fp")
    assert store.delete_note("u2", mine.note_id, key) is False
    assert store.read_note("u1", mine.note_id) == mine


def test_list_is_oldest_first_and_empty_text_is_kept(store: Store) -> None:
    notes = [store.add_note("u1", text) for text in ("", "b", "")]
    assert store.list_notes("u1") == notes
    assert store.count_notes("u1") == 3


def test_any_json_string_is_kept_exactly_including_nul(store: Store) -> None:
    texts = ["a\x00b", "第二条 🎉", "\\u0000", " "]
    for key, text in enumerate(texts):
        note = store.create_note("u1", text, IdempotencyKey(f'"k{key}"', f"fp{key}"))
        assert store.read_note("u1", note.note_id) == note
    assert [n.text for n in store.list_notes("u1")] == texts
    assert store.read_note("u1", "n\x00") is None
    assert store.delete_note("u1", "n\x00", IdempotencyKey('"z"', "fp")) is False


def test_note_ids_are_random_and_unique(store: Store) -> None:
    ids = {store.add_note("u1", "x").note_id for _ in range(50)}
    assert len(ids) == 50
    assert all(i.startswith("n") and len(i) == 17 for i in ids)


def test_create_is_once_per_call_id(store: Store) -> None:
    key = IdempotencyKey('"c1"', "fp-a")
    first = store.create_note("u1", "t", key)
    assert store.create_note("u1", "t", key) == first
    assert store.count_notes("u1") == 1
    with pytest.raises(IdempotencyConflict):
        store.create_note("u1", "other", IdempotencyKey('"c1"', "fp-b"))
    assert store.count_notes("u1") == 1
    # the same call id is another owner's own
    assert store.create_note("u2", "t", key) != first


def test_delete_is_once_per_call_id(store: Store) -> None:
    note = store.add_note("u1", "t")
    key = IdempotencyKey('"d1"', "fp")
    assert store.delete_note("u1", note.note_id, key) is True
    assert store.delete_note("u1", note.note_id, key) is True
    assert store.delete_note("u1", note.note_id, IdempotencyKey('"d2"', "fp")) is False
    with pytest.raises(IdempotencyConflict):
        store.delete_note("u1", note.note_id, IdempotencyKey('"d1"', "other"))


def test_a_delete_of_nothing_records_nothing(store: Store) -> None:
    key = IdempotencyKey('"d1"', "fp")
    assert store.delete_note("u1", "n-none", key) is False
    assert raw_rows(store, "SELECT call_id FROM idempotency") == []
    # so the same key may still be used, for the same call, once the note exists
    assert store.create_note("u1", "t", IdempotencyKey('"c1"', "fp")).text == "t"


def test_a_write_that_must_not_wait_writes_nothing_when_refused(store: Store) -> None:
    key = IdempotencyKey('"k"', "fp")
    try:
        note = store.create_note("u1", "t", key, wait=False)
    except StoreBusy:  # PostgreSQL never writes on an event loop's thread
        assert store.count_notes("u1") == 0
        note = store.create_note("u1", "t", key)
    assert store.list_notes("u1") == [note]


def test_tokens_are_kept_only_as_hashes(store: Store) -> None:
    token = store.create_token("u1")
    assert store.identity_for_token(token) == "u1"
    assert store.identity_for_token(token + "x") is None
    assert store.identity_for_token("") is None
    assert raw_rows(store, "SELECT hash, identity FROM tokens") == [(hash_token(token), "u1")]


def test_audit_records_and_counts(store: Store) -> None:
    store.record_call(AuditRecord(1.0, "c1", "u1", "read_note", "ok", None, None, 12))
    store.record_call(AuditRecord(2.0, "c2", "u1", None, "error", "invalid_json", "parse", 3))
    assert [r.call_id for r in store.recent_calls(10)] == ["c2", "c1"]
    assert sorted(store.call_counts(), key=str) == sorted(
        [("ok", None, None, 1), ("error", "parse", "invalid_json", 1)], key=str
    )


def test_a_batch_of_audit_records_keeps_every_field_and_type(store: Store) -> None:
    batch = [
        AuditRecord(1.5, "007", "u1", "read_note", "ok", None, None, 0),
        AuditRecord(2.0, "1e5", "用户", None, "error", "invalid_json", "parse", 2**40),
        AuditRecord(3.25, None, None, None, "error", "unauthenticated", "auth", 7),
        AuditRecord(4.0, "null", 'u"2\\', "create_note", "ok", None, None, 12),
    ]
    store.record_calls(batch)
    assert store.recent_calls(10) == batch[::-1]
    assert [type(r.at) for r in store.recent_calls(10)] == [float] * 4
    assert [type(r.latency_us) for r in store.recent_calls(10)] == [int] * 4


def test_an_audit_record_with_a_nul_in_its_call_id_is_written(store: Store) -> None:
    store.record_calls([AuditRecord(1.0, '"a\x00"', "u1", "read_note", "ok", None, None, 1)])
    [written] = store.recent_calls(1)
    # SQLite's text ends at the NUL; PostgreSQL's holds none, so it keeps the JSON escape
    assert written.call_id in ('"a', '"a\\u0000"')
    assert written[2:] == ("u1", "read_note", "ok", None, None, 1, None, None)


def test_an_empty_batch_of_audit_records_writes_nothing(store: Store) -> None:
    store.record_calls([])
    assert store.recent_calls(10) == []


def test_a_database_from_a_newer_strictcall_is_refused_untouched(store: Store) -> None:
    note = store.add_note("u1", "kept")
    db = str(store.path) if isinstance(store, SQLiteStore) else None
    if db is None:
        from strictcall.storage.postgres import PostgresStore

        assert isinstance(store, PostgresStore)
        with store.connection() as conn:
            conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        db = store._url
    else:
        conn3 = sqlite3.connect(db)
        conn3.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        conn3.commit()
        conn3.close()
    with pytest.raises(SchemaTooNew) as refused:
        open_store(db)
    assert refused.value.found == 99
    assert isinstance(refused.value, StoreUnavailable)  # callers that catch it still do
    assert store.read_note("u1", note.note_id) == note
