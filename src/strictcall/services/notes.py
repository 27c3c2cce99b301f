"""The notes tools, served from a `NotesStore` under the caller's identity.

    read_note   {note_id}  -> {note_id, text}
    list_notes  {}         -> [{note_id, text}, ...], oldest first; [] when there are none
    count_notes {}         -> integer; 0 when there are none
    create_note {text}     -> {note_id, text}; "" is a note; at most MAX_NOTE_LENGTH characters
    delete_note {note_id}  -> null

Every query names the caller as owner, so another owner's note and a missing note are the same
answer (forbidden_or_missing) by the same path. create_note and delete_note are idempotent per
(identity, call id): a retry returns the first answer and changes nothing; the same call id with
other arguments is idempotency_conflict. A store fault is store_unavailable, retryable.
"""

from __future__ import annotations

import hashlib
from types import TracebackType
from typing import Final

import orjson

from strictcall.core.gateway import Gateway
from strictcall.core.pipeline import Limits
from strictcall.core.policy import PolicyHolder
from strictcall.core.tools import (
    Arguments,
    ForbiddenOrMissing,
    Handler,
    Tool,
    ToolContext,
    ToolFailure,
    WouldWait,
    running_inline,
)
from strictcall.errors import (
    IDEMPOTENCY_CONFLICT,
    RETRY_AFTER_MS,
    STORE_UNAVAILABLE,
    VALUE_REFUSED,
    JSONValue,
)
from strictcall.services.demo import READ_NOTE_OUTPUT, same_note
from strictcall.storage import (
    AwaitedNotes,
    IdempotencyConflict,
    IdempotencyKey,
    Note,
    NotesStore,
    StoreBusy,
    StoreRefused,
    StoreUnavailable,
)

MAX_NOTE_LENGTH: Final = 10_000
"""The longest note text create_note accepts, in characters (code points)."""

MAX_NOTE_ID_LENGTH: Final = 64
"""The longest note id a call may name (ids the server makes are 17 characters)."""

"""What a store_unavailable answer suggests waiting before the retry."""

WRITE_TIMEOUT_S: Final = 5.0
"""The time limit of create_note and delete_note. A write first runs inline, where it does not
wait: when the lock is free it commits at once, without a thread hop. When another write holds
the lock it runs again on a worker thread, where it waits within this limit, so a lock held
elsewhere never stalls an event loop (the server's): reads and other callers go on meanwhile."""

READ_TIMEOUT_S: Final = WRITE_TIMEOUT_S
"""The time limit of the reads where they run on a worker thread (a networked store)."""

_NOTE: Final = READ_NOTE_OUTPUT  # a note, as the seed's read_note returns it
_NOTE_ID_ARGUMENT: Final = {
    "type": "object",
    "properties": {
        "note_id": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_ID_LENGTH},
    },
    "required": ["note_id"],
    "additionalProperties": False,
}
_NO_ARGUMENTS: Final = {"type": "object", "properties": {}, "additionalProperties": False}
_STORE_FAILURES: Final = (STORE_UNAVAILABLE,)
_WRITE_FAILURES: Final = (STORE_UNAVAILABLE, IDEMPOTENCY_CONFLICT, VALUE_REFUSED)


class _StoreFaults:
    """Turn the store's failures into the failures the notes tools declare.

    A plain class rather than a generator-based context manager: it sits on every call's path,
    where @contextmanager costs about a microsecond.
    """

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            return
        if issubclass(exc_type, StoreBusy):
            raise WouldWait from None  # only asked of a write running inline
        if issubclass(exc_type, StoreUnavailable):
            raise ToolFailure(STORE_UNAVAILABLE, retry_after_ms=RETRY_AFTER_MS) from None
        if issubclass(exc_type, IdempotencyConflict):
            raise ToolFailure(IDEMPOTENCY_CONFLICT) from None
        if issubclass(exc_type, StoreRefused):
            raise ToolFailure(VALUE_REFUSED) from None


_store_faults: Final = _StoreFaults()


def idempotency_key(ctx: ToolContext, arguments: Arguments) -> IdempotencyKey:
    """The key of a write: its call id (type-exact: 7 and "7" differ) and a fingerprint of
    the tool and its arguments."""
    raw_id = ctx.call_id
    # str(int) for any integer (orjson stops at 64 bits); a str as its JSON text, quoted
    call_id = str(int(raw_id)) if isinstance(raw_id, int) else orjson.dumps(raw_id).decode("utf-8")
    canonical = orjson.dumps([ctx.tool, arguments], option=orjson.OPT_SORT_KEYS)
    return IdempotencyKey(call_id, hashlib.sha256(canonical).hexdigest())


def _as_result(note: Note) -> dict[str, JSONValue]:
    return {"note_id": note.note_id, "text": note.text}


