"""The PostgreSQL schema and its migrations: versioned in `meta`, migrated at start under an
advisory lock held to the commit, so servers starting together apply each step once; a
database whose schema is newer than this code is refused (`SchemaTooNew`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import psycopg

from strictcall.storage.base import MINUTE_S, SchemaTooNew

SCHEMA_VERSION: Final = 3
"""The schema this code writes (PostgreSQL's own numbering, apart from SQLite's)."""

# Any fixed 64-bit key: the lock servers of every version take before they read or migrate.
MIGRATION_LOCK: Final = 0x5C_7A_11_0000_0001

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
MIGRATIONS: Final[Mapping[int, tuple[str, ...]]] = {
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
    # Tool pinning (issue 28), as SQLite's version 4.
    3: (
        """CREATE TABLE IF NOT EXISTS tool_pins (
            name text PRIMARY KEY,
            pinned text NOT NULL,
            seen text,
            pinned_at double precision NOT NULL
        )""",
    ),
}


def migrate(url: str, connect_kwargs: Mapping[str, Any]) -> None:
    """Bring the schema up to SCHEMA_VERSION, on a connection of its own, under an advisory
    lock held to the commit.

    Raises:
        SchemaTooNew: the database's schema is newer than this code.
        psycopg.Error: the database failed.
    """
    kwargs = {**connect_kwargs, "autocommit": False}
    with psycopg.connect(url, **kwargs) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text)")
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', '0') ON CONFLICT DO NOTHING"
        )
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row is not None else 0
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(version, SCHEMA_VERSION)
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[target]:
                conn.execute(statement.encode("utf-8"))
            conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (str(target),))
