"""Storage: the `Store` interface and its implementations, one module per database.

`open_store(db)` opens the store a `--db` value names: a `postgresql://` (or `postgres://`) URL
names a PostgreSQL database, anything else a SQLite file path. Nothing here imports a driver
until a store of that kind is opened.
"""

from __future__ import annotations

import os

from strictcall.storage.base import (
    DEFAULT_DB_PATH,
    MINUTE_S,
    TOKEN_CACHE_S,
    AuditRecord,
    FailureRow,
    IdempotencyConflict,
    IdempotencyKey,
    Note,
    StatRow,
    Store,
    StoreBusy,
    StoreError,
    StoreUnavailable,
    hash_token,
    minute_counts,
    new_note_id,
    new_token,
)

__all__ = [
    "DEFAULT_DB_PATH",
    "MINUTE_S",
    "TOKEN_CACHE_S",
    "AuditRecord",
    "FailureRow",
    "IdempotencyConflict",
    "IdempotencyKey",
    "Note",
    "StatRow",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreUnavailable",
    "default_db",
    "hash_token",
    "is_database_url",
    "minute_counts",
    "new_note_id",
    "new_token",
    "open_store",
]

_URL_SCHEMES: tuple[str, ...] = ("postgresql://", "postgres://")


def default_db() -> str:
    """$STRICTCALL_DB, or strictcall.sqlite3 in the current directory."""
    # An empty variable names no store, so it means the same as an unset one here.
    return os.environ.get("STRICTCALL_DB") or DEFAULT_DB_PATH


def is_database_url(db: str) -> bool:
    """Whether `db` names a database server by URL rather than a SQLite file by path."""
    return db.startswith(_URL_SCHEMES)


def open_store(db: str) -> Store:
    """The store `db` names: a SQLite file path, or a PostgreSQL URL.

    Raises:
        StoreUnavailable: the store cannot be opened.
        MissingExtra: the driver for that kind of store is not installed.
    """
    if is_database_url(db):
        raise StoreUnavailable("no PostgreSQL store in this build")
    from strictcall.storage.sqlite import SQLiteStore

    return SQLiteStore(db)
