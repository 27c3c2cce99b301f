"""The staged pipeline: the rungs a tool call climbs, first failure wins.

1. parse     `read_call`: the text is strict JSON within the size and depth limits.
2. route     `route_call`: the document is an object naming a registered tool.
3. shape     `check_envelope` (strict callers only) and `check_arguments`: the arguments
             satisfy the tool's strict input schema; errors carry a pointer into the call.
4. resource  `authorize_call`: the caller may act on what the arguments name. A tool that
             finds the resource missing while it runs answers at this stage too, identically.
5. execute   `strictcall.core.execute`: the handler runs; a declared failure keeps its code,
             anything else becomes internal_error, a slow tool timeout (its time limits and
             threads are that module's).
6. output    `check_result`: the result is a JSON value that satisfies the output schema; a
             result that is MCP content, `check_content`: its blocks well-formed
             (`strictcall.core.content`), its text redacted where the tool says
             (`strictcall.core.redact`), its structured value satisfying the output schema.

Each rung returns what the next one needs or a `Rejection`. Nothing here does I/O but the tool
itself. `Gateway` climbs them (one ladder per form, sync and async), and the seed's `handle`
is a Gateway.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from strictcall.core.policy.grant import Grant

from strictcall.core.content import Content, check_blocks
from strictcall.core.jsontext import (
    MAX_DEPTH,
    MAX_SIZE,
    Document,
    JSONTextError,
    TextFault,
    _check_depth,
    json_kind,
)
from strictcall.core.jsontext import parse_document as _parse_document
from strictcall.core.redact import redact_content
from strictcall.core.schema import CompiledSchema, Violation, to_pointer
from strictcall.core.tools import (
    Arguments,
    ForbiddenOrMissing,
    Tool,
    ToolContext,
)
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    INTERNAL_ERROR,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_TOOL_RESULT,
    REQUEST_TOO_LARGE,
    TIMEOUT,
    TOOL_ERROR,
    UNKNOWN_TOOL,
    JSONValue,
    Reason,
    Rejection,
)

ENVELOPE_MEMBERS: Final = ("arguments", "name")


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits on a call's text: `max_size` (bytes, or characters for str) and `max_depth`."""

    max_size: int = MAX_SIZE
    max_depth: int = MAX_DEPTH


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """A registered tool with its schemas compiled."""

    tool: Tool
    arguments: CompiledSchema
    result: CompiledSchema
    is_async: bool
    refusals: dict[Hashable, Rejection] = field(default_factory=dict)
    """Rejections already built for this tool's argument violations whose expected value is
    a scalar (so shared answers share nothing mutable); at most `REFUSALS_KEPT`."""
    grant: Grant | None = None
    """What the policy grants the caller whose view holds this copy (limits, quotas), or
    None: no policy."""

    @classmethod
    def compile(cls, tool: Tool) -> CompiledTool:
        """Compile a tool's schemas.

        Raises:
            SchemaDefinitionError: a schema is not valid JSON Schema 2020-12.
        """
        return cls(
            tool,
            CompiledSchema(dict(tool.input_schema)),
            CompiledSchema(
                True
                if tool.output_schema is None
                else tool.output_schema
                if isinstance(tool.output_schema, bool)
                else dict(tool.output_schema),
                as_declared=tool.output_as_declared,
            ),
            inspect.iscoroutinefunction(tool.handler),
        )


def frozen_details(details: dict[str, JSONValue]) -> MappingProxyType[str, JSONValue]:
    """A rejection's details, read-only (rejections are shared between answers)."""
    return MappingProxyType(details)


FORBIDDEN: Final = Rejection(FORBIDDEN_OR_MISSING)
INTERNAL: Final = Rejection(INTERNAL_ERROR)
TIMED_OUT: Final = Rejection(TIMEOUT)
WITHHELD: Final = Rejection(INVALID_TOOL_RESULT)


# --- 1. parse ----------------------------------------------------------------------------------


CALL_LEVELS: Final = 1
"""Levels of a call's text above its arguments: the call object {name, arguments}."""

ARGUMENTS_LEVELS: Final = 0
"""Levels of an arguments text above the arguments: none (an agent loop's tool call, where the
model writes only the arguments, e.g. OpenAI's `function.arguments`)."""

MESSAGE_LEVELS: Final = 2
"""Levels of a JSON-RPC or MCP message above the arguments: the message and its params (a batch
adds one more)."""


