"""The PostgreSQL store: the only module that imports psycopg.

`PostgresStore` implements `strictcall.storage.base.Store` on a PostgreSQL database named by a
URL, through psycopg 3 and a psycopg_pool connection pool, so that several processes and hosts
serve one set of notes. Its schema is versioned in `meta` and migrated at start under an
advisory lock, so servers starting together apply each step once; a database whose schema is
newer than this code is refused (`SchemaTooNew`).

The guarantees are SQLiteStore's: a note is read by (owner, id) in one unique index; tokens are
kept as hashes; writes are idempotent per (identity, call id), now across servers: the
idempotency row and the note go in by one statement, `INSERT ... ON CONFLICT DO NOTHING`, so of
two servers racing on one key the second waits for the first's commit and answers its note.

A server's event loop awaits its calls on connections of its own (`_LoopPool`); its reads
(a note, a list, a count, a token not yet known) are sent there as statements prepared on each
connection at their first use, through libpq with the socket watched by the loop (`_Session`):
a third of the CPU of a psycopg cursor per read, with the same statement and the same faults.
The notes read by the calls of one turn of the loop go together, in one statement (each by its
owner and id, as alone): one round trip, and one wake-up of PostgreSQL, for all of them.

Every driver fault (connection refused or lost, an administrator's termination, a statement
timeout, no free connection in the pool) raises `StoreUnavailable`. After a lost connection the
pool is checked and the call tried once more; while the database stays down, calls fail at once
for `FAULT_HOLD_S` instead of each waiting for a connection, and the pool reconnects by itself.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from strictcall.errors import MissingExtra
from strictcall.storage.base import (
    MINUTE_S,
    TOKEN_CACHE_S,
    AuditRecord,
    FailureRow,
    IdempotencyConflict,
    IdempotencyKey,
    Note,
    SchemaTooNew,
    StatRow,
    StoreBusy,
    StoreUnavailable,
    failure_rows,
    hash_token,
    minute_counts,
    minute_of,
    new_note_id,
    new_token,
    stat_rows,
)

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import pq
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # exercised in a venv without the extra (tests: a blocked import)
    raise MissingExtra("postgres", "psycopg") from None

T = TypeVar("T")
_IDLE: Final = pq.TransactionStatus.IDLE
_FATAL_ERROR: Final = pq.ExecStatus.FATAL_ERROR
_CONNECTION_OK: Final = pq.ConnStatus.OK

SCHEMA_VERSION: Final = 2
"""The schema this code writes (PostgreSQL's own numbering, apart from SQLite's)."""

STATEMENT_TIMEOUT_MS: Final = 2000
"""The longest a statement may run (unless the URL sets `options`): below the write tools' 5 s
limit, so a stuck statement is answered store_unavailable rather than timed out."""

CONNECT_TIMEOUT_S: Final = 3
POOL_WAIT_S: Final = 1.0
"""The longest a write (on a worker thread) waits for a free connection."""

READ_POOL_WAIT_S: Final = 0.05
HEALTH_TIMEOUT_S: Final = 1.0
"""How long /healthz waits on the database when it is awaited on the loop: a database slow to
answer is then reported not healthy (503), and nothing else waited meanwhile."""
"""The longest a read waits for one: reads run on the server's event loop, which must not stall
(the pool holds one connection more than the loop and the writers use together)."""

RETRY_POOL_WAIT_S: Final = 0.2
"""How long the second try after a lost connection waits for a replacement."""

FAULT_HOLD_S: Final = 0.25
"""After a connection fault, how long calls are answered store_unavailable without trying."""

LOST_WINDOW_S: Final = 10.0
"""After a lost connection, how long a pool without a free connection is taken for a database
that is down (held, as above) rather than for a busy pool (refused, not held)."""

CALL_THREADS: Final = 8
"""The calls one server runs at once on worker threads, where a call is not awaited on the
server's event loop (the operator's commands, a gateway called without a loop)."""

LOOP_CONNECTIONS: Final = 8
"""The connections a server's event loop awaits its calls on (`read_note_async` and the
others): PostgreSQL answers them, and commits, in parallel, while the loop serves the rest."""

_TOKEN_CACHE_SIZE: Final = 4096
# Any fixed 64-bit key: the lock servers of every version take before they read or migrate.
_MIGRATION_LOCK: Final = 0x5C_7A_11_0000_0001

# Connection-level SQLSTATE classes: the session is gone (08: connection exception; 57P01-3:
# terminated by an administrator, crash shutdown, cannot connect now).
_LOST_CONNECTION: Final = ("08", "57P01", "57P02", "57P03")

_SCHEMA: Final = """
CREATE TABLE notes (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text NOT NULL UNIQUE,
    owner text NOT NULL,
    text bytea NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);
