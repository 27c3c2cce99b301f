"""Strict intake of one MCP message, before the SDK sees it.

Every message is read with strictcall's strict intake: a text that is not strict JSON gets
-32700 with id null, one that is not a JSON-RPC 2.0 message -32600 (a batch among them: one
of more than `MAX_BATCH` messages is refused so from a scan of its first ones, unparsed), one
longer than the limit request_too_large, params by position -32602, and a request for a
method the server does not serve -32601 unknown_method (the SDK's own answer would echo the
method name, whatever its length). A tools/call whose params the SDK would refuse without
detail goes to the gateway instead (`DirectCall`), so that it is answered as any other call is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple, overload

import mcp_types as types
import orjson
from pydantic import ValidationError

from strictcall.core.ids import valid_id
from strictcall.core.jsontext import array_longer_than
from strictcall.core.pipeline import Limits, too_large
from strictcall.core.pipeline import read_message as read_text
from strictcall.core.refusals import ID_TOO_LONG, NO_SUCH_METHOD, NOT_A_REQUEST, POSITIONAL_PARAMS
from strictcall.errors import JSONValue, Rejection
from strictcall.transports.jsonrpc import (
    MAX_BATCH,
    NO_VERSION,
    NOT_VERSION_2,
    error_reply,
    read_request,
)
from strictcall.transports.mcp.direct import DirectRequest


class Refused:
    """A message refused before the SDK saw it, and its JSON-RPC error reply (on HTTP, the body
    of a 400, or of a 200 for an unknown method, as the SDK answers that). A valid notification
    that is refused (params by position) is audited but never answered (`answered` false)."""

    __slots__ = ("answered", "error", "name", "reply", "request_id", "status")

    def __init__(
        self,
        request_id: str | int | None,
        refusal: Rejection,
        name: str | None = None,
        status: int = 400,
        *,
        answered: bool = True,
    ) -> None:
        self.request_id: Final = request_id
        """The message's id, when it had a valid one."""
        self.name: Final = name
        """The tool a tools/call named, when its params could be read (for the audit log)."""
        self.error: Final = refusal.as_error()
        """The structured error {code, stage, retryable, ...}."""
        self.reply: Final[dict[str, Any]] = error_reply(request_id, self.error)
        self.status: Final = status
        self.answered: Final = answered

    def message(self) -> types.JSONRPCMessage:
        """The reply as the SDK's message model."""
        return types.jsonrpc_message_adapter.validate_python(self.reply, by_name=False)

    def body(self) -> bytes:
        """The reply as UTF-8 JSON."""
        return orjson.dumps(self.reply)


class DirectCall(NamedTuple):
    """A tools/call the SDK would refuse with a bare -32602 (no tool name, or arguments that
    are not an object): it goes to the gateway directly, which answers it as it answers any
    other call (route first, then shape), as a tool result."""

    request_id: types.RequestId
    params: dict[str, JSONValue]


_RESPONSE_MEMBERS: Final = frozenset({"jsonrpc", "id", "result", "error"})
_PLAIN_CALL: Final = frozenset({"name", "arguments"})


def _serves_all(method: str) -> bool:
    return True


AnswersItself = Callable[[dict[str, JSONValue]], DirectRequest | None]
"""Which requests /mcp answers on its own path (`strictcall.transports.mcp.direct`)."""


@overload
def read_message(
    raw: bytes,
    limits: Limits,
    serves: Callable[[str], bool] = ...,
    *,
    direct_calls: bool = ...,
    answers_itself: None = ...,
) -> types.JSONRPCMessage | DirectCall | Refused: ...


@overload
def read_message(
    raw: bytes,
    limits: Limits,
    serves: Callable[[str], bool] = ...,
    *,
    direct_calls: bool = ...,
    answers_itself: AnswersItself,
) -> types.JSONRPCMessage | DirectCall | DirectRequest | Refused: ...


