"""JSON-RPC 2.0 in front of the gateway: requests, batches, notifications, and the one table
from stages to error codes.

A request is {"jsonrpc": "2.0", "id": str | int, "method": str, "params": object}; nothing
else is accepted (no bool, float or null ids, no unknown members). Methods:

    tools/call  params {"name", "arguments"} -> the tool's value as "result", unchanged
                (as in MCP, "arguments" may be left out when there are none)
    tools/list  -> {"tools": [MCP tool definitions]}

A failure is a JSON-RPC error whose "data" is the structured error {code, stage, retryable,
...}; its "code" comes from `ERROR_CODES` by stage, its "message" is the stage's fixed text.
Unparsable text is -32700 with id null; a malformed envelope -32600 (id null unless the id was
valid); an empty batch one -32600; params by position (an array) -32602. A notification (no id)
is run and gets no answer, so a batch of notifications gets no body at all.

Limits on what comes in and what goes out: a batch holds at most `MAX_BATCH` messages (a longer
one is one -32600 invalid_request, reason max_items, `expected` the limit; nothing of it runs,
and it is told from its first elements, before the body is parsed);
a call's reply is at most `MAX_REPLY_BYTES` (a longer result is withheld: result_too_large,
with the limit) and a batch's reply at most `MAX_BATCH_REPLY_BYTES` (the calls whose replies
would pass it get reply_too_large, with the limit). A withheld reply is audited as the caller
got it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Protocol

import orjson

# AWAIT: `RpcService.answer_now`'s word that a body must be answered by `answer` (the gateway's)
from strictcall.core.content import Content
from strictcall.core.gateway import AWAIT as AWAIT
from strictcall.core.gateway import Await as Await
from strictcall.core.gateway import Gateway, Outcome
from strictcall.core.ids import id_too_long, mint_call_id, valid_id
from strictcall.core.jsontext import Document, array_longer_than, dump_text
from strictcall.core.pipeline import read_message
from strictcall.core.policy.model import Claims
from strictcall.core.record import AuditRecord, record_of, refusal_record
from strictcall.core.refusals import (
    CALLER_BUSY,
    ID_TOO_LONG,
    NO_SUCH_METHOD,
    NOT_A_REQUEST,
    POSITIONAL_PARAMS,
    WITHHELD,
    malformed_call,
    withheld_for_size,
)
from strictcall.errors import JSONValue, Reason, Rejection, Stage
from strictcall.transports.offload import off_loop, read_off_loop

ERROR_CODES: Final[Mapping[Stage, tuple[int, str]]] = MappingProxyType(
    {
        Stage.PARSE: (-32700, "Parse error"),
        Stage.PROTOCOL: (-32600, "Invalid Request"),
        Stage.ROUTE: (-32601, "Method or tool not found"),
        Stage.SHAPE: (-32602, "Invalid params"),
        Stage.EXECUTE: (-32603, "Tool failed"),
        Stage.AUTH: (-32001, "Unauthenticated"),
        Stage.RESOURCE: (-32002, "Not found"),
        Stage.OUTPUT: (-32003, "Invalid tool result"),
    }
)
"""Stage of the structured error -> (JSON-RPC error code, message). Pinned by a test."""

MAX_BATCH: Final = 100
"""The most messages one batch may hold: each is a call the server runs before it answers."""

MAX_REPLY_BYTES: Final = 4 << 20
"""The longest reply to one call, in bytes (a result read from the store can be longer than any
text sent in: escapes write one character as six bytes)."""

MAX_BATCH_REPLY_BYTES: Final = 8 << 20
"""The longest reply to one batch, in bytes."""

BATCH_TOO_LONG: Final = malformed_call("", Reason.MAX_ITEMS, MAX_BATCH)
"""A batch of more than `MAX_BATCH` messages: invalid_request, the limit as `expected`."""

_REQUEST_MEMBERS: Final = frozenset({"jsonrpc", "id", "method", "params"})

Recorder = Callable[[AuditRecord], None]


def error_reply(request_id: JSONValue, error: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """A JSON-RPC error reply carrying the structured `error` as its data."""
    code, message = ERROR_CODES[Stage(error["stage"])]
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": error},
    }


def refusal_reply(request_id: JSONValue, refusal: Rejection) -> dict[str, JSONValue]:
    """An error reply for one of the transports' refusals (`strictcall.core.refusals`)."""
    return error_reply(request_id, refusal.as_error())


