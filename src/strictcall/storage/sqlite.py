"""The embedded store: the only module that imports sqlite3.

`SQLiteStore` serves every job's protocol (`strictcall.storage.base`: notes, tokens, audit,
operators) on one file in WAL mode, its schema created on first use and versioned in `meta` for
later migrations; the statements it shares with PostgreSQL are `strictcall.storage.sql`'s, their
row code `strictcall.storage.queries`'. Every query that touches a
note names its owner, so another owner's note and a missing note take the same path and give
the same answer.

Database faults (locked, read-only, disk full, the file deleted under the server) raise
`StoreUnavailable`; the store itself stays usable and recovers when the fault clears.

Its schema and migrations (SQL text) are `strictcall.storage.sqlite_schema`'s.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Final

import orjson

from strictcall.storage.base import (
    TOKEN_CACHE_S,
    TOKEN_ID_LENGTH,
    AuditRecord,
    IdempotencyKey,
    Note,
    SchemaTooNew,
    StoreBusy,
    StoreUnavailable,
    TokenInfo,
    hash_token,
    minute_counts,
    new_note_id,
    new_token,
)
from strictcall.storage.pins import SharedPins
from strictcall.storage.queries import SharedReads, TokenCache, recorded_note_id
from strictcall.storage.sql import SQLITE
from strictcall.storage.sqlite_schema import COUNT_MINUTE as _COUNT_MINUTE
from strictcall.storage.sqlite_schema import INSERT_AUDIT_ROW as _INSERT_AUDIT_ROW
from strictcall.storage.sqlite_schema import INSERT_AUDIT_ROWS as _INSERT_AUDIT_ROWS
from strictcall.storage.sqlite_schema import MIGRATIONS as _MIGRATIONS
from strictcall.storage.sqlite_schema import SCHEMA as _SCHEMA
from strictcall.storage.sqlite_schema import SCHEMA_VERSION as SCHEMA_VERSION

BUSY_TIMEOUT_MS: Final = 1000
_READ_CHECK_S: Final = 0.5


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the file's schema up to SCHEMA_VERSION, one version per transaction.

    Raises:
        SchemaTooNew: the file's schema is newer than this code knows.
        sqlite3.Error: the database failed.
    """
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0])
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(version, SCHEMA_VERSION)
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _MIGRATIONS[target]:
                _apply(conn, statement)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(target),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _apply(conn: sqlite3.Connection, statement: str) -> None:
    """One migration step. A column the step adds that is already there (a file whose version
    was set back by hand) is what the step wants: SQLite has no ADD COLUMN IF NOT EXISTS."""
    try:
        conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if not (statement.startswith("ALTER TABLE") and "duplicate column name" in str(exc)):
            raise


INLINE_LOCK_WAIT_S: Final = 0.002
"""How long a write with `wait=False` may wait for another write of the same store to finish
(an audit batch, a write on a worker thread), which takes about a millisecond; without this
wait, writes arriving together would all go to the worker thread."""


