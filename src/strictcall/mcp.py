"""MCP in front of the gateway, on the official SDK (PyPI `mcp` 2.x).

    strictcall serve --mcp-stdio --identity ID   stdio; the identity is the operator's flag
    strictcall serve                             streamable HTTP at /mcp; the identity comes from
                                                 the bearer token, checked by `strictcall.http`

The SDK's low-level `Server` does the framing, the handshake, both protocol eras and the
sessions; strictcall decides everything about a call:

- tools/list gives each tool's name, description, inputSchema and outputSchema. MCP wants an
  object schema there, so a tool whose result is not declared an object is advertised wrapped:
  {"type": "object", "properties": {"result": <schema>}, "required": ["result"], ...}.
- tools/call hands the raw params (never the SDK's coerced model) to `Gateway.call_parsed_async`.
  Success: structuredContent holds the validated value (wrapped as {"result": value} for those
  tools) and one text block holds the value as JSON, so [], "" and null are never an empty
  content list. Failure: isError, structuredContent holds the structured error
  {code, stage, retryable, ...} and one text block the same JSON.
- Every message is read with strictcall's strict intake (`read_message`) before the SDK sees
  it: on stdio, a line that is not strict JSON gets -32700 with id null, one that is not a
  JSON-RPC 2.0 message -32600, one longer than the limit request_too_large; on HTTP the same
  refusals are the body of a 400 (413 when too large). Blank stdio lines carry no message and
  are skipped. When stdin ends, the requests still running are answered (within `DRAIN_S`)
  before the session ends: the SDK alone would cancel them unanswered.

A call id names one call to the gateway (writes are idempotent per identity and call id). An
MCP request id is only unique within one connection, and hosts restart their ids at every
launch, so the call id is the request id qualified by its connection: one random scope per stdio
process, one per HTTP request (stateless HTTP has no connection to tie two requests together).
"""

from __future__ import annotations

import io
import os
import secrets
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import IO, Any, Final, Protocol, cast

import anyio
import mcp_types as types
import orjson
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from strictcall.errors import (
    INVALID_ARGUMENTS,
    INVALID_REQUEST,
    INVALID_TOOL_RESULT,
    REQUEST_TOO_LARGE,
    UNAUTHENTICATED,
    UNKNOWN_TOOL,
    JSONValue,
    Rejection,
)
from strictcall.gateway import Gateway
from strictcall.http import IDENTITY_KEY, Message, Receive, Scope, Send, read_body
from strictcall.jsonrpc import Recorder, error_reply, read_request, valid_id
from strictcall.jsontext import dump_text
from strictcall.pipeline import Limits, json_kind, read_call
from strictcall.storage import AuditRecord

SERVER_NAME: Final = "strictcall"

RESULT_MEMBER: Final = "result"
"""The member that holds a result that is not an object, in structuredContent and in the
advertised outputSchema."""

MCP_PARAMS: Final = frozenset({"_meta", "task", "inputResponses", "requestState"})
"""Members of tools/call params that belong to MCP itself, not to the call; any other member
besides name and arguments reaches the gateway, which refuses it."""

Context = ServerRequestContext[Any, Any]
IdentityOf = Callable[[Context], str | None]


# --- tools/list --------------------------------------------------------------------------------


def result_is_wrapped(output_schema: JSONValue) -> bool:
    """Whether a tool's results are wrapped as {"result": value}: unless its schema declares an
    object, a value may be something MCP's structuredContent cannot hold."""
    return not (isinstance(output_schema, dict) and output_schema.get("type") == "object")


