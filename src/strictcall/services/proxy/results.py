"""Reading an upstream's tools/call answer as the official session would: the answer's
envelope checked, the members of revisions later than the session's dropped, the result
validated once as the SDK's `CallToolResult`."""

from __future__ import annotations

from typing import get_args

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.methods import SERVER_RESULTS
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from strictcall.errors import JSONValue
from strictcall.services.proxy.stdio import UnreadableAnswer


def call_result(
    answer: dict[str, JSONValue], later_members: frozenset[str]
) -> types.CallToolResult:
    """The tools/call result in a JSON-RPC answer read off the pipe, validated once.

    Raises:
        MCPError: the answer is a JSON-RPC error {code: int, message: str, data?}.
        UnreadableAnswer: the answer is neither that nor a result object (both at once
            included, which the SDK's envelope reads as an error).
        ValidationError: the result is not a tools/call result.
    """
    if "result" in answer:
        result = answer["result"]
        if type(result) is not dict or "error" in answer:
            raise UnreadableAnswer
        if not later_members.isdisjoint(result):  # as the session drops them
            result = {key: value for key, value in result.items() if key not in later_members}
        return types.CallToolResult.model_validate(result, by_name=False)
    error = answer.get("error")
    if type(error) is dict and type(error.get("code")) is int and type(error.get("message")) is str:
        raise MCPError(code=error["code"], message=error["message"], data=error.get("data"))
    raise UnreadableAnswer


def later_members(version: str) -> frozenset[str]:
    """The members of a tools/call result that only revisions later than `version` define:
    the session drops them from a result before reading it, so that a later revision's
    constraints do not apply to a session that did not negotiate it."""
    if version not in KNOWN_PROTOCOL_VERSIONS or ("tools/call", version) not in SERVER_RESULTS:
        return frozenset()
    later: set[str] = set()
    for revision in KNOWN_PROTOCOL_VERSIONS[KNOWN_PROTOCOL_VERSIONS.index(version) + 1 :]:
        if ("tools/call", revision) in SERVER_RESULTS:
            later |= _members(SERVER_RESULTS[("tools/call", revision)])
    return frozenset(later - _members(SERVER_RESULTS[("tools/call", version)]))


def _members(model: object) -> set[str]:
    """The wire names of a result model's members (of every model of a union)."""
    found: set[str] = set()
    for member in get_args(model) or (model,):
        if isinstance(member, type) and issubclass(member, BaseModel):
            found |= {field.alias or name for name, field in member.model_fields.items()}
    return found
