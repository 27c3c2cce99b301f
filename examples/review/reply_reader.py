"""Seed 000's reply reader after the half fix: `"result" in reply` became
`reply.get("result") is not None`. `strictcall check --contract reply` finds what it broke."""

from __future__ import annotations

from typing import Any


def interpret_tool_reply(reply: Any, expected_id: str) -> dict[str, Any]:
    """The seed's three answers: ok with the value, error with the error, or invalid."""
    if not isinstance(reply, dict):
        return {"status": "invalid"}
    if reply.get("jsonrpc") != "2.0" or reply.get("id") != expected_id:
        return {"status": "invalid"}
    has_result = reply.get("result") is not None
    has_error = "error" in reply
    if has_result == has_error:
        return {"status": "invalid"}
    if has_result:
        return {"status": "ok", "value": reply["result"]}
    error = reply["error"]
    if (
        not isinstance(error, dict)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        return {"status": "invalid"}
    return {"status": "error", "error": error}