def read_call(
    raw: str | bytes,
    limits: Limits,
    *,
    numbers: bool = True,
    levels: int = CALL_LEVELS,
    floats: bool = True,
) -> Document | Rejection:
    """Rung 1: parse the call's text strictly (`numbers`, `floats`: see
    `jsontext.parse_document`).

    The depth limit counts the whole text; `levels` is how many of its levels sit above the
    arguments, so that a too-deep refusal can say in `arguments_limit` how deep the arguments
    themselves may nest on this transport.
    """
    try:
        return _parse_document(
            raw,
            max_size=limits.max_size,
            max_depth=limits.max_depth,
            numbers=numbers,
            floats=floats,
        )
    except JSONTextError as exc:
        return text_refusal(exc, raw, limits, levels)


def text_refusal(exc: JSONTextError, raw: str | bytes, limits: Limits, levels: int) -> Rejection:
    """Rung 1's refusal of a text the strict parse refused, as `read_call` says (for a caller
    that runs the parse itself, one frame less on its every call)."""
    if exc.fault is TextFault.TOO_LARGE:
        return too_large(limits.max_size)
    details: dict[str, JSONValue] = {"reason": exc.fault.value}
    if exc.fault is TextFault.TOO_DEEP:
        details["limit"] = limits.max_depth
        details["arguments_limit"] = max(limits.max_depth - levels - _is_batch(raw, levels), 0)
    if exc.line is not None:
        details["line"] = exc.line
        details["column"] = exc.column
    return Rejection(INVALID_JSON, frozen_details(details))


def read_value(value: JSONValue, limits: Limits) -> bool | Rejection:
    """Rung 1 for arguments an SDK already parsed (Anthropic's `input`): whether they may hold
    a float, or the refusal of a value JSON text cannot hold (NaN, an infinity, a key that is
    not a str: reason syntax) or one nested deeper than the limit."""
    has_float = json_kind(value, limits.max_depth)
    if has_float is not None:
        return has_float
    try:
        _check_depth(value, limits.max_depth)
    except (JSONTextError, RecursionError):
        reason = {"reason": Reason.TOO_DEEP.value, "limit": limits.max_depth}
        return Rejection(INVALID_JSON, frozen_details(reason))
    return Rejection(INVALID_JSON, frozen_details({"reason": Reason.SYNTAX.value}))


_TOO_LARGE: dict[int, Rejection] = {}


def too_large(limit: int) -> Rejection:
    """Rung 1's refusal of a text longer than `limit` (bytes, or characters for a str), unread;
    transports that stop reading a body at the limit answer with it too."""
    known = _TOO_LARGE.get(limit)
    if known is None:
        known = Rejection(
            REQUEST_TOO_LARGE, frozen_details({"reason": Reason.TOO_LARGE.value, "limit": limit})
        )
        if len(_TOO_LARGE) < 64:  # a handful of limits per process; never grows without end
            _TOO_LARGE[limit] = known
    return known


def read_message(
    raw: str | bytes, limits: Limits, *, numbers: bool = True, floats: bool = True
) -> Document | Rejection:
    """Rung 1 for a transport that reads a whole JSON-RPC message (the JSON-RPC endpoint, MCP):
    `read_call`, with the message's own levels above the arguments."""
    return read_call(raw, limits, numbers=numbers, levels=MESSAGE_LEVELS, floats=floats)


def _is_batch(raw: str | bytes, levels: int) -> int:
    """1 when a message's text is a batch (its arguments one level deeper), else 0."""
    if levels != MESSAGE_LEVELS or not isinstance(raw, str | bytes):
        return 0
    first = raw.lstrip()[:1]
    return 1 if first == "[" or first == b"[" else 0


# --- 2. route ----------------------------------------------------------------------------------


def route_call(call: JSONValue, tools: Mapping[str, CompiledTool]) -> CompiledTool | Rejection:
    """Rung 2: the call is an object whose "name" is a registered tool."""
    if type(call) is dict:
        name = call.get("name")
        if type(name) is str:
            found = tools.get(name)
            if found is not None:
                return found
    return unknown_tool(tools)


def unknown_tool(tools: Mapping[str, CompiledTool]) -> Rejection:
    """Rung 2's refusal: the call names no tool of `tools`, which it lists."""
    return Rejection(UNKNOWN_TOOL, frozen_details({"available": sorted(tools)}))


