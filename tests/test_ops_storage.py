"""The store's side of the operator's view, on a real SQLite file and a real PostgreSQL database
each: reason and pointer kept, the calls counted per minute, refusals newest first, the audit
followed by cursor, operator tokens apart from agents' tokens, and an older schema migrated with
its audit counted (SQLite's version 2, PostgreSQL's version 1)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from strictcall.errors import INVALID_ARGUMENTS, UNKNOWN_TOOL, Reason, Stage
from strictcall.storage import AuditRecord, FailureRow, StatRow, Store, open_store
from strictcall.storage.sqlite import SCHEMA_VERSION, SQLiteStore

SHAPE = str(Stage.SHAPE)
ROUTE = str(Stage.ROUTE)
BAD_ARGS = INVALID_ARGUMENTS.code
NO_TOOL = UNKNOWN_TOOL.code
TYPE = str(Reason.TYPE)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    db = str(tmp_path / "s.sqlite3")
    if request.param == "postgres":
        db = request.getfixturevalue("pg_url")
    opened = open_store(db)
    yield opened
    opened.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "s.sqlite3")
    yield opened
    opened.close()


def token_hashes(store: Store) -> list[str]:
    """The tokens table's hashes, read around the store."""
    if isinstance(store, SQLiteStore):
        conn = sqlite3.connect(store.path)
        try:
            return [row[0] for row in conn.execute("SELECT hash FROM tokens")]
        finally:
            conn.close()
    from strictcall.storage.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    with store.connection() as pg:
        return [row[0] for row in pg.execute("SELECT hash FROM tokens").fetchall()]


def ok(at: float, tool: str = "read_note") -> AuditRecord:
    return AuditRecord(at, "c", "u1", tool, "ok", None, None, 10)


def bad(at: float, pointer: str | None = "/arguments/note_id") -> AuditRecord:
    return AuditRecord(at, "c", "u1", "read_note", "error", BAD_ARGS, SHAPE, 10, TYPE, pointer)


def test_an_audit_record_keeps_its_reason_and_pointer(store: Store) -> None:
    store.record_calls([bad(100.0), ok(101.0)])
    assert store.recent_calls(2) == [ok(101.0), bad(100.0)]


def test_calls_are_counted_per_minute_by_tool_outcome_stage_and_code(store: Store) -> None:
    store.record_calls([ok(120.0), ok(179.9), bad(150.0)])
    store.record_calls([ok(180.0), bad(130.0)])  # a later batch adds to the same minute
    assert sorted(store.call_stats(0.0)) == [
        StatRow(120, "read_note", "error", SHAPE, BAD_ARGS, 2),
        StatRow(120, "read_note", "ok", None, None, 2),
        StatRow(180, "read_note", "ok", None, None, 1),
    ]
    # a window starts at the minute holding its start
    assert [row.minute for row in store.call_stats(185.0)] == [180]
    assert store.call_stats(240.0) == []


def test_a_call_naming_no_tool_is_counted_under_none(store: Store) -> None:
    store.record_calls([AuditRecord(60.0, "c", "u1", None, "error", NO_TOOL, ROUTE, 0)])
    assert store.call_stats(0.0) == [StatRow(60, None, "error", ROUTE, NO_TOOL, 1)]
    assert store.top_failures(0.0, 5) == [FailureRow(None, NO_TOOL, None, None, 1)]


def test_top_failures_are_the_most_frequent_tool_code_reason_pointer_in_the_window(
    store: Store,
) -> None:
    store.record_calls([bad(60.0, "/arguments/note_id")] * 3 + [bad(70.0, "/arguments/*")] * 2)
    store.record_calls([bad(5.0, "/arguments/*")] * 9)  # before the window
    store.record_calls([ok(80.0)] * 10)  # successes are no failures
    assert store.top_failures(60.0, 5) == [
        FailureRow("read_note", BAD_ARGS, TYPE, "/arguments/note_id", 3),
        FailureRow("read_note", BAD_ARGS, TYPE, "/arguments/*", 2),
    ]
    assert len(store.top_failures(60.0, 1)) == 1
    assert store.top_failures(0.0, 1)[0].calls == 11


def test_recent_refusals_are_failures_only_newest_first(store: Store) -> None:
    store.record_calls([bad(1.0), ok(2.0), bad(3.0, None), ok(4.0)])
    assert store.recent_refusals(10) == [bad(3.0, None), bad(1.0)]
    assert store.recent_refusals(1) == [bad(3.0, None)]


def test_the_audit_is_followed_from_the_newest_call_on(store: Store) -> None:
    store.record_calls([ok(1.0), ok(2.0)])
    cursor, none_yet = store.calls_after(None, 100)
    assert none_yet == []
    assert store.calls_after(cursor, 100) == (cursor, [])
    store.record_calls([ok(3.0), bad(4.0), ok(5.0)])
    cursor, first = store.calls_after(cursor, 2)
    assert first == [ok(3.0), bad(4.0)]
    cursor, rest = store.calls_after(cursor, 2)
    assert rest == [ok(5.0)]
    assert store.calls_after(cursor, 2)[1] == []


