"""The storage interface: what the notes service needs from a database, and nothing of any
database in particular.

Each job has its protocol: `NotesStore` (the notes service), `TokenStore` (admission),
`AuditStore` (the audit log), `OpsStore` (the operators' page and commands), and `Health`;
`Store` is their union, for code that opens one database for every job. Their
records (`Note`, `AuditRecord`, `IdempotencyKey`) and faults (`StoreUnavailable`, `StoreBusy`,
`IdempotencyConflict`) live here, so that nothing above the storage layer imports a driver.
`strictcall.storage.sqlite` is the embedded default (the only module that imports sqlite3);
`strictcall.storage.open_store` picks the implementation for a `--db` value.

Every implementation keeps the same guarantees: a note is read by (owner, id) inside the query,
so another owner's note and a missing one take the same path; tokens are kept only as hashes;
every call leaves an audit record without argument values or note text; writes are idempotent
per (identity, call id).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

from strictcall.core.record import AuditRecord as AuditRecord
from strictcall.errors import StrictcallError

DEFAULT_DB_PATH: Final = "strictcall.sqlite3"
"""Where the service keeps its data unless --db or $STRICTCALL_DB says otherwise."""

TOKEN_CACHE_S: Final = 5.0
"""How long a store may remember a known token without a query: a revoked token is refused by
every server sharing the store at most this long after `tokens revoke` (unless
`$STRICTCALL_TOKEN_CACHE_S` says another time)."""

TOKEN_CACHE_ENV: Final = "STRICTCALL_TOKEN_CACHE_S"
"""The environment variable that sets the token cache's time, in seconds (0: no cache)."""

TOKEN_ID_LENGTH: Final = 12
"""A token's id: the first characters of its hash, what `tokens list` shows and `tokens
revoke` takes (the token itself is never stored, nor shown again)."""


def token_cache_s() -> float:
    """The token cache's time: `$STRICTCALL_TOKEN_CACHE_S` when it is a number of seconds, 0 or
    more (0 turns the cache off), else `TOKEN_CACHE_S` (unset or empty: the default)."""
    import math
    import os

    value = os.environ.get(TOKEN_CACHE_ENV, "")
    try:
        seconds = float(value)
    except ValueError:
        return TOKEN_CACHE_S
    return seconds if math.isfinite(seconds) and seconds >= 0 else TOKEN_CACHE_S


class TokenInfo(NamedTuple):
    """One stored token as an operator may see it: its id, never the token."""

    token_id: str
    identity: str
    role: str
    created_at: float

    @classmethod
    def of_row(cls, digest: str, identity: str, role: str, created_at: float) -> TokenInfo:
        """The token of a (hash, identity, role, created_at) row."""
        return cls(str(digest)[:TOKEN_ID_LENGTH], str(identity), str(role), float(created_at))


class StoreError(StrictcallError):
    """A store could not do what was asked; the subclasses say why."""


class StoreUnavailable(StoreError):
    """The database cannot serve right now (locked, read-only, full, missing); retry later."""


class SchemaTooNew(StoreUnavailable):
    """The database was migrated by a newer strictcall than this one: refused, not touched."""

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"the database's schema is version {found}, newer than this strictcall's {known}:"
            " upgrade strictcall"
        )
        self.found = found
        self.known = known

    def for_operator(self) -> str:
        """Why the store was refused, in the operator's words (one short clause)."""
        return (
            f"it was written by a newer strictcall (schema version {self.found}; this one knows"
            f" {self.known}); upgrade strictcall to open it"
        )


class StoreUnreachable(StoreUnavailable):
    """The database server could not be reached, or refused the connection; `for_operator()`
    says why as psql would (missing database or role, failed authentication, no TLS, nothing
    listening, a host that does not resolve), never with the URL's password."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def for_operator(self) -> str:
        """Why the store could not be opened, in the operator's words (one short clause)."""
        return self.reason


class StoreBusy(StoreError):
    """A write asked not to wait (`wait=False`) would have had to: another write holds the
    lock. Nothing was written."""


class StoreRefused(StoreError):
    """The database refused a value of the call itself (longer than an index allows, not
    storable): no fault of the database's, and the same call fails again."""


class IdempotencyConflict(StoreError):
    """The call id was already used by this identity for a different call."""


class Note(NamedTuple):
    """One note, as its owner sees it."""

    note_id: str
    text: str


MINUTE_S: Final = 60
"""The audit's time windows are counted in whole minutes (`Store.call_stats`)."""


