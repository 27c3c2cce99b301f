"""An upstream MCP server's tools as strictcall `Tool`s, run through the same gateway.

A proxied tool is listed with its upstream's title, annotations, icons and `_meta`, neutralised
where a host or terminal would show them (`strictcall.core.display`).

What a proxied tool's result is (what stage output checks and the caller receives):

- a tool that declares an outputSchema: its `structuredContent`, checked against that schema
  (made strict, as any output schema); a success without structuredContent is withheld;
- any other tool: its text, when the upstream answers with exactly one text block; otherwise
  the list of content blocks as MCP writes them (`{"type": "image", ...}`), `[]` included.

An `isError` result is `tool_error` (stage execute), its text withheld unless the tool is one
whose errors the operator passes on (`--pass-errors`): then the upstream's text is the error's
`upstream_text`. A JSON-RPC error from the upstream is a `tool_error` too, and a result that is
not a tools/call result is withheld (`invalid_tool_result`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Final

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from strictcall.core.display import NO_DISPLAY, Display, display_from_listing
from strictcall.core.tools import Arguments, Tool, ToolContext, ToolFailure
from strictcall.errors import RESULT_TOO_LARGE, TOOL_ERROR, UPSTREAM_UNAVAILABLE, JSONValue
from strictcall.services.proxy.pins import display_members
from strictcall.services.proxy.stdio import AnswerTooLarge, UnreadableAnswer
from strictcall.services.proxy.upstream import Upstream

log = logging.getLogger("strictcall")

UPSTREAM_TEXT: Final = "upstream_text"
"""The detail of a tool_error that holds the upstream's own error text (`--pass-errors` only)."""

CONTENT_RESULT: Final[dict[str, JSONValue]] = {
    "anyOf": [
        {"type": "string"},
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"type": {"type": "string"}},
                "required": ["type"],
                "additionalProperties": True,
            },
        },
    ]
}
"""The result schema of a proxied tool without an outputSchema: its one text, or its blocks."""

_UNREADABLE: Final = object()
"""What a handler returns for a result that must be withheld: not a JSON value, so stage
output refuses it (invalid_tool_result) like any other broken result."""


def proxied_tool(
    listed: types.Tool, upstream: Upstream, *, pass_errors: bool, timeout: float | None
) -> Tool:
    """The strictcall tool that forwards calls of `listed` to `upstream`."""
    structured = listed.output_schema is not None
    name = listed.name

    async def forward(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        try:
            result = await upstream.call(name, arguments)
        except MCPError as exc:  # the upstream refused a call that passed strictcall's checks
            raise _tool_error(exc.error.message if pass_errors else None) from None
        except (ValidationError, UnreadableAnswer):  # not a tools/call result
            return _UNREADABLE
        except AnswerTooLarge:
            raise ToolFailure(
                RESULT_TOO_LARGE, details={"limit": upstream.max_result_bytes}
            ) from None
        return result_of(result, structured=structured, pass_errors=pass_errors)

    output_schema: dict[str, JSONValue] = (
        CONTENT_RESULT if listed.output_schema is None else _read_as_ours(listed.output_schema)
    )
    return Tool(
        name=name,
        description="" if listed.description is None else listed.description,
        input_schema=_read_as_ours(listed.input_schema),
        output_schema=output_schema,
        handler=forward,
        failures=(TOOL_ERROR, UPSTREAM_UNAVAILABLE, RESULT_TOO_LARGE),
        timeout=timeout,
        display=display_of(listed),
    )


def display_of(listed: types.Tool) -> Display:
    """What a host is shown of an upstream's tool beside its schemas (title, annotations, icons,
    `_meta`), neutralised as `strictcall.core.display` says."""
    shown = display_members(listed)
    if not shown:
        return NO_DISPLAY
    return display_from_listing(shown)


def proxied_tools(
    listing: list[types.Tool],
    upstream: Upstream,
    *,
    pass_errors: Collection[str],
    timeout: float | None,
) -> list[Tool]:
    """Every tool of an upstream listing as a strictcall tool."""
    return [
        proxied_tool(listed, upstream, pass_errors=listed.name in pass_errors, timeout=timeout)
        for listed in listing
    ]


def result_of(result: types.CallToolResult, *, structured: bool, pass_errors: bool) -> JSONValue:
    """A proxied tool's result (see the module's docstring).

    Raises:
        ToolFailure: tool_error, for an isError result.
    """
    if result.is_error:
        raise _tool_error(_text_of(result.content) if pass_errors else None)
    if structured:
        if "structured_content" not in result.model_fields_set:
            return _UNREADABLE  # the upstream's own schema promises structured content
        return result.structured_content
    content = result.content
    if len(content) == 1 and isinstance(content[0], types.TextContent):
        return content[0].text
    return [block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in content]


def _tool_error(text: str | None) -> ToolFailure:
    if text is None:
        return ToolFailure(TOOL_ERROR)
    return ToolFailure(TOOL_ERROR, details={UPSTREAM_TEXT: text})


def _text_of(content: list[types.ContentBlock]) -> str:
    """The text blocks of an error result, one per line."""
    return "\n".join(block.text for block in content if isinstance(block, types.TextContent))


def _read_as_ours(schema: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """An upstream schema as strictcall reads every schema, JSON Schema 2020-12: a `$schema`
    naming another dialect (zod writes draft-07) is dropped rather than advertised for rules
    that are not the ones enforced."""
    return {key: value for key, value in schema.items() if key != "$schema"}
