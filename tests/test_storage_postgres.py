"""The PostgreSQL store on a real server: schema versions under concurrent starts, idempotency
across servers, and the driver's faults (a killed session, a database refusing connections, a
statement timeout, a full pool) answered as StoreUnavailable, with recovery on its own."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import psycopg
import pytest

import pg
from servers import strictcall
from strictcall.errors import MissingExtra
from strictcall.storage import (
    AuditRecord,
    IdempotencyConflict,
    IdempotencyKey,
    Note,
    StoreUnavailable,
    open_store,
    shown_db,
)
from strictcall.storage.postgres import LOOP_CONNECTIONS, SCHEMA_VERSION, PostgresStore
from strictcall.storage.postgres.connections import LoopPool, PoolFull

T = TypeVar("T")
DEADLINE_S = 30.0


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_url)
    yield opened
    opened.close()


def eventually(action: Callable[[], T]) -> T:
    """`action`'s result once it stops raising StoreUnavailable (polled with a deadline)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return action()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_servers_starting_together_on_an_empty_database_migrate_it_once(pg_url: str) -> None:
    barrier = threading.Barrier(4)

    def start() -> PostgresStore:
        barrier.wait(10)
        return PostgresStore(pg_url)

    with ThreadPoolExecutor(4) as pool:
        stores = list(pool.map(lambda _: start(), range(4)))
    try:
        assert {s.schema_version() for s in stores} == {SCHEMA_VERSION}
        with stores[0].connection() as conn:
            assert conn.execute("SELECT count(*) FROM meta").fetchone() == (1,)
        note = stores[0].add_note("u1", "seen by all")
        assert all(s.read_note("u1", note.note_id) == note for s in stores)
    finally:
        for s in stores:
            s.close()


def test_the_same_call_sent_at_once_to_two_servers_is_applied_once(pg_url: str) -> None:
    first, second = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        for n in range(20):
            key = IdempotencyKey(f'"race-{n}"', "fp")
            barrier = threading.Barrier(2)

            def create(
                store: PostgresStore,
                key: IdempotencyKey = key,
                barrier: threading.Barrier = barrier,
            ) -> Note:
                barrier.wait(10)
                return store.create_note("u1", "once", key)

            with ThreadPoolExecutor(2) as pool:
                a, b = pool.map(create, (first, second))
            assert a == b
        assert first.count_notes("u1") == 20
    finally:
        first.close()
        second.close()


def test_a_call_id_reused_with_other_arguments_is_refused_by_any_server(pg_url: str) -> None:
    first, second = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        note = first.create_note("u1", "a", IdempotencyKey('"c"', "fp-a"))
        with pytest.raises(IdempotencyConflict):
            second.create_note("u1", "b", IdempotencyKey('"c"', "fp-b"))
        with pytest.raises(IdempotencyConflict):
            second.delete_note("u1", note.note_id, IdempotencyKey('"c"', "fp-c"))
        assert second.list_notes("u1") == [note]
    finally:
        first.close()
        second.close()


def test_a_delete_sent_at_once_to_two_servers_is_applied_once(pg_url: str) -> None:
    first, second = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        for n in range(10):
            note = first.add_note("u1", "doomed")
            key = IdempotencyKey(f'"del-{n}"', "fp")
            barrier = threading.Barrier(2)

            def delete(
                store: PostgresStore,
                key: IdempotencyKey = key,
                note: Note = note,
                barrier: threading.Barrier = barrier,
            ) -> bool:
                barrier.wait(10)
                return store.delete_note("u1", note.note_id, key)

            with ThreadPoolExecutor(2) as pool:
                assert list(pool.map(delete, (first, second))) == [True, True]
        assert first.count_notes("u1") == 0
    finally:
        first.close()
        second.close()