class StatRow(NamedTuple):
    """How many calls ended one way in one minute: the audit counted by time window."""

    minute: int
    """The minute's start, in seconds since the epoch (a multiple of 60)."""
    tool: str | None
    outcome: str
    stage: str | None
    code: str | None
    calls: int


class FailureRow(NamedTuple):
    """How many calls failed the same way (tool, code, reason, pointer) in a time window."""

    tool: str | None
    code: str | None
    reason: str | None
    pointer: str | None
    calls: int


def minute_of(moment: float) -> int:
    """The start of the minute holding `moment` (seconds since the epoch)."""
    return int(moment) // MINUTE_S * MINUTE_S


def stored_none(stored: str) -> str | None:
    """A per-minute key's part as a store reads it back: '' was none (a NULL would never
    conflict in a unique key; no tool, stage, code, reason or pointer is named '')."""
    return None if stored == "" else str(stored)


def stat_rows(rows: Sequence[Sequence[Any]]) -> list[StatRow]:
    """(minute, tool, outcome, stage, code, calls) rows as a store reads them, decoded."""
    return [
        StatRow(int(m), stored_none(t), str(o), stored_none(s), stored_none(c), int(n))
        for m, t, o, s, c, n in rows
    ]


def failure_rows(rows: Sequence[Sequence[Any]]) -> list[FailureRow]:
    """(tool, code, reason, pointer, calls) rows as a store reads them, decoded."""
    return [
        FailureRow(stored_none(t), stored_none(c), stored_none(r), stored_none(p), int(n))
        for t, c, r, p, n in rows
    ]


MinuteKey = tuple[int, str | None, str, str | None, str | None, str | None, str | None]
"""(minute, tool, outcome, stage, code, reason, pointer): what a store counts per minute."""


def minute_counts(records: Sequence[AuditRecord]) -> dict[MinuteKey, int]:
    """A batch of records counted by minute and outcome: what a store adds to its per-minute
    counts when it writes the batch, so that a time window is read without its records."""
    counts: dict[MinuteKey, int] = {}
    for r in records:
        key = (
            minute_of(r.at),
            r.tool,
            r.outcome,
            r.stage,
            r.code,
            r.reason,
            r.pointer,
        )
        counts[key] = counts.get(key, 0) + 1
    return counts


@dataclass(frozen=True, slots=True)
class IdempotencyKey:
    """A write's (call id, fingerprint of tool and arguments), unique per identity."""

    call_id: str
    fingerprint: str


@runtime_checkable
class Health(Protocol):
    """Whether a database can serve now, asked by /healthz and the readiness probe."""

    def healthy(self) -> bool:
        """Whether the database can serve now (cheap, never long)."""
        ...

    async def healthy_async(self) -> bool:
        """`healthy`, awaited on the running loop without blocking it (a store that answers in
        process may answer inline)."""
        ...


@runtime_checkable
class NotesStore(Health, Protocol):
    """The notes service's job: notes read and written by their owner, writes idempotent per
    (identity, call id)."""

    @property
    def concurrent_calls(self) -> int:
        """How many calls are worth running at once on worker threads. 1: the database answers
        in process, in microseconds (SQLite): reads run inline on the caller's thread, writes
        one at a time. More: every call waits a network round trip (PostgreSQL): reads and
        writes run on that many threads, so an event loop never waits on the database (a store
        that is also `AwaitedNotes` has a server's loop await them instead)."""
        ...

    def read_note(self, owner: str, note_id: str) -> Note | None: ...
    def list_notes(self, owner: str) -> list[Note]: ...
    def count_notes(self, owner: str) -> int: ...
    def add_note(self, owner: str, text: str) -> Note: ...
    def create_note(
        self, owner: str, text: str, key: IdempotencyKey, *, wait: bool = True
    ) -> Note: ...
    def delete_note(
        self, owner: str, note_id: str, key: IdempotencyKey, *, wait: bool = True
    ) -> bool: ...


@runtime_checkable
class TokenStore(Protocol):
    """Admission's job: an agent's bearer token to its identity. Both forms on every store, so
    admission awaits the lookup without asking which database answers."""

    @property
    def tokens_inline(self) -> bool:
        """True when `identity_for_token` never waits on a network round trip (SQLite: it may
        run on an event loop's thread); False when it may (PostgreSQL: await the async form)."""
        ...

    def create_token(self, identity: str) -> str: ...

    def list_tokens(self) -> list[TokenInfo]:
        """Every stored token (agents' and operators'), oldest first: ids, never tokens."""
        ...

    def revoke_tokens(
        self, token_id: str | None = None, identity: str | None = None
    ) -> list[TokenInfo]:
        """Delete the token whose id is `token_id` and every token of `identity`; the ones
        deleted. Every server refuses them once its cache lets go of them."""
        ...

    def identity_for_token(self, token: str) -> str | None:
        """Whose agent token this is, or None for an unknown one (or an operator's).

        Raises:
            StoreUnavailable: the database cannot answer now.
        """
        ...

    async def identity_for_token_async(self, token: str) -> str | None:
        """`identity_for_token`, awaited on the running loop without blocking it."""
        ...