CREATE UNIQUE INDEX notes_by_owner_id ON notes (owner, id);
CREATE INDEX notes_by_owner ON notes (owner, seq);
CREATE TABLE tokens (
    hash text PRIMARY KEY,
    identity text NOT NULL,
    created_at double precision NOT NULL
);
CREATE TABLE audit (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at double precision NOT NULL,
    call_id text,
    identity text,
    tool text,
    outcome text NOT NULL,
    code text,
    stage text,
    latency_us bigint NOT NULL
);
CREATE TABLE idempotency (
    identity text NOT NULL,
    call_id text NOT NULL,
    fingerprint text NOT NULL,
    note_id text NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (identity, call_id)
);
"""

# Version -> the statements that bring the database from the version before to it.
_MIGRATIONS: Final[Mapping[int, tuple[str, ...]]] = {
    1: (_SCHEMA,),
    # For operators (issue 16), as SQLite's version 3: a failure's reason and (made safe)
    # pointer; tokens with a role, so that an operator's token opens the page and not /rpc (nor
    # the reverse); the calls counted per minute as they are written, so that a time window is
    # read from its minutes' counts and not its records; refusals indexed apart.
    2: (
        "ALTER TABLE audit ADD COLUMN reason text, ADD COLUMN pointer text",
        "ALTER TABLE tokens ADD COLUMN role text NOT NULL DEFAULT 'agent'",
        # '' stands for none in the key: a NULL would never conflict, and counts would split
        """CREATE TABLE audit_minutes (
            minute bigint NOT NULL,
            tool text NOT NULL,
            outcome text NOT NULL,
            stage text NOT NULL,
            code text NOT NULL,
            reason text NOT NULL,
            pointer text NOT NULL,
            n bigint NOT NULL,
            PRIMARY KEY (minute, tool, outcome, stage, code, reason, pointer)
        )""",
        f"""INSERT INTO audit_minutes
            SELECT (floor(at / {MINUTE_S}) * {MINUTE_S})::bigint, coalesce(tool, ''), outcome,
                   coalesce(stage, ''), coalesce(code, ''), '', '', count(*)
            FROM audit GROUP BY 1, 2, 3, 4, 5""",
        "CREATE INDEX audit_refusals ON audit (seq) WHERE outcome = 'error'",
    ),
}

_READ_NOTE: Final = "SELECT text FROM notes WHERE owner = %s AND id = %s"
_LIST_NOTES: Final = "SELECT id, text FROM notes WHERE owner = %s ORDER BY seq"
_COUNT_NOTES: Final = "SELECT count(*) FROM notes WHERE owner = %s"

# The claim of the call id and the note in one statement (one round trip, one commit): when the
# key is taken, the claim returns nothing and no note is inserted. A second server racing on the
# same key waits at the claim for the first's commit, then sees the key taken.
_CREATE: Final = """
WITH claim AS (
    INSERT INTO idempotency (identity, call_id, fingerprint, note_id, created_at)
    VALUES (%(owner)s, %(call_id)s, %(fingerprint)s, %(note_id)s, %(now)s)
    ON CONFLICT DO NOTHING
    RETURNING note_id
)
INSERT INTO notes (id, owner, text, created_at, updated_at)
SELECT note_id, %(owner)s, %(text)s, %(now)s, %(now)s FROM claim
RETURNING id
"""

# The note is locked first; the call id is claimed only if it exists, and the note deleted only
# if the claim went in: a delete of nothing records nothing, as on SQLite. A racing delete of the
# same note waits at the lock and then finds it gone.
_DELETE: Final = """
WITH target AS (
    SELECT id FROM notes WHERE owner = %(owner)s AND id = %(note_id)s FOR UPDATE
), claim AS (
    INSERT INTO idempotency (identity, call_id, fingerprint, note_id, created_at)
    SELECT %(owner)s, %(call_id)s, %(fingerprint)s, id, %(now)s FROM target
    ON CONFLICT DO NOTHING
    RETURNING note_id
)
DELETE FROM notes WHERE id IN (SELECT note_id FROM claim)
RETURNING id
"""


@dataclass(frozen=True, slots=True)
class _Statement:
    """A read the loop sends often: prepared by name on each of the loop's connections at its
    first use there, then sent as that name and its parameters (no parse, no plan, no psycopg
    cursor: a third of what `AsyncConnection.execute` costs the loop per read)."""

    name: bytes
    sql: bytes  # with PostgreSQL's own placeholders, $1, $2, ...

    @classmethod
    def of(cls, name: str, sql: str) -> _Statement:
        """The statement `sql`, written with psycopg's %s placeholders, prepared as `name`."""
        parts = sql.split("%s")
        numbered = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
        return cls(name.encode("ascii"), numbered.encode("utf-8"))


_RECORDED: Final = (
    "SELECT fingerprint, note_id FROM idempotency WHERE identity = %s AND call_id = %s"
)

_TOKEN_IDENTITY: Final = "SELECT hash, identity FROM tokens WHERE hash = %s AND role = 'agent'"

# The loop's reads, prepared on its connections (the threads' go through psycopg's cursors).
_READ_NOTE_PREPARED: Final = _Statement.of("strictcall_read_note", _READ_NOTE)
_LIST_NOTES_PREPARED: Final = _Statement.of("strictcall_list_notes", _LIST_NOTES)
_COUNT_NOTES_PREPARED: Final = _Statement.of("strictcall_count_notes", _COUNT_NOTES)
_TOKEN_IDENTITY_PREPARED: Final = _Statement.of("strictcall_token_identity", _TOKEN_IDENTITY)
_HEALTH_PREPARED: Final = _Statement.of("strictcall_health", "SELECT 1")
# The notes read by the calls of one turn of the loop, by one statement: each (owner, id) read
# by its own lookup in the unique index, as alone (the single read's query, once per key; OFFSET
# 0 keeps the planner from turning it into a join that may scan the table).
_READ_NOTES_PREPARED: Final = _Statement(
    b"strictcall_read_notes",
    b"SELECT k.n, n.text FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(owner, id, n)"
    b" CROSS JOIN LATERAL"
    b" (SELECT text FROM notes WHERE owner = k.owner AND id = k.id OFFSET 0) AS n",
)

_AUDIT_COLUMNS: Final = (
    "at, call_id, identity, tool, outcome, code, stage, latency_us, reason, pointer"
)
# A batch as ten arrays, one per column, inserted by one statement. The arrays go in binary
# (%b): psycopg writes them in half the CPU of the text format's quoting.
_INSERT_AUDIT_ROWS: Final = (
    f"INSERT INTO audit ({_AUDIT_COLUMNS}) SELECT * FROM unnest("
    "%b::float8[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[],"
    " %b::int8[], %b::text[], %b::text[])"
)
# A batch's per-minute counts, added by one statement. The keys come sorted, so that servers
# writing the same minutes at once take their row locks in one order (no deadlock).
_COUNT_MINUTES: Final = (
    "INSERT INTO audit_minutes (minute, tool, outcome, stage, code, reason, pointer, n)"
    " SELECT * FROM unnest(%b::int8[], %b::text[], %b::text[], %b::text[], %b::text[],"
    " %b::text[], %b::text[], %b::int8[])"
    " ON CONFLICT (minute, tool, outcome, stage, code, reason, pointer)"
    " DO UPDATE SET n = audit_minutes.n + excluded.n"
)


# A batch of records and its per-minute counts, by one statement (one round trip, atomic).
_RECORD_BATCH: Final = f"WITH rows AS ({_INSERT_AUDIT_ROWS}) {_COUNT_MINUTES}"


