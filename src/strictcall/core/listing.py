"""Tool listings in the formats agent hosts read: MCP, OpenAI function tools, Anthropic tools.

- Every host wants an input schema whose root says `type: "object"`; it is added where a
  tool's schema leaves it implicit (`object_rooted`).
- MCP (and /rpc's tools/list) wants an object `outputSchema`: a tool whose result is not
  declared an object is listed wrapped, as the schema of {"result": value}, marked with
  `x-fastmcp-wrap-result` so that FastMCP's client unwraps the value again. A tool that
  declares none (`Tool.output_schema` None: it answers content) is listed without one.
- OpenAI: `strict: true` only for a tool whose input schema qualifies for strict mode as it
  stands (`strictcall.core.openai_strict`); every other tool is listed `strict: false`, unchanged.
  Optional members are never rewritten as required-and-nullable: a gateway reading null as
  absent for one host would accept, for that host, calls the tool's schema refuses.
"""

from __future__ import annotations

import copy
from typing import Final, Literal

from strictcall.core.openai_strict import strict_schema
from strictcall.core.tools import Tool
from strictcall.errors import JSONValue

ToolFormat = Literal["mcp", "openai", "openai-responses", "anthropic"]

RESULT_MEMBER: Final = "result"
"""The member that holds a result that is not an object, in MCP's structuredContent and in the
listed outputSchema."""

WRAP_MARKER: Final = "x-fastmcp-wrap-result"
"""The keyword FastMCP's client reads on an outputSchema to unwrap {"result": value} to the
value; other validators ignore it (an unknown keyword constrains nothing)."""


def describe_tool(
    tool: Tool, input_schema: JSONValue, output_schema: JSONValue, format: ToolFormat
) -> dict[str, JSONValue]:
    """One tool as `format` lists it, with fresh copies of the (strict) schemas.

    Raises:
        ValueError: an unknown format.
    """
    parameters = object_rooted(input_schema)
    strict = None
    if format in ("openai", "openai-responses"):
        strict = strict_schema(parameters)
        parameters = strict if strict is not None else parameters
    if format == "mcp":
        listed: dict[str, JSONValue] = {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": parameters,
        }
        if tool.output_schema is not None:  # None: the tool declares none (it answers content)
            listed["outputSchema"] = mcp_output_schema(output_schema)
        return listed
    if format == "openai":
        return {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": parameters,
                "strict": strict is not None,
            },
        }
    if format == "openai-responses":
        return {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters,
            "strict": strict is not None,
        }
    if format == "anthropic":
        return {"name": tool.name, "description": tool.description, "input_schema": parameters}
    raise ValueError(f"unknown tool format {format!r}")


def object_rooted(input_schema: JSONValue) -> JSONValue:
    """An input schema as hosts list it (a fresh copy), its root declared `type: "object"`:
    every host requires that (MCP's inputSchema, OpenAI's and Anthropic's tools), and it keeps
    what the tool accepts, since the gateway refuses arguments that are not an object whatever
    the schema says (`pipeline.check_arguments`)."""
    if input_schema is True:
        return {"type": "object"}
    if not isinstance(input_schema, dict):
        return copy.deepcopy(input_schema)
    rooted = copy.deepcopy(input_schema)
    declared = rooted.get("type")
    if declared is None:
        return {"type": "object", **rooted}
    if isinstance(declared, list) and "object" in declared:
        rooted["type"] = "object"
    return rooted


def result_is_wrapped(output_schema: JSONValue) -> bool:
    """Whether a tool's results are wrapped as {"result": value} for MCP: unless its schema
    declares an object, a value may be something MCP's structuredContent cannot hold."""
    return not (isinstance(output_schema, dict) and output_schema.get("type") == "object")


def mcp_output_schema(output_schema: JSONValue) -> JSONValue:
    """A tool's output schema as MCP lists it (a fresh copy): as declared when it is an object
    schema, otherwise wrapped (`wrap_schema`)."""
    if result_is_wrapped(output_schema):
        return wrap_schema(output_schema)
    return copy.deepcopy(output_schema)


def wrap_schema(schema: JSONValue) -> dict[str, JSONValue]:
    """The object schema of {"result": value} for a value of `schema`, marked for FastMCP's
    client; its local references ("#/$defs/...") are moved along with it."""
    return {
        "type": "object",
        "properties": {RESULT_MEMBER: _moved_refs(schema, "#/properties/" + RESULT_MEMBER)},
        "required": [RESULT_MEMBER],
        "additionalProperties": False,
        WRAP_MARKER: True,
    }


_DATA_KEYWORDS: Final = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are instances, not schemas: a "$ref" inside one is data."""


def _moved_refs(schema: JSONValue, base: str) -> JSONValue:
    if isinstance(schema, list):
        return [_moved_refs(item, base) for item in schema]
    if not isinstance(schema, dict):
        return schema
    moved: dict[str, JSONValue] = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str) and (value == "#" or value.startswith("#/")):
            moved[key] = base + value[1:]
        elif key in _DATA_KEYWORDS:
            moved[key] = copy.deepcopy(value)
        else:
            moved[key] = _moved_refs(value, base)
    return moved
