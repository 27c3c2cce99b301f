"""The SQL both databases share, written once: each statement with the dialect's differences
(its placeholder, SQLite's index hints) as small parameters.

A statement that only one database has (SQLite's batch by `json_each`, PostgreSQL's claim and
insert in one statement, its batch by arrays) stays beside its store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

AUDIT_COLUMNS: Final = (
    "at, call_id, identity, tool, outcome, code, stage, latency_us, reason, pointer"
)
"""The audit record's fields as columns, in `AuditRecord`'s order."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the databases in the statements they share."""

    name: str
    param: str
    """The placeholder of one parameter: '?' (sqlite3) or '%s' (psycopg)."""
    index_hints: bool
    """Whether a read names its index (SQLite's INDEXED BY: a lookup by (owner, id) never falls
    back to a scan that would time another owner's note apart from a missing one)."""


@dataclass(frozen=True, slots=True)
class Statements:
    """Every statement both databases run, in one dialect."""

    schema_version: str
    read_note: str
    list_notes: str
    count_notes: str
    recorded: str
    insert_token: str
    insert_operator_token: str
    token_identity: str
    operator_identity: str
    recent_calls: str
    call_counts: str
    call_stats: str
    top_failures: str
    recent_refusals: str
    last_seq: str
    calls_after: str
    audit_size: str
    prune_audit: str
    """At most N audit rows written before a time, oldest first (before, limit)."""
    prune_audit_over: str
    """At most N of the oldest rows beyond the newest N (keep, limit): the (N+1)th newest and
    older, none when there are N or fewer (the inner select is then NULL)."""
    tool_pins: str
    pin_tool: str
    see_tool: str
    approve_tool: str


def statements(dialect: Dialect) -> Statements:
    """The shared statements in `dialect`."""
    p = dialect.param

    def indexed(index: str) -> str:
        return f" INDEXED BY {index}" if dialect.index_hints else ""

    return Statements(
        schema_version="SELECT value FROM meta WHERE key = 'schema_version'",
        read_note=(
            f"SELECT text FROM notes{indexed('notes_by_owner_id')} WHERE owner = {p} AND id = {p}"
        ),
        list_notes=f"SELECT id, text FROM notes WHERE owner = {p} ORDER BY seq",
        count_notes=f"SELECT count(*) FROM notes WHERE owner = {p}",
        recorded=(
            f"SELECT fingerprint, note_id FROM idempotency WHERE identity = {p} AND call_id = {p}"
        ),
        insert_token=f"INSERT INTO tokens (hash, identity, created_at) VALUES ({p}, {p}, {p})",
        insert_operator_token=(
            "INSERT INTO tokens (hash, identity, created_at, role)"
            f" VALUES ({p}, {p}, {p}, 'operator')"
        ),
        token_identity=f"SELECT hash, identity FROM tokens WHERE hash = {p} AND role = 'agent'",
        operator_identity=(
            f"SELECT hash, identity FROM tokens WHERE hash = {p} AND role = 'operator'"
        ),
        recent_calls=f"SELECT {AUDIT_COLUMNS} FROM audit ORDER BY seq DESC LIMIT {p}",
        call_counts=(
            "SELECT outcome, stage, code, count(*) FROM audit"
            " GROUP BY outcome, stage, code ORDER BY count(*) DESC"
        ),
        call_stats=(
            "SELECT minute, tool, outcome, stage, code, sum(n) FROM audit_minutes"
            f" WHERE minute >= {p} GROUP BY minute, tool, outcome, stage, code"
        ),
        top_failures=(
            "SELECT tool, code, reason, pointer, sum(n) AS total FROM audit_minutes"
            f" WHERE minute >= {p} AND outcome = 'error' GROUP BY tool, code, reason, pointer"
            f" ORDER BY total DESC, tool, code, reason, pointer LIMIT {p}"
        ),
        recent_refusals=(
            f"SELECT {AUDIT_COLUMNS} FROM audit{indexed('audit_refusals')}"
            f" WHERE outcome = 'error' ORDER BY seq DESC LIMIT {p}"
        ),
        last_seq="SELECT coalesce(max(seq), 0) FROM audit",
        calls_after=(
            f"SELECT seq, {AUDIT_COLUMNS} FROM audit WHERE seq > {p} ORDER BY seq LIMIT {p}"
        ),
        audit_size="SELECT count(*) FROM audit",
        prune_audit=(
            "DELETE FROM audit WHERE seq IN"
            f" (SELECT seq FROM audit WHERE at < {p} ORDER BY seq LIMIT {p})"
        ),
        prune_audit_over=(
            "DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE seq <="
            f" (SELECT seq FROM audit ORDER BY seq DESC LIMIT 1 OFFSET {p}) ORDER BY seq LIMIT {p})"
        ),
        tool_pins="SELECT name, pinned, seen FROM tool_pins ORDER BY name",
        pin_tool=(
            "INSERT INTO tool_pins (name, pinned, pinned_at)"
            f" VALUES ({p}, {p}, {p}) ON CONFLICT (name) DO NOTHING"
        ),
        see_tool=f"UPDATE tool_pins SET seen = {p} WHERE name = {p}",
        approve_tool=(
            f"UPDATE tool_pins SET pinned = seen, seen = NULL, pinned_at = {p}"
            f" WHERE name = {p} AND seen = {p}"
        ),
    )


SQLITE: Final = statements(Dialect("sqlite", "?", index_hints=True))
POSTGRES: Final = statements(Dialect("postgresql", "%s", index_hints=False))