# --- 3. shape ----------------------------------------------------------------------------------


def check_envelope(call: dict[str, JSONValue]) -> Rejection | None:
    """Rung 3, first half: the call has no members but "name" and "arguments"."""
    for member in call:
        if member != "name" and member != "arguments":
            return _located(to_pointer((member,)), Reason.UNEXPECTED_MEMBER, list(ENVELOPE_MEMBERS))
    return None


def check_arguments(
    call: dict[str, JSONValue], compiled: CompiledTool, has_float: bool
) -> Arguments | Rejection:
    """Rung 3: the call's "arguments" satisfy the tool's strict input schema."""
    arguments: Arguments
    if "arguments" not in call:
        arguments = {}  # as in MCP: a call without arguments has none (not null)
    else:
        given = call["arguments"]
        if type(given) is not dict:
            return _located("/arguments", Reason.TYPE, "object")
        arguments = given
    schema = compiled.arguments
    if schema.is_valid_when[has_float](arguments):
        return arguments
    quick = schema.quick_in_object  # `first_violation` of an object, without its two calls
    violation = None if quick is None else quick(arguments)
    if violation is None:
        violation = schema.exact_violation(arguments)
    if violation is None:  # the two validators disagree: refuse without a location
        return Rejection(INVALID_ARGUMENTS)
    # The same mistake is usually made again: its rejection is built once (the key holds the
    # expected value's type, since 1 == True; for a list of scalars, an enum's or the members
    # an object declares, each item's type). `fail` gives each answer its own list.
    expected = violation.expected
    kind = type(expected)
    key: Hashable | None = None
    if kind in _SCALARS:
        key = (violation, kind)
    elif kind is list:
        kinds = tuple(map(type, expected))
        if _SCALARS.issuperset(kinds):  # in C: no generator over the items
            key = (violation.path, violation.reason, tuple(expected), kinds)
    if key is not None:
        known = compiled.refusals.get(key)
        if known is not None:
            return known
    rejection = _refusal(violation)
    if key is not None and len(compiled.refusals) < REFUSALS_KEPT:
        compiled.refusals[key] = rejection
    return rejection


REFUSALS_KEPT: Final = 256
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _refusal(violation: Violation) -> Rejection:
    pointer = "/arguments" + to_pointer(violation.path)
    if violation.has_expected:
        return _located(pointer, violation.reason, violation.expected)
    details = {"pointer": pointer, "reason": violation.reason.value}
    return Rejection(INVALID_ARGUMENTS, frozen_details(details))


def _located(pointer: str, reason: str, expected: JSONValue) -> Rejection:
    details = {"pointer": pointer, "reason": str(reason), "expected": expected}
    return Rejection(INVALID_ARGUMENTS, frozen_details(details))


# --- 4. resource -------------------------------------------------------------------------------


def authorize_call(
    compiled: CompiledTool, ctx: ToolContext, arguments: Arguments
) -> Rejection | None:
    """Rung 4: the tool's own authorization says exactly True, or the tool has none.

    An authorizer that raises denies (and is logged): a lookup that fails only for missing
    resources must not answer differently from a denial.
    """
    authorize = compiled.tool.authorize
    if authorize is None:
        return None
    try:
        allowed = authorize(ctx, arguments)
    except Exception as exc:
        if not isinstance(exc, ForbiddenOrMissing):
            log_failure(ctx, exc)
        return FORBIDDEN
    return None if allowed is True else FORBIDDEN


def log_failure(ctx: ToolContext, exc: BaseException) -> None:
    """Log where a tool failed, without the exception's text (it may hold the caller's data)."""
    import logging  # a failing tool's path only: not loaded by `import strictcall`
    import traceback

    frames = "".join(traceback.format_tb(exc.__traceback__))
    logging.getLogger("strictcall").error(
        "tool %r failed in call %r with %s (message withheld)\n%s",
        ctx.tool,
        ctx.call_id,
        type(exc).__qualname__,
        frames,
    )


# --- 6. output ---------------------------------------------------------------------------------


