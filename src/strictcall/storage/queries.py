"""The reads both stores answer alike, written once: the shared statements (`storage.sql`) and
the row code that turns their rows into records, over one small method each store provides
(`_select`: one statement's first row, or all its rows, with the store's own faults)."""

from __future__ import annotations

import hmac
import time
from typing import Any, Final

from strictcall.storage.base import (
    TOKEN_CACHE_S,
    AuditRecord,
    FailureRow,
    IdempotencyConflict,
    IdempotencyKey,
    StatRow,
    TokenInfo,
    failure_rows,
    hash_token,
    minute_of,
    stat_rows,
)
from strictcall.storage.sql import Statements

TOKEN_CACHE_SIZE: Final = 4096
"""The most tokens a store remembers at once (then it forgets them all and starts again)."""


class TokenCache:
    """The agent tokens a store knows, by hash, each remembered for `ttl` seconds, so that a busy
    caller costs one hash and no query per call; an unknown token is never remembered."""

    __slots__ = ("_known", "_ttl")

    def __init__(self, ttl: float = TOKEN_CACHE_S) -> None:
        self._ttl = ttl
        self._known: dict[str, tuple[str, float]] = {}

    def get(self, digest: str) -> str | None:
        """The identity of a token remembered and not yet expired, else None."""
        cached = self._known.get(digest)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        return None

    def clear(self) -> None:
        """Forget every token (the next lookup of each is a query)."""
        self._known.clear()

    def remember(self, digest: str, row: Any) -> str | None:
        """The identity of a token's (hash, identity) row (None for no row), remembered."""
        if row is None or not hmac.compare_digest(row[0], digest):
            return None
        identity = str(row[1])
        if len(self._known) >= TOKEN_CACHE_SIZE:
            self._known.clear()
        self._known[digest] = (identity, time.monotonic() + self._ttl)
        return identity


def recorded_note_id(row: Any, key: IdempotencyKey) -> str | None:
    """The note id an idempotency row (fingerprint, note_id) recorded for `key`, or None for no
    row.

    Raises:
        IdempotencyConflict: the call id was used for a different call.
    """
    if row is None:
        return None
    if not hmac.compare_digest(row[0], key.fingerprint):
        raise IdempotencyConflict
    return str(row[1])


def audit_records(rows: Any) -> list[AuditRecord]:
    """Rows of `AUDIT_COLUMNS` as records."""
    return [AuditRecord(*row) for row in rows]


class SharedReads:
    """Token, audit and operator reads, the same on both databases."""

    _sql: Statements
    _tokens: TokenCache

    def _select(self, sql: str, params: tuple[object, ...], *, many: bool = False) -> Any:
        """One read query's first row (None: no row), or all its rows with `many`.

        Raises:
            StoreUnavailable: the database cannot answer now.
        """
        raise NotImplementedError

    def identity_for_token(self, token: str) -> str | None:
        """Whose agent token this is, or None for an unknown token (or an operator's).

        A known token is remembered for the store's token cache time (`TOKEN_CACHE_S` unless
        the store was opened with another; in each server process), so that a busy caller costs
        one hash and no query per call; an unknown one is looked up every time. A token deleted
        from the database is therefore refused by every server within that long.
        """
        digest = hash_token(token)
        cached = self._tokens.get(digest)
        if cached is not None:
            return cached
        return self._tokens.remember(digest, self._select(self._sql.token_identity, (digest,)))

    def list_tokens(self) -> list[TokenInfo]:
        """Every stored token (agents' and operators'), oldest first: ids, never tokens."""
        rows = self._select(
            "SELECT hash, identity, role, created_at FROM tokens ORDER BY created_at, hash",
            (),
            many=True,
        )
        return [TokenInfo.of_row(*row) for row in rows]

    def operator_for_token(self, token: str) -> str | None:
        """The operator's name for an operator token; None for any other (an agent's too)."""
        digest = hash_token(token)
        row = self._select(self._sql.operator_identity, (digest,))
        if row is None or not hmac.compare_digest(row[0], digest):
            return None
        return str(row[1])

    def recent_calls(self, limit: int) -> list[AuditRecord]:
        """The last `limit` calls, newest first."""
        return audit_records(self._select(self._sql.recent_calls, (limit,), many=True))

    def call_counts(self) -> list[tuple[str, str | None, str | None, int]]:
        """How many calls ended with each (outcome, stage, code)."""
        rows = self._select(self._sql.call_counts, (), many=True)
        return [(str(o), s, c, int(n)) for o, s, c, n in rows]

    def call_stats(self, since: float) -> list[StatRow]:
        """The calls counted by minute, tool, outcome, stage and code, from the minute holding
        `since` on (read from the per-minute counts, never the records)."""
        return stat_rows(self._select(self._sql.call_stats, (minute_of(since),), many=True))

    def top_failures(self, since: float, limit: int) -> list[FailureRow]:
        """The (tool, code, reason, pointer) failing most often since `since`, most first."""
        rows = self._select(self._sql.top_failures, (minute_of(since), limit), many=True)
        return failure_rows(rows)

    def recent_refusals(self, limit: int) -> list[AuditRecord]:
        """The last `limit` calls that failed, newest first."""
        return audit_records(self._select(self._sql.recent_refusals, (limit,), many=True))

    def calls_after(self, cursor: int | None, limit: int) -> tuple[int, list[AuditRecord]]:
        """The calls recorded after `cursor` (at most `limit`, oldest first) and the cursor
        after them; a cursor of None starts after the newest call recorded so far.

        On PostgreSQL sequence numbers are drawn before commit: with several servers writing at
        once, a batch committed just after a read may hold a number below the cursor the read
        returned, so a follower may miss it (the records are kept; `audit` shows them)."""
        if cursor is None:
            return int(self._select(self._sql.last_seq, ())[0]), []
        rows = self._select(self._sql.calls_after, (cursor, limit), many=True)
        if not rows:
            return cursor, []
        return int(rows[-1][0]), [AuditRecord(*row[1:]) for row in rows]

    def audit_size(self) -> int:
        """How many calls the audit log holds."""
        return int(self._select(self._sql.audit_size, ())[0])

    def schema_version(self) -> int:
        """The version of the schema this database holds."""
        return int(self._select(self._sql.schema_version, ())[0])
