"""The gateway: registered tools behind the staged pipeline, for any tool.

    gateway = Gateway([read_note, create_note])
    answer = gateway.call('{"name":"read_note","arguments":{"note_id":"n1"}}', "u1", "call-7")

An answer is {"ok": true, "call_id": ..., "result": value} or {"ok": false, "call_id": ...,
"error": {"code", "stage", "retryable", ...details}}; see `strictcall.errors` for every code.
The identity is the caller's, given by whoever calls the gateway (a transport's token, an
operator's flag): nothing in the call's text can change it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from types import TracebackType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from strictcall.core.threads import Workers

import orjson

from strictcall.core.ids import check_request_id
from strictcall.core.jsontext import JSONTextError, dump_text, parse_document
from strictcall.core.listing import ToolFormat, describe_tool
from strictcall.core.pipeline import (
    ARGUMENTS_LEVELS,
    WITHHELD,
    CompiledTool,
    Limits,
    authorize_call,
    check_arguments,
    check_envelope,
    check_result,
    execute_call,
    execute_call_async,
    fail,
    failure_of,
    may_hold_float,
    read_call,
    route_call,
    succeed,
    text_refusal,
    unknown_tool,
)
from strictcall.core.schema import SchemaDefinitionError
from strictcall.core.tools import Arguments, Tool, ToolContext
from strictcall.errors import JSONValue, Rejection

Allowed = Callable[[str], AbstractSet[str] | None]
"""Which tools an identity may see and call: their names, or None for every tool."""

_VIEWS_KEPT: Final = 256
"""Per-identity views of the tools kept at once (one per distinct allow-list, usually few)."""

_Climbed = tuple[CompiledTool, ToolContext, Arguments]

_WORKERS: Final = 4

AUDIT_POINTER_MAX: Final = 256
"""The longest pointer an audit record keeps (declared names are the operator's, but deep)."""

_ENVELOPE_NAMES: Final = frozenset({"name", "arguments"})

# A NamedTuple's own constructor is a Python function; tuple.__new__ builds the same in C.
_new_context: Final[Callable[[type[ToolContext], tuple[str, str | int, str]], ToolContext]] = (
    tuple.__new__
)


class Gateway:
    """Tools registered by name, each call checked in stages: parse, route, shape, resource,
    execute, output; first failure wins."""

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        limits: Limits | None = None,
        workers: int = _WORKERS,
        allowed: Allowed | None = None,
    ) -> None:
        """`workers`: the threads that run tools with a timeout (made on first use); a thread
        held by a call past its time limit is replaced (see `strictcall.core.threads`).
        `allowed`: which tools each identity may see and call; a tool it may not is answered
        at route exactly like one that does not exist (its `available` lists only the
        caller's tools)."""
        if workers < 1:
            raise ValueError("a gateway needs at least one worker thread")
        self.limits: Final = limits if limits is not None else Limits()
        self._tools: dict[str, CompiledTool] = {}
        self._numbers = False
        self._pool: Workers | None = None
        self._pool_size: Final = workers
        self._declared: dict[str, frozenset[str]] = {}
        self._allowed = allowed
        self._views: dict[frozenset[str], dict[str, CompiledTool]] = {}
        self.generation = 0
        """Bumped whenever the set of tools changes, for those who cache a listing."""
        self._watchers: list[Callable[[], None]] = []
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> Tool:
        """Add a tool, compiling its schemas now so that no call pays for it.

        Raises:
            ValueError: a tool of that name is already registered.
            SchemaDefinitionError: a schema is not valid JSON Schema 2020-12.
        """
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        compiled = CompiledTool.compile(tool)
        self._tools[tool.name] = compiled
        self._numbers = self._numbers or compiled.arguments.admits_numbers
        self._views.clear()
        self.generation += 1
        return tool

    def replace_tools(self, tools: Iterable[Tool]) -> dict[str, str]:
        """Serve exactly `tools` from now on (calls already running finish with the old ones).

        A tool whose schema cannot be compiled, or that repeats a name, is left out: the
        result maps each such name to the reason, and the others are served.
        """
        compiled: dict[str, CompiledTool] = {}
        refused: dict[str, str] = {}
        for tool in tools:
            if tool.name in compiled or tool.name in refused:
                refused[tool.name] = "the name is listed twice"
                compiled.pop(tool.name, None)
                continue
            try:
                compiled[tool.name] = CompiledTool.compile(tool)
            except SchemaDefinitionError as exc:
                refused[tool.name] = str(exc)
        changed = _listed(compiled) != _listed(self._tools)
        # one assignment each: a call routes against the old dict or the new, never a mixture
        self._tools = compiled
        self._numbers = any(c.arguments.admits_numbers for c in compiled.values())
        self._views = {}
        self._declared = {}
        self.generation += 1
        if changed:
            for watcher in list(self._watchers):
                watcher()
        return refused

    def watch_tools(self, watcher: Callable[[], None]) -> Callable[[], None]:
        """Have `watcher` called (in the thread that replaces the tools) each time
        `replace_tools` changes what is listed: a name, a description or a schema. Returns the
        function that stops it."""
        self._watchers.append(watcher)

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch

    def tools_for(self, identity: str) -> Mapping[str, CompiledTool]:
        """The tools `identity` may see and call, by name."""
        if self._allowed is None:
            return self._tools
        names = self._allowed(identity)
        if names is None:
            return self._tools
        key = names if type(names) is frozenset else frozenset(names)
        view = self._views.get(key)
        if view is None:
            view = {name: c for name, c in self._tools.items() if name in key}
            if len(self._views) >= _VIEWS_KEPT:
                self._views.clear()
            self._views[key] = view
        return view

    @property
    def reads_numbers(self) -> bool:
        """Whether some tool's arguments may hold a number. When none may, the parse does not
        look for floats and long integers: any number in a call is refused at shape anyway, with
        the same answer however it was read. A transport that parses for the gateway passes
        this on as `numbers` (see `jsontext.parse_document`)."""
        return self._numbers

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The registered tools, in registration order."""
        return tuple(compiled.tool for compiled in self._tools.values())

    def tool_named(self, call: JSONValue) -> str | None:
        """The registered tool a parsed call names, or None: what an audit record says of a
        call, whether or not it climbed further."""
        if type(call) is dict:
            name = call.get("name")
            if type(name) is str and name in self._tools:
                return name
        return None

    def must_await(self, call: JSONValue, identity: str) -> bool:
        """Whether `call_parsed_async` would await for this parsed call: it names a tool
        `identity` may call that is async or has a time limit. Every other call (one refused
        before execute included) `call_parsed` answers in place, inside an event loop too."""
        if type(call) is dict:
            name = call.get("name")
            if type(name) is str:
                tools = self._tools if self._allowed is None else self.tools_for(identity)
                compiled = tools.get(name)
                if compiled is not None:
                    return compiled.is_async or compiled.tool.timeout is not None
        return False

    def audit_pointer(self, tool: str | None, error: Mapping[str, object] | None) -> str | None:
        """An error's pointer as an audit record may keep it: each member name the call
        envelope or the tool's input schema declares is kept, any other name (one the model
        made up, which is its text) is "*", array indexes stay; None where the error has no
        pointer (or points at the whole call). At most `AUDIT_POINTER_MAX` characters."""
        pointer = None if error is None else error.get("pointer")
        if type(pointer) is not str or not pointer.startswith("/"):
            return None
        compiled = None if tool is None else self._tools.get(tool)
        declared = _ENVELOPE_NAMES if compiled is None else self._declared_names(compiled)
        kept = [
            part if _is_index(part) or _unescaped(part) in declared else "*"
            for part in pointer[1:].split("/")
        ]
        return ("/" + "/".join(kept))[:AUDIT_POINTER_MAX]

    def _declared_names(self, compiled: CompiledTool) -> frozenset[str]:
        names = self._declared.get(compiled.tool.name)
        if names is None:
            names = _ENVELOPE_NAMES | _member_names(compiled.arguments.advertised)
            self._declared[compiled.tool.name] = names
        return names

    def list_tools(
        self, format: ToolFormat = "mcp", *, identity: str | None = None
    ) -> list[dict[str, JSONValue]]:
        """The tools as an agent host lists them: "mcp", "openai", "openai-responses" or
        "anthropic"; the schemas are the strict ones the gateway enforces. With `identity`,
        only the tools that identity may call."""
        tools = self._tools if identity is None else self.tools_for(identity)
        return [
            describe_tool(c.tool, c.arguments.advertised, c.result.advertised, format)
            for c in tools.values()
        ]

    def call(self, raw: str | bytes, identity: str, call_id: str | int) -> dict[str, JSONValue]:
        """Check and run one call; never raises for any text.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
            RuntimeError: the call reached an async tool from inside a running event loop
                (use `call_async` there).
        """
        _check_caller(identity, call_id)
        document = read_call(raw, self.limits, numbers=self._numbers)  # 1. parse
        if type(document) is Rejection:
            return fail(call_id, document)
        # Rungs 2 to 6 as `call_parsed` takes them (route, envelope, `_answer`), written out:
        # this is every in-process call's path, and each Python call saved here is ~2 % of it.
        parsed = document.value
        tools = self._tools if self._allowed is None else self.tools_for(identity)
        compiled = route_call(parsed, tools)  # 2. route
        if type(compiled) is Rejection:
            return fail(call_id, compiled)
        rejection = check_envelope(parsed)  # 3. shape
        if rejection is not None:
            return fail(call_id, rejection)
        arguments = check_arguments(parsed, compiled, document.has_float)
        if type(arguments) is Rejection:
            return fail(call_id, arguments)
        tool = compiled.tool
        ctx = _new_context(ToolContext, (identity, call_id, tool.name))
        if tool.authorize is not None:  # 4. resource
            rejection = authorize_call(compiled, ctx, arguments)
            if rejection is not None:
                return fail(call_id, rejection)
        if tool.timeout is None and not compiled.is_async:  # 5. execute: in place, untimed
            try:
                result = tool.handler(ctx, arguments)
            except Exception as exc:
                return fail(call_id, failure_of(compiled, ctx, exc))
        else:
            pool = None if tool.timeout is None else self._workers()
            result, rejection = execute_call(compiled, ctx, arguments, pool)
            if rejection is not None:
                return fail(call_id, rejection)
        rejection = check_result(compiled, arguments, result, ctx)  # 6. output
        if rejection is not None:
            return fail(call_id, rejection)
        return succeed(call_id, result)

    async def call_async(
        self, raw: str | bytes, identity: str, call_id: str | int
    ) -> dict[str, JSONValue]:
        """`call` from a running event loop; async handlers are awaited.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
        """
        _check_caller(identity, call_id)
        document = read_call(raw, self.limits, numbers=self._numbers)
        if type(document) is Rejection:
            return fail(call_id, document)
        climbed = self._climb(document.value, document.has_float, identity, call_id)
        return await self._finish_async(climbed, call_id)

    def call_parsed(
        self, call: JSONValue, identity: str, call_id: str | int, *, has_float: bool | None = None
    ) -> dict[str, JSONValue]:
        """`call` for a call already parsed, as `call_parsed_async` says; the ladder starts at
        rung 2, route.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
            RuntimeError: the call reached an async tool from inside a running event loop.
        """
        _check_caller(identity, call_id)
        if has_float is None:
            has_float = self._numbers and may_hold_float(call)
        tools = self._tools if self._allowed is None else self.tools_for(identity)
        compiled = route_call(call, tools)  # 2. route
        if type(compiled) is Rejection:
            return fail(call_id, compiled)
        rejection = check_envelope(call)  # 3. shape
        if rejection is not None:
            return fail(call_id, rejection)
        return self._answer(compiled, call, has_float, identity, call_id)

    def call_arguments(
        self, name: str, arguments: str | bytes, identity: str, call_id: str | int
    ) -> dict[str, JSONValue]:
        """`call` for a call given as its tool's name and its arguments' JSON text, as an agent
        loop's model writes it (OpenAI's `function.arguments`): rung 1 reads that text strictly
        (a parse error's `line` and `column` are in it; it may nest `limits.max_depth` deep),
        then the call climbs from rung 2 as `call_parsed` does. An empty text is a call without
        arguments (OpenAI's API writes "" for a tool whose parameters are all optional), which
        has `{}`, as in `call`. Never raises for any text.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
            RuntimeError: the call reached an async tool from inside a running event loop.
        """
        _check_caller(identity, call_id)
        if arguments:
            limits = self.limits
            try:  # 1. parse: `read_call`'s, called directly (its frame is ~2 % of this path)
                value, has_float = parse_document(
                    arguments,
                    max_size=limits.max_size,
                    max_depth=limits.max_depth,
                    numbers=self._numbers,
                )
            except JSONTextError as exc:
                return fail(call_id, text_refusal(exc, arguments, limits, ARGUMENTS_LEVELS))
        else:
            value, has_float = {}, False
        tools = self._tools if self._allowed is None else self.tools_for(identity)
        # 2. route: `route_call`'s test on the name itself (the call is made here, an object)
        compiled = tools.get(name) if type(name) is str else None
        if compiled is None:
            return fail(call_id, unknown_tool(tools))
        # 3. shape: a call made of "name" and "arguments" has no envelope member to refuse
        call: dict[str, JSONValue] = {"name": name, "arguments": value}
        return self._answer(compiled, call, has_float, identity, call_id)

    def _answer(
        self,
        compiled: CompiledTool,
        call: dict[str, JSONValue],
        has_float: bool,
        identity: str,
        call_id: str | int,
    ) -> dict[str, JSONValue]:
        """Rungs 3 (the arguments) to 6 for a routed call, written out as in `call`: the path
        of every parsed call and of the agent loop adapters."""
        arguments = check_arguments(call, compiled, has_float)  # 3. shape
        if type(arguments) is Rejection:
            return fail(call_id, arguments)
        tool = compiled.tool
        ctx = _new_context(ToolContext, (identity, call_id, tool.name))
        if tool.authorize is not None:  # 4. resource
            rejection = authorize_call(compiled, ctx, arguments)
            if rejection is not None:
                return fail(call_id, rejection)
        if tool.timeout is None and not compiled.is_async:  # 5. execute: in place, untimed
            try:
                result = tool.handler(ctx, arguments)
            except Exception as exc:
                return fail(call_id, failure_of(compiled, ctx, exc))
        else:
            pool = None if tool.timeout is None else self._workers()
            result, rejection = execute_call(compiled, ctx, arguments, pool)
            if rejection is not None:
                return fail(call_id, rejection)
        rejection = check_result(compiled, arguments, result, ctx)  # 6. output
        if rejection is not None:
            return fail(call_id, rejection)
        return succeed(call_id, result)

    async def call_parsed_async(
        self, call: JSONValue, identity: str, call_id: str | int, *, has_float: bool | None = None
    ) -> dict[str, JSONValue]:
        """`call_async` for a call a transport already parsed (with `strictcall.core.jsontext`, or
        an SDK's strict reader); the ladder starts at rung 2, route. `has_float` is whether
        the parse saw a number that may be a float; None to have the gateway look.

        Raises:
            TypeError, ValueError: `identity` is not a str, or `call_id` not a request id.
        """
        _check_caller(identity, call_id)
        if has_float is None:
            # only a gateway whose tools take numbers needs to know (`reads_numbers`)
            has_float = self._numbers and may_hold_float(call)
        return await self._finish_async(self._climb(call, has_float, identity, call_id), call_id)

    async def _finish_async(
        self, climbed: _Climbed | Rejection, call_id: str | int
    ) -> dict[str, JSONValue]:
        """Rungs 5 and 6: execute, output."""
        if type(climbed) is Rejection:
            return fail(call_id, climbed)
        compiled, ctx, arguments = climbed
        pool = None if compiled.tool.timeout is None else self._workers()
        result, rejection = await execute_call_async(compiled, ctx, arguments, pool)
        if rejection is None:
            rejection = check_result(compiled, arguments, result, ctx)
        if rejection is not None:
            return fail(call_id, rejection)
        return succeed(call_id, result)

    def call_text(self, raw: str | bytes, identity: str, call_id: str | int) -> bytes:
        """`call`, answered as UTF-8 JSON text."""
        answer = self.call(raw, identity, call_id)
        try:
            return orjson.dumps(answer)
        except orjson.JSONEncodeError:
            return encode_answer(answer)

    def _climb(
        self, call: JSONValue, has_float: bool, identity: str, call_id: str | int
    ) -> _Climbed | Rejection:
        """Rungs 2 to 4: route, shape, resource."""
        tools = self._tools if self._allowed is None else self.tools_for(identity)
        compiled = route_call(call, tools)
        if type(compiled) is Rejection:
            return compiled
        rejection = check_envelope(call)
        if rejection is not None:
            return rejection
        arguments = check_arguments(call, compiled, has_float)
        if type(arguments) is Rejection:
            return arguments
        ctx = _new_context(ToolContext, (identity, call_id, compiled.tool.name))
        rejection = authorize_call(compiled, ctx, arguments)
        if rejection is not None:
            return rejection
        return compiled, ctx, arguments

    def _workers(self) -> Workers:
        if self._pool is None:
            from strictcall.core.threads import Workers

            self._pool = Workers(self._pool_size)
        return self._pool

    def close(self) -> None:
        """Stop the worker threads used for tools with a timeout."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Gateway:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _check_caller(identity: object, call_id: object) -> None:
    """Refuse a caller's programming error: an identity that is not a str, a bad call id.

    Raises:
        TypeError, ValueError: as `check_request_id` says, or a non-str identity.
    """
    if type(identity) is not str:
        raise TypeError("identity is a str")
    if not ((type(call_id) is str and call_id) or type(call_id) is int):
        check_request_id(call_id)  # subclasses pass there; anything else raises


def encode_answer(answer: dict[str, JSONValue]) -> bytes:
    """An answer as UTF-8 JSON; a result that cannot be written (e.g. a lone surrogate in a
    string) is withheld as invalid_tool_result rather than sent broken."""
    text = dump_text(answer)
    if text is None:
        return orjson.dumps(fail(answer["call_id"], WITHHELD))
    return text


def _is_index(part: str) -> bool:
    """Whether a pointer's part is an array index (digits, no leading zero, at most 9)."""
    return part.isascii() and part.isdigit() and len(part) <= 9 and (part == "0" or part[0] != "0")


def _unescaped(part: str) -> str:
    """A pointer's part as the member name it stands for (RFC 6901)."""
    return part.replace("~1", "/").replace("~0", "~")


def _member_names(schema: object) -> frozenset[str]:
    """Every member name a schema declares anywhere in it (properties, required)."""
    names: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                names.update(key for key in properties if isinstance(key, str))
            required = node.get("required")
            if isinstance(required, list):
                names.update(key for key in required if isinstance(key, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(names)


def _listed(tools: Mapping[str, CompiledTool]) -> list[tuple[str, str, object, object]]:
    """What a listing shows of `tools`: each name, description and schemas, by name."""
    return [
        (name, tool.tool.description, tool.tool.input_schema, tool.tool.output_schema)
        for name, tool in sorted(tools.items())
    ]
