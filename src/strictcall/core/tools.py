"""Tool definitions: what a tool declares, what its handler receives, and how it may fail.

A handler receives a `ToolContext` (the caller's identity, set by whoever calls the gateway and
never taken from the arguments) and the validated arguments. It returns a JSON value, which the
gateway checks against the output schema before the agent sees it, or a
`strictcall.core.content.Content` (MCP content blocks, an optional structured value checked
against the output schema), which MCP hosts receive as the blocks they are. It fails by raising:

- `ForbiddenOrMissing`: the resource is not there for this caller (stage resource);
- `ToolFailure(kind)`: a failure the tool declared in `failures` (stage execute, its own code
  and retryable flag, e.g. `BUSY` with `retry_after_ms`);
- anything else: `internal_error`, with nothing of the exception in the answer.

A tool with a timeout runs on a worker thread, so that a call that hangs can be timed out. With
`inline_first` it is first run on the caller's thread (no thread hop, no lock hand-over): there
`running_inline()` is True and the handler must not wait; where it would, it raises `WouldWait`
before changing anything, and runs again on a worker thread, under its timeout.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple, NotRequired, Required, get_type_hints

from strictcall.core.display import NO_DISPLAY, Display
from strictcall.core.redact import Redaction
from strictcall.errors import RESULT_TOO_LARGE, ErrorKind, JSONValue, Stage, StrictcallError

Arguments = dict[str, JSONValue]
Handler = Callable[["ToolContext", Arguments], JSONValue | Awaitable[JSONValue]]
Authorizer = Callable[["ToolContext", Arguments], bool]
ResultCheck = Callable[[Arguments, JSONValue], bool]


class ToolContext(NamedTuple):
    """Who is calling, with which call id, and which tool (immutable: a tool cannot change
    whom it acts for)."""

    identity: str
    call_id: str | int
    tool: str
    server_requests: frozenset[str] | None = None
    """The requests the tool's server may make of the caller during the call (of
    `strictcall.core.policy.SERVER_REQUESTS`), as the policy's rule allows them; None: every
    one the caller's client offers."""


class ToolSignal(StrictcallError):
    """Raised by a tool's handler to tell the pipeline how the call ends; the subclasses say."""


class ForbiddenOrMissing(ToolSignal):
    """Raised by a tool: the resource is missing or not the caller's (never said which)."""


class WouldWait(ToolSignal):
    """Raised by a handler running inline (`running_inline()`) where it would have to wait,
    before it has changed anything: it runs again on a worker thread. Raised anywhere else, it
    is a failure like any other (internal_error)."""


_INLINE: ContextVar[bool] = ContextVar("strictcall_inline", default=False)


def running_inline() -> bool:
    """Whether the handler runs inline for `Tool.inline_first`, where it must not wait."""
    return _INLINE.get()


def run_inline(handler: Handler, ctx: ToolContext, arguments: Arguments) -> tuple[bool, JSONValue]:
    """Run a sync handler on this thread, where it must not wait: (True, its result), or
    (False, None) when it raised WouldWait (having changed nothing). Other exceptions propagate."""
    inline = _INLINE.set(True)
    try:
        return True, handler(ctx, arguments)
    except WouldWait:
        return False, None
    finally:
        _INLINE.reset(inline)


