"""PostgreSQL for the tests: the server at 127.0.0.1:5432 (or $STRICTCALL_TEST_PG), one fresh
database per use, dropped after.

When no server answers, the PostgreSQL tests skip with one reason, printed once by pytest's
summary; with CI=true they fail instead, as CI must run them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import psycopg
import pytest

ADMIN_URL: Final = os.environ.get(
    "STRICTCALL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
)
"""A database to connect to for creating and dropping the tests' own."""

SKIP_REASON: Final = "PostgreSQL tests skipped: no server answers at " + ADMIN_URL


def in_ci() -> bool:
    """Whether this run is CI's, where PostgreSQL is required."""
    return os.environ.get("CI", "").lower() == "true"


def answers() -> bool:
    """Whether the PostgreSQL server answers."""
    try:
        with psycopg.connect(ADMIN_URL, connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def url_of(database: str) -> str:
    """The URL of `database` on the tests' server."""
    return ADMIN_URL.rsplit("/", 1)[0] + "/" + database


def admin() -> psycopg.Connection[tuple[object, ...]]:
    """A connection to the admin database, in autocommit."""
    return psycopg.connect(ADMIN_URL, connect_timeout=3, autocommit=True)


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new empty database, `strictcall_test_<random>`, dropped (whoever is connected) after;
    its URL."""
    name = "strictcall_test_" + secrets.token_hex(6)
    with admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url_of(name)
    finally:
        with admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def terminate_backends(url: str) -> int:
    """Kill every session connected to `url`'s database (pg_terminate_backend); how many."""
    database = url.rsplit("/", 1)[1].split("?", 1)[0]
    with admin() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return len(rows)


def allow_connections(url: str, allowed: bool) -> None:
    """Let sessions connect to `url`'s database, or refuse them (as a database that is down)."""
    database = url.rsplit("/", 1)[1].split("?", 1)[0]
    with admin() as conn:
        conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(allowed).lower()}')


def require() -> None:
    """Skip (or, in CI, fail) the calling test when PostgreSQL does not answer."""
    if answers():
        return
    if in_ci():
        pytest.fail("CI requires PostgreSQL and none answers at " + ADMIN_URL, pytrace=False)
    pytest.skip(SKIP_REASON)
