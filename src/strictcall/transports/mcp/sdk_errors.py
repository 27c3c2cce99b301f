"""The MCP SDK's own JSON-RPC errors as strictcall passes them on: audited like any refusal, and
scrubbed of what the caller sent.

The SDK answers a few protocol errors itself, after strictcall's intake (-32602 for a request
before initialize or with params its model refuses, -32022 for a protocol version it does not
serve, -32020 for HTTP routing headers that disagree with the body, ...). Some of them repeat
the caller's text: -32022 puts the requested version in `data.requested`, whatever its length,
and the SDK's -32601 puts the method name in `data`. Here such data is replaced by nothing of
the caller's; the transports audit the error as `strictcall.core.refusals.protocol_refusal` says.
"""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

from strictcall.core.jsontext import dump_text

MAX_MESSAGE: Final = 200
"""Longer messages are replaced by JSON-RPC's text for the code (the SDK's are short and fixed)."""
MAX_DATA: Final = 512
"""Longer `data` (as JSON) is dropped."""

_STANDARD_MESSAGES: Final = {
    types.PARSE_ERROR: "Parse error",
    types.INVALID_REQUEST: "Invalid Request",
    types.METHOD_NOT_FOUND: "Method not found",
    types.INVALID_PARAMS: "Invalid params",
    types.INTERNAL_ERROR: "Internal error",
}


def scrubbed_message(message: types.JSONRPCError) -> types.JSONRPCError:
    """An SDK error reply, scrubbed (`scrubbed`)."""
    error = message.error.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return types.JSONRPCError(
        jsonrpc="2.0", id=message.id, error=types.ErrorData.model_validate(scrubbed(error))
    )


def scrubbed(error: dict[str, Any]) -> dict[str, Any]:
    """An SDK error object {code, message, data?} with nothing of the caller's left in it."""
    code = error.get("code")
    message = error.get("message")
    clean: dict[str, Any] = {"code": code}
    if not isinstance(message, str) or len(message) > MAX_MESSAGE:
        message = _STANDARD_MESSAGES.get(code, "Error") if isinstance(code, int) else "Error"
    clean["message"] = message
    if "data" not in error:
        return clean
    data = error["data"]
    if code == types.UNSUPPORTED_PROTOCOL_VERSION and isinstance(data, dict):
        requested = data.get("requested")
        # the spec's shape asks for the requested version: a known one is no echo, any other
        # (a caller's text of any length) is given back as ""
        data = {**data, "requested": requested if requested in KNOWN_PROTOCOL_VERSIONS else ""}
    elif code == types.METHOD_NOT_FOUND or (isinstance(data, str) and data):
        return clean  # the SDK's -32601 data is the method name, as sent
    text = dump_text(data)
    if text is not None and len(text) <= MAX_DATA:
        clean["data"] = data
    return clean
