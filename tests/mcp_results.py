"""Reading MCP tool results the way a model does: a refusal is isError with the structured
error as JSON in its one text block, and no structuredContent."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types


def tool_error(result: types.CallToolResult) -> dict[str, Any]:
    """The structured error of an isError result (an SDK model), read from its one text block."""
    assert result.is_error is True
    assert result.structured_content is None
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    error = json.loads(block.text)
    assert isinstance(error, dict)
    return error


def wire_error(result: dict[str, Any]) -> dict[str, Any]:
    """The structured error of an isError result as it is on the wire."""
    assert result["isError"] is True
    assert "structuredContent" not in result
    assert [block["type"] for block in result["content"]] == ["text"]
    error = json.loads(result["content"][0]["text"])
    assert isinstance(error, dict)
    return error
