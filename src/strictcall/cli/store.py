"""What every command that reads or writes the store shares: its exit statuses, and the store
opened (or one line saying why it cannot be)."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import closing
from typing import Final, TextIO, TypeVar

from strictcall.errors import MissingExtra
from strictcall.storage import (
    Store,
    StoreUnavailable,
    is_database_url,
    open_store,
    shown_db,
    unavailable_because,
)

T = TypeVar("T")

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1


def _open_store(db: str, err: TextIO) -> Store | None:
    """The store at `db` for a server, or None (and a message) when it cannot be opened."""
    try:
        return open_store(db)
    except MissingExtra as exc:
        err.write(f"strictcall: cannot open the store at {shown_db(db)}: {exc}\n")
        return None
    except StoreUnavailable as exc:
        why = unavailable_because(db, exc)
        err.write(f"strictcall: cannot open the store at {shown_db(db)}: {why}\n")
        return None


def store_named(db: str) -> str:
    """The store as a command names it: a file by its full path (a relative one is relative
    to the directory the command ran in), a URL without its password."""
    return shown_db(db) if is_database_url(db) else os.path.abspath(db)


def say_if_new(db: str, err: TextIO) -> None:
    """Tell `err` when the SQLite file at `db` is not there yet (a command that writes makes it):
    a token made in a new store is one no server on another store knows."""
    if is_database_url(db) or os.path.exists(db):
        return
    if os.path.isdir(os.path.dirname(os.path.abspath(db))):  # else opening it says why not
        err.write(f"strictcall: no store at {store_named(db)} yet: a new one is made there\n")


def _with_store(db: str, err: TextIO, action: Callable[[Store], T]) -> T | None:
    """`action` on the store at `db`, closed after; None (and a message) when it is unavailable."""
    store = _open_store(db, err)
    if store is None:
        return None
    try:
        with closing(store):
            return action(store)
    except StoreUnavailable as exc:
        why = unavailable_because(db, exc)
        err.write(f"strictcall: cannot use the store at {shown_db(db)}: {why}\n")
        return None