def encode_replies(replies: list[dict[str, JSONValue] | bytes], *, batch: bool) -> bytes:
    """Replies as UTF-8 JSON (those already written as they are); a result that cannot be
    written (e.g. a lone surrogate) is replaced by an invalid_tool_result error, so the wire
    never carries broken text."""
    parts = []
    for reply in replies:
        if type(reply) is bytes:
            parts.append(reply)
            continue
        assert type(reply) is dict
        text = dump_text(reply)
        if text is None:
            text = orjson.dumps(refusal_reply(reply["id"], WITHHELD))
        parts.append(text)
    return b"[" + b",".join(parts) + b"]" if batch else parts[0]


@dataclass(frozen=True, slots=True)
class _Request:
    """A valid request: its id (None for a notification), method and params."""

    request_id: str | int | None
    method: str
    params: dict[str, JSONValue]


class CallsInFlight(Protocol):
    """Calls being answered, per identity, against a limit (the edge's `InFlight`)."""

    def enter_many(self, identity: str, count: int) -> bool: ...

    def leave_many(self, identity: str, count: int) -> None: ...


class _Budget:
    """What is left of a reply's bytes: a batch's, shared by its calls."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit


class RpcService:
    """Answers JSON-RPC 2.0 bodies for one identity at a time, auditing every call.

    `max_batch`, `max_reply_bytes` and `max_batch_reply_bytes`: the limits above."""

    def __init__(
        self,
        gateway: Gateway,
        record: Recorder,
        *,
        max_batch: int = MAX_BATCH,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        max_batch_reply_bytes: int = MAX_BATCH_REPLY_BYTES,
    ) -> None:
        self.gateway: Final = gateway
        self._record = record
        self._max_batch = max_batch
        self._batch_too_long = (
            BATCH_TOO_LONG
            if max_batch == MAX_BATCH
            else malformed_call("", Reason.MAX_ITEMS, max_batch)
        )
        self._max_reply = max_reply_bytes
        self._max_batch_reply = max_batch_reply_bytes
        self.calls_in_flight: CallsInFlight | None = None
        """Set by whoever admits requests: a batch counts as the calls it holds there (the
        request itself was counted as one), and is refused busy when they do not fit."""

    async def answer(
        self, body: bytes, identity: str, claims: Claims | None = None
    ) -> bytes | None:
        """The reply body for a request body, or None when nothing is to be answered.
        `claims`: the caller's token's ("scope:S"; None for strictcall's own), which decide
        with the identity what it may list and call. A long body is read off the loop."""
        if off_loop(body):
            document = await read_off_loop(lambda: self._read(body))
        else:
            document = self._read(body)
        now = self._answer_read_now(document, identity, claims)  # the body read once
        if now is not AWAIT:
            return now
        assert not isinstance(document, Rejection)  # answered in place
        message = document.value
        if type(message) is list:
            refused = self._admit_batch(len(message), identity)
            if refused is not None:
                return refused
            replies: list[dict[str, JSONValue] | bytes] = []
            budget = _Budget(self._max_batch_reply)
            try:
                for n, item in enumerate(message):
                    if n:
                        await asyncio.sleep(0)  # between its calls, the loop serves others
                    reply = await self._answer_one(
                        item, identity, document.has_float, budget, claims
                    )
                    if reply is not None:
                        replies.append(reply)
            finally:
                self._leave_batch(len(message), identity)
            return encode_replies(replies, batch=True) if replies else None
        reply = await self._answer_one(message, identity, document.has_float, None, claims)
        return None if reply is None else encode_replies([reply], batch=False)

    def answer_now(
        self, body: bytes, identity: str, claims: Claims | None = None
    ) -> bytes | Await | None:
        """`answer`, in place: the reply body (None: nothing to answer), or `AWAIT` when one
        of its calls must be awaited (an async tool, a tool with a time limit). Nothing is run
        or audited before that is known, so `answer` may then take the body from the start.
        A body to be read off the loop (`off_loop`) is `AWAIT` unread."""
        if off_loop(body):
            return AWAIT
        return self._answer_read_now(self._read(body), identity, claims)

    def _read(self, body: bytes) -> Document | Rejection:
        """The body read strictly, or its refusal; a batch of more than `max_batch` messages
        is refused from a scan of its first ones (`array_longer_than`), before it is parsed,
        however long or malformed the rest."""
        limits = self.gateway.limits
        if len(body) <= limits.max_size and array_longer_than(body, self._max_batch):
            return self._batch_too_long
        return read_message(body, limits, numbers=self.gateway.reads_numbers)

    def _answer_read_now(
        self, document: Document | Rejection, identity: str, claims: Claims | None
    ) -> bytes | Await | None:
        """`answer_now` of a body already read."""
        if isinstance(document, Rejection):
            self._record(refusal_record(document.as_error(), identity))
            return encode_replies([error_reply(None, document.as_error())], batch=False)
        message = document.value
        if type(message) is list:
            if not message:
                return encode_replies([refusal_reply(None, NOT_A_REQUEST)], batch=False)
            if len(message) > self._max_batch:  # one the scan could not tell
                refusal = self._batch_too_long
                self._record(refusal_record(refusal.as_error(), identity))
                return encode_replies([refusal_reply(None, refusal)], batch=False)
            if len(message) > MAX_BATCH_IN_PLACE:
                return AWAIT  # a long batch is answered call by call, the loop served between
            # nothing of a batch runs before every call of it is known to be answered in place
            for item in message:
                if (
                    type(item) is dict
                    and item.get("method") == "tools/call"
                    and self.gateway.must_await(item.get("params"), identity, claims)
                ):
                    return AWAIT
            refused = self._admit_batch(len(message), identity)
            if refused is not None:
                return refused
            replies: list[dict[str, JSONValue] | bytes] = []
            budget = _Budget(self._max_batch_reply)
            try:
                for item in message:
                    # not in place: the look above said none awaits (as of then)
                    reply = self._answer_one_now(
                        item, identity, document.has_float, budget, claims, in_place=False
                    )
                    if reply is not None and reply is not AWAIT:
                        replies.append(reply)
            finally:
                self._leave_batch(len(message), identity)
            return encode_replies(replies, batch=True) if replies else None
        reply = self._answer_one_now(
            message, identity, document.has_float, None, claims, in_place=True
        )
        if reply is None or reply is AWAIT:
            return reply
        return encode_replies([reply], batch=False)

    def _admit_batch(self, count: int, identity: str) -> bytes | None:
        """None when a batch of `count` calls is admitted as that many calls in flight (the
        request itself counted one already), else its refusal: one busy error, id null,
        retryable, audited, nothing of it run."""
        counter = self.calls_in_flight
        if counter is None or count < 2 or counter.enter_many(identity, count - 1):
            return None
        self._record(refusal_record(CALLER_BUSY.as_error(), identity))
        return encode_replies([refusal_reply(None, CALLER_BUSY)], batch=False)

    def _leave_batch(self, count: int, identity: str) -> None:
        counter = self.calls_in_flight
        if counter is not None and count >= 2:
            counter.leave_many(identity, count - 1)

    def _answer_one_now(
        self,
        message: JSONValue,
        identity: str,
        has_float: bool,
        budget: _Budget | None,
        claims: Claims | None,
        *,
        in_place: bool,
    ) -> dict[str, JSONValue] | bytes | Await | None:
        """`_answer_one` in place; `in_place`: or `AWAIT` for a tools/call the gateway says must
        be awaited (nothing of it run or audited)."""
        request = read_request(message)
        if type(request) is _Request and request.method == "tools/call":
            request_id = request.request_id
            call_id = request_id if request_id is not None else mint_call_id("n")
            outcome = self.gateway.settle(
                request.params,
                identity,
                call_id,
                has_float=has_float,
                in_place=in_place,
                claims=claims,
            )
            if outcome is AWAIT:
                return AWAIT
            return self._answered(request_id, outcome, identity, budget)
        return self._answer_other(message, request, identity, claims)

    async def _answer_one(
        self,
        message: JSONValue,
        identity: str,
        has_float: bool,
        budget: _Budget | None,
        claims: Claims | None,
    ) -> dict[str, JSONValue] | bytes | None:
        request = read_request(message)
        if type(request) is _Request and request.method == "tools/call":
            request_id = request.request_id
            call_id = request_id if request_id is not None else mint_call_id("n")
            outcome = await self.gateway.settle_async(
                request.params, identity, call_id, has_float=has_float, claims=claims
            )
            return self._answered(request_id, outcome, identity, budget)
        return self._answer_other(message, request, identity, claims)

    def _answered(
        self,
        request_id: str | int | None,
        outcome: Outcome,
        identity: str,
        budget: _Budget | None,
    ) -> dict[str, JSONValue] | bytes | None:
        """A tools/call's reply from the gateway's outcome, audited (a notification's too) as
        the caller gets it: a result past the reply's limits is withheld, refused."""
        answer = outcome.answer
        if request_id is None:
            self._record(record_of(outcome, identity))
            return None
        if answer["ok"] is not True:
            self._record(record_of(outcome, identity))
            return error_reply(request_id, answer["error"])
        result = answer["result"]
        if type(result) is Content:  # /rpc takes no blocks: the content's one value
            result = result.as_value()
        reply: dict[str, JSONValue] = {"jsonrpc": "2.0", "id": request_id, "result": result}
        text = dump_text(reply)
        if text is not None:  # else encode_replies withholds it
            size = len(text)
            if size > self._max_reply:
                outcome = _withheld(outcome, withheld_for_size(self._max_reply, batch=False))
            elif budget is not None and size > budget.left:
                outcome = _withheld(outcome, withheld_for_size(budget.limit, batch=True))
            else:
                if budget is not None:
                    budget.left -= size
                self._record(record_of(outcome, identity))
                return text
            self._record(record_of(outcome, identity))
            return error_reply(request_id, outcome.answer["error"])
        self._record(record_of(outcome, identity))
        return reply

    def _answer_other(
        self,
        message: JSONValue,
        request: _Request | Rejection,
        identity: str,
        claims: Claims | None,
    ) -> dict[str, JSONValue] | None:
        """The reply to anything but a tools/call: a refused message, tools/list, an unknown
        method."""
        if isinstance(request, Rejection):
            request_id = valid_id(message)
            params = message.get("params") if type(message) is dict else None
            tool = self.gateway.tool_named(params)
            self._record(refusal_record(request.as_error(), identity, request_id, tool))
            if request is POSITIONAL_PARAMS and "id" not in message:
                return None  # a valid notification: refused, but never answered
            return error_reply(request_id, request.as_error())
        if request.method == "tools/list":
            if request.request_id is None:
                return None
            # a /rpc caller is never asked (sampling, elicitation, roots): it offers none
            listing = self.gateway.listing(identity, "mcp", claims, frozenset())
            return {"jsonrpc": "2.0", "id": request.request_id, "result": {"tools": listing}}
        self._record(refusal_record(NO_SUCH_METHOD.as_error(), identity, request.request_id))
        if request.request_id is None:
            return None
        return refusal_reply(request.request_id, NO_SUCH_METHOD)


MAX_BATCH_IN_PLACE: Final = 16
"""The longest batch answered in place, all at once (no other request served meanwhile); a
longer one is awaited call by call, the loop serving others between its calls."""


def _withheld(outcome: Outcome, refusal: Rejection) -> Outcome:
    """`outcome` with its result withheld, refused as `refusal` says (stage output)."""
    error = refusal.as_error()
    answer = {"ok": False, "call_id": outcome.answer["call_id"], "error": error}
    return outcome._replace(answer=answer, pointer=None, stage=error["stage"])


NO_VERSION: Final = malformed_call("", Reason.MISSING_MEMBER, "jsonrpc")
"""A request without "jsonrpc": invalid_request, the member named in `expected`."""
NOT_VERSION_2: Final = malformed_call("/jsonrpc", Reason.CONST, "2.0")
"""A request whose "jsonrpc" is not "2.0": invalid_request at /jsonrpc."""


def read_request(message: JSONValue) -> _Request | Rejection:
    """A valid JSON-RPC 2.0 request, or its rejection: invalid_request, or invalid_arguments
    for params given by position (an array)."""
    if type(message) is not dict or not _REQUEST_MEMBERS.issuperset(message):
        return NOT_A_REQUEST
    if "jsonrpc" not in message:  # named, so that a newcomer's request says what it lacks
        return NO_VERSION
    if message["jsonrpc"] != "2.0":
        return NOT_VERSION_2
    if type(message.get("method")) is not str:
        return NOT_A_REQUEST
    request_id = message.get("id")
    if "id" in message and valid_id(message) is None:
        return ID_TOO_LONG if id_too_long(message) else NOT_A_REQUEST
    params = message.get("params")
    if type(params) is list:  # by position: a valid request, but no method takes those
        return POSITIONAL_PARAMS
    if "params" in message and type(params) is not dict:
        return NOT_A_REQUEST
    return _Request(request_id, message["method"], params if params is not None else {})