@runtime_checkable
class AuditStore(Protocol):
    """The audit log's job: records appended in batches, read back newest first."""

    def record_call(self, record: AuditRecord) -> None: ...
    def record_calls(self, records: Sequence[AuditRecord]) -> None: ...

    async def record_calls_async(self, records: Sequence[AuditRecord]) -> None:
        """`record_calls`, awaited on the running loop without blocking it (SQLite writes on a
        worker thread, as its write may wait on a lock).

        Raises:
            StoreUnavailable: the batch was not written (the caller keeps it).
        """
        ...

    def recent_calls(self, limit: int) -> list[AuditRecord]: ...
    def call_counts(self) -> list[tuple[str, str | None, str | None, int]]: ...
    def audit_size(self) -> int: ...


@runtime_checkable
class OpsStore(Protocol):
    """The operators' job (issue 16): their tokens, and the audit counted and followed for the
    page, /metrics' neighbours, `stats` and `audit --follow`."""

    def create_operator_token(self, name: str) -> str: ...
    def operator_for_token(self, token: str) -> str | None: ...
    def call_stats(self, since: float) -> list[StatRow]: ...
    def top_failures(self, since: float, limit: int) -> list[FailureRow]: ...
    def recent_refusals(self, limit: int) -> list[AuditRecord]: ...
    def calls_after(self, cursor: int | None, limit: int) -> tuple[int, list[AuditRecord]]: ...


class ToolPin(NamedTuple):
    """A pinned tool, resource, template or prompt (a federation's, by its served key): the
    definition approved (JSON; "" when none was yet: one that appeared mid-run), and the
    different one last seen from its upstream, waiting for approval (None: none)."""

    name: str
    pinned: str
    seen: str | None


@runtime_checkable
class PinStore(Protocol):
    """Tool pinning (issue 28): each tool's definition as first seen, and changes held until an
    operator approves them."""

    def tool_pins(self) -> list[ToolPin]: ...
    def pin_tool(self, name: str, definition: str) -> bool: ...
    def see_tool(self, name: str, definition: str | None) -> None: ...
    def approve_tool(self, name: str, seen: str) -> bool: ...


@runtime_checkable
class Store(NotesStore, TokenStore, AuditStore, OpsStore, PinStore, Protocol):
    """One database for every job: what `open_store` returns and a server opens once."""

    def close(self) -> None: ...


@runtime_checkable
class AwaitedNotes(Protocol):
    """A store whose note calls can be awaited on the server's event loop (PostgreSQL): each
    waits a network round trip, which an event loop awaits at less cost than a thread hop. The
    same guarantees, faults and answers as the `NotesStore` methods of the same names (without
    `_async`). (Token lookups, audit batches and the health probe have their async forms on
    every store: `TokenStore`, `AuditStore`, `Health`.)"""

    async def read_note_async(self, owner: str, note_id: str) -> Note | None: ...
    async def list_notes_async(self, owner: str) -> list[Note]: ...
    async def count_notes_async(self, owner: str) -> int: ...
    async def create_note_async(self, owner: str, text: str, key: IdempotencyKey) -> Note: ...
    async def delete_note_async(self, owner: str, note_id: str, key: IdempotencyKey) -> bool: ...
    async def record_calls_async(self, records: Sequence[AuditRecord]) -> None: ...
    async def identity_for_token_async(self, token: str) -> str | None: ...
    async def healthy_async(self) -> bool: ...


def new_token() -> str:
    """A fresh API token: "sc_" and 256 random bits, URL-safe."""
    return "sc_" + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of an API token: its SHA-256 (tokens are 256-bit random values)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


_ID_ALPHABET: Final = "23456789abcdfghjkmnpqrstuvwxyz"


def new_note_id() -> str:
    """A fresh note id: "n" and 16 random characters (78 bits), so no id says anything about
    other owners' notes. The alphabet has no "e", "0", "1", "l" or "o": an id is never misread
    by a person, and never holds a digit followed by "e", which the strict intake would take
    for a possible float exponent and check more slowly."""
    return "n" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(16))