def test_killed_sessions_are_replaced_without_a_failed_call(store: PostgresStore) -> None:
    note = store.add_note("u1", "before")
    assert pg.terminate_backends(store._url) >= 1
    # the lost connection is found on use, the pool checked, and the call tried once more
    assert store.read_note("u1", note.note_id) == note
    assert pg.terminate_backends(store._url) >= 1
    created = store.create_note("u1", "after", IdempotencyKey('"k"', "fp"))
    assert store.list_notes("u1") == [note, created]


def test_a_database_refusing_connections_is_unavailable_then_recovers_by_itself(
    store: PostgresStore,
) -> None:
    note = store.add_note("u1", "kept")
    pg.allow_connections(store._url, False)
    try:
        pg.terminate_backends(store._url)
        with pytest.raises(StoreUnavailable):
            store.read_note("u1", note.note_id)
        with pytest.raises(StoreUnavailable):
            store.create_note("u1", "not now", IdempotencyKey('"k"', "fp"))
        assert store.healthy() is False
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):  # held: answered at once, no wait for the pool
            store.read_note("u1", note.note_id)
        assert time.monotonic() - started < 0.5
    finally:
        pg.allow_connections(store._url, True)
    assert eventually(lambda: store.read_note("u1", note.note_id)) == note
    assert store.healthy() is True
    created = eventually(lambda: store.create_note("u1", "now", IdempotencyKey('"k"', "fp")))
    assert store.list_notes("u1") == [note, created]


def test_a_statement_past_its_timeout_is_unavailable_and_the_session_goes_on(pg_url: str) -> None:
    store = PostgresStore(pg_url + "?options=-c%20statement_timeout%3D200")
    try:
        with psycopg.connect(pg_url) as holder:  # a transaction holding the key's row
            holder.execute("INSERT INTO idempotency VALUES ('u1', '\"k\"', 'fp', 'n-held', 0)")
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                store.create_note("u1", "t", IdempotencyKey('"k"', "fp"))
            assert time.monotonic() - started < 5
            holder.rollback()
        note = store.create_note("u1", "t", IdempotencyKey('"k"', "fp"))
        assert store.list_notes("u1") == [note]
    finally:
        store.close()


def test_a_full_pool_is_unavailable_at_once_and_serves_when_a_connection_is_back(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url, max_size=1, pool_wait_s=0.1)
    try:
        with store.connection():
            with pytest.raises(StoreUnavailable):
                store.create_note("u1", "t", IdempotencyKey('"k"', "fp"))
            with pytest.raises(StoreUnavailable):
                store.count_notes("u1")
        assert store.create_note("u1", "t", IdempotencyKey('"k"', "fp")).text == "t"
    finally:
        store.close()


def test_an_unreachable_server_is_unavailable_at_open() -> None:
    with pytest.raises(StoreUnavailable):
        open_store("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")


def test_without_the_driver_a_url_names_the_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from strictcall.storage import open_store\n"
        "try:\n    open_store('postgresql://x/y')\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc.extra)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.split() == [MissingExtra.__name__, "postgres"]


