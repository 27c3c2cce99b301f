"""The PostgreSQL store: the only package that imports psycopg (and psycopg_pool).

`PostgresStore` serves every job's protocol (`strictcall.storage.base`) on a PostgreSQL
database named by a URL, so that several processes and hosts serve one set of notes. Its
modules, by job:

- `store`: the store, its calls from threads and their twins awaited on an event loop, which
  share their statements and row code;
- `statements`: the statements only PostgreSQL runs (the shared ones are
  `strictcall.storage.sql`) and how values cross into it;
- `schema`: the tables and their migrations, applied once under an advisory lock;
- `connections`: the loop's own connections (`LoopPool`), kept over psycopg_pool's async pool
  by measurement (its docstring has the figures);
- `session`: one of those connections as the loop's reads use it, through libpq;
- `faults`: which faults mean a lost session, and how long calls are then held;
- `_libpq`: the one home of psycopg's private part (`errors.error_from_result`).

The guarantees are SQLiteStore's: a note is read by (owner, id) in one unique index; tokens are
kept as hashes; writes are idempotent per (identity, call id), across servers: the idempotency
row and the note go in by one statement, `INSERT ... ON CONFLICT DO NOTHING`, so of two servers
racing on one key the second waits for the first's commit and answers its note.

Every driver fault (connection refused or lost, an administrator's termination, a statement
timeout, no free connection in the pool) raises `StoreUnavailable`. After a lost connection the
pool is checked and the call tried once more; while the database stays down, calls fail at once
for `FAULT_HOLD_S` instead of each waiting for a connection, and the pool reconnects by itself.
"""

from __future__ import annotations

from strictcall.errors import MissingExtra

try:
    import psycopg  # noqa: F401
    import psycopg_pool  # noqa: F401
except ImportError:  # exercised in a venv without the extra (tests: a blocked import)
    raise MissingExtra("postgres", "psycopg") from None

from strictcall.storage.postgres.connections import POOL_WAIT_S
from strictcall.storage.postgres.faults import FAULT_HOLD_S, LOST_WINDOW_S, RETRY_POOL_WAIT_S
from strictcall.storage.postgres.schema import SCHEMA_VERSION
from strictcall.storage.postgres.store import (
    CALL_THREADS,
    CONNECT_TIMEOUT_S,
    HEALTH_TIMEOUT_S,
    LOOP_CONNECTIONS,
    READ_POOL_WAIT_S,
    STATEMENT_TIMEOUT_MS,
    PostgresStore,
)

__all__ = [
    "CALL_THREADS",
    "CONNECT_TIMEOUT_S",
    "FAULT_HOLD_S",
    "HEALTH_TIMEOUT_S",
    "LOOP_CONNECTIONS",
    "LOST_WINDOW_S",
    "POOL_WAIT_S",
    "READ_POOL_WAIT_S",
    "RETRY_POOL_WAIT_S",
    "SCHEMA_VERSION",
    "STATEMENT_TIMEOUT_MS",
    "PostgresStore",
]