def test_an_empty_audit_is_followed_from_its_start(store: Store) -> None:
    cursor, _ = store.calls_after(None, 10)
    store.record_calls([ok(1.0)])
    assert store.calls_after(cursor, 10)[1] == [ok(1.0)]


def test_an_operator_token_is_no_agent_token_and_an_agent_token_no_operator_token(
    store: Store,
) -> None:
    operator = store.create_operator_token("ops")
    agent = store.create_token("u1")
    assert store.operator_for_token(operator) == "ops"
    assert store.identity_for_token(operator) is None
    assert store.operator_for_token(agent) is None
    assert store.identity_for_token(agent) == "u1"
    assert store.operator_for_token("sc_unknown") is None
    hashes = token_hashes(store)
    assert len(hashes) == 2
    assert all(operator not in digest and agent not in digest for digest in hashes)


def test_a_version_2_file_is_migrated_and_its_audit_counted_per_minute(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite3"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.executescript(
        "DROP TABLE audit_minutes; DROP INDEX audit_refusals;"
        "ALTER TABLE audit DROP COLUMN reason; ALTER TABLE audit DROP COLUMN pointer;"
        "ALTER TABLE tokens DROP COLUMN role;"
        "INSERT INTO tokens VALUES ('h', 'u1', 0);"
        "INSERT INTO audit (at, call_id, identity, tool, outcome, code, stage, latency_us)"
        " VALUES (61.0, 'c', 'u1', 'read_note', 'ok', NULL, NULL, 5),"
        " (62.0, 'c', 'u1', 'read_note', 'error', 'invalid_arguments', 'shape', 5);"
        "UPDATE meta SET value = '2' WHERE key = 'schema_version';"
    )
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        assert sorted(store.call_stats(0.0)) == [
            StatRow(60, "read_note", "error", SHAPE, BAD_ARGS, 1),
            StatRow(60, "read_note", "ok", None, None, 1),
        ]
        assert store.recent_refusals(5)[0].reason is None
        token_row = sqlite3.connect(path).execute("SELECT role FROM tokens").fetchone()
        assert token_row == ("agent",)  # a token made before roles is an agent's
    finally:
        store.close()


def test_without_sqlites_json_functions_the_minutes_are_counted_too(
    sqlite_store: SQLiteStore,
) -> None:
    sqlite_store.json_rows = False
    sqlite_store.record_calls([ok(60.0), bad(61.0)])
    assert sum(row.calls for row in sqlite_store.call_stats(0.0)) == 2
    assert sqlite_store.recent_calls(2) == [bad(61.0), ok(60.0)]


def test_a_version_1_postgresql_database_is_migrated_and_its_audit_counted_per_minute(
    pg_url: str,
) -> None:
    from strictcall.storage import postgres

    first = postgres.PostgresStore(pg_url)
    with first.connection() as pg:
        pg.execute(
            "DROP TABLE audit_minutes; DROP INDEX audit_refusals;"
            "ALTER TABLE audit DROP COLUMN reason, DROP COLUMN pointer;"
            "ALTER TABLE tokens DROP COLUMN role;"
            "INSERT INTO tokens VALUES ('h', 'u1', 0);"
            "INSERT INTO audit (at, call_id, identity, tool, outcome, code, stage, latency_us)"
            " VALUES (61.0, 'c', 'u1', 'read_note', 'ok', NULL, NULL, 5),"
            " (62.0, 'c', 'u1', 'read_note', 'error', 'invalid_arguments', 'shape', 5);"
            "UPDATE meta SET value = '1' WHERE key = 'schema_version';"
        )
    first.close()
    store = postgres.PostgresStore(pg_url)
    try:
        assert store.schema_version() == postgres.SCHEMA_VERSION == 3
        assert sorted(store.call_stats(0.0)) == [
            StatRow(60, "read_note", "error", SHAPE, BAD_ARGS, 1),
            StatRow(60, "read_note", "ok", None, None, 1),
        ]
        assert store.recent_refusals(5)[0].reason is None
        with store.connection() as pg:
            token_row = pg.execute("SELECT role FROM tokens").fetchone()
        assert token_row == ("agent",)  # a token made before roles is an agent's
        store.record_calls([bad(63.0)])  # the new columns and counts take writes
        assert sum(row.calls for row in store.top_failures(0.0, 5)) == 2
    finally:
        store.close()


def test_a_batch_with_nul_in_its_pointer_is_written_and_counted(store: Store) -> None:
    store.record_calls([bad(60.0, "/arguments/a\x00b")])
    assert store.top_failures(0.0, 5)[0].calls == 1
    assert len(store.recent_refusals(5)) == 1