def test_a_urls_password_is_never_printed() -> None:
    assert shown_db("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert shown_db("postgresql://h/db?password=s3cret&x=1") == "postgresql://h/db?password=***&x=1"
    assert shown_db("postgresql://u@h/db") == "postgresql://u@h/db"
    assert shown_db("notes.sqlite3") == "notes.sqlite3"
    done = strictcall(
        "notes", "list", "--owner", "u1", "--db", "postgresql://u:s3cret@127.0.0.1:1/x"
    )
    assert done.returncode == 1
    assert "s3cret" not in done.stdout + done.stderr


def test_the_operators_commands_take_a_url(pg_url: str) -> None:
    token = strictcall("tokens", "create", "--identity", "u1", "--db", pg_url)
    assert token.returncode == 0, token.stderr
    added = strictcall("notes", "add", "--owner", "u1", "--text", "via url", "--db", pg_url)
    assert added.returncode == 0, added.stderr
    listed = strictcall("notes", "list", "--owner", "u1", "--db", pg_url)
    assert listed.stdout == f'{added.stdout.strip()}\t"via url"\n'
    audit = strictcall("audit", "--db", pg_url)
    assert audit.returncode == 0, audit.stderr


def test_a_database_from_a_newer_strictcall_is_refused_in_one_line(store: PostgresStore) -> None:
    with store.connection() as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    done = strictcall("notes", "list", "--owner", "u1", "--db", store._url)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1
    assert "99" in done.stderr and "Traceback" not in done.stderr


# --- the same, awaited on an event loop (how the server calls the notes tools) ----------------


async def eventually_async(action: Callable[[], Awaitable[T]]) -> T:
    """`eventually`, for a call awaited on the loop."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return await action()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def test_awaited_calls_keep_the_guarantees_of_the_others(store: PostgresStore) -> None:
    theirs = store.add_note("u2", "not yours")

    async def scenario() -> None:
        key = IdempotencyKey('"a"', "fp")
        note = await store.create_note_async("u1", "awaited", key)
        assert await store.create_note_async("u1", "awaited", key) == note  # a retry: once
        with pytest.raises(IdempotencyConflict):
            await store.create_note_async("u1", "other", IdempotencyKey('"a"', "fp-2"))
        assert await store.read_note_async("u1", note.note_id) == note
        assert await store.read_note_async("u1", theirs.note_id) is None  # as a missing one
        assert await store.read_note_async("u1", "n\x00") is None
        assert await store.list_notes_async("u1") == [note]
        assert await store.count_notes_async("u1") == 1
        gone = IdempotencyKey('"d"', "fp-d")
        assert await store.delete_note_async("u1", theirs.note_id, gone) is False
        assert await store.delete_note_async("u1", note.note_id, gone) is True
        assert await store.delete_note_async("u1", note.note_id, gone) is True  # a retry
        assert await store.count_notes_async("u1") == 0

    asyncio.run(scenario())
    assert store.read_note("u2", theirs.note_id) == theirs


def test_awaited_calls_replace_killed_sessions_without_a_failed_call(store: PostgresStore) -> None:
    async def scenario() -> None:
        note = await store.create_note_async("u1", "before", IdempotencyKey('"k1"', "fp"))
        assert pg.terminate_backends(store._url) >= 1
        assert await store.read_note_async("u1", note.note_id) == note
        assert pg.terminate_backends(store._url) >= 1
        created = await store.create_note_async("u1", "after", IdempotencyKey('"k2"', "fp"))
        assert await store.list_notes_async("u1") == [note, created]

    asyncio.run(scenario())


def test_awaited_calls_on_a_database_refusing_connections_are_unavailable_then_recover(
    store: PostgresStore,
) -> None:
    note = store.add_note("u1", "kept")

    async def scenario() -> None:
        assert await store.read_note_async("u1", note.note_id) == note  # the loop's connection
        pg.allow_connections(store._url, False)
        try:
            pg.terminate_backends(store._url)
            with pytest.raises(StoreUnavailable):
                await store.read_note_async("u1", note.note_id)
            with pytest.raises(StoreUnavailable):
                await store.create_note_async("u1", "not now", IdempotencyKey('"k"', "fp"))
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):  # held: answered at once
                await store.count_notes_async("u1")
            assert time.monotonic() - started < 0.5
        finally:
            pg.allow_connections(store._url, True)
        assert await eventually_async(lambda: store.read_note_async("u1", note.note_id)) == note
        created = await eventually_async(
            lambda: store.create_note_async("u1", "now", IdempotencyKey('"k"', "fp"))
        )
        assert await store.list_notes_async("u1") == [note, created]

    asyncio.run(scenario())


def test_an_awaited_call_waiting_on_a_lock_fills_the_pool_then_gives_its_place_back(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url + "?options=-c%20statement_timeout%3D1000", max_size=1)
    store._pool_wait_s = 0.1  # the loop's one connection is busy: the next call waits this long

    async def scenario() -> None:
        with psycopg.connect(pg_url) as holder:  # a transaction holding the key's row
            holder.execute("INSERT INTO idempotency VALUES ('u1', '\"k\"', 'fp', 'n-held', 0)")
            blocked = asyncio.create_task(
                store.create_note_async("u1", "t", IdempotencyKey('"k"', "fp"))
            )
            await asyncio.sleep(0)  # it takes the connection and waits on the row
            with pytest.raises(StoreUnavailable):  # no free connection, at once
                await store.count_notes_async("u1")
            with pytest.raises(StoreUnavailable):  # the statement timed out
                await blocked
            holder.rollback()
        note = await store.create_note_async("u1", "t", IdempotencyKey('"k"', "fp"))
        assert await store.list_notes_async("u1") == [note]

    try:
        asyncio.run(scenario())
    finally:
        store.close()


def test_an_awaited_call_cancelled_mid_statement_leaves_no_broken_session(
    store: PostgresStore,
) -> None:
    async def scenario() -> None:
        with psycopg.connect(store._url) as holder:
            holder.execute("INSERT INTO idempotency VALUES ('u1', '\"k\"', 'fp', 'n-held', 0)")
            blocked = asyncio.create_task(
                store.create_note_async("u1", "t", IdempotencyKey('"k"', "fp"))
            )
            await asyncio.sleep(0.1)
            blocked.cancel()  # as a tool's time limit does
            with pytest.raises(asyncio.CancelledError):
                await blocked
            holder.rollback()
        for n in range(LOOP_CONNECTIONS + 1):  # every connection the loop has answers
            key = IdempotencyKey(f'"after-{n}"', "fp")
            assert (await store.create_note_async("u1", "after", key)).text == "after"
        assert await store.count_notes_async("u1") == LOOP_CONNECTIONS + 1

    asyncio.run(scenario())


def test_awaited_calls_from_a_second_running_loop_are_served_on_threads(
    store: PostgresStore,
) -> None:
    note = store.add_note("u1", "from two loops")
    first_running = threading.Event()
    stop = threading.Event()

    async def first() -> None:
        assert await store.read_note_async("u1", note.note_id) == note
        first_running.set()
        while not stop.is_set():
            await asyncio.sleep(0.01)
        assert await store.read_note_async("u1", note.note_id) == note

    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(asyncio.run, first())
        assert first_running.wait(DEADLINE_S)
        try:
            assert asyncio.run(store.read_note_async("u1", note.note_id)) == note
            key = IdempotencyKey('"second"', "fp")
            assert asyncio.run(store.create_note_async("u1", "x", key)).text == "x"
        finally:
            stop.set()
        running.result(DEADLINE_S)
    # and once the first loop has ended, the next loop takes the connections over
    assert asyncio.run(store.count_notes_async("u1")) == 2


def test_awaited_audit_batches_are_written_once_or_refused_whole(store: PostgresStore) -> None:
    def batch(*call_ids: str) -> list[AuditRecord]:
        return [AuditRecord.of_call(c, "u1", "read_note", None, 5) for c in call_ids]

    async def scenario() -> None:
        await store.record_calls_async(batch("a1", "a2"))
        pg.allow_connections(store._url, False)
        try:
            pg.terminate_backends(store._url)
            with pytest.raises(StoreUnavailable):
                await store.record_calls_async(batch("lost-1"))
        finally:
            pg.allow_connections(store._url, True)
        await eventually_async(lambda: store.record_calls_async(batch("a3")))

    asyncio.run(scenario())
    assert [r.call_id for r in store.recent_calls(10)] == ["a3", "a2", "a1"]
    assert sum(row.calls for row in store.call_stats(0)) == 3


def test_an_awaited_audit_batch_leaves_its_session_waiting_for_flushes(
    store: PostgresStore,
) -> None:
    """The batch's transaction commits without waiting for its WAL flush; the session it ran
    on does not: behind a pooler in transaction mode, that session is next lent to another
    client, whose writes must wait for theirs."""
    settings: list[str] = []

    async def scenario() -> None:
        await store.record_calls_async([AuditRecord.of_call("s1", "u1", "read_note", None, 5)])
        pool = store._loop_pool()
        assert pool is not None
        conn = await pool.audit_connection()
        cursor = await conn.execute("SHOW synchronous_commit")
        row = await cursor.fetchone()
        assert row is not None
        settings.append(row[0])

    asyncio.run(scenario())
    assert settings == ["on"]
    assert [r.call_id for r in store.recent_calls(10)] == ["s1"]


def test_a_deleted_token_is_refused_by_every_server_once_its_cache_time_is_past(
    pg_url: str,
) -> None:
    first = PostgresStore(pg_url, token_cache_s=0.5)
    second = PostgresStore(pg_url, token_cache_s=0.5)
    try:
        token = first.create_token("u1")
        assert first.identity_for_token(token) == second.identity_for_token(token) == "u1"
        with first.connection() as conn:  # revoked, as an operator would: the row deleted
            conn.execute("DELETE FROM tokens WHERE identity = 'u1'")
        deadline = time.monotonic() + DEADLINE_S
        while any(s.identity_for_token(token) is not None for s in (first, second)):
            assert time.monotonic() < deadline, "a revoked token is still taken"
            time.sleep(0.05)
        never_cached = PostgresStore(pg_url)  # and a server that had not seen it refuses it
        try:
            assert never_cached.identity_for_token(token) is None
        finally:
            never_cached.close()
    finally:
        first.close()
        second.close()


# --- the loop's reads, sent through libpq as prepared statements --------------------------------


def watched_sockets(store: PostgresStore) -> int:
    """How many of the loop's connections have their socket watched by the loop now."""
    pool = store._loop_side
    assert pool is not None
    return sum(session._watched >= 0 for session in pool._sessions.values())


def test_awaited_reads_of_every_kind_read_what_was_written(store: PostgresStore) -> None:
    text = 'quotes " and \\ backslashes, NUL \x00, 退款, an emoji 🙂'
    first = store.add_note("u1", text)
    second = store.add_note("u1", "")
    theirs = store.add_note("u2", "not yours")
    token = store.create_token("u1")
    operator = store.create_operator_token("ops")

    async def scenario() -> None:
        for _ in range(2):  # the first prepares each statement, the second reuses it
            assert await store.read_note_async("u1", first.note_id) == first
            assert await store.read_note_async("u1", second.note_id) == second
            assert await store.read_note_async("u1", theirs.note_id) is None
            assert await store.read_note_async("u1", "missing") is None
            assert await store.list_notes_async("u1") == [first, second]
            assert await store.list_notes_async("nobody") == []
            assert await store.count_notes_async("u1") == 2
            assert await store.count_notes_async("nobody") == 0
        store._tokens.clear()  # looked up, not cached
        assert await store.identity_for_token_async(token) == "u1"
        assert await store.identity_for_token_async(operator) is None  # no agent's token
        assert await store.identity_for_token_async("sc_unknown") is None

    asyncio.run(scenario())


def test_awaited_reads_go_on_when_their_idle_sessions_are_killed(store: PostgresStore) -> None:
    note = store.add_note("u1", "kept")

    async def scenario() -> None:
        counts = [store.count_notes_async("u1") for _ in range(LOOP_CONNECTIONS)]
        assert await asyncio.gather(*counts) == [1] * LOOP_CONNECTIONS
        assert watched_sockets(store) >= 2  # several connections, each watched while idle
        assert pg.terminate_backends(store._url) >= 2
        deadline = time.monotonic() + DEADLINE_S
        while watched_sockets(store):  # the loop reads each goodbye and stops watching
            assert time.monotonic() < deadline, "a killed session's socket is still watched"
            await asyncio.sleep(0.01)
        assert await store.read_note_async("u1", note.note_id) == note  # replaced, prepared
        assert await store.count_notes_async("u1") == 1

    asyncio.run(scenario())


def test_an_awaited_read_past_its_timeout_is_unavailable_and_the_session_goes_on(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url + "?options=-c%20statement_timeout%3D200")
    note = store.add_note("u1", "t")

    async def scenario() -> None:
        assert await store.read_note_async("u1", note.note_id) == note
        with psycopg.connect(pg_url) as holder:  # a transaction holding the table from readers
            holder.execute("LOCK TABLE notes IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreUnavailable):
                await store.read_note_async("u1", note.note_id)
            holder.rollback()
        assert watched_sockets(store) == 1  # the same session, not lost
        assert await store.read_note_async("u1", note.note_id) == note

    try:
        asyncio.run(scenario())
    finally:
        store.close()


def test_an_awaited_read_cancelled_mid_statement_leaves_no_broken_session(
    store: PostgresStore,
) -> None:
    note = store.add_note("u1", "t")

    async def scenario() -> None:
        with psycopg.connect(store._url) as holder:
            holder.execute("LOCK TABLE notes IN ACCESS EXCLUSIVE MODE")
            blocked = asyncio.create_task(store.count_notes_async("u1"))
            await asyncio.sleep(0.1)
            blocked.cancel()  # as a tool's time limit does
            with pytest.raises(asyncio.CancelledError):
                await blocked
            holder.rollback()
        assert watched_sockets(store) == 0  # the busy connection closed, its socket let go
        reads = [store.read_note_async("u1", note.note_id) for _ in range(LOOP_CONNECTIONS + 1)]
        assert await asyncio.gather(*reads) == [note] * (LOOP_CONNECTIONS + 1)
        counts = [store.count_notes_async("u1") for _ in range(LOOP_CONNECTIONS + 1)]
        assert await asyncio.gather(*counts) == [1] * (LOOP_CONNECTIONS + 1)

    asyncio.run(scenario())


def test_a_note_read_given_up_leaves_the_reads_of_its_turn_answered(store: PostgresStore) -> None:
    note = store.add_note("u1", "t")

    async def scenario() -> None:
        with psycopg.connect(store._url) as holder:
            holder.execute("LOCK TABLE notes IN ACCESS EXCLUSIVE MODE")
            given_up = asyncio.create_task(store.read_note_async("u1", note.note_id))
            waiting = asyncio.create_task(store.read_note_async("u1", "missing"))
            await asyncio.sleep(0.1)  # both sent together, both waiting on the lock
            given_up.cancel()
            with pytest.raises(asyncio.CancelledError):
                await given_up
            holder.rollback()
        assert await waiting is None
        assert await store.read_note_async("u1", note.note_id) == note

    asyncio.run(scenario())


def test_the_notes_read_in_one_turn_are_each_their_owners_or_none(store: PostgresStore) -> None:
    odd = ['q"uote', "back\\slash", "{brace}", "a,b", " spaced ", "NULL", "", "退款 🙂", '\\"']
    mine = [store.add_note("u1", f"text of {n}") for n in range(3)]
    theirs = store.add_note("u2", "not yours")
    with store.connection() as conn:  # notes whose ids a caller could send
        for n, note_id in enumerate(odd):
            conn.execute(
                "INSERT INTO notes (id, owner, text, created_at, updated_at)"
                " VALUES (%s, 'u1', %s, 0, 0)",
                (note_id, f"odd {n}".encode()),
            )
    asked = [
        *(("u1", note.note_id) for note in mine),
        ("u1", mine[0].note_id),  # the same note twice in one turn
        ("u1", theirs.note_id),  # another owner's: as a missing one
        ("u2", theirs.note_id),
        ("u1", "missing"),
        *(("u1", note_id) for note_id in odd),
        ("u2", odd[0]),
    ]
    expected = [
        *mine,
        mine[0],
        None,
        theirs,
        None,
        *(Note(note_id, f"odd {n}") for n, note_id in enumerate(odd)),
        None,
    ]

    async def scenario() -> None:
        together = await asyncio.gather(*(store.read_note_async(o, i) for o, i in asked))
        assert together == expected
        alone = [await store.read_note_async(o, i) for o, i in asked]  # one a turn
        assert alone == expected

    asyncio.run(scenario())


def test_a_write_between_awaited_reads_on_one_connection_keeps_both_working(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url, max_size=1)  # one connection: reads and writes share it

    async def scenario() -> None:
        async with asyncio.timeout(DEADLINE_S):  # a read no one wakes would wait for ever
            for n in range(3):  # psycopg watches the socket for a write, the session for reads
                key = IdempotencyKey(f'"{n}"', "fp")
                note = await store.create_note_async("u1", f"t{n}", key)
                assert await store.read_note_async("u1", note.note_id) == note
                assert watched_sockets(store) == 1
            assert await store.count_notes_async("u1") == 3

    try:
        asyncio.run(scenario())
    finally:
        store.close()


def test_calls_waiting_for_a_connection_give_up_each_at_its_own_deadline(pg_url: str) -> None:
    async def scenario() -> None:
        pool = LoopPool(pg_url, {"autocommit": True}, 1)
        try:
            taken = await pool.get(1.0)
            patient = asyncio.create_task(pool.get(DEADLINE_S))
            cancelled = asyncio.create_task(pool.get(DEADLINE_S))
            await asyncio.sleep(0)  # both wait
            with pytest.raises(PoolFull):  # the shortest wait, asked last, ends first
                await pool.get(0.05)
            assert not patient.done()
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            pool.put(taken)  # to the first still waiting
            assert await patient is taken
            pool.put(taken)
            assert await pool.get(0.05) is taken  # idle again: no wait
            assert not pool._deadlines  # nothing left to give up
            pool.put(taken)
        finally:
            pool.close()

    asyncio.run(scenario())


def test_a_read_whose_statements_were_dropped_prepares_them_again(store: PostgresStore) -> None:
    note = store.add_note("u1", "t")

    async def scenario() -> None:
        assert await store.read_note_async("u1", note.note_id) == note
        pool = store._loop_side
        assert pool is not None and len(pool._idle) == 1
        conn = pool._idle[-1]
        pool.unwatch(conn)
        await conn.execute("DEALLOCATE ALL")  # as a pooler's reset would
        with pytest.raises(StoreUnavailable):
            await store.read_note_async("u1", note.note_id)
        assert await store.read_note_async("u1", note.note_id) == note  # prepared again

    asyncio.run(scenario())


def test_the_notes_read_in_one_turn_share_a_fault_and_its_recovery(store: PostgresStore) -> None:
    note = store.add_note("u1", "kept")

    def together(n: int) -> Awaitable[list[Note | None]]:
        return asyncio.gather(*(store.read_note_async("u1", note.note_id) for _ in range(n)))

    async def scenario() -> None:
        assert await together(5) == [note] * 5
        assert pg.terminate_backends(store._url) >= 1
        assert await together(5) == [note] * 5  # the lost session replaced, the batch tried again
        pg.allow_connections(store._url, False)
        try:
            pg.terminate_backends(store._url)
            answers = await asyncio.gather(
                *(store.read_note_async("u1", note.note_id) for _ in range(5)),
                return_exceptions=True,
            )
            assert all(isinstance(answer, StoreUnavailable) for answer in answers)
            assert len({id(answer) for answer in answers}) == 5  # each call its own
        finally:
            pg.allow_connections(store._url, True)
        assert await eventually_async(lambda: together(5)) == [note] * 5

    asyncio.run(scenario())