def notes_tools(store: NotesStore) -> list[Tool]:
    """The five notes tools, bound to `store`. On a store whose every call waits a network
    round trip (`concurrent_calls` above 1) every tool runs on a worker thread: the reads under
    `READ_TIMEOUT_S`, the writes without trying inline first, as an event loop that waited on
    the database would stall every other call. On a store whose calls can be awaited
    (`AwaitedNotes`: PostgreSQL) they are awaited on the caller's event loop instead, under the
    same time limits, without a thread."""
    networked = store.concurrent_calls > 1
    read_timeout = READ_TIMEOUT_S if networked else None

    def read_note(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        with _store_faults:
            note = store.read_note(ctx.identity, arguments["note_id"])
        if note is None:
            raise ForbiddenOrMissing
        return _as_result(note)

    def list_notes(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        with _store_faults:
            return [_as_result(note) for note in store.list_notes(ctx.identity)]

    def count_notes(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        with _store_faults:
            return store.count_notes(ctx.identity)

    def create_note(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        key = idempotency_key(ctx, arguments)
        wait = not running_inline()
        with _store_faults:
            return _as_result(store.create_note(ctx.identity, arguments["text"], key, wait=wait))

    def delete_note(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        key = idempotency_key(ctx, arguments)
        wait = not running_inline()
        with _store_faults:
            deleted = store.delete_note(ctx.identity, arguments["note_id"], key, wait=wait)
        if not deleted:
            raise ForbiddenOrMissing
        return None

    handlers: tuple[Handler, ...] = (read_note, list_notes, count_notes, create_note, delete_note)
    if isinstance(store, AwaitedNotes):
        handlers = _awaited_handlers(store)
    read, listing, count, create, delete = handlers

    return [
        Tool(
            name="read_note",
            description="Read one of your notes by its id.",
            input_schema=_NOTE_ID_ARGUMENT,
            output_schema=_NOTE,
            handler=read,
            failures=_STORE_FAILURES,
            timeout=read_timeout,
            result_matches=same_note,
        ),
        Tool(
            name="list_notes",
            description="List your notes, oldest first; [] when you have none.",
            input_schema=_NO_ARGUMENTS,
            output_schema={"type": "array", "items": _NOTE},
            handler=listing,
            failures=_STORE_FAILURES,
            timeout=read_timeout,
        ),
        Tool(
            name="count_notes",
            description="Count your notes; 0 when you have none.",
            input_schema=_NO_ARGUMENTS,
            output_schema={"type": "integer", "minimum": 0},
            handler=count,
            failures=_STORE_FAILURES,
            timeout=read_timeout,
        ),
        Tool(
            name="create_note",
            description=(
                f"Create a note (text may be empty, at most {MAX_NOTE_LENGTH} characters). "
                "Retrying with the same call id returns the same note."
            ),
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": MAX_NOTE_LENGTH}},
                "required": ["text"],
                "additionalProperties": False,
            },
            output_schema=_NOTE,
            handler=create,
            failures=_WRITE_FAILURES,
            timeout=WRITE_TIMEOUT_S,
            inline_first=not networked,  # a round trip never runs inline
        ),
        Tool(
            name="delete_note",
            description="Delete one of your notes by its id; answers null.",
            input_schema=_NOTE_ID_ARGUMENT,
            output_schema={"type": "null"},
            handler=delete,
            failures=_WRITE_FAILURES,
            timeout=WRITE_TIMEOUT_S,
            inline_first=not networked,  # a round trip never runs inline
        ),
    ]


def _awaited_handlers(store: AwaitedNotes) -> tuple[Handler, ...]:
    """The five handlers, awaited on the server's event loop: no thread hop per call."""

    async def read_note(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        with _store_faults:
            note = await store.read_note_async(ctx.identity, arguments["note_id"])
        if note is None:
            raise ForbiddenOrMissing
        return _as_result(note)

    async def list_notes(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        with _store_faults:
            return [_as_result(note) for note in await store.list_notes_async(ctx.identity)]

    async def count_notes(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        with _store_faults:
            return await store.count_notes_async(ctx.identity)

    async def create_note(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        key = idempotency_key(ctx, arguments)
        with _store_faults:
            note = await store.create_note_async(ctx.identity, arguments["text"], key)
        return _as_result(note)

    async def delete_note(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        key = idempotency_key(ctx, arguments)
        with _store_faults:
            deleted = await store.delete_note_async(ctx.identity, arguments["note_id"], key)
        if not deleted:
            raise ForbiddenOrMissing
        return None

    return (read_note, list_notes, count_notes, create_note, delete_note)


def notes_gateway(
    store: NotesStore, *, limits: Limits | None = None, policy: PolicyHolder | None = None
) -> Gateway:
    """A gateway serving the notes tools from `store`. Its worker threads run the calls that
    have to wait, as many as the store takes at once: on SQLite one, for the writes that wait
    for the lock (SQLite takes one writer at a time anyway, and one thread spares them a queue
    at the lock); on PostgreSQL several, for every call (each waits a round trip)."""
    return Gateway(notes_tools(store), limits=limits, workers=store.concurrent_calls, policy=policy)