class PostgresStore:
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

    def __init__(
        self,
        url: str,
        *,
        max_size: int = CALL_THREADS + 3,
        pool_wait_s: float = POOL_WAIT_S,
        token_cache_s: float = TOKEN_CACHE_S,
    ) -> None:
        self._pool_wait_s = pool_wait_s
        self._token_cache_s = token_cache_s
        self._loop_size = min(LOOP_CONNECTIONS, max_size)
        self._loop_side: _LoopPool | None = None
        self._closed = False
        self._down_until = 0.0
        self._lost_at = -LOST_WINDOW_S
        self._tokens: dict[str, tuple[str, float]] = {}
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
        self._url = url
        self._fault_lock = threading.Lock()
        try:
            self._migrate()
        except psycopg.Error as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
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

    # --- schema -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Bring the schema up to SCHEMA_VERSION, under an advisory lock held to the commit.

        Raises:
            SchemaTooNew: the database's schema is newer than this code.
            psycopg.Error: the database failed.
        """
        kwargs = {**self._connect_kwargs, "autocommit": False}
        with psycopg.connect(self._url, **kwargs) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text)")
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', '0')"
                " ON CONFLICT DO NOTHING"
            )
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row is not None else 0
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(version, SCHEMA_VERSION)
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[target]:
                    conn.execute(statement.encode("utf-8"))
                conn.execute(
                    "UPDATE meta SET value = %s WHERE key = 'schema_version'", (str(target),)
                )

    def schema_version(self) -> int:
        """The version of the schema this database holds."""
        row = self._read("SELECT value FROM meta WHERE key = 'schema_version'", ())
        return int(row[0])

    # --- connections and faults ---------------------------------------------------------------

    def _run(
        self,
        work: Callable[[psycopg.Connection[Any]], T],
        *,
        retry: bool,
        wait: float | None = None,
    ) -> T:
        """`work` on a pooled connection, with every driver fault raised as StoreUnavailable.

        With `retry`, a connection found lost (killed, the server restarted) is replaced once:
        the pool's idle connections are checked first, as they are likely lost too. Only work
        that is safe to run twice is retried (reads, and writes idempotent by their key).
        """
        if time.monotonic() < self._down_until:
            raise StoreUnavailable("held after a fault")
        timeout = self._pool_wait_s if wait is None else wait
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                with self._pool.connection(timeout=timeout) as conn:
                    return work(conn)
            except PoolTimeout:
                if time.monotonic() - self._lost_at < LOST_WINDOW_S:
                    self._hold()  # the pool is reconnecting: the database is down
                raise StoreUnavailable("no free connection") from None
            except psycopg.Error as exc:
                lost = _is_lost(exc)
                if lost:
                    self._lost_at = time.monotonic()
                if lost and attempt + 1 < attempts:
                    self._check_pool()
                    # a replacement comes in milliseconds, or the database is down: not a second
                    timeout = min(timeout, RETRY_POOL_WAIT_S)
                    continue
                if lost:
                    self._hold()
                raise StoreUnavailable(type(exc).__name__) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _hold(self) -> None:
        self._down_until = time.monotonic() + FAULT_HOLD_S

    def _check_pool(self) -> None:
        """Drop the pool's lost idle connections (one thread at a time; the others go on)."""
        if self._fault_lock.acquire(blocking=False):
            try:
                self._pool.check()
            except psycopg.Error:
                pass  # what it could not replace, the pool reconnects in the background
            finally:
                self._fault_lock.release()

    def healthy(self) -> bool:
        """Whether the database answers now (one round trip, or none while a fault is held)."""
        try:
            self._run(lambda conn: conn.execute("SELECT 1"), retry=True, wait=READ_POOL_WAIT_S)
        except StoreUnavailable:
            return False
        return True

    def _read(self, sql: str, params: tuple[object, ...], *, many: bool = False) -> Any:
        def query(conn: psycopg.Connection[Any]) -> Any:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if many else cursor.fetchone()

        return self._run(query, retry=True, wait=READ_POOL_WAIT_S)

    # --- notes --------------------------------------------------------------------------------

    def read_note(self, owner: str, note_id: str) -> Note | None:
        """The owner's note of that id, or None (missing and not-yours are the same)."""
        if "\x00" in note_id:  # no id holds one, and PostgreSQL refuses it in text
            return None
        row = self._read(_READ_NOTE, (owner, note_id))
        return None if row is None else Note(note_id, _text(row[0]))

    def list_notes(self, owner: str) -> list[Note]:
        """The owner's notes, oldest first."""
        rows = self._read(_LIST_NOTES, (owner,), many=True)
        return [Note(note_id, _text(text)) for note_id, text in rows]

    def count_notes(self, owner: str) -> int:
        """How many notes the owner has."""
        row = self._read(_COUNT_NOTES, (owner,))
        return int(row[0])

    def add_note(self, owner: str, text: str) -> Note:
        """Add a note outside any call (the operator's `notes add`); not retried, as it has no
        key that would make a second try harmless."""

        def insert(conn: psycopg.Connection[Any]) -> Note:
            now = time.time()
            while True:
                note_id = new_note_id()
                row = conn.execute(
                    "INSERT INTO notes (id, owner, text, created_at, updated_at)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
                    (note_id, owner, _bytes(text), now, now),
                ).fetchone()
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
        params = {
            "owner": owner,
            "call_id": key.call_id,
            "fingerprint": key.fingerprint,
            "text": _bytes(text),
        }

        def create(conn: psycopg.Connection[Any]) -> Note:
            while True:
                note_id = new_note_id()
                try:
                    row = conn.execute(
                        _CREATE, {**params, "note_id": note_id, "now": time.time()}
                    ).fetchone()
                except pg_errors.UniqueViolation:  # 78 random bits collided: draw again
                    continue
                if row is not None:
                    return Note(note_id, text)
                recorded = _recorded(conn, owner, key)
                if recorded is not None:
                    return Note(recorded, text)
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
        params = {
            "owner": owner,
            "note_id": note_id,
            "call_id": key.call_id,
            "fingerprint": key.fingerprint,
        }

        def delete(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(_DELETE, {**params, "now": time.time()}).fetchone()
            if row is not None:
                return True
            return _recorded(conn, owner, key) is not None

        return self._run(delete, retry=True)

    # --- tokens -------------------------------------------------------------------------------

    def create_token(self, identity: str) -> str:
        """A new random API token for `identity`; only its hash is kept."""
        token = new_token()
        self._run(
            lambda conn: conn.execute(
                "INSERT INTO tokens (hash, identity, created_at) VALUES (%s, %s, %s)",
                (hash_token(token), identity, time.time()),
            ),
            retry=False,
        )
        return token

    @property
    def tokens_inline(self) -> bool:
        """False: a token not in the cache waits a round trip (await the async form)."""
        return False

    def identity_for_token(self, token: str) -> str | None:
        """Whose token this is, or None for an unknown token.

        A known token is remembered for `token_cache_s` seconds (`TOKEN_CACHE_S` unless the
        store was opened with another; in each server process), so that a busy caller costs one
        hash and no query per call; an unknown one is looked up every time. A token deleted
        from the database is therefore refused by every server within that long.
        """
        digest = hash_token(token)
        cached = self._cached_identity(digest)
        if cached is not None:
            return cached
        return self._remember(digest, self._read(_TOKEN_IDENTITY, (digest,)))

    async def identity_for_token_async(self, token: str) -> str | None:
        """`identity_for_token`, awaited on the running loop: a token not in the cache (an
        unknown one every time) costs the loop no blocking round trip."""
        digest = hash_token(token)
        cached = self._cached_identity(digest)
        if cached is not None:
            return cached
        pool = self._loop_pool()
        if pool is None:
            return await asyncio.to_thread(self.identity_for_token, token)
        row = await self._fetch_async(pool, _TOKEN_IDENTITY_PREPARED, (digest,), _text_pair)
        return self._remember(digest, row)

    def _cached_identity(self, digest: str) -> str | None:
        cached = self._tokens.get(digest)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        return None

    def _remember(self, digest: str, row: tuple[str, str] | None) -> str | None:
        """The identity of a token's row (None for no row), remembered for `token_cache_s`."""
        if row is None or not hmac.compare_digest(row[0], digest):
            return None
        identity = str(row[1])
        if len(self._tokens) >= _TOKEN_CACHE_SIZE:
            self._tokens.clear()
        self._tokens[digest] = (identity, time.monotonic() + self._token_cache_s)
        return identity

    # --- audit --------------------------------------------------------------------------------

    def record_call(self, record: AuditRecord) -> None:
        """Append one call to the audit log."""
        self.record_calls((record,))

    def record_calls(self, records: Sequence[AuditRecord]) -> None:
        """Append calls to the audit log, by one statement in one transaction. Not retried here:
        the caller keeps what could not be written and offers it again.

        The transaction commits without waiting for its WAL flush (`synchronous_commit = off`):
        a crash of the database machine may lose its last fraction of a second of audit records,
        never a note (note writes wait for their flush).
        """
        if not records:
            return
        batch = _audit_batch(records)

        def insert(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = off")
                conn.execute(_RECORD_BATCH, batch)

        self._run(insert, retry=False)

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
            return await asyncio.to_thread(self.record_calls, records)
        if not records:
            return None
        if time.monotonic() < self._down_until:
            raise StoreUnavailable("held after a fault")
        batch = _audit_batch(records)
        try:
            conn = await pool.audit_connection()
            # one round trip: the four statements go as one pipeline; the setting is the
            # transaction's own, so a pooler in transaction mode (PgBouncer) hands no other
            # client a session that commits without waiting for its flush
            async with conn.pipeline(), conn.transaction():
                await conn.execute("SET LOCAL synchronous_commit = off")
                await conn.execute(_RECORD_BATCH, batch)
        except psycopg.Error as exc:
            pool.drop_audit_connection()
            if _is_lost(exc):
                self._lost_at = time.monotonic()
            raise StoreUnavailable(type(exc).__name__) from None
        return None

    def recent_calls(self, limit: int) -> list[AuditRecord]:
        """The last `limit` calls, newest first."""
        rows = self._read(
            f"SELECT {_AUDIT_COLUMNS} FROM audit ORDER BY seq DESC LIMIT %s", (limit,), many=True
        )
        return [AuditRecord(*row) for row in rows]

    def call_counts(self) -> list[tuple[str, str | None, str | None, int]]:
        """How many calls ended with each (outcome, stage, code)."""
        rows = self._read(
            "SELECT outcome, stage, code, count(*) FROM audit"
            " GROUP BY outcome, stage, code ORDER BY count(*) DESC",
            (),
            many=True,
        )
        return [(str(o), s, c, int(n)) for o, s, c, n in rows]

    # --- for operators ------------------------------------------------------------------------

    def create_operator_token(self, name: str) -> str:
        """A new operator token (the page, /metrics); it is no agent's token: /rpc refuses it."""
        token = new_token()
        self._run(
            lambda conn: conn.execute(
                "INSERT INTO tokens (hash, identity, created_at, role) VALUES (%s, %s, %s, %s)",
                (hash_token(token), name, time.time(), "operator"),
            ),
            retry=False,
        )
        return token

    def operator_for_token(self, token: str) -> str | None:
        """The operator's name for an operator token; None for any other (an agent's too)."""
        digest = hash_token(token)
        row = self._read(
            "SELECT hash, identity FROM tokens WHERE hash = %s AND role = 'operator'", (digest,)
        )
        if row is None or not hmac.compare_digest(row[0], digest):
            return None
        return str(row[1])

    def call_stats(self, since: float) -> list[StatRow]:
        """The calls counted by minute, tool, outcome, stage and code, from the minute holding
        `since` on (read from the per-minute counts, never the records)."""
        rows = self._read(
            "SELECT minute, tool, outcome, stage, code, sum(n) FROM audit_minutes"
            " WHERE minute >= %s GROUP BY minute, tool, outcome, stage, code",
            (minute_of(since),),
            many=True,
        )
        return stat_rows(rows)

    def top_failures(self, since: float, limit: int) -> list[FailureRow]:
        """The (tool, code, reason, pointer) failing most often since `since`, most first."""
        rows = self._read(
            "SELECT tool, code, reason, pointer, sum(n) AS total FROM audit_minutes"
            " WHERE minute >= %s AND outcome = 'error' GROUP BY tool, code, reason, pointer"
            " ORDER BY total DESC, tool, code, reason, pointer LIMIT %s",
            (minute_of(since), limit),
            many=True,
        )
        return failure_rows(rows)

    def recent_refusals(self, limit: int) -> list[AuditRecord]:
        """The last `limit` calls that failed, newest first."""
        rows = self._read(
            f"SELECT {_AUDIT_COLUMNS} FROM audit WHERE outcome = 'error'"
            " ORDER BY seq DESC LIMIT %s",
            (limit,),
            many=True,
        )
        return [AuditRecord(*row) for row in rows]

    def calls_after(self, cursor: int | None, limit: int) -> tuple[int, list[AuditRecord]]:
        """The calls recorded after `cursor` (at most `limit`, oldest first) and the cursor
        after them; a cursor of None starts after the newest call recorded so far.

        Sequence numbers are drawn before commit: with several servers writing at once, a batch
        committed just after a read may hold a number below the cursor the read returned, so a
        follower may miss it (the records are kept; `audit` shows them)."""
        if cursor is None:
            row = self._read("SELECT coalesce(max(seq), 0) FROM audit", ())
            return int(row[0]), []
        rows = self._read(
            f"SELECT seq, {_AUDIT_COLUMNS} FROM audit WHERE seq > %s ORDER BY seq LIMIT %s",
            (cursor, limit),
            many=True,
        )
        if not rows:
            return cursor, []
        return int(rows[-1][0]), [AuditRecord(*row[1:]) for row in rows]

    def audit_size(self) -> int:
        """How many calls the audit log holds."""
        return int(self._read("SELECT count(*) FROM audit", ())[0])

    # --- on an event loop ---------------------------------------------------------------------

    def _loop_pool(self) -> _LoopPool | None:
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
        self._loop_side = _LoopPool(self._url, self._connect_kwargs, self._loop_size)
        return self._loop_side

    async def _run_async(
        self,
        pool: _LoopPool,
        work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]],
        *,
        retry: bool,
        libpq: bool = False,
    ) -> T:
        """`_run`, awaited on the loop's own connections: the same faults, the same answers.

        `work` goes through psycopg's calls unless `libpq` (a `_Session.fetch`): psycopg then
        watches the connection's socket itself, and the session's watch is stopped first.
        """
        if time.monotonic() < self._down_until:
            raise StoreUnavailable("held after a fault")
        wait = self._pool_wait_s
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                # an idle one without a coroutine (the common case: a read's hot path)
                conn = pool._idle.pop() if pool._idle else await pool.get(wait)
            except _PoolFull:
                if time.monotonic() - self._lost_at < LOST_WINDOW_S:
                    self._hold()  # connections are being replaced: the database is down
                raise StoreUnavailable("no free connection") from None
            except psycopg.Error as exc:  # no new connection: the database is down
                self._lost_at = time.monotonic()
                self._hold()
                raise StoreUnavailable(type(exc).__name__) from None
            try:
                if not libpq:
                    pool.unwatch(conn)
                return await work(conn)
            except psycopg.Error as exc:
                if not _is_lost(exc):
                    raise StoreUnavailable(type(exc).__name__) from None
                self._lost_at = time.monotonic()
                pool.drop_idle()
                if attempt + 1 < attempts:
                    wait = min(wait, RETRY_POOL_WAIT_S)
                    continue
                self._hold()
                raise StoreUnavailable(type(exc).__name__) from None
            finally:
                pool.put(conn)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _fetch_async(
        self,
        pool: _LoopPool,
        statement: _Statement,
        params: Sequence[str],
        rows: Callable[[pq.abc.PGresult], T],
    ) -> T:
        """`rows` of what `statement` returns (binary format), on one of the loop's connections:
        the same faults and answers as the store's other calls, and retried once the same way.

        Raises:
            StoreUnavailable: as any call; and for a row `rows` cannot read (a NULL where the
                schema holds none).
        """
        values = [param.encode("utf-8") for param in params]
        result = await self._run_async(
            pool, lambda conn: pool.session(conn).fetch(statement, values), retry=True, libpq=True
        )
        try:
            return rows(result)
        except _NoValue:
            raise StoreUnavailable("unexpected NULL") from None

    async def healthy_async(self) -> bool:
        """`healthy`, awaited on the running loop: a database that does not answer holds the
        probe alone, for at most `HEALTH_TIMEOUT_S` (then it is not healthy; the connection the
        probe waited on is closed, as any given back mid-statement)."""
        pool = self._loop_pool()
        if pool is None:
            return await asyncio.to_thread(self.healthy)
        try:
            async with asyncio.timeout(HEALTH_TIMEOUT_S):
                await self._fetch_async(pool, _HEALTH_PREPARED, (), _nothing)
        except (StoreUnavailable, TimeoutError):
            return False
        return True

    async def read_note_async(self, owner: str, note_id: str) -> Note | None:
        """`read_note`, awaited on the running loop, no thread: the notes read by the calls of
        one turn of the loop are read together, by one statement and one round trip (each by
        its owner and id, as alone), and each call answered its own note, None, or the fault."""
        pool = self._loop_pool()
        if pool is None:
            return await asyncio.to_thread(self.read_note, owner, note_id)
        if "\x00" in note_id:
            return None
        read: asyncio.Future[bytes | None] = pool.loop.create_future()
        pool.note_reads.append((owner, note_id, read))
        if len(pool.note_reads) == 1:
            pool.loop.call_soon(self._send_note_reads, pool)
        text = await read
        return None if text is None else Note(note_id, _text(text))

    def _send_note_reads(self, pool: _LoopPool) -> None:
        """Read the notes asked for in this turn of the loop, in a task of their own (a call
        that gives up waiting leaves the others' read going)."""
        batch, pool.note_reads = pool.note_reads, []
        task = pool.loop.create_task(self._read_notes(pool, batch))
        pool.tasks.add(task)
        task.add_done_callback(pool.tasks.discard)

    async def _read_notes(self, pool: _LoopPool, batch: list[_NoteRead]) -> None:
        """Each read of `batch` answered: its note's text or None, or StoreUnavailable."""
        try:
            if len(batch) == 1:
                owner, note_id, _ = batch[0]
                one = await self._fetch_async(
                    pool, _READ_NOTE_PREPARED, (owner, note_id), _first_bytes
                )
                texts = {(owner, note_id): one}
            else:
                keys = list(dict.fromkeys((owner, note_id) for owner, note_id, _ in batch))
                found = await self._fetch_async(
                    pool,
                    _READ_NOTES_PREPARED,
                    (_text_array([k[0] for k in keys]), _text_array([k[1] for k in keys])),
                    _numbered_bytes,
                )
                texts = {key: found.get(n) for n, key in enumerate(keys, 1)}
        except StoreUnavailable as exc:
            for _, _, read in batch:
                if not read.done():
                    read.set_exception(StoreUnavailable(*exc.args))
            return
        except asyncio.CancelledError:
            for _, _, read in batch:
                read.cancel()
            raise
        except Exception as exc:  # not expected: every caller sees it, none waits for ever
            for _, _, read in batch:
                if not read.done():
                    read.set_exception(exc)
            return
        for owner, note_id, read in batch:
            if not read.done():  # else the call gave up waiting
                read.set_result(texts[owner, note_id])

    async def list_notes_async(self, owner: str) -> list[Note]:
        """`list_notes`, awaited on the running loop."""
        pool = self._loop_pool()
        if pool is None:
            return await asyncio.to_thread(self.list_notes, owner)
        return await self._fetch_async(pool, _LIST_NOTES_PREPARED, (owner,), _notes)

    async def count_notes_async(self, owner: str) -> int:
        """`count_notes`, awaited on the running loop."""
        pool = self._loop_pool()
        if pool is None:
            return await asyncio.to_thread(self.count_notes, owner)
        return await self._fetch_async(pool, _COUNT_NOTES_PREPARED, (owner,), _count)

    async def create_note_async(self, owner: str, text: str, key: IdempotencyKey) -> Note:
        """`create_note`, awaited on the running loop: one round trip and one commit.

        Raises:
            IdempotencyConflict: the call id was used for a different call.
        """
        pool = self._loop_pool()
        if pool is None:
            return await asyncio.to_thread(self.create_note, owner, text, key)
        params = {
            "owner": owner,
            "call_id": key.call_id,
            "fingerprint": key.fingerprint,
            "text": _bytes(text),
        }

        async def create(conn: psycopg.AsyncConnection[Any]) -> Note:
            while True:
                note_id = new_note_id()
                try:
                    cursor = await conn.execute(
                        _CREATE, {**params, "note_id": note_id, "now": time.time()}
                    )
                    row = await cursor.fetchone()
                except pg_errors.UniqueViolation:  # 78 random bits collided: draw again
                    continue
                if row is not None:
                    return Note(note_id, text)
                recorded = await _recorded_async(conn, owner, key)
                if recorded is not None:
                    return Note(recorded, text)

        return await self._run_async(pool, create, retry=True)

    async def delete_note_async(self, owner: str, note_id: str, key: IdempotencyKey) -> bool:
        """`delete_note`, awaited on the running loop.

        Raises:
            IdempotencyConflict: the call id was used for a different call.
        """
        pool = self._loop_pool()
        if pool is None:
            return await asyncio.to_thread(self.delete_note, owner, note_id, key)
        if "\x00" in note_id:
            return False
        params = {
            "owner": owner,
            "note_id": note_id,
            "call_id": key.call_id,
            "fingerprint": key.fingerprint,
        }

        async def delete(conn: psycopg.AsyncConnection[Any]) -> bool:
            cursor = await conn.execute(_DELETE, {**params, "now": time.time()})
            if await cursor.fetchone() is not None:
                return True
            return await _recorded_async(conn, owner, key) is not None

        return await self._run_async(pool, delete, retry=True)

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


