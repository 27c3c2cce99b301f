"""The PostgreSQL store (`PostgresStore`): every job's protocol on one database named by a URL,
shared by any number of servers.

Calls made from threads (the operator's commands, a gateway called without a loop) go through a
psycopg_pool `ConnectionPool` (`deadlines.BoundedPool`: each call cut at its deadline) and
psycopg's cursors; the calls a server's event loop awaits
(`*_async`) go through the loop's own connections (`connections.LoopPool`), its reads as
statements prepared through libpq (`session.Session`). The twins share their statements
(`strictcall.storage.sql`, `statements`) and their row code (`strictcall.storage.queries`).

The statements, their parameters, the connections, the session and the schema it calls on are
modules of their own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import PoolTimeout

from strictcall.storage.base import (
    TOKEN_CACHE_S,
    TOKEN_ID_LENGTH,
    AuditRecord,
    IdempotencyKey,
    Note,
    StoreBusy,
    StoreUnavailable,
    StoreUnreachable,
    TokenInfo,
    hash_token,
    new_note_id,
    new_token,
)
from strictcall.storage.pins import SharedPins
from strictcall.storage.postgres.connections import CALL_DEADLINE_S, POOL_WAIT_S, LoopPool
from strictcall.storage.postgres.deadlines import BoundedPool
from strictcall.storage.postgres.faults import (
    RETRY_POOL_WAIT_S,
    Faults,
    call_deadline_for,
    is_lost,
    refusal_of,
    why_not_connected,
)
from strictcall.storage.postgres.schema import migrate
from strictcall.storage.postgres.session import count_of, notes_of, nothing, text_pair
from strictcall.storage.postgres.statements import (
    ADD_NOTE,
    COUNT_NOTES_PREPARED,
    CREATE,
    DELETE,
    HEALTH_PREPARED,
    HEALTH_SQL,
    LIST_NOTES_PREPARED,
    RECORD_BATCH,
    TOKEN_IDENTITY_PREPARED,
    audit_batch,
    bytes_of,
    text_of,
)
from strictcall.storage.postgres.statements import create_params as _create_params
from strictcall.storage.postgres.statements import delete_params as _delete_params
from strictcall.storage.postgres.statements import drawn as _drawn
from strictcall.storage.queries import SharedReads, TokenCache, recorded_note_id
from strictcall.storage.sql import POSTGRES

T = TypeVar("T")

STATEMENT_TIMEOUT_MS: Final = 2000
"""The longest a statement may run (unless the URL sets `options`): below the write tools' 5 s
limit, so a stuck statement is answered store_unavailable rather than timed out."""

CONNECT_TIMEOUT_S: Final = 3

READ_POOL_WAIT_S: Final = 0.05
"""The longest a read waits for one: reads run on the server's event loop, which must not stall
(the pool holds one connection more than the loop and the writers use together)."""

HEALTH_TIMEOUT_S: Final = 1.0
"""How long /healthz waits on the database when it is awaited on the loop: a database slow to
answer is then reported not healthy (503), and nothing else waited meanwhile."""

CALL_THREADS: Final = 8
"""The calls one server runs at once on worker threads, where a call is not awaited on the
server's event loop (the operator's commands, a gateway called without a loop)."""

LOOP_CONNECTIONS: Final = 8
"""The connections a server's event loop awaits its calls on (`read_note_async` and the
others): PostgreSQL answers them, and commits, in parallel, while the loop serves the rest."""


class PostgresStore(SharedReads, SharedPins):
    """A PostgreSQL database behind a connection pool, shared by any number of servers.

    `url` is a libpq URL or conninfo string (`postgresql://user@host:5432/db?...`). Unless it
    sets `options` itself, sessions get a statement timeout of `STATEMENT_TIMEOUT_MS`.

    Calls made from threads (the operator's commands, /healthz, a token not yet known) go
    through a psycopg_pool pool of up to `max_size` connections; the notes calls and the audit
    batches a server's event loop awaits go through the loop's own, up to `LOOP_CONNECTIONS`
    (at most `max_size`) and one for the audit, opened as calls need them.

    Raises (from the constructor):
        StoreUnavailable: the database cannot be reached or its schema not prepared.
        SchemaTooNew: the database was migrated by a newer strictcall.
    """

    concurrent_calls: Final = CALL_THREADS
    tokens_inline: Final = False  # a token not yet known costs a round trip: await its lookup
    _sql = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        max_size: int = CALL_THREADS + 3,
        pool_wait_s: float = POOL_WAIT_S,
        token_cache_s: float = TOKEN_CACHE_S,
        call_deadline_s: float | None = None,
    ) -> None:
        self._pool_wait_s = pool_wait_s
        self._loop_size = min(LOOP_CONNECTIONS, max_size)
        self._loop_side: LoopPool | None = None
        self._closed = False
        self._faults = Faults()
        self._tokens = TokenCache(token_cache_s)
        try:
            settings = conninfo_to_dict(url)
        except psycopg.Error:
            raise StoreUnavailable("invalid database URL") from None
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": settings.get("connect_timeout", CONNECT_TIMEOUT_S),
            "application_name": settings.get("application_name", "strictcall"),
            # a silent network partition is noticed in seconds, not after the kernel's hours
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 3,
            # and a statement sent into one fails once unacknowledged for this long (ms)
            "tcp_user_timeout": settings.get("tcp_user_timeout", 5000),
        }
        if "options" not in settings:
            self._connect_kwargs["options"] = (
                f"-c statement_timeout={STATEMENT_TIMEOUT_MS}"
                " -c idle_in_transaction_session_timeout=10000"
            )
        # every call awaited on the loop ends by this deadline (past the statement timeout)
        self._call_deadline_s = (
            call_deadline_for(str(settings.get("options", "")), CALL_DEADLINE_S)
            if call_deadline_s is None
            else call_deadline_s
        )
        self._url = url
        self._fault_lock = threading.Lock()
        try:
            migrate(url, self._connect_kwargs)
        except psycopg.Error as exc:
            raise StoreUnreachable(why_not_connected(exc, settings)) from None
        self._pool = BoundedPool(
            url,
            self._call_deadline_s,
            kwargs=self._connect_kwargs,
            min_size=min(2, max_size),
            max_size=max_size,
            open=False,
            timeout=pool_wait_s,
            # a slot that cannot reconnect for this long is given up, and the next request for a
            # connection makes a new one at once (instead of after a backoff grown to minutes)
            reconnect_timeout=5.0,
            name="strictcall",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 2)
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreUnavailable(type(exc).__name__) from None

    # --- connections and faults (the threads' side) -------------------------------------------

    def _run(
        self,
        work: Callable[[psycopg.Connection[Any]], T],
        *,
        retry: bool,
        wait: float | None = None,
    ) -> T:
        """`work` on a pooled connection, with every driver fault raised as StoreUnavailable;
        a session that has not answered within the call deadline is cut (`BoundedPool`),
        which fails it as lost.

        With `retry`, a connection found lost (killed, the server restarted) is replaced once:
        the pool's idle connections are checked first, as they are likely lost too. Only work
        that is safe to run twice is retried (reads, and writes idempotent by their key).
        """
        faults = self._faults
        faults.check()
        timeout = self._pool_wait_s if wait is None else wait
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                with (
                    self._pool.connection(timeout=timeout) as conn,
                    self._pool.deadlines.bounded(conn, self._call_deadline_s),
                ):
                    return work(conn)
            except PoolTimeout:
                faults.hold_if_lately_lost()  # the pool is reconnecting: the database is down
                raise StoreUnavailable("no free connection") from None
            except psycopg.Error as exc:
                lost = is_lost(exc)
                if lost:
                    faults.lost()
                if lost and attempt + 1 < attempts:
                    self._check_pool()
                    # a replacement comes in milliseconds, or the database is down: not a second
                    timeout = min(timeout, RETRY_POOL_WAIT_S)
                    continue
                if lost:
                    faults.hold()
                    raise StoreUnavailable(type(exc).__name__) from None
                raise refusal_of(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_pool(self) -> None:
        """Drop the pool's lost idle connections (one thread at a time; the others go on)."""
        if self._fault_lock.acquire(blocking=False):
            try:
                self._pool.check()
            except psycopg.Error:
                pass  # what it could not replace, the pool reconnects in the background
            finally:
                self._fault_lock.release()

    def _select(self, sql: str, params: tuple[object, ...], *, many: bool = False) -> Any:
        """One read query's first row (or all rows), retried once after a lost session."""

        def query(conn: psycopg.Connection[Any]) -> Any:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if many else cursor.fetchone()

        return self._run(query, retry=True, wait=READ_POOL_WAIT_S)

    def _change(self, sql: str, params: tuple[object, ...]) -> int:
        """One write statement, committed; the rows it changed (not retried: a lost connection
        may have committed it)."""
        return self._run(lambda conn: conn.execute(sql, params).rowcount, retry=False)

    def healthy(self) -> bool:
        """Whether the database answers now with the tables calls need (one round trip, or
        none while a fault is held)."""
        try:
            self._run(lambda conn: conn.execute(HEALTH_SQL), retry=True, wait=READ_POOL_WAIT_S)
        except StoreUnavailable:
            return False
        return True

    # --- notes --------------------------------------------------------------------------------

    def read_note(self, owner: str, note_id: str) -> Note | None:
        """The owner's note of that id, or None (missing and not-yours are the same)."""
        if "\x00" in note_id:  # no id holds one, and PostgreSQL refuses it in text
            return None
        row = self._select(POSTGRES.read_note, (owner, note_id))
        return None if row is None else Note(note_id, text_of(row[0]))

    def list_notes(self, owner: str) -> list[Note]:
        """The owner's notes, oldest first."""
        rows = self._select(POSTGRES.list_notes, (owner,), many=True)
        return [Note(note_id, text_of(text)) for note_id, text in rows]

    def count_notes(self, owner: str) -> int:
        """How many notes the owner has."""
        return int(self._select(POSTGRES.count_notes, (owner,))[0])

    def add_note(self, owner: str, text: str) -> Note:
        """Add a note outside any call (the operator's `notes add`); not retried, as it has no
        key that would make a second try harmless."""

        def insert(conn: psycopg.Connection[Any]) -> Note:
            now = time.time()
            while True:
                note_id = new_note_id()
                row = conn.execute(ADD_NOTE, (note_id, owner, bytes_of(text), now, now)).fetchone()
                if row is not None:  # else 78 random bits collided: draw again
                    return Note(note_id, text)

        return self._run(insert, retry=False)

    def create_note(self, owner: str, text: str, key: IdempotencyKey, *, wait: bool = True) -> Note:
        """Add a note, once per call id across every server on this database: a retry (or the
        same call sent to another server) returns the first note and adds nothing.

        With `wait` false: StoreBusy at once, as every write waits for a round trip and a
        commit, which must not happen on an event loop (the server runs it on a worker thread).

        Raises:
            IdempotencyConflict: the call id was used for a different call.
            StoreBusy: `wait` is false.
        """
        if not wait:
            raise StoreBusy
        params = _create_params(owner, text, key)

        def create(conn: psycopg.Connection[Any]) -> Note:
            while True:
                note_id = new_note_id()
                try:
                    row = conn.execute(CREATE, _drawn(params, note_id)).fetchone()
                except pg_errors.UniqueViolation:  # 78 random bits collided: draw again
                    continue
                if row is not None:
                    return Note(note_id, text)
                recorded = conn.execute(POSTGRES.recorded, (owner, key.call_id)).fetchone()
                if (note := recorded_note_id(recorded, key)) is not None:
                    return Note(note, text)
                # the claim met a row that is gone now: an operator pruned it; claim again

        return self._run(create, retry=True)

    def delete_note(
        self, owner: str, note_id: str, key: IdempotencyKey, *, wait: bool = True
    ) -> bool:
        """Delete the owner's note, once per call id: True if deleted now or by the first try
        of this call (on any server); False (nothing recorded) when the owner has no such note.

        Raises:
            IdempotencyConflict: the call id was used for a different call.
            StoreBusy: `wait` is false (see create_note).
        """
        if not wait:
            raise StoreBusy
        if "\x00" in note_id:
            return False
        params = _delete_params(owner, note_id, key)

        def delete(conn: psycopg.Connection[Any]) -> bool:
            if conn.execute(DELETE, {**params, "now": time.time()}).fetchone() is not None:
                return True
            recorded = conn.execute(POSTGRES.recorded, (owner, key.call_id)).fetchone()
            return recorded_note_id(recorded, key) is not None

        return self._run(delete, retry=True)

    # --- tokens -------------------------------------------------------------------------------

    def create_token(self, identity: str) -> str:
        """A new random API token for `identity`; only its hash is kept."""
        return self._insert_token(POSTGRES.insert_token, identity)

    def create_operator_token(self, name: str) -> str:
        """A new operator token (the page, /metrics); it is no agent's token: /rpc refuses it."""
        return self._insert_token(POSTGRES.insert_operator_token, name)

    def _insert_token(self, sql: str, name: str) -> str:
        token = new_token()
        self._run(
            lambda conn: conn.execute(sql, (hash_token(token), name, time.time())), retry=False
        )
        return token

    def revoke_tokens(
        self, token_id: str | None = None, identity: str | None = None
    ) -> list[TokenInfo]:
        """Delete the token whose id is `token_id` and every token of `identity`; the ones
        deleted. Every server refuses them once its cache lets go of them (`token_cache_s`)."""
        rows = self._run(
            lambda conn: conn.execute(
                "DELETE FROM tokens WHERE left(hash, %s) = %s OR identity = %s"
                " RETURNING hash, identity, role, created_at",
                (TOKEN_ID_LENGTH, token_id, identity),
            ).fetchall(),
            retry=False,  # run twice, it would report nothing revoked the second time
        )
        self._tokens.clear()
        return sorted(TokenInfo.of_row(*row) for row in rows)

    # --- audit --------------------------------------------------------------------------------

    def record_call(self, record: AuditRecord) -> None:
        """Append one call to the audit log."""
        self.record_calls((record,))

    def prune_audit(self, before: float, limit: int) -> int:
        """Delete at most `limit` audit rows written before `before` (oldest first), in one
        short statement. How many went."""
        return self._change(POSTGRES.prune_audit, (before, limit))

    def prune_audit_over(self, keep: int, limit: int) -> int:
        """Delete at most `limit` of the audit rows beyond the newest `keep` (oldest first), in
        one short statement. How many went."""
        return self._change(POSTGRES.prune_audit_over, (keep, limit))

    def record_calls(self, records: Sequence[AuditRecord]) -> None:
        """Append calls to the audit log, by one statement in one transaction. Not retried here:
        the caller keeps what could not be written and offers it again.

        The transaction commits without waiting for its WAL flush (`synchronous_commit = off`):
        a crash of the database machine may lose its last fraction of a second of audit records,
        never a note (note writes wait for their flush).
        """
        if not records:
            return
        batch = audit_batch(records)

        def insert(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = off")
                conn.execute(RECORD_BATCH, batch)

        self._run(insert, retry=False)

    # --- the same calls, awaited on an event loop ---------------------------------------------

    def _loop_pool(self) -> LoopPool | None:
        """The connections of the running loop, or None when another loop, still running, has
        them (the call then runs on a thread, through the pool the threads share)."""
        loop = asyncio.get_running_loop()
        pool = self._loop_side
        if pool is not None and pool.loop is loop:
            return pool
        if pool is not None and not pool.loop.is_closed():
            return None
        if pool is not None:
            pool.close()  # its loop ended (a gateway called without one makes one per call)
        if self._closed:
            return None
        self._loop_side = LoopPool(
            self._url,
            self._connect_kwargs,
            self._loop_size,
            faults=self._faults,
            wait_s=self._pool_wait_s,
            deadline_s=self._call_deadline_s,
        )
        return self._loop_side

    async def _on_thread(self, call: Callable[[], T]) -> T:
        """`call` on a worker thread, awaited within the deadline of the loop's own calls
        (and the wait for a connection): the thread's own session is cut at that deadline
        (`BoundedPool`), the caller answered StoreUnavailable.

        Raises:
            StoreUnavailable: as the call, or it did not end in time.
        """
        try:
            async with asyncio.timeout(self._call_deadline_s + self._pool_wait_s):
                return await asyncio.to_thread(call)
        except TimeoutError:
            raise StoreUnavailable("no answer in time") from None

    async def _on_loop(
        self, call: Callable[[LoopPool], Awaitable[T]], on_thread: Callable[[], T]
    ) -> T:
        """`call` on the running loop's connections, or `on_thread` on a worker thread when
        another loop has them."""
        pool = self._loop_pool()
        if pool is None:
            return await self._on_thread(on_thread)
        return await call(pool)

    async def identity_for_token_async(self, token: str) -> str | None:
        """`identity_for_token`, awaited on the running loop: a token not in the cache (an
        unknown one every time) costs the loop no blocking round trip."""
        digest = hash_token(token)
        cached = self._tokens.get(digest)
        if cached is not None:
            return cached
        pool = self._loop_pool()
        if pool is None:
            return await self._on_thread(lambda: self.identity_for_token(token))
        row = await pool.fetch(TOKEN_IDENTITY_PREPARED, (digest,), text_pair)
        return self._tokens.remember(digest, row)

    async def healthy_async(self) -> bool:
        """`healthy`, awaited on the running loop: a database that does not answer holds the
        probe alone, for at most `HEALTH_TIMEOUT_S` (then it is not healthy; the connection the
        probe waited on is closed, as any given back mid-statement)."""
        pool = self._loop_pool()
        if pool is None:
            try:
                return await self._on_thread(self.healthy)
            except StoreUnavailable:
                return False
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                await pool.fetch(HEALTH_PREPARED, (), nothing)
        except (StoreUnavailable, TimeoutError):
            return False
        return True

    async def read_note_async(self, owner: str, note_id: str) -> Note | None:
        """`read_note`, awaited on the running loop, no thread: the notes read by the calls of
        one turn of the loop are read together (`LoopPool.read_note`)."""
        pool = self._loop_pool()
        if pool is None:
            return await self._on_thread(lambda: self.read_note(owner, note_id))
        if "\x00" in note_id:
            return None
        text = await pool.read_note(owner, note_id)
        return None if text is None else Note(note_id, text_of(text))

    async def list_notes_async(self, owner: str) -> list[Note]:
        """`list_notes`, awaited on the running loop."""
        return await self._on_loop(
            lambda pool: pool.fetch(LIST_NOTES_PREPARED, (owner,), notes_of),
            lambda: self.list_notes(owner),
        )

    async def count_notes_async(self, owner: str) -> int:
        """`count_notes`, awaited on the running loop."""
        return await self._on_loop(
            lambda pool: pool.fetch(COUNT_NOTES_PREPARED, (owner,), count_of),
            lambda: self.count_notes(owner),
        )

    async def create_note_async(self, owner: str, text: str, key: IdempotencyKey) -> Note:
        """`create_note`, awaited on the running loop: one round trip and one commit.

        Raises:
            IdempotencyConflict: the call id was used for a different call.
        """
        params = _create_params(owner, text, key)

        async def create(conn: psycopg.AsyncConnection[Any]) -> Note:
            while True:
                note_id = new_note_id()
                try:
                    cursor = await conn.execute(CREATE, _drawn(params, note_id))
                    row = await cursor.fetchone()
                except pg_errors.UniqueViolation:  # 78 random bits collided: draw again
                    continue
                if row is not None:
                    return Note(note_id, text)
                cursor = await conn.execute(POSTGRES.recorded, (owner, key.call_id))
                if (note := recorded_note_id(await cursor.fetchone(), key)) is not None:
                    return Note(note, text)

        return await self._on_loop(
            lambda pool: pool.run(create, retry=True),
            lambda: self.create_note(owner, text, key),
        )

    async def delete_note_async(self, owner: str, note_id: str, key: IdempotencyKey) -> bool:
        """`delete_note`, awaited on the running loop.

        Raises:
            IdempotencyConflict: the call id was used for a different call.
        """
        if "\x00" in note_id:
            return False
        params = _delete_params(owner, note_id, key)

        async def delete(conn: psycopg.AsyncConnection[Any]) -> bool:
            cursor = await conn.execute(DELETE, {**params, "now": time.time()})
            if await cursor.fetchone() is not None:
                return True
            cursor = await conn.execute(POSTGRES.recorded, (owner, key.call_id))
            return recorded_note_id(await cursor.fetchone(), key) is not None

        return await self._on_loop(
            lambda pool: pool.run(delete, retry=True),
            lambda: self.delete_note(owner, note_id, key),
        )

    async def record_calls_async(self, records: Sequence[AuditRecord]) -> None:
        """`record_calls`, awaited on the running loop: one statement in one transaction that
        commits without waiting for the WAL flush, as above, sent in one round trip, on a
        connection of the loop's own kept for the audit. Not retried: the caller keeps what
        was not written.

        Raises:
            StoreUnavailable: the batch was not written.
        """
        pool = self._loop_pool()
        if pool is None:
            return await self._on_thread(lambda: self.record_calls(records))
        if not records:
            return None
        self._faults.check()
        batch = audit_batch(records)

        async def insert(conn: psycopg.AsyncConnection[Any]) -> None:
            # one round trip: the four statements go as one pipeline; the setting is the
            # transaction's own, so a pooler in transaction mode (PgBouncer) hands no other
            # client a session that commits without waiting for its flush
            async with conn.pipeline(), conn.transaction():
                await conn.execute("SET LOCAL synchronous_commit = off")
                await conn.execute(RECORD_BATCH, batch)

        await pool.on_audit_connection(insert)
        return None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit), for tests and tools that look under the store."""
        with self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        """Close the pools and their connections."""
        self._closed = True
        if self._loop_side is not None:
            self._loop_side.close()
        self._pool.close()
