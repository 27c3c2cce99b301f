"""Storage by job: each store serves each job's protocol (notes, tokens, audit, operators,
health), token lookups and health probes have both forms on every store, and the SQL both
databases share, written once, gives the same rows on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from strictcall.errors import INVALID_ARGUMENTS, UNKNOWN_TOOL
from strictcall.storage import AuditRecord, Store, open_store
from strictcall.storage.base import AuditStore, Health, NotesStore, OpsStore, TokenStore
from strictcall.storage.sql import POSTGRES, SQLITE, Dialect, statements
from strictcall.storage.sqlite import SQLiteStore

if TYPE_CHECKING:
    from strictcall.storage.postgres import PostgresStore

JOBS = (NotesStore, TokenStore, AuditStore, OpsStore, Health, Store)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    db = str(tmp_path / "s.sqlite3")
    if request.param == "postgres":
        db = request.getfixturevalue("pg_url")
    opened = open_store(db)
    yield opened
    opened.close()


@pytest.fixture
def both(tmp_path: Path, pg_url: str) -> Iterator[tuple[Store, Store]]:
    """A SQLite store and a PostgreSQL store, both empty."""
    sqlite, postgres = open_store(str(tmp_path / "s.sqlite3")), open_store(pg_url)
    yield sqlite, postgres
    sqlite.close()
    postgres.close()


def as_jobs(
    store: SQLiteStore | PostgresStore,
) -> tuple[NotesStore, TokenStore, AuditStore, OpsStore, Health, Store]:
    """The store as each job sees it: mypy checks here that each store class is each protocol."""
    return (store, store, store, store, store, store)


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.__name__)
def test_each_store_serves_each_jobs_protocol(
    store: SQLiteStore | PostgresStore, job: type
) -> None:
    assert isinstance(store, job)
    assert isinstance(as_jobs(store)[JOBS.index(job)], job)


def test_a_protocol_a_store_lacks_is_seen_missing(tmp_path: Path) -> None:
    class NoAsyncLookup:
        tokens_inline = True

        def create_token(self, identity: str) -> str:
            return identity

        def identity_for_token(self, token: str) -> str | None:
            return None

    assert not isinstance(NoAsyncLookup(), TokenStore)


def test_tokens_are_inline_on_sqlite_and_awaited_on_postgresql(store: Store) -> None:
    assert store.tokens_inline is isinstance(store, SQLiteStore)


def test_both_forms_of_the_token_lookup_answer_alike(store: Store) -> None:
    agent = store.create_token("u1")
    operator = store.create_operator_token("ops")

    async def lookups() -> list[str | None]:
        return [await store.identity_for_token_async(t) for t in (agent, operator, "sc_unknown")]

    expected = [store.identity_for_token(t) for t in (agent, operator, "sc_unknown")]
    assert expected == ["u1", None, None]
    assert asyncio.run(lookups()) == expected


def test_both_forms_of_the_health_probe_answer_alike(store: Store) -> None:
    assert store.healthy() is True
    assert asyncio.run(store.healthy_async()) is True


def test_an_awaited_audit_batch_is_written_on_every_store(store: Store) -> None:
    record = AuditRecord(120.0, "c1", "u1", "read_note", "ok", None, None, 7)
    asyncio.run(store.record_calls_async([record]))
    assert store.recent_calls(5) == [record]
    assert store.audit_size() == 1


def test_the_shared_statements_differ_only_in_the_dialects_parameters() -> None:
    as_sqlite_without_hints = statements(Dialect("sqlite", "?", index_hints=False))
    for field in dataclasses.fields(POSTGRES):
        postgres = getattr(POSTGRES, field.name)
        assert postgres.replace("%s", "?") == getattr(as_sqlite_without_hints, field.name)
        assert getattr(SQLITE, field.name).replace(" INDEXED BY notes_by_owner_id", "").replace(
            " INDEXED BY audit_refusals", ""
        ) == getattr(as_sqlite_without_hints, field.name)
    assert "INDEXED BY" in SQLITE.read_note and "INDEXED BY" not in POSTGRES.read_note


def fill(store: Store) -> tuple[str, str]:
    """The same notes, tokens and calls written to `store`; its agent and operator tokens."""
    for text in ("first", "", "third \x00 with a NUL"):
        store.add_note("u1", text)
    store.add_note("u2", "theirs")
    shape, route = INVALID_ARGUMENTS, UNKNOWN_TOOL
    records = [
        AuditRecord(60.0 + n, f"c{n}", "u1", "read_note", "ok", None, None, 10 + n)
        for n in range(3)
    ] + [
        AuditRecord(
            61.0,
            "c3",
            "u1",
            "read_note",
            "error",
            shape.code,
            shape.stage.value,
            5,
            "type",
            "/note_id",
        ),
        AuditRecord(125.0, "c4", "u2", None, "error", route.code, route.stage.value, 3, None, None),
        AuditRecord(126.0, "c5", None, "list_notes", "ok", None, None, 4),
    ]
    store.record_calls(records[:4])
    store.record_calls(records[4:])
    return store.create_token("u1"), store.create_operator_token("ops")


def test_the_shared_sql_gives_the_same_rows_on_both_databases(both: tuple[Store, Store]) -> None:
    answers = []
    for store in both:
        agent, operator = fill(store)
        answers.append(
            {
                "notes": [note.text for note in store.list_notes("u1")],
                "count": store.count_notes("u1"),
                "agent": store.identity_for_token(agent),
                "operator": store.operator_for_token(operator),
                "agent as operator": store.operator_for_token(agent),
                "recent": store.recent_calls(10),
                "counts": sorted(store.call_counts(), key=repr),
                "stats": sorted(store.call_stats(0.0), key=repr),
                "stats since 120": sorted(store.call_stats(120.0), key=repr),
                "failures": store.top_failures(0.0, 10),
                "refusals": store.recent_refusals(10),
                "after 0": store.calls_after(0, 2),
                "after them": store.calls_after(2, 10),
                "from now": store.calls_after(None, 10),
                "size": store.audit_size(),
            }
        )
    sqlite, postgres = answers
    assert sqlite == postgres
    assert sqlite["notes"] == ["first", "", "third \x00 with a NUL"]
    assert sqlite["size"] == 6
    assert [r.call_id for r in both[0].recent_refusals(10)] == ["c4", "c3"]