_NoteRead = tuple[str, str, "asyncio.Future[bytes | None]"]
"""A note asked for: its owner, its id, and the future its text (None: no such note) is set on."""


class _PoolFull(Exception):
    """No connection came free within the wait."""


class _LoopPool:
    """The connections one event loop awaits its calls on: no thread, no lock, no hop.

    A connection is taken from the idle ones, or opened when fewer than `size` are, or awaited
    from a call that is done with one. A connection given back in any state but idle (a call
    cancelled mid-statement, a session lost) is closed, and the next call short of one opens a
    new one; `drop_idle` closes the idle ones too, after a lost session says they are likely lost.
    """

    def __init__(self, url: str, kwargs: Mapping[str, Any], size: int) -> None:
        self.loop: Final = asyncio.get_running_loop()
        self._url = url
        self._kwargs = kwargs
        self._size = size
        self._idle: deque[psycopg.AsyncConnection[Any]] = deque()
        self._waiters: deque[asyncio.Future[psycopg.AsyncConnection[Any] | None]] = deque()
        # until when each waiting call waits, and the one timer that gives them up
        self._deadlines: dict[asyncio.Future[psycopg.AsyncConnection[Any] | None], float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._open = 0  # connections counted against `size`: idle, in use or being opened
        self._audit: psycopg.AsyncConnection[Any] | None = None
        self._sessions: dict[psycopg.AsyncConnection[Any], _Session] = {}
        self.note_reads: list[_NoteRead] = []  # asked for in this turn of the loop, not sent
        self.tasks: set[asyncio.Task[None]] = set()  # the reads sent, until done

    async def get(self, wait: float) -> psycopg.AsyncConnection[Any]:
        """A connection of this loop's.

        Raises:
            _PoolFull: none came free within `wait` seconds.
            psycopg.Error: a new connection could not be opened.
        """
        while True:
            if self._idle:
                return self._idle.pop()  # the most recently used: its statements are prepared
            if self._open < self._size:
                self._open += 1
                try:
                    return await psycopg.AsyncConnection.connect(self._url, **self._kwargs)
                except BaseException:
                    self._open -= 1
                    self._wake()
                    raise
            waiter: asyncio.Future[psycopg.AsyncConnection[Any] | None] = self.loop.create_future()
            self._waiters.append(waiter)
            self._expire_at(waiter, self.loop.time() + wait)
            try:
                conn = await waiter
            except _PoolFull:
                raise  # none came within the wait (`_expire`)
            except BaseException:  # the call was cancelled
                self._deadlines.pop(waiter, None)
                if waiter.done() and not waiter.cancelled():  # handed one just as it gave up
                    handed = waiter.result()
                    if handed is None:
                        self._wake()  # the free place goes to the next one waiting
                    else:
                        self.put(handed)
                else:
                    waiter.cancel()
                raise
            if conn is not None:
                return conn
            # None: a connection was closed, and this call may open one in its place

    def _expire_at(
        self, waiter: asyncio.Future[psycopg.AsyncConnection[Any] | None], deadline: float
    ) -> None:
        """Give `waiter` up at `deadline` unless it is served first: one timer for all the
        calls waiting (armed for the earliest), not one per call, as most are served in
        microseconds."""
        self._deadlines[waiter] = deadline
        if self._timer is None or deadline < self._timer.when():
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Fail the calls whose wait is over (_PoolFull), and arm the timer for the next."""
        self._timer = None
        now = self.loop.time()
        for waiter, deadline in list(self._deadlines.items()):
            if waiter.done():
                del self._deadlines[waiter]
            elif deadline <= now:
                del self._deadlines[waiter]
                waiter.set_exception(_PoolFull())
        if self._deadlines:
            self._timer = self.loop.call_at(min(self._deadlines.values()), self._expire)

    def session(self, conn: psycopg.AsyncConnection[Any]) -> _Session:
        """What this pool keeps of `conn`, one of its connections in use."""
        session = self._sessions.get(conn)
        if session is None:
            session = self._sessions[conn] = _Session(conn, self.loop)
        return session

    def unwatch(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Stop watching `conn`'s socket (before psycopg, or the pool, takes it over)."""
        session = self._sessions.get(conn)
        if session is not None:
            session.unwatch()

    def _discard(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Close `conn`, its socket no longer watched by the loop first."""
        session = self._sessions.pop(conn, None)
        if session is not None:
            session.unwatch()
        _discard(conn)

    def put(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Give `conn` back: to a waiting call, to the idle ones, or closed if not idle."""
        pgconn = conn.pgconn  # its status read from libpq (psycopg's `info` makes an object)
        if (
            pgconn.status != _CONNECTION_OK
            or pgconn.transaction_status != _IDLE
            or self._open > self._size
        ):
            self._discard(conn)
            self._open -= 1
            self._wake()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                del self._deadlines[waiter]
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    def _wake(self) -> None:
        """Tell one waiting call that a place is free to open a connection in."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                del self._deadlines[waiter]
                waiter.set_result(None)
                return

    def drop_idle(self) -> None:
        """Close the idle connections (their sessions are likely lost too)."""
        while self._idle:
            self._discard(self._idle.pop())
            self._open -= 1
            self._wake()

    async def audit_connection(self) -> psycopg.AsyncConnection[Any]:
        """The connection kept for the audit's batches (one writer at a time: the audit's
        flush), opened when first asked for or after a fault.

        Raises:
            psycopg.Error: it could not be opened.
        """
        if self._audit is None or self._audit.closed:
            self._audit = await psycopg.AsyncConnection.connect(self._url, **self._kwargs)
        return self._audit

    def drop_audit_connection(self) -> None:
        """Close the audit's connection (after a fault): the next batch opens another."""
        if self._audit is not None:
            _discard(self._audit)
            self._audit = None

    def close(self) -> None:
        """Close the idle connections; those in use are closed when given back."""
        self._size = 0
        self.drop_idle()
        self.drop_audit_connection()


def _discard(conn: psycopg.AsyncConnection[Any]) -> None:
    # The session ends at once (libpq's finish is not a wait): no task to schedule.
    conn.pgconn.finish()


class _Session:
    """One of the loop's connections as its reads use it: the statements prepared on it, and
    its socket watched by the loop for as long as reads go through libpq on it (watching it
    once, not per round trip, saves the loop two registrations per read).

    While no read waits on it, what arrives (a notice; the server's goodbye when the session is
    terminated) is read at once, so that the loop is not woken for it again; a session found
    lost that way is no longer watched, and the next call on it fails and replaces it.
    """

    __slots__ = ("_conn", "_loop", "_prepared", "_ready", "_watched")

    def __init__(self, conn: psycopg.AsyncConnection[Any], loop: asyncio.AbstractEventLoop):
        self._conn = conn
        self._loop = loop
        self._prepared: set[bytes] = set()
        self._ready: asyncio.Future[None] | None = None  # a read waiting for the socket
        self._watched = -1  # the socket the loop watches for this session, or -1

    def fetch(self, statement: _Statement, params: Sequence[bytes]) -> Awaitable[pq.abc.PGresult]:
        """The result of `statement`, sent as a prepared statement (prepared first, by one more
        round trip, at its first use on this connection) and awaited on the loop.

        The connection is idle, in autocommit, and no other call uses it meanwhile (the loop's
        pool hands it to one call at a time); a call cancelled while it waits leaves it busy,
        and the pool closes it.

        Raises:
            psycopg.Error: the statement failed (its class from its SQLSTATE, as psycopg raises
                it), or the session did (when sent, or when awaited).
        """
        pgconn = self._conn.pgconn
        if self._watched < 0:
            self._watched = pgconn.socket
            self._loop.add_reader(self._watched, self._readable)
        if statement.name not in self._prepared:
            return self._prepare_then_fetch(statement, params)
        pgconn.send_query_prepared(statement.name, params, result_format=pq.Format.BINARY)
        return self._result()

    async def _prepare_then_fetch(
        self, statement: _Statement, params: Sequence[bytes]
    ) -> pq.abc.PGresult:
        self._conn.pgconn.send_prepare(statement.name, statement.sql)
        await self._result()
        self._prepared.add(statement.name)
        return await self.fetch(statement, params)

    async def _result(self) -> pq.abc.PGresult:
        """The result of the command just sent (libpq non-blocking, as psycopg leaves it); the
        first error is raised."""
        pgconn = self._conn.pgconn
        while pgconn.flush():  # 1: not all sent yet (the socket's buffer is full)
            await _writable(self._loop, self._watched)
        kept: pq.abc.PGresult | None = None
        while True:
            while pgconn.is_busy():
                self._ready = ready = self._loop.create_future()
                try:
                    await ready
                finally:
                    self._ready = None
                pgconn.consume_input()
            result = pgconn.get_result()
            if result is None:  # the command is done and the session ready for the next
                break
            if kept is None or kept.status != _FATAL_ERROR:
                kept = result
        if kept is None:
            raise psycopg.InterfaceError("no result")
        if kept.status == _FATAL_ERROR:
            error = pg_errors.error_from_result(kept, encoding=self._conn.info.encoding)
            if isinstance(error, pg_errors.InvalidSqlStatementName):
                # the session's statements were dropped (DEALLOCATE ALL, DISCARD ALL, a pooler's
                # reset): this call fails, the next prepares them again
                self._prepared.clear()
            raise error
        return kept

    def _readable(self) -> None:
        ready = self._ready
        if ready is not None:
            if not ready.done():  # the loop may poll the socket again before the read runs
                ready.set_result(None)
            return
        pgconn = self._conn.pgconn
        try:
            pgconn.consume_input()
        except psycopg.Error:
            self.unwatch()  # the session is lost: the next call on it finds out
            return
        if pgconn.status != _CONNECTION_OK:
            self.unwatch()

    def unwatch(self) -> None:
        """Stop watching the socket (before psycopg takes the connection, or it is closed)."""
        if self._watched >= 0:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._watched)
            self._watched = -1


