"""Tool listings in the formats agent hosts read: MCP, OpenAI function tools, Anthropic tools."""

from __future__ import annotations

import copy
from typing import Literal

from strictcall.errors import JSONValue
from strictcall.tools import Tool

ToolFormat = Literal["mcp", "openai", "openai-responses", "anthropic"]


def describe_tool(
    tool: Tool, input_schema: JSONValue, output_schema: JSONValue, format: ToolFormat
) -> dict[str, JSONValue]:
    """One tool as `format` lists it, with fresh copies of the (strict) schemas.

    Raises:
        ValueError: an unknown format.
    """
    parameters = copy.deepcopy(input_schema)
    if format == "mcp":
        return {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": parameters,
            "outputSchema": copy.deepcopy(output_schema),
        }
    if format == "openai":
        return {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": parameters,
                "strict": True,
            },
        }
    if format == "openai-responses":
        return {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters,
            "strict": True,
        }
    if format == "anthropic":
        return {"name": tool.name, "description": tool.description, "input_schema": parameters}
    raise ValueError(f"unknown tool format {format!r}")
