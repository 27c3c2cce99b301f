"""The embedded store's schema (`strictcall.storage.sqlite`): the tables a new file is given,
the statements that migrate an older file one version at a time, and its audit writes'
statements. SQL text only: `strictcall.storage.sqlite` runs them (the only module that imports
sqlite3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from strictcall.storage.base import MINUTE_S
from strictcall.storage.sql import AUDIT_COLUMNS

SCHEMA_VERSION: Final = 4
"""The schema this code writes; an older file is migrated when opened, a newer one refused."""

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS notes_by_owner ON notes (owner, seq);
CREATE TABLE IF NOT EXISTS tokens (
    hash TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    call_id TEXT,
    identity TEXT,
    tool TEXT,
    outcome TEXT NOT NULL,
    code TEXT,
    stage TEXT,
    latency_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
    identity TEXT NOT NULL,
    call_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    note_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (identity, call_id)
);
"""


# Version -> the statements that bring a file from the version before to it, in one transaction.
MIGRATIONS: Final[Mapping[int, tuple[str, ...]]] = {
    # A note is found by (owner, id) in one index: another owner's note and a missing one stop
    # at the same place, so neither the answer nor its time tells them apart.
    2: ("CREATE UNIQUE INDEX IF NOT EXISTS notes_by_owner_id ON notes (owner, id)",),
    # For operators (issue 16): a failure's reason and (made safe) pointer; tokens with a role,
    # so that an operator's token opens the page and an agent's does not (nor the reverse);
    # the calls counted per minute as they are written, so that a time window is read from
    # its minutes' counts and not from its records (the page answers as fast with a million
    # records in the last hour as with ten); refusals indexed apart, newest found at once.
    3: (
        "ALTER TABLE audit ADD COLUMN reason TEXT",
        "ALTER TABLE audit ADD COLUMN pointer TEXT",
        "ALTER TABLE tokens ADD COLUMN role TEXT NOT NULL DEFAULT 'agent'",
        # '' stands for none in the key: a NULL would never conflict, and counts would split
        """CREATE TABLE IF NOT EXISTS audit_minutes (
            minute INTEGER NOT NULL,
            tool TEXT NOT NULL,
            outcome TEXT NOT NULL,
            stage TEXT NOT NULL,
            code TEXT NOT NULL,
            reason TEXT NOT NULL,
            pointer TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (minute, tool, outcome, stage, code, reason, pointer)
        ) WITHOUT ROWID""",
        f"""INSERT OR IGNORE INTO audit_minutes
            SELECT CAST(at AS INTEGER) / {MINUTE_S} * {MINUTE_S}, coalesce(tool, ''), outcome,
                   coalesce(stage, ''), coalesce(code, ''), '', '', count(*)
            FROM audit GROUP BY 1, 2, 3, 4, 5""",
        "CREATE INDEX IF NOT EXISTS audit_refusals ON audit (seq) WHERE outcome = 'error'",
    ),
    # Tool pinning (issue 28): a federation's tools as first seen, and changes held for approval.
    4: (
        """CREATE TABLE IF NOT EXISTS tool_pins (
            name TEXT PRIMARY KEY,
            pinned TEXT NOT NULL,
            seen TEXT,
            pinned_at REAL NOT NULL
        )""",
    ),
}
INSERT_AUDIT_ROW: Final = (
    f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
COUNT_MINUTE: Final = (
    "INSERT INTO audit_minutes (minute, tool, outcome, stage, code, reason, pointer, n)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (minute, tool, outcome, stage, code, reason, pointer)"
    " DO UPDATE SET n = n + excluded.n"
)
# A batch as one JSON array of rows, inserted by one statement: the sqlite3 module lets go of the
# GIL once for the whole batch instead of once per row, and a server's event loop (holding the
# GIL) is not made to hand it back and forth ~10,000 times a second.
INSERT_AUDIT_ROWS: Final = (
    f"INSERT INTO audit ({AUDIT_COLUMNS}) SELECT "
    + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(10))
    + " FROM json_each(?)"
)
