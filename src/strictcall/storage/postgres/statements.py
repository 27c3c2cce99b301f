"""The statements only PostgreSQL runs, and their parameters: the claim of a call id and its
note in one statement, an audit batch as arrays, the reads the loop prepares by name; and how a
value crosses into PostgreSQL (note text as bytes, no NUL in text). The statements both
databases share are in `strictcall.storage.sql`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from strictcall.storage.base import AuditRecord, IdempotencyKey, minute_counts
from strictcall.storage.sql import AUDIT_COLUMNS, POSTGRES


@dataclass(frozen=True, slots=True)
class Prepared:
    """A read the loop sends often: prepared by name on each of the loop's connections at its
    first use there, then sent as that name and its parameters (no parse, no plan, no psycopg
    cursor: a third of what `AsyncConnection.execute` costs the loop per read)."""

    name: bytes
    sql: bytes  # with PostgreSQL's own placeholders, $1, $2, ...

    @classmethod
    def of(cls, name: str, sql: str) -> Prepared:
        """The statement `sql`, written with psycopg's %s placeholders, prepared as `name`."""
        parts = sql.split("%s")
        numbered = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
        return cls(name.encode("ascii"), numbered.encode("utf-8"))


# The claim of the call id and the note in one statement (one round trip, one commit): when the
# key is taken, the claim returns nothing and no note is inserted. A second server racing on the
# same key waits at the claim for the first's commit, then sees the key taken.
CREATE: Final = """
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
DELETE: Final = """
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

ADD_NOTE: Final = (
    "INSERT INTO notes (id, owner, text, created_at, updated_at)"
    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id"
)

# The loop's reads, prepared on its connections (the threads' go through psycopg's cursors).
READ_NOTE_PREPARED: Final = Prepared.of("strictcall_read_note", POSTGRES.read_note)
LIST_NOTES_PREPARED: Final = Prepared.of("strictcall_list_notes", POSTGRES.list_notes)
COUNT_NOTES_PREPARED: Final = Prepared.of("strictcall_count_notes", POSTGRES.count_notes)
TOKEN_IDENTITY_PREPARED: Final = Prepared.of("strictcall_token_identity", POSTGRES.token_identity)
HEALTH_SQL: Final = "SELECT 1 FROM notes, tokens, audit LIMIT 0"
"""The health probe: the tables every call needs are there (a database emptied or replaced
under a running server answers `SELECT 1` while every call fails), read nothing."""
HEALTH_PREPARED: Final = Prepared.of("strictcall_health", HEALTH_SQL)
# The notes read by the calls of one turn of the loop, by one statement: each (owner, id) read
# by its own lookup in the unique index, as alone (the single read's query, once per key; OFFSET
# 0 keeps the planner from turning it into a join that may scan the table).
READ_NOTES_PREPARED: Final = Prepared(
    b"strictcall_read_notes",
    b"SELECT k.n, n.text FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(owner, id, n)"
    b" CROSS JOIN LATERAL"
    b" (SELECT text FROM notes WHERE owner = k.owner AND id = k.id OFFSET 0) AS n",
)

# A batch as ten arrays, one per column, inserted by one statement. The arrays go in binary
# (%b): psycopg writes them in half the CPU of the text format's quoting.
_INSERT_AUDIT_ROWS: Final = (
    f"INSERT INTO audit ({AUDIT_COLUMNS}) SELECT * FROM unnest("
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

RECORD_BATCH: Final = f"WITH rows AS ({_INSERT_AUDIT_ROWS}) {_COUNT_MINUTES}"
"""A batch of records and its per-minute counts, by one statement (one round trip, atomic)."""


def audit_batch(records: Sequence[AuditRecord]) -> list[list[Any]]:
    """The parameters of `RECORD_BATCH`: the records as ten columns, then their per-minute
    counts as eight, sorted (so that servers writing the same minutes lock them in one order)."""
    columns = [list(column) for column in zip(*records, strict=True)]
    for index in (1, 2, 3, 8, 9):  # call_id, identity, tool, reason, pointer: text refuses NUL
        columns[index] = [no_nul(value) for value in columns[index]]
    minutes = sorted(
        (minute, *(_key(part) for part in rest), n)
        for (minute, *rest), n in minute_counts(records).items()
    )
    return [*columns, *(list(column) for column in zip(*minutes, strict=True))]


def _key(part: str | None) -> str | None:
    """A part of a per-minute key as stored: '' for none (a NULL would never conflict)."""
    return "" if part is None else no_nul(part)


def bytes_of(text: str) -> bytes:
    """Note text as stored: UTF-8 bytes. PostgreSQL's text refuses NUL, which a JSON string may
    hold and SQLite keeps, and a note must read back exactly as it was written on either."""
    return text.encode("utf-8")


def text_of(value: bytes) -> str:
    """Note text as read back."""
    return bytes(value).decode("utf-8")


def no_nul(value: str | None) -> str | None:
    """An audit column as stored. It is the service's own text, but a call id is the caller's:
    its NUL is written as the JSON escape, so the batch is never refused for it."""
    return value if value is None or "\x00" not in value else value.replace("\x00", "\\u0000")


def create_params(owner: str, text: str, key: IdempotencyKey) -> dict[str, Any]:
    """`CREATE`'s parameters but the note id drawn and the time (`drawn`)."""
    return {
        "owner": owner,
        "call_id": key.call_id,
        "fingerprint": key.fingerprint,
        "text": bytes_of(text),
    }


def drawn(params: dict[str, Any], note_id: str) -> dict[str, Any]:
    """`create_params`' parameters with the note id drawn and the time now."""
    return {**params, "note_id": note_id, "now": time.time()}


def delete_params(owner: str, note_id: str, key: IdempotencyKey) -> dict[str, Any]:
    """`DELETE`'s parameters but the time."""
    return {
        "owner": owner,
        "note_id": note_id,
        "call_id": key.call_id,
        "fingerprint": key.fingerprint,
    }