async def _writable(loop: asyncio.AbstractEventLoop, fileno: int) -> None:
    """Until `fileno` can be written to."""
    ready = loop.create_future()
    loop.add_writer(fileno, _set_ready, ready)
    try:
        await ready
    finally:
        loop.remove_writer(fileno)


def _set_ready(ready: asyncio.Future[None]) -> None:
    # The loop may poll the socket again before the waiting call runs: called twice, once here.
    if not ready.done():
        ready.set_result(None)


def _nothing(result: pq.abc.PGresult) -> None:
    """Nothing of a result but that it came."""


def _first_bytes(result: pq.abc.PGresult) -> bytes | None:
    """The first column of the first row (a NOT NULL bytea), or None for no row."""
    return result.get_value(0, 0) if result.ntuples else None


def _numbered_bytes(result: pq.abc.PGresult) -> dict[int, bytes]:
    """The (int8 number, bytea) rows, by number."""
    return {
        int.from_bytes(_cell(result, row, 0), "big", signed=True): _cell(result, row, 1)
        for row in range(result.ntuples)
    }


def _text_array(values: Sequence[str]) -> str:
    """A PostgreSQL array literal of `values` (text without NUL), every element quoted: a
    quoted NULL, brace, comma or space is text, and a quote or backslash is escaped."""
    quoted = (value.replace("\\", "\\\\").replace('"', '\\"') for value in values)
    return "{" + ",".join(f'"{value}"' for value in quoted) + "}"


