"""An upstream MCP server's tools as strictcall `Tool`s, run through the same gateway.

A proxied tool is listed with its upstream's title, annotations, icons and `_meta`, neutralised
where a host or terminal would show them (`strictcall.core.display`).

What a proxied tool's result is: the upstream's own, as MCP content
(`strictcall.core.content.Content`): its blocks in order, its structuredContent and `_meta`,
checked at stage output (blocks well-formed; structuredContent against the tool's
outputSchema, made strict as any output schema; a success without it, where the tool declares
one, withheld) and redacted of secrets there (`strictcall.core.redact`: its results' text unless
`redact = "off"`, its error text always). MCP hosts get the blocks as they are; /rpc and the
providers' turns their mapping (`Content.as_value`). A tool without an outputSchema is served
without one.

An `isError` result is `tool_error` (stage execute) carrying the upstream's blocks (and their
text as the error's `upstream_text`) and the upstream's name, unless the operator withholds
the tool's errors (`withhold_errors`): then it is a bare `tool_error`, as strictcall's own
refusals are. A JSON-RPC error from the upstream is a bare `tool_error` (its message is the
upstream's to its client, not a tool's to the model; it passes, redacted, for a tool named in
`pass_errors`), and a result that is not a tools/call
result is withheld (`invalid_tool_result`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from strictcall.core.content import Content
from strictcall.core.display import NO_DISPLAY, Display, display_from_listing
from strictcall.core.pipeline import ERROR_TEXT
from strictcall.core.redact import Redaction, redact_text
from strictcall.core.tools import Arguments, Tool, ToolContext, ToolFailure
from strictcall.errors import (
    AT_CAPACITY,
    RESULT_TOO_LARGE,
    TOOL_ERROR,
    UPSTREAM_UNAVAILABLE,
    JSONValue,
)
from strictcall.services.proxy.instances import Instances
from strictcall.services.proxy.stdio import AnswerTooLarge, UnreadableAnswer
from strictcall.services.proxy.upstream import Upstream
from strictcall.transports.mcp.peer import current_peer

log = logging.getLogger("strictcall")

UPSTREAM_TEXT: Final = ERROR_TEXT
"""The detail of a tool_error that holds the upstream's own error text (redacted)."""

_UNREADABLE: Final = object()
"""What a handler returns for a result that must be withheld: not a JSON value, so stage
output refuses it (invalid_tool_result) like any other broken result."""


class Redactions:
    """How many secrets of each kind were redacted in each upstream's answers (for /metrics);
    only counts, never what was found."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def tally(self, source: str | None, kind: str, count: int) -> None:
        """`Redaction.tally`: add `count` secrets of `kind` found in `source`'s answers."""
        key = ("" if source is None else source, kind)
        self.counts[key] = self.counts.get(key, 0) + count


REDACT_SECRETS: Final = Redaction()
"""The default: secrets redacted in results' text and in error text."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """How a proxied tool's answers reach the caller: its upstream's name (`source`), whether
    its error results are withheld (a bare tool_error), and what is redacted of them."""

    source: str | None = None
    withhold_errors: bool = False
    redaction: Redaction | None = REDACT_SECRETS
    pass_errors: bool = False
    """Named in `pass_errors`: a JSON-RPC error's message passes too (redacted), as
    `upstream_text`."""


DEFAULT_OUTPUT: Final = ToolOutput()


def proxied_tool(
    listed: types.Tool,
    upstream: Upstream,
    *,
    timeout: float | None,
    output: ToolOutput = DEFAULT_OUTPUT,
    instances: Instances | None = None,
) -> Tool:
    """The strictcall tool that forwards calls of `listed` to `upstream` (or, with
    `instances`, to the caller identity's own process of it)."""
    name = listed.name
    withhold = output.withhold_errors

    async def forward(ctx: ToolContext, arguments: Arguments) -> JSONValue:
        try:
            if instances is None:
                result = await upstream.call(name, arguments, current_peer(), ctx)
            else:
                result = await instances.call(ctx.identity, name, arguments, current_peer(), ctx)
        except MCPError as exc:  # the upstream refused a call that passed strictcall's checks
            if not output.pass_errors:
                raise ToolFailure(TOOL_ERROR) from None
            redaction = REDACT_SECRETS if output.redaction is None else output.redaction
            text = redact_text(exc.error.message, redaction, {})
            raise ToolFailure(TOOL_ERROR, details={UPSTREAM_TEXT: text}) from None
        except (ValidationError, UnreadableAnswer):  # not a tools/call result
            return _UNREADABLE
        except AnswerTooLarge:
            raise ToolFailure(
                RESULT_TOO_LARGE, details={"limit": upstream.max_result_bytes}
            ) from None
        if result.is_error and withhold:
            raise ToolFailure(TOOL_ERROR)
        return content_of(result)

    return Tool(
        name=name,
        description="" if listed.description is None else listed.description,
        input_schema=_read_as_ours(listed.input_schema),
        output_schema=None if listed.output_schema is None else _read_as_ours(listed.output_schema),
        handler=forward,
        failures=(TOOL_ERROR, UPSTREAM_UNAVAILABLE, RESULT_TOO_LARGE)
        + (() if instances is None else (AT_CAPACITY,)),
        timeout=timeout,
        display=display_of(listed),
        redact=output.redaction,
        source=output.source,
        output_as_declared=True,  # the upstream's contract, as its own clients read it
        asks=upstream.asks.get(name, frozenset()),  # listed as its upstream lists it
    )


def display_members(listed: types.Tool) -> dict[str, object]:
    """A listed tool's title, annotations, icons and `_meta` as MCP writes them (those it has)."""
    if (
        listed.title is None
        and listed.annotations is None
        and listed.icons is None
        and listed.meta is None
    ):
        return {}
    return listed.model_dump(by_alias=True, mode="json", exclude_none=True, include=_DISPLAY_FIELDS)


_DISPLAY_FIELDS: Final = {"title", "annotations", "icons", "meta"}


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
    timeout: float | None,
    outputs: Mapping[str, ToolOutput] | None = None,
    output: ToolOutput = DEFAULT_OUTPUT,
    instances: Instances | None = None,
) -> list[Tool]:
    """Every tool of an upstream listing as a strictcall tool (each with its own `outputs`
    where given, else `output`; with `instances`, each call made on the caller identity's own
    process)."""
    chosen = {} if outputs is None else outputs
    return [
        proxied_tool(
            listed,
            upstream,
            timeout=timeout,
            output=chosen.get(listed.name, output),
            instances=instances,
        )
        for listed in listing
    ]


def content_of(result: types.CallToolResult) -> Content:
    """An upstream's tools/call result as the content stage output checks: its blocks as MCP
    writes them, its structuredContent (only when it sent one) and `_meta`."""
    blocks = tuple(
        block.model_dump(by_alias=True, mode="json", exclude_none=True) for block in result.content
    )
    structured = (
        result.structured_content if "structured_content" in result.model_fields_set else None
    )
    return Content(blocks, structured, result.meta, bool(result.is_error))


def _read_as_ours(schema: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """An upstream schema as strictcall reads every schema, JSON Schema 2020-12: a `$schema`
    naming another dialect (zod writes draft-07) is dropped rather than advertised for rules
    that are not the ones enforced."""
    return {key: value for key, value in schema.items() if key != "$schema"}
