"""Storage: one protocol per job (`NotesStore`, `TokenStore`, `AuditStore`, `OpsStore`,
`Health`; `Store`, their union) and the stores, one module (or package) per database.

`open_store(db)` opens the store a `--db` value names: a `postgresql://` (or `postgres://`) URL
names a PostgreSQL database, anything else a SQLite file path. Nothing here imports a driver
until a store of that kind is opened.
"""

from __future__ import annotations

import os

from strictcall.storage.base import (
    DEFAULT_DB_PATH,
    MINUTE_S,
    TOKEN_CACHE_ENV,
    TOKEN_CACHE_S,
    TOKEN_ID_LENGTH,
    AuditRecord,
    AuditStore,
    AwaitedNotes,
    FailureRow,
    Health,
    IdempotencyConflict,
    IdempotencyKey,
    Note,
    NotesStore,
    OpsStore,
    SchemaTooNew,
    StatRow,
    Store,
    StoreBusy,
    StoreError,
    StoreRefused,
    StoreUnavailable,
    StoreUnreachable,
    TokenInfo,
    TokenStore,
    hash_token,
    minute_counts,
    new_note_id,
    new_token,
    token_cache_s,
)

__all__ = [
    "DEFAULT_DB_PATH",
    "MINUTE_S",
    "TOKEN_CACHE_ENV",
    "TOKEN_CACHE_S",
    "TOKEN_ID_LENGTH",
    "AuditRecord",
    "AuditStore",
    "AwaitedNotes",
    "FailureRow",
    "Health",
    "IdempotencyConflict",
    "IdempotencyKey",
    "Note",
    "NotesStore",
    "OpsStore",
    "SchemaTooNew",
    "StatRow",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreRefused",
    "StoreUnavailable",
    "StoreUnreachable",
    "TokenInfo",
    "TokenStore",
    "default_db",
    "hash_token",
    "is_database_url",
    "minute_counts",
    "new_note_id",
    "new_token",
    "open_store",
    "shown_db",
    "token_cache_s",
    "unavailable_because",
]

_URL_SCHEMES: tuple[str, ...] = ("postgresql://", "postgres://")


def default_db() -> str | None:
    """$STRICTCALL_DB, or strictcall.sqlite3 in the current directory when it is unset; None
    when it is set but empty.

    An empty variable names no store. Reading it as "the default" would quietly put the data
    somewhere the operator did not say, so it is refused, as an empty --db is.
    """
    db = os.environ.get("STRICTCALL_DB")
    if db is None:
        return DEFAULT_DB_PATH
    return db if db != "" else None


def is_database_url(db: str) -> bool:
    """Whether `db` names a database server by URL rather than a SQLite file by path."""
    return db.startswith(_URL_SCHEMES)


def unavailable_because(db: str, exc: StoreUnavailable) -> str:
    """Why the store `db` names could not be opened or used, in the operator's words."""
    if isinstance(exc, (SchemaTooNew, StoreUnreachable)):
        return exc.for_operator()
    if is_database_url(db):
        return "the database server refused or could not be reached"
    from strictcall.storage.sqlite import describe_failure

    return describe_failure(db, exc)


def open_store(db: str) -> Store:
    """The store `db` names: a SQLite file path, or a PostgreSQL URL.

    Raises:
        StoreUnavailable: the store cannot be opened.
        MissingExtra: the driver for that kind of store is not installed.
    """
    if is_database_url(db):
        from strictcall.storage.postgres import PostgresStore

        return PostgresStore(db, token_cache_s=token_cache_s())
    from strictcall.storage.sqlite import SQLiteStore

    return SQLiteStore(db, token_cache_s=token_cache_s())


def shown_db(db: str) -> str:
    """`db` as it may be printed or logged: a URL's password (in its user part or its query)
    replaced by "***"."""
    if not is_database_url(db):
        return db
    import re

    db = re.sub(r"^([a-z]+://[^:@/]*):[^@/]*@", r"\1:***@", db)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", db)