def wrap_schema(schema: JSONValue) -> dict[str, JSONValue]:
    """The object schema of {"result": value} for a value of `schema`; its local references
    ("#/$defs/...") are moved along with it."""
    return {
        "type": "object",
        "properties": {RESULT_MEMBER: _moved_refs(schema, "#/properties/" + RESULT_MEMBER)},
        "required": [RESULT_MEMBER],
        "additionalProperties": False,
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
            moved[key] = value
        else:
            moved[key] = _moved_refs(value, base)
    return moved


def describe_tools(gateway: Gateway) -> list[types.Tool]:
    """The gateway's tools as MCP lists them, with non-object output schemas wrapped."""
    tools = []
    for listed in gateway.list_tools("mcp"):
        output_schema = listed["outputSchema"]
        if result_is_wrapped(output_schema):
            output_schema = wrap_schema(output_schema)
        tools.append(
            types.Tool(
                name=listed["name"],
                description=listed["description"],
                input_schema=listed["inputSchema"],
                output_schema=output_schema,
            )
        )
    return tools


# --- tools/call --------------------------------------------------------------------------------


def tool_result(answer: dict[str, JSONValue], *, wrapped: bool) -> types.CallToolResult:
    """A gateway answer as an MCP tool result: the value (or the structured error) in
    structuredContent and, as JSON, in exactly one text block."""
    if answer["ok"] is True:
        value = answer["result"]
        text = json_text(value)
        if text is not None:
            structured = {RESULT_MEMBER: value} if wrapped else value
            return types.CallToolResult(
                content=[types.TextContent(text=text)], structured_content=structured
            )
        error = Rejection(INVALID_TOOL_RESULT).as_error()
    else:
        error = answer["error"]
    error_text = json_text(error)  # the catalogue's errors always write; None never reaches here
    return types.CallToolResult(
        content=[types.TextContent(text="" if error_text is None else error_text)],
        structured_content=error,
        is_error=True,
    )


def json_text(value: JSONValue) -> str | None:
    """`value` as compact JSON text, or None when it cannot be written as UTF-8 JSON."""
    text = dump_text(value)
    return None if text is None else text.decode("utf-8")


class McpTools:
    """The gateway's tools behind the SDK's low-level `Server`: tools/list and tools/call only.

    `identity_of` says who is calling (None refuses the call as unauthenticated); `call_scope`
    gives the connection part of call ids.
    """

    def __init__(
        self,
        gateway: Gateway,
        identity_of: IdentityOf,
        call_scope: Callable[[], str],
        record: Recorder | None = None,
    ) -> None:
        self.gateway: Final = gateway
        self._identity_of = identity_of
        self._call_scope = call_scope
        self._record = record
        self._tools: Final = describe_tools(gateway)
        self._wrapped: Final = frozenset(
            tool.name for tool in gateway.tools if result_is_wrapped(tool.output_schema)
        )
        self._names: Final = frozenset(tool.name for tool in gateway.tools)

    def server(self) -> Server[Any]:
        """A new low-level SDK server answering with these tools."""
        return Server(
            SERVER_NAME,
            version=_version(),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """tools/list: every tool, on one page."""
        return types.ListToolsResult(tools=self._tools)

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """tools/call: the raw params go to the gateway; the SDK's parsed `params` are unused
        (pydantic would have coerced what the gateway must see as sent)."""
        raw = dict(ctx.params) if ctx.params is not None else {}
        call = {key: value for key, value in raw.items() if key not in MCP_PARAMS}
        call.setdefault("arguments", {})  # as MCP says: no arguments is no arguments
        name = call.get("name")
        tool = name if isinstance(name, str) and name in self._names else None
        call_id = f"mcp-{self._call_scope()}:{json_text(ctx.request_id)}"
        identity = self._identity_of(ctx)
        started = time.perf_counter_ns()
        if identity is None:  # a transport that forgot the caller: refuse, never guess
            answer = {"ok": False, "call_id": call_id, "error": UNAUTHENTICATED.as_error()}
        else:
            # only a gateway whose tools take numbers needs to know (Gateway.reads_numbers)
            has_float = self.gateway.reads_numbers and json_kind(call) is not False
            answer = await self.gateway.call_parsed_async(
                call, identity, call_id, has_float=has_float
            )
        result = tool_result(answer, wrapped=tool in self._wrapped)
        if self._record is not None:
            error = result.structured_content if result.is_error else None
            latency_us = (time.perf_counter_ns() - started) // 1000
            self._record(AuditRecord.of_call(call_id, identity, tool, error, latency_us))
        return result


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("strictcall")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return ""


# --- intake: one message's text ----------------------------------------------------------------


class Refused:
    """A message refused before the SDK saw it, and the reply it gets: a JSON-RPC error (HTTP
    400), or, for a tools/call the SDK would refuse without detail, the tool result with
    isError that any other argument error gets (HTTP 200), so the model can read it."""

    __slots__ = ("error", "reply", "status")

    def __init__(
        self, request_id: str | int | None, error: dict[str, JSONValue], *, as_tool: bool = False
    ) -> None:
        self.error: Final = error
        """The structured error {code, stage, retryable, ...}."""
        self.reply: Final[dict[str, Any]] = (
            {"jsonrpc": "2.0", "id": request_id, "result": _tool_error(error)}
            if as_tool
            else error_reply(request_id, error)
        )
        self.status: Final = 200 if as_tool else 400

    def message(self) -> types.JSONRPCMessage:
        """The reply as the SDK's message model."""
        return types.jsonrpc_message_adapter.validate_python(self.reply, by_name=False)

    def body(self) -> bytes:
        """The reply as UTF-8 JSON."""
        return orjson.dumps(self.reply)


_RESPONSE_MEMBERS: Final = frozenset({"jsonrpc", "id", "result", "error"})


def read_message(raw: bytes, limits: Limits) -> types.JSONRPCMessage | Refused:
    """One JSON-RPC 2.0 message read strictly: a request or notification as
    `strictcall.jsonrpc` accepts them, or a response; anything else is refused."""
    document = read_call(raw, limits)
    if isinstance(document, Rejection):
        return Refused(None, document.as_error())
    message = document.value
    if type(message) is dict and "method" not in message and _RESPONSE_MEMBERS & message.keys():
        acceptable = _is_response(message)
    else:
        acceptable = not isinstance(read_request(message), Rejection)
    if acceptable and message.get("method") == "tools/call" and "id" in message:
        refused = _refuse_call_params(message)
        if refused is not None:
            return refused
    if acceptable:
        try:
            return types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        except ValidationError:
            pass
    return Refused(valid_id(message), INVALID_REQUEST.as_error())


def _tool_error(error: dict[str, JSONValue]) -> dict[str, JSONValue]:
    """A tools/call result with isError, as the SDK would write it for `error`."""
    text = json_text(error)
    return {
        "content": [{"type": "text", "text": "" if text is None else text}],
        "structuredContent": error,
        "isError": True,
    }


def _refuse_call_params(message: dict[str, JSONValue]) -> Refused | None:
    """A tools/call whose params the SDK would refuse with a bare -32602 (no tool name, or
    arguments that are not an object), refused here with the gateway's structured error."""
    params = message.get("params", {})  # absent params are read_request's "no params"
    if type(params.get("name")) is not str:
        return Refused(valid_id(message), UNKNOWN_TOOL.as_error(), as_tool=True)
    if (
        "arguments" in params
        and params["arguments"] is not None
        and type(params["arguments"]) is not dict
    ):
        located = {"pointer": "/arguments", "reason": "type", "expected": "object"}
        error = {**INVALID_ARGUMENTS.as_error(), **located}
        return Refused(valid_id(message), error, as_tool=True)
    return None


def refuse_too_large(limits: Limits) -> Refused:
    """The refusal of a message longer than the limit, unread."""
    error = REQUEST_TOO_LARGE.as_error()
    error.update({"reason": "too_large", "limit": limits.max_size})
    return Refused(None, error)


def _is_response(message: dict[str, JSONValue]) -> bool:
    """A JSON-RPC 2.0 response with a result object or an error {code: int, message: str}."""
    if not _RESPONSE_MEMBERS.issuperset(message) or message.get("jsonrpc") != "2.0":
        return False
    if ("result" in message) == ("error" in message):
        return False
    if "id" not in message:
        return False
    if "result" in message:
        return type(message["result"]) is dict and valid_id(message) is not None
    error = message["error"]
    return (
        (message["id"] is None or valid_id(message) is not None)
        and type(error) is dict
        and type(error.get("code")) is int
        and type(error.get("message")) is str
    )


# --- stdio -------------------------------------------------------------------------------------


def serve_stdio(
    gateway: Gateway,
    identity: str,
    *,
    record: Recorder | None = None,
    stdin: IO[bytes] | None = None,
) -> None:
    """Serve MCP on this process's stdin and stdout as `identity` until stdin ends."""
    source = stdin if stdin is not None else _private_stdin()
    anyio.run(_serve_stdio, gateway, identity, record, source)
    if stdin is None:  # stdin has ended, so its reader has returned
        source.close()


def _private_stdin() -> IO[bytes]:
    """A reader of fd 0 of its own: the reading thread may still block on it when the process
    ends (on SIGINT), and sys.stdin's buffer would then be locked while Python finalizes it."""
    try:
        return os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    except (AttributeError, OSError, ValueError):  # started with stdin closed: it has ended
        return io.BytesIO()


async def _serve_stdio(
    gateway: Gateway, identity: str, record: Recorder | None, stdin: IO[bytes]
) -> None:
    scope = f"stdio-{secrets.token_hex(8)}"
    tools = McpTools(gateway, lambda ctx: identity, lambda: scope, record)
    server = tools.server()
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    # The SDK's transport writes (its framing, and fd 1 kept for the wire alone so that stray
    # prints go to stderr); reading is ours, so that no line goes unanswered.
    async with (
        stdio_server(stdin=cast("anyio.AsyncFile[str]", _NoInput())) as (unused, write_stream),
        BlockingPortal() as portal,
    ):
        await unused.aclose()
        answers = Answers(write_stream)
        intake = StdioIntake(read_send, answers, gateway.limits, identity, record)
        reader = threading.Thread(
            target=read_lines,
            args=(stdin, gateway.limits.max_size, intake, portal),
            name="strictcall-mcp-stdin",
            daemon=True,  # a read blocked on a silent host must not hold up the exit
        )
        reader.start()
        await server.run(read_receive, answers, server.create_initialization_options())


class _NoInput:
    """Stands in for the SDK transport's stdin, which strictcall reads itself."""

    def __aiter__(self) -> _NoInput:
        return self

    async def __anext__(self) -> str:
        raise StopAsyncIteration


DRAIN_S: Final = 10.0
"""How long the end of stdin waits for the answers to requests still running: the SDK cancels
them, unanswered, as soon as its read side ends."""


class WriteSide(Protocol):
    """The SDK stdio transport's write stream."""

    async def send(self, item: SessionMessage, /) -> None: ...

    async def aclose(self) -> None: ...


class Answers:
    """The write side of a stdio session, watched for the answers to the requests stdin passed
    on, so that the end of stdin can wait for them."""

    def __init__(self, inner: WriteSide) -> None:
        self._inner = inner
        self._waiting: Counter[str] = Counter()
        self._settled = anyio.Event()
        self._settled.set()

    def expect(self, request_id: types.RequestId) -> None:
        """A request was passed on: its answer is awaited."""
        if not self._waiting:
            self._settled = anyio.Event()
        self._waiting[_key(request_id)] += 1

    def forget(self, request_id: types.RequestId) -> None:
        """A request was answered (or cancelled, and will never be)."""
        key = _key(request_id)
        if key in self._waiting:
            self._waiting[key] -= 1
            if self._waiting[key] <= 0:
                del self._waiting[key]
        if not self._waiting:
            self._settled.set()

    async def settled(self) -> None:
        """Return once every request passed on has its answer."""
        await self._settled.wait()

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        message = item.message
        if (
            isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id is not None
        ):
            self.forget(message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Answers:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _key(request_id: types.RequestId) -> str:
    """A request id with its JSON type, so that 7 and "7" stay two ids."""
    return f"{type(request_id).__name__}:{request_id}"


class StdioIntake:
    """Where stdin's lines go: valid messages on to the SDK, refusals answered at once on the
    SDK's own write stream."""

    def __init__(
        self,
        messages: MemoryObjectSendStream[SessionMessage | Exception],
        answers: Answers,
        limits: Limits,
        identity: str,
        record: Recorder | None,
    ) -> None:
        self._messages = messages
        self._answers = answers
        self._limits = limits
        self._identity = identity
        self._record = record

    async def take(self, line: bytes) -> None:
        """Pass on or answer one line (its newline removed); a blank line carries no message."""
        if not line.strip(b" \t\r"):
            return
        message = read_message(line, self._limits)
        if isinstance(message, Refused):
            await self._answer(message)
            return
        if isinstance(message, types.JSONRPCRequest):
            self._answers.expect(message.id)
        elif isinstance(message, types.JSONRPCNotification):
            params = {} if message.params is None else message.params
            cancelled = valid_id({"id": params.get("requestId")})
            if message.method == "notifications/cancelled" and cancelled is not None:
                self._answers.forget(cancelled)  # the SDK never answers a cancelled request
        await self._messages.send(SessionMessage(message))

    async def take_too_long(self) -> None:
        """Answer a line that was longer than the limit (and skipped unread)."""
        await self._answer(refuse_too_large(self._limits))

    async def _answer(self, refused: Refused) -> None:
        if self._record is not None:
            self._record(AuditRecord.of_call(None, self._identity, None, refused.error, 0))
        await self._answers.send(SessionMessage(refused.message()))

    async def end(self) -> None:
        """Stdin has ended: so does the session, once the requests still running are answered
        (within `DRAIN_S`)."""
        with anyio.move_on_after(DRAIN_S):
            await self._answers.settled()
        await self._messages.aclose()


_SESSION_OVER: Final = (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError)
"""What handing a line over raises once the server has stopped (the portal, or the streams)."""


def read_lines(stream: IO[bytes], limit: int, intake: StdioIntake, portal: BlockingPortal) -> None:
    """Read `stream` line by line (each at most `limit` bytes, the newline aside; longer ones
    are skipped unread) and hand each line to `intake` on the portal's event loop."""
    try:
        while True:
            chunk = stream.readline(limit + 1)
            if not chunk:
                break
            if chunk.endswith(b"\n"):
                portal.call(intake.take, chunk[:-1])
            elif len(chunk) <= limit:  # the last line, without a newline
                portal.call(intake.take, chunk)
            else:
                while chunk and not chunk.endswith(b"\n"):
                    chunk = stream.readline(1 << 16)
                portal.call(intake.take_too_long)
    except (OSError, ValueError):  # stdin unreadable or closed under us: the same as its end
        pass
    except _SESSION_OVER:
        return
    try:
        portal.call(intake.end)
    except _SESSION_OVER:
        return


# --- streamable HTTP ---------------------------------------------------------------------------


def identity_in_scope(ctx: Context) -> str | None:
    """The identity `strictcall.http` put in the HTTP request's scope, or None."""
    request = ctx.request
    if not isinstance(request, Request):
        return None
    identity = request.scope.get(IDENTITY_KEY)
    return identity if isinstance(identity, str) else None


class McpHttpApp:
    """MCP streamable HTTP, stateless with JSON responses, as an ASGI app for `RpcApp`'s
    mounts: it expects the caller's identity in the scope (`strictcall.http.IDENTITY_KEY`), and
    `lifespan()` must be running while it serves."""

    def __init__(self, gateway: Gateway, *, record: Recorder | None = None) -> None:
        self.limits: Final = gateway.limits
        self._record = record
        tools = McpTools(gateway, identity_in_scope, lambda: f"http-{uuid.uuid4().hex}", record)
        self.manager: Final = StreamableHTTPSessionManager(
            tools.server(),
            json_response=True,
            stateless=True,
            max_request_body_size=gateway.limits.max_size,
        )

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """The session manager's run, to be entered at startup and left at shutdown."""
        return self.manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "POST":
            body = await read_body(receive, self.limits.max_size)
            if body is None:
                await self._refuse(refuse_too_large(self.limits), 413, scope, receive, send)
                return
            message = read_message(body, self.limits)
            if isinstance(message, Refused):
                await self._refuse(message, message.status, scope, receive, send)
                return
            receive = _replay(body, receive)
        await self.manager.handle_request(scope, receive, send)

    async def _refuse(
        self, refused: Refused, status: int, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if self._record is not None:
            identity = scope.get(IDENTITY_KEY)
            self._record(AuditRecord.of_call(None, identity, None, refused.error, 0))
        response = Response(refused.body(), status_code=status, media_type="application/json")
        await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body already read, then whatever the client sends next."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed


__all__ = [
    "DRAIN_S",
    "MCP_PARAMS",
    "RESULT_MEMBER",
    "Answers",
    "McpHttpApp",
    "McpTools",
    "Refused",
    "StdioIntake",
    "describe_tools",
    "identity_in_scope",
    "read_lines",
    "read_message",
    "refuse_too_large",
    "result_is_wrapped",
    "serve_stdio",
    "tool_result",
    "wrap_schema",
]