def _prepare_writer(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode = WAL")
    # WAL + NORMAL: a commit survives a crash of the process (kill -9); only a crash of the
    # machine may lose the last commits.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(_SCHEMA)
    conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1')")
    _migrate(conn)


def _has_json(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT json_valid('[]')")
    except sqlite3.OperationalError:  # no such function
        return False
    return True


def _begin_without_waiting(conn: sqlite3.Connection) -> None:
    """BEGIN IMMEDIATE, or StoreBusy at once if another connection holds the write lock.

    Raises:
        StoreBusy: the write lock is held elsewhere.
    """
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise StoreBusy from None
        raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


class SQLiteStore(SharedReads, SharedPins):
    """The embedded store: one SQLite file in WAL mode, with two connections, each behind its
    own lock: one for writes, one for reads. In WAL mode readers never wait for a writer, so a
    write waiting on a lock held elsewhere (up to `BUSY_TIMEOUT_MS`) never holds up a read."""

    concurrent_calls: Final = 1  # reads take microseconds in process; one writer at a time
    tokens_inline: Final = True  # a token is looked up in process, in microseconds
    _sql = SQLITE

    def __init__(
        self, path: str | os.PathLike[str], *, token_cache_s: float = TOKEN_CACHE_S
    ) -> None:
        self.path: Final = Path(path)
        self._lock = threading.Lock()
        self._conn, self._inode = self._connect()
        self._read_lock = threading.Lock()
        self._reader, self._reader_inode = self._open_reader()
        self._read_cursor = self._reader.cursor()  # reused: one cursor less per read
        self._checked_at = time.monotonic()
        self._tokens = TokenCache(token_cache_s)
        self.json_rows = _has_json(self._conn)
        """Whether this SQLite has its JSON functions (built in since 3.38), with which an audit
        batch is inserted by one statement; without them, row by row."""

    def _connect(self) -> tuple[sqlite3.Connection, tuple[int, int]]:
        """The write connection: WAL mode, the schema created or migrated."""
        return self._open(_prepare_writer)

    def _open_reader(self) -> tuple[sqlite3.Connection, tuple[int, int]]:
        """The read connection: it can only query."""
        return self._open(lambda conn: conn.execute("PRAGMA query_only = ON"))

    def _open(
        self, prepare: Callable[[sqlite3.Connection], object]
    ) -> tuple[sqlite3.Connection, tuple[int, int]]:
        """A connection to the file, prepared, and the file's identity (device, inode)."""
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=0
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            prepare(conn)
            stat = os.stat(self.path)
        except SchemaTooNew:
            conn.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(type(exc).__name__) from None
        return conn, (stat.st_dev, stat.st_ino)

    def _file_now(self) -> tuple[int, int]:
        """The file's identity now.

        Raises:
            StoreUnavailable: the file is gone (deleted under us): serve nothing from it.
        """
        try:
            stat = os.stat(self.path)
        except OSError:
            raise StoreUnavailable("file missing") from None
        return stat.st_dev, stat.st_ino

    def _check_writer(self) -> None:
        """Before a write: refuse a deleted file, reopen a replaced one (under the write lock)."""
        if self._file_now() != self._inode:
            self._conn.close()
            self._conn, self._inode = self._connect()

    def _check_reader(self) -> None:
        """Before a read, at most every `_READ_CHECK_S`: the same (under the read lock)."""
        inode = self._file_now()
        self._checked_at = time.monotonic()
        if inode != self._reader_inode:
            self._reader.close()
            self._reader, self._reader_inode = self._open_reader()
            self._read_cursor = self._reader.cursor()

    @contextmanager
    def _using(self, *, write: bool = False, locked: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock (taken here unless the caller holds it: `locked`),
        with database faults raised as StoreUnavailable."""
        if not locked:
            self._lock.acquire()
        try:
            if write:
                self._check_writer()
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise StoreUnavailable(type(exc).__name__) from None
        finally:
            self._lock.release()

    def _select(self, sql: str, params: tuple[object, ...], *, many: bool = False) -> Any:
        """One read query's first row (or all rows), on the read connection, without a context
        manager on the path."""
        with self._read_lock:
            if time.monotonic() - self._checked_at >= _READ_CHECK_S:
                self._check_reader()
            try:
                cursor = self._read_cursor.execute(sql, params)
                return cursor.fetchall() if many else cursor.fetchone()
            except sqlite3.Error as exc:
                fault = type(exc).__name__
            # the file may have been replaced since the last check: look now, and retry once
            self._checked_at = 0.0
            self._check_reader()
            try:
                cursor = self._read_cursor.execute(sql, params)
                return cursor.fetchall() if many else cursor.fetchone()
            except sqlite3.Error:
                raise StoreUnavailable(fault) from None

    @contextmanager
    def _writing(self, *, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed whole, or rolled back whole.

        With `wait` false: StoreBusy rather than a wait for the database's write lock, or one
        longer than `INLINE_LOCK_WAIT_S` for this store's own (another of its writes). Its
        commit may still checkpoint the WAL, as any commit may: about one write in a few
        hundred takes a few milliseconds more.
        """
        if not wait and not self._lock.acquire(timeout=INLINE_LOCK_WAIT_S):
            raise StoreBusy
        with self._using(write=True, locked=not wait) as conn:
            if wait:
                conn.execute("BEGIN IMMEDIATE")
            else:
                _begin_without_waiting(conn)
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise

    def healthy(self) -> bool:
        """Whether the file is there (one stat; a lock or a full disk is a fault of one call)."""
        try:
            self._file_now()
        except StoreUnavailable:
            return False
        return True

    async def healthy_async(self) -> bool:
        """`healthy`, answered inline: one stat, no wait."""
        return self.healthy()

    # --- notes --------------------------------------------------------------------------------

    def read_note(self, owner: str, note_id: str) -> Note | None:
        """The owner's note of that id, or None (missing and not-yours are the same)."""
        row = self._select(SQLITE.read_note, (owner, note_id))
        return None if row is None else Note(note_id, row[0])

    def list_notes(self, owner: str) -> list[Note]:
        """The owner's notes, oldest first."""
        rows = self._select(SQLITE.list_notes, (owner,), many=True)
        return [Note(note_id, text) for note_id, text in rows]

    def count_notes(self, owner: str) -> int:
        """How many notes the owner has."""
        row = self._select(SQLITE.count_notes, (owner,))
        return int(row[0])

    def add_note(self, owner: str, text: str) -> Note:
        """Add a note outside any call (the operator's `notes add`)."""
        with self._writing() as conn:
            return self._insert_note(conn, owner, text)

    def create_note(self, owner: str, text: str, key: IdempotencyKey, *, wait: bool = True) -> Note:
        """Add a note, once per call id: a retry of the same call returns the first note and
        adds nothing. The note and the record of the write commit together.

        Raises:
            IdempotencyConflict: the call id was used for a different call.
            StoreBusy: with `wait` false, another write holds the lock (nothing written).
        """
        with self._writing(wait=wait) as conn:
            recorded = self._recorded(conn, owner, key)
            if recorded is not None:
                return Note(recorded, text)
            note = self._insert_note(conn, owner, text)
            self._record(conn, owner, key, note.note_id)
            return note

    def delete_note(
        self, owner: str, note_id: str, key: IdempotencyKey, *, wait: bool = True
    ) -> bool:
        """Delete the owner's note, once per call id: True if deleted now or by the first try
        of this call; False (nothing recorded) when the owner has no such note.

        Raises:
            IdempotencyConflict: the call id was used for a different call.
            StoreBusy: with `wait` false, another write holds the lock (nothing written).
        """
        with self._writing(wait=wait) as conn:
            if self._recorded(conn, owner, key) is not None:
                return True
            deleted = conn.execute(
                "DELETE FROM notes INDEXED BY notes_by_owner_id WHERE owner = ? AND id = ?",
                (owner, note_id),
            ).rowcount
            if deleted:
                self._record(conn, owner, key, note_id)
            return bool(deleted)

    @staticmethod
    def _insert_note(conn: sqlite3.Connection, owner: str, text: str) -> Note:
        now = time.time()
        while True:
            note_id = new_note_id()
            try:
                conn.execute(
                    "INSERT INTO notes (id, owner, text, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (note_id, owner, text, now, now),
                )
            except sqlite3.IntegrityError:  # 78 random bits collided: draw again
                continue
            return Note(note_id, text)

    @staticmethod
    def _recorded(conn: sqlite3.Connection, owner: str, key: IdempotencyKey) -> str | None:
        return recorded_note_id(conn.execute(SQLITE.recorded, (owner, key.call_id)).fetchone(), key)

    @staticmethod
    def _record(conn: sqlite3.Connection, owner: str, key: IdempotencyKey, note_id: str) -> None:
        conn.execute(
            "INSERT INTO idempotency (identity, call_id, fingerprint, note_id, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (owner, key.call_id, key.fingerprint, note_id, time.time()),
        )

    # --- tokens -------------------------------------------------------------------------------

    def create_token(self, identity: str) -> str:
        """A new random API token for `identity`; only its hash is kept."""
        token = new_token()
        with self._using(write=True) as conn:
            conn.execute(SQLITE.insert_token, (hash_token(token), identity, time.time()))
        return token

    async def identity_for_token_async(self, token: str) -> str | None:
        """`identity_for_token`, answered inline: a lookup in process takes microseconds."""
        return self.identity_for_token(token)

    def revoke_tokens(
        self, token_id: str | None = None, identity: str | None = None
    ) -> list[TokenInfo]:
        """Delete the token whose id is `token_id` and every token of `identity`; the ones
        deleted. Servers sharing the file refuse them once their cache lets go of them."""
        with self._using(write=True) as conn:
            rows = conn.execute(
                "DELETE FROM tokens WHERE substr(hash, 1, ?) = ? OR identity = ?"
                " RETURNING hash, identity, role, created_at",
                (TOKEN_ID_LENGTH, token_id, identity),
            ).fetchall()
        self._tokens.clear()
        return sorted(TokenInfo.of_row(*row) for row in rows)

    # --- audit --------------------------------------------------------------------------------

    def record_call(self, record: AuditRecord) -> None:
        """Append one call to the audit log."""
        self.record_calls((record,))

    def record_calls(self, records: Sequence[AuditRecord]) -> None:
        """Append calls to the audit log, in one transaction (never into a deleted file: the
        caller keeps what could not be written)."""
        # Each record is a JSON array of its eight fields. Its strs are the service's own (ids
        # from strict JSON, identities from the token table, names from the catalogue), so they
        # encode: a lone surrogate, the one str orjson refuses, sqlite3 would refuse as well.
        minutes = [(*(_key(part) for part in key), n) for key, n in minute_counts(records).items()]
        with self._writing() as conn:
            if self.json_rows:
                rows = orjson.dumps([tuple(record) for record in records])  # no NamedTuple
                conn.execute(_INSERT_AUDIT_ROWS, (rows,))
            else:
                conn.executemany(_INSERT_AUDIT_ROW, records)
            conn.executemany(_COUNT_MINUTE, minutes)

    async def record_calls_async(self, records: Sequence[AuditRecord]) -> None:
        """`record_calls` on a worker thread: the write may wait on the database's lock."""
        await asyncio.to_thread(self.record_calls, records)

    def prune_audit(self, before: float, limit: int) -> int:
        """Delete at most `limit` audit rows written before `before` (oldest first): one short
        transaction, so calls' writes never wait long behind it. How many went."""
        return self._change(SQLITE.prune_audit, (before, limit))

    def prune_audit_over(self, keep: int, limit: int) -> int:
        """Delete at most `limit` of the audit rows beyond the newest `keep` (oldest first), in
        one short statement. How many went."""
        return self._change(SQLITE.prune_audit_over, (keep, limit))

    # --- for operators ------------------------------------------------------------------------

    def _change(self, sql: str, params: tuple[object, ...]) -> int:
        """One write statement in a transaction of its own; the rows it changed."""
        with self._writing() as conn:
            return conn.execute(sql, params).rowcount

    def create_operator_token(self, name: str) -> str:
        """A new operator token (the page, /metrics); it is no agent's token: /rpc refuses it."""
        token = new_token()
        with self._using(write=True) as conn:
            conn.execute(SQLITE.insert_operator_token, (hash_token(token), name, time.time()))
        return token

    def close(self) -> None:
        """Close the database (a WAL checkpoint happens when the last connection closes)."""
        with self._read_lock:
            self._reader.close()
        with self._lock:
            self._conn.close()


def _key(part: object) -> object:
    """A part of a per-minute key as stored: '' for none (a NULL would never conflict)."""
    return "" if part is None else part


# --- why a store failed, for the operator -------------------------------------------------------

# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_PERM: Final = 3
_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_SQLITE_READONLY: Final = 8
_SQLITE_IOERR: Final = 10
_SQLITE_CORRUPT: Final = 11
_SQLITE_FULL: Final = 13
_SQLITE_CANTOPEN: Final = 14
_SQLITE_AUTH: Final = 23
_SQLITE_NOTADB: Final = 26
_SQLITE_READONLY_DIRECTORY: Final = 1544

_BY_CODE: Final = {
    _SQLITE_PERM: "permission denied",
    _SQLITE_AUTH: "permission denied",
    _SQLITE_BUSY: "it is locked by another process; try again when that process is done",
    _SQLITE_LOCKED: "it is locked by another process; try again when that process is done",
    _SQLITE_READONLY: "it is read-only (the file or its directory cannot be written)",
    _SQLITE_IOERR: "the disk reported an I/O error",
    _SQLITE_CORRUPT: "it is not a database (not SQLite, or damaged)",
    _SQLITE_NOTADB: "it is not a database (not SQLite, or damaged)",
    _SQLITE_FULL: "the disk is full",
}


def describe_failure(path: str | os.PathLike[str], exc: BaseException) -> str:
    """Why the store at `path` failed with `exc`, in the operator's words (one short clause).

    A StoreUnavailable says only "retry later", all a caller of a tool needs; an operator
    starting a command needs the cause: it is read from the SQLite or OS error the store was
    handling (the exception's context) and from the path itself.
    """
    if isinstance(exc, SchemaTooNew):
        return exc.for_operator()
    cause = exc.__cause__ or exc.__context__
    where = Path(path)
    if isinstance(cause, sqlite3.Error):
        code = cause.sqlite_errorcode
        if code == _SQLITE_READONLY_DIRECTORY:
            return f"it is read-only: its directory {where.parent} cannot be written"
        if code is not None and code & 0xFF != _SQLITE_CANTOPEN and code & 0xFF in _BY_CODE:
            return _BY_CODE[code & 0xFF]
    if isinstance(cause, OSError) and cause.errno == errno.ENOENT and where.parent.is_dir():
        return "the file was removed while it was being opened"
    return _why_not_opened(where)


def _why_not_opened(path: Path) -> str:
    """Why a file cannot be opened, from the path alone."""
    directory = path.parent
    if not directory.is_dir():
        if directory.exists():
            return f"{directory} is not a directory"
        return f"the directory {directory} does not exist"
    if path.is_dir():
        return "it is a directory, not a file"
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            return "permission denied: the file cannot be read and written by this user"
    elif not os.access(directory, os.W_OK | os.X_OK):
        return f"permission denied: this user cannot create a file in {directory}"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"it is read-only: its directory {directory} cannot be written"
    return "SQLite could not open the file"