def _count(result: pq.abc.PGresult) -> int:
    """The int8 of a one-row, one-column result."""
    return int.from_bytes(_cell(result, 0, 0), "big", signed=True)


def _notes(result: pq.abc.PGresult) -> list[Note]:
    """The (id, text) rows as notes."""
    return [
        Note(_cell(result, row, 0).decode("utf-8"), _text(_cell(result, row, 1)))
        for row in range(result.ntuples)
    ]


def _text_pair(result: pq.abc.PGresult) -> tuple[str, str] | None:
    """The first row's two text columns, or None for no row."""
    if not result.ntuples:
        return None
    return _cell(result, 0, 0).decode("utf-8"), _cell(result, 0, 1).decode("utf-8")


class _NoValue(Exception):
    """A NULL where the schema holds none."""


def _cell(result: pq.abc.PGresult, row: int, column: int) -> bytes:
    value = result.get_value(row, column)
    if value is None:  # every column read here is NOT NULL
        raise _NoValue
    return value


def _is_lost(exc: psycopg.Error) -> bool:
    """Whether `exc` says the session is gone (not a timeout or a refused statement)."""
    state = exc.sqlstate
    if state is None:  # no answer from the server: libpq's own connection failure
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith(_LOST_CONNECTION)


def _recorded(conn: psycopg.Connection[Any], owner: str, key: IdempotencyKey) -> str | None:
    row = conn.execute(_RECORDED, (owner, key.call_id)).fetchone()
    if row is None:
        return None
    if not hmac.compare_digest(row[0], key.fingerprint):
        raise IdempotencyConflict
    return str(row[1])


