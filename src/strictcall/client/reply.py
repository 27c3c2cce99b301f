"""Reading one JSON-RPC 2.0 reply to a tool call, by presence of keys and never by their truth.

A result of 0, false, "", [], {} or null is a success: `"result" in reply` decides, not
`reply.get("result")`. This is the reply reader, its contract exactly, with one addition: the
expected id may also be an int, and ids compare by type as well as value (7 never matches 7.0,
True or "7").
"""

from __future__ import annotations

from typing import Final

from strictcall.core.ids import check_request_id
from strictcall.errors import JSONValue

INVALID: Final = "invalid"


def same_id(received: JSONValue, expected: str | int) -> bool:
    """True when a reply's id is the expected id, by JSON type (string or integer) and value.

    A str subclass (a StrEnum member, say) is a string and an int subclass other than bool is an
    integer, as they are for the seed's `!=`; 7 still never matches 7.0, True or "7".
    """
    if isinstance(expected, str):
        return isinstance(received, str) and received == expected
    return isinstance(received, int) and not isinstance(received, bool) and received == expected


def interpret_tool_reply(reply: JSONValue, expected_id: str | int) -> dict[str, JSONValue]:
    """Read one parsed JSON-RPC 2.0 reply to the request `expected_id`.

    Returns {"status": "ok", "value": result}, {"status": "error", "error": error} or
    {"status": "invalid"}; exactly one of result and error must be present, "jsonrpc" must be
    exactly "2.0", and an error must be a dict whose code is an int (not a bool) and whose
    message is a str. The reply is never modified.

    Raises:
        TypeError: `expected_id` is neither a str nor an int (bool excluded).
        ValueError: `expected_id` is an empty str.
    """
    check_request_id(expected_id)
    if not isinstance(reply, dict):
        return {"status": INVALID}
    if reply.get("jsonrpc") != "2.0" or not same_id(reply.get("id"), expected_id):
        return {"status": INVALID}

    has_result = "result" in reply
    has_error = "error" in reply
    if has_result == has_error:
        return {"status": INVALID}

    if has_result:
        return {"status": "ok", "value": reply["result"]}

    error = reply["error"]
    if (
        not isinstance(error, dict)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        return {"status": INVALID}
    return {"status": "error", "error": error}