def read_message(
    raw: bytes,
    limits: Limits,
    serves: Callable[[str], bool] = _serves_all,
    *,
    direct_calls: bool = False,
    answers_itself: AnswersItself | None = None,
) -> types.JSONRPCMessage | DirectCall | DirectRequest | Refused:
    """One JSON-RPC 2.0 message read strictly: a request or notification as
    `strictcall.transports.jsonrpc` accepts them, or a response; anything else is refused, and so
    is a
    request for a method that `serves` says the server does not answer. With `direct_calls`
    (an initialized stdio session), a tools/call whose params hold nothing but a name and
    arguments is a `DirectCall` too: the SDK would only pass it on to the gateway. A request
    that `answers_itself` takes (/mcp's own path, `strictcall.transports.mcp.direct`) is
    returned as it says, unread by the SDK's models."""
    if len(raw) <= limits.max_size and array_longer_than(raw, MAX_BATCH):
        return Refused(None, NOT_A_REQUEST)  # as a batch parsed is: none is taken, unparsed
    # has_float is never read here (the gateway finds floats in the call itself, when its
    # tools take numbers); long integers are still read exactly
    document = read_text(raw, limits, floats=False)
    if isinstance(document, Rejection):
        return Refused(None, document)
    message = document.value
    if type(message) is dict and "method" not in message and _RESPONSE_MEMBERS & message.keys():
        acceptable = _is_response(message)
    else:
        request = read_request(message)
        if request is ID_TOO_LONG:  # answered with id null: the id is never echoed or kept
            return Refused(None, ID_TOO_LONG, named_tool(message))
        if request is POSITIONAL_PARAMS:  # a notification among them gets no answer
            return Refused(valid_id(message), POSITIONAL_PARAMS, answered="id" in message)
        if request is NO_VERSION or request is NOT_VERSION_2:  # named, as on /rpc
            return Refused(valid_id(message), request, named_tool(message))
        acceptable = not isinstance(request, Rejection)
        if acceptable and "id" in message and not serves(message["method"]):
            return Refused(valid_id(message), NO_SUCH_METHOD, status=200)
    if acceptable and message.get("method") == "tools/call" and "id" in message:
        params = message.get("params", {})  # absent params are read_request's "no params"
        if _sdk_refuses(params) or (direct_calls and _PLAIN_CALL.issuperset(params)):
            return DirectCall(message["id"], params)
    if acceptable and answers_itself is not None and type(message) is dict:
        direct = answers_itself(message)
        if direct is not None:
            return direct
    if acceptable:
        try:
            return types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        except ValidationError:
            pass
    return Refused(valid_id(message), NOT_A_REQUEST, named_tool(message))


def named_tool(message: JSONValue) -> str | None:
    """The tool name a message's params hold, when they can be read: a str, else None."""
    if type(message) is not dict:
        return None
    params = message.get("params")
    name = params.get("name") if type(params) is dict else None
    return name if type(name) is str else None


def _sdk_refuses(params: dict[str, JSONValue]) -> bool:
    """Whether the SDK's model of tools/call params refuses these without a structured error:
    a name that is not a str, or arguments neither an object nor null."""
    if type(params.get("name")) is not str:
        return True
    arguments = params.get("arguments")
    return arguments is not None and type(arguments) is not dict


def refuse_too_large(limits: Limits) -> Refused:
    """The refusal of a message longer than the limit, unread."""
    return Refused(None, too_large(limits.max_size))


def _is_response(message: dict[str, JSONValue]) -> bool:
    """A JSON-RPC 2.0 response with a result object or an error {code: int, message: str}."""
    if not _RESPONSE_MEMBERS.issuperset(message) or message.get("jsonrpc") != "2.0":
        return False
    if ("result" in message) == ("error" in message):
        return False
    if "id" not in message:
        return False
    if "result" in message:
        return type(message["result"]) is dict and valid_id(message) is not None
    error = message["error"]
    return (
        (message["id"] is None or valid_id(message) is not None)
        and type(error) is dict
        and type(error.get("code")) is int
        and type(error.get("message")) is str
    )