def _audit_batch(records: Sequence[AuditRecord]) -> list[list[Any]]:
    """The parameters of `_RECORD_BATCH`: the records as ten columns, then their per-minute
    counts as eight, sorted (so that servers writing the same minutes lock them in one order)."""
    columns = [list(column) for column in zip(*records, strict=True)]
    for index in (1, 2, 3, 8, 9):  # call_id, identity, tool, reason, pointer: text refuses NUL
        columns[index] = [_no_nul(value) for value in columns[index]]
    minutes = sorted(
        (minute, *(_key(part) for part in rest), n)
        for (minute, *rest), n in minute_counts(records).items()
    )
    return [*columns, *(list(column) for column in zip(*minutes, strict=True))]


async def _recorded_async(
    conn: psycopg.AsyncConnection[Any], owner: str, key: IdempotencyKey
) -> str | None:
    cursor = await conn.execute(_RECORDED, (owner, key.call_id))
    row = await cursor.fetchone()
    if row is None:
        return None
    if not hmac.compare_digest(row[0], key.fingerprint):
        raise IdempotencyConflict
    return str(row[1])


def _key(part: str | None) -> str | None:
    """A part of a per-minute key as stored: '' for none (a NULL would never conflict)."""
    return "" if part is None else _no_nul(part)


def _bytes(text: str) -> bytes:
    # Note text is kept as UTF-8 bytes: PostgreSQL's text refuses NUL, which a JSON string may
    # hold and SQLite keeps, and a note must read back exactly as it was written on either.
    return text.encode("utf-8")


def _text(value: bytes) -> str:
    return bytes(value).decode("utf-8")


def _no_nul(value: str | None) -> str | None:
    # An audit column is the service's own text, but a call id is the caller's: its NUL is
    # written as the JSON escape, so the batch is never refused for it.
    return value if value is None or "\x00" not in value else value.replace("\x00", "\\u0000")
