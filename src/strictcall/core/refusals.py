"""The refusals a transport answers with before, or instead of, the ladder: each decided here
once, so that every transport gives the same answer with the same details.

A transport only chooses which of these applies (no token, a body over the limit, a message that
is not a request, ...); what the answer says is decided here and in the pipeline.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from strictcall.core.pipeline import WITHHELD, too_large
from strictcall.errors import (
    BUSY,
    FORBIDDEN_ORIGIN,
    INTERNAL_ERROR,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    MAX_CALL_ID_LENGTH,
    REPLY_TOO_LARGE,
    RESULT_TOO_LARGE,
    RETRY_AFTER_MS,
    TOKEN_STORE_UNAVAILABLE,
    UNAUTHENTICATED,
    UNKNOWN_METHOD,
    UNKNOWN_ROUND,
    JSONValue,
    Reason,
    Rejection,
)

__all__ = [
    "AUTH_DOWN",
    "CALLER_BUSY",
    "FOREIGN_ORIGIN",
    "IDENTITY_STREAMS_FULL",
    "ID_TOO_LONG",
    "NOT_A_REQUEST",
    "NO_SUCH_METHOD",
    "NO_TOKEN",
    "POSITIONAL_PARAMS",
    "STREAMS_FULL",
    "UNKNOWN_STATE",
    "WITHHELD",
    "malformed_call",
    "protocol_refusal",
    "too_large",
    "withheld_for_size",
]

UNKNOWN_STATE: Final = Rejection(UNKNOWN_ROUND)
"""A 2026-07-28 requestState that names no round held for its caller: never minted, already
answered, past its wait, or another identity's (all answered alike)."""

NO_TOKEN: Final = Rejection(UNAUTHENTICATED)
"""No token, or one the server does not know (HTTP 401)."""

AUTH_DOWN: Final = Rejection(
    TOKEN_STORE_UNAVAILABLE, MappingProxyType({"retry_after_ms": RETRY_AFTER_MS})
)
"""The token could not be checked: its store is down (HTTP 503)."""

FOREIGN_ORIGIN: Final = Rejection(FORBIDDEN_ORIGIN)
"""A browser request from an origin the server does not admit (HTTP 403)."""

CALLER_BUSY: Final = Rejection(BUSY, MappingProxyType({"retry_after_ms": RETRY_AFTER_MS}))
"""The caller already has as many calls in flight as it may (HTTP 429)."""

STREAM_RETRY_MS: Final = 5000
"""When to try a change stream again once they are all taken: one frees when a host leaves."""

IDENTITY_STREAMS_FULL: Final = Rejection(
    BUSY, MappingProxyType({"retry_after_ms": STREAM_RETRY_MS, "limit": "streams_per_identity"})
)
"""The caller already holds as many change streams on /mcp as it may (HTTP 429)."""

STREAMS_FULL: Final = Rejection(
    BUSY, MappingProxyType({"retry_after_ms": STREAM_RETRY_MS, "limit": "streams"})
)
"""The server holds as many change streams on /mcp as it may, or is stopping (HTTP 503)."""

NOT_A_REQUEST: Final = Rejection(INVALID_REQUEST)
"""A message that is not a JSON-RPC 2.0 request (or an empty batch)."""

NO_SUCH_METHOD: Final = Rejection(UNKNOWN_METHOD)
"""A JSON-RPC method the server does not have."""

ID_TOO_LONG: Final = Rejection(
    INVALID_REQUEST,
    MappingProxyType(
        {
            "pointer": "/id",
            "reason": Reason.MAX_LENGTH.value,
            "expected": MAX_CALL_ID_LENGTH,  # as a schema's maxLength error says it
            "limit": MAX_CALL_ID_LENGTH,  # as request_too_large says its limit
        }
    ),
)
"""A request whose str id is longer than `MAX_CALL_ID_LENGTH`: answered with id null, the id
never stored."""


def withheld_for_size(limit: int, *, batch: bool) -> Rejection:
    """A result withheld for its size, the limit named: result_too_large past one call's
    reply limit, reply_too_large past its batch's."""
    kind = REPLY_TOO_LARGE if batch else RESULT_TOO_LARGE
    return Rejection(kind, MappingProxyType({"limit": limit}))


def malformed_call(pointer: str, reason: Reason, expected: JSONValue = None) -> Rejection:
    """A provider's tool call that the model's turn itself gets wrong (no id, no name, arguments
    that are not text, an id used twice, ...), located by a pointer into the turn."""
    details: dict[str, JSONValue] = {"pointer": pointer, "reason": reason.value}
    if expected is not None:
        details["expected"] = expected
    return Rejection(INVALID_REQUEST, MappingProxyType(details))


POSITIONAL_PARAMS: Final = Rejection(
    INVALID_ARGUMENTS,
    MappingProxyType({"pointer": "", "reason": Reason.TYPE.value, "expected": "object"}),
)
"""A request whose params are an array: JSON-RPC allows them, but every method here takes its
params by name (JSON-RPC -32602 Invalid params; the pointer is the params' root)."""


_BY_JSON_RPC_CODE: Final = MappingProxyType(
    {
        -32700: Rejection(INVALID_JSON),
        -32601: NO_SUCH_METHOD,
        -32602: Rejection(INVALID_ARGUMENTS),
        -32603: Rejection(INTERNAL_ERROR),
        0: Rejection(INTERNAL_ERROR),  # the MCP SDK's code for a handler that failed
    }
)


def protocol_refusal(code: int) -> Rejection:
    """The refusal a JSON-RPC error that another layer answered (the MCP SDK's own protocol
    errors) is audited as: by its code, and invalid_request for any other code (-32600, and
    MCP's -32020 to -32022 for headers, capabilities and protocol versions)."""
    return _BY_JSON_RPC_CODE.get(code, NOT_A_REQUEST)