def check_result(
    compiled: CompiledTool,
    arguments: Arguments,
    result: JSONValue,
    ctx: ToolContext,
) -> Rejection | None:
    """Rung 6: the result is a JSON value that satisfies the output schema (and the tool's
    own consistency check); otherwise it is withheld."""
    has_float = json_kind(result)
    if has_float is None:
        return WITHHELD
    try:
        schema = compiled.result
        if not schema.is_valid_when[has_float](result):
            return WITHHELD
    except ValueError:  # a str the validator cannot read as UTF-8 (a lone surrogate)
        return WITHHELD
    matches = compiled.tool.result_matches
    if matches is None:
        return None
    try:
        consistent = matches(arguments, result)
    except Exception as exc:
        log_failure(ctx, exc)
        return WITHHELD
    return None if consistent is True else WITHHELD


def check_content(
    compiled: CompiledTool, arguments: Arguments, content: Content, ctx: ToolContext
) -> Content | Rejection:
    """Rung 6 for a result that is MCP content: its blocks well-formed, its text redacted as
    the tool's `redact` says, then its structured value (an object) a JSON value that satisfies
    the output schema; a tool that declares one and answers success without it is withheld.
    An error result (`is_error`) is checked and redacted alike, its structured value dropped
    (hosts check one against the output schema even on errors)."""
    blocks = check_blocks(content.blocks)
    structured, meta = content.structured, content.meta
    if blocks is None or not (meta is None or type(meta) is dict):
        return WITHHELD
    if content.is_error:
        structured = None
    elif structured is not None:
        if type(structured) is not dict:
            return WITHHELD
    elif compiled.tool.output_schema is not None:
        return WITHHELD
    if meta is not None and json_kind(meta) is None:
        return WITHHELD
    checked = Content(blocks, structured, meta, content.is_error)
    redaction = compiled.tool.redact
    if redaction is not None:
        checked = redact_content(checked, redaction, compiled.tool.source)
    if checked.structured is not None and (
        compiled.tool.output_schema is not None or json_kind(checked.structured) is None
    ):
        rejection = check_result(compiled, arguments, checked.structured, ctx)
        if rejection is not None:
            return rejection
    return checked


def may_hold_float(value: JSONValue) -> bool:
    """Whether a parsed call may hold a float anywhere (True, too, for what is not JSON), for a
    transport whose parser did not say."""
    return json_kind(value) is not False


# --- answers -----------------------------------------------------------------------------------


ERROR_TEXT: Final = "upstream_text"
"""The detail of a tool_error that holds the tool's own error text (a proxied tool's upstream's,
redacted), from an error result (`Content.is_error`)."""

SOURCE: Final = "upstream"
"""The detail of a tool_error that names the upstream whose error it is (`Tool.source`)."""

CONTENT: Final = "content"
"""The member of an error answer that holds the error result's `Content`, for the wires that
write its blocks (MCP); the others write the error (its text in `ERROR_TEXT`)."""


def succeed(
    call_id: str | int, result: JSONValue, source: str | None = None
) -> dict[str, JSONValue]:
    """The answer to a call that climbed every rung (an error result's: its tool_error, with
    the `Content` beside it, naming the upstream `source`)."""
    if type(result) is Content and result.is_error:
        return content_error(call_id, result, source)
    return {"ok": True, "call_id": call_id, "result": result}


def content_error(call_id: str | int, content: Content, source: str | None) -> dict[str, JSONValue]:
    """The answer to a call whose tool answered an error result: tool_error, the text of its
    blocks as `ERROR_TEXT` (and the upstream as `SOURCE`), the result beside it as `CONTENT`."""
    error = TOOL_ERROR.as_error()
    if source is not None:
        error[SOURCE] = source
    error[ERROR_TEXT] = content.text()
    return {"ok": False, "call_id": call_id, "error": error, CONTENT: content}


def plain_answer(answer: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """An answer as JSON alone, for a caller that takes no content blocks (`Gateway.call`,
    /rpc): a `Content` result as its one value (`Content.as_value`), an error result's blocks
    left out (its text is in the error)."""
    if answer["ok"] is True:
        result = answer["result"]
        if type(result) is Content:
            return {"ok": True, "call_id": answer["call_id"], "result": result.as_value()}
        return answer
    if CONTENT in answer:
        return {"ok": False, "call_id": answer["call_id"], "error": answer["error"]}
    return answer


def fail(call_id: str | int, rejection: Rejection, *, located: bool = True) -> dict[str, JSONValue]:
    """The answer to a call that a rung refused."""
    error = rejection.as_error(located=located)
    expected = error.get("expected")
    if type(expected) is list:  # its own: a refusal's list may be shared (`check_arguments`)
        error["expected"] = list(expected)
    return {"ok": False, "call_id": call_id, "error": error}