class ToolFailure(ToolSignal):
    """Raised by a tool for a failure it declared; the agent sees its code and retryable flag.

    `details` (optional) are added to the structured error as they are: only what the operator
    chose to show the model belongs there (e.g. a proxied tool's own error text, with
    `--pass-errors`), never a caller's values by accident.
    """

    def __init__(
        self,
        kind: ErrorKind,
        *,
        retry_after_ms: int | None = None,
        details: Mapping[str, JSONValue] | None = None,
    ) -> None:
        super().__init__(kind.code)
        self.kind = kind
        self.retry_after_ms = retry_after_ms
        self.details = details


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool: its name, description, input and output JSON Schemas, and handler.

    `authorize` (optional) decides at stage resource whether the caller may act on what the
    arguments name; a False is answered exactly like a missing resource. `failures` lists the
    `ErrorKind`s the handler may raise through `ToolFailure`. `timeout` is in seconds.
    `result_matches` (optional) checks a result against the arguments at stage output, for what
    a schema cannot say (e.g. the note returned is the note asked for). `inline_first`, for a
    tool with a timeout, tries the handler on the caller's thread before a worker's (see the
    module's docstring). An `output_schema` of None declares none: the tool is listed without
    one and answers content (or a value as its JSON text) with no structured value. `redact`
    (optional) is what stage output redacts of its content (`strictcall.core.redact`);
    `source` names the upstream a proxied tool forwards to, in its errors and their records.
    `display` is what a host shows beside the name and schemas (title, annotations, icons,
    `_meta`: `strictcall.core.display`). `output_as_declared`: the output schema is enforced
    and listed as written, by JSON Schema 2020-12 alone (an upstream's tool, whose results its
    own clients read by that schema: an object it leaves open stays open), not made strict.
    `asks`: the capabilities a caller's client must offer for the tool to be listed to it (an
    upstream's tool that its server lists only to a client offering MCP's sampling, elicitation
    or roots); a listing asked without saying what the caller offers shows it to all.
    """

    name: str
    description: str
    input_schema: Mapping[str, JSONValue]
    output_schema: Mapping[str, JSONValue] | bool | None
    handler: Handler
    authorize: Authorizer | None = None
    failures: tuple[ErrorKind, ...] = ()
    timeout: float | None = None
    result_matches: ResultCheck | None = None
    inline_first: bool = False
    display: Display = NO_DISPLAY
    redact: Redaction | None = None
    source: str | None = None
    output_as_declared: bool = False
    asks: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a tool's name is a non-empty str")
        for kind in self.failures:
            # and result_too_large: a tool that fetches its result (a proxy's) may refuse it
            # unread, as stage output would refuse it read
            if kind.stage is not Stage.EXECUTE and kind is not RESULT_TOO_LARGE:
                raise ValueError("a tool declares failures of stage execute only")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError("a tool's timeout is a positive number of seconds")
        if self.inline_first and self.timeout is None:
            raise ValueError("inline_first is for a tool with a timeout (without, it runs inline)")


def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    authorize: Authorizer | None = None,
    failures: tuple[ErrorKind, ...] = (),
    timeout: float | None = None,
    display: Display = NO_DISPLAY,
) -> Callable[[Callable[..., Any]], Tool]:
    """Make a `Tool` of a function, deriving both schemas from its type hints.

    The function's first parameter, if annotated `ToolContext`, receives the context; the others
    are the tool's arguments (a parameter with a default is optional). Use JSON-shaped types:
    str, int, float, bool, None, list, dict, Literal, TypedDict and unions of them (before
    Python 3.12, pydantic needs `typing_extensions.TypedDict`). The derived schemas are what the
    gateway enforces, made strict like any declared schema. `display`: the title, annotations,
    icons and `_meta` hosts are shown (`Display`).
    """

    def make(func: Callable[..., Any]) -> Tool:
        input_schema, output_schema, takes_context = _schemas_from_hints(func)
        params = [p for p in inspect.signature(func).parameters][1 if takes_context else 0 :]

        if inspect.iscoroutinefunction(func):

            async def handler_async(ctx: ToolContext, args: Arguments) -> JSONValue:
                kwargs = {p: args[p] for p in params if p in args}
                if takes_context:
                    return await func(ctx, **kwargs)
                return await func(**kwargs)

            handler: Handler = handler_async
        else:

            def handler_sync(ctx: ToolContext, args: Arguments) -> JSONValue:
                kwargs = {p: args[p] for p in params if p in args}
                if takes_context:
                    return func(ctx, **kwargs)
                return func(**kwargs)

            handler = handler_sync

        doc = inspect.getdoc(func)
        return Tool(
            name=name if name is not None else func.__name__,
            description=description if description is not None else (doc or ""),
            input_schema=input_schema,
            output_schema=output_schema,
            handler=handler,
            authorize=authorize,
            failures=failures,
            timeout=timeout,
            display=display,
        )

    return make


def _schemas_from_hints(
    func: Callable[..., Any],
) -> tuple[dict[str, JSONValue], dict[str, JSONValue] | None, bool]:
    # Only the decorator needs pydantic; it refuses typing.TypedDict before Python 3.12, so the
    # arguments' TypedDict comes from typing_extensions (a dependency of pydantic).
    from pydantic import TypeAdapter
    from typing_extensions import TypedDict

    from strictcall.core.content import Content

    hints = get_type_hints(func, include_extras=True)
    params = list(inspect.signature(func).parameters.values())
    takes_context = bool(params) and hints.get(params[0].name) is ToolContext
    fields: dict[str, Any] = {}
    for param in params[1 if takes_context else 0 :]:
        if param.name not in hints:
            raise TypeError(f"parameter {param.name!r} needs a type hint")
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError("tool parameters are plain named parameters")
        wrap = Required if param.default is inspect.Parameter.empty else NotRequired
        fields[param.name] = wrap[hints[param.name]]
    if "return" not in hints:
        raise TypeError("a tool's return type needs a type hint")
    arguments_type = TypedDict(f"{func.__name__}_arguments", fields)  # type: ignore[misc]
    input_schema = _untitled(TypeAdapter(arguments_type).json_schema())
    if hints["return"] is Content:  # content blocks: no output schema to declare
        return input_schema, None, takes_context
    output_schema = _untitled(TypeAdapter(hints["return"]).json_schema())
    return input_schema, output_schema, takes_context


def _untitled(schema: JSONValue) -> JSONValue:
    """Drop pydantic's generated titles, which only add noise to what the model reads."""
    if isinstance(schema, list):
        return [_untitled(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, JSONValue] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _NAMED_SUBSCHEMAS and isinstance(value, dict):
            out[key] = {name: _untitled(sub) for name, sub in value.items()}
        elif key in _LITERAL_VALUES:
            out[key] = value
        else:
            out[key] = _untitled(value)
    return out


_NAMED_SUBSCHEMAS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
_LITERAL_VALUES = frozenset({"const", "enum", "default", "examples"})
