"""MCP streamable HTTP at /mcp, stateless with JSON responses; the identity comes from the
bearer token, checked by `strictcall.server.router` before this app is reached.

A GET that accepts `text/event-stream` opens a change stream where the listing can change (a
proxy's, a federation's: `strictcall.transports.mcp.changes`), on the handshake-era wire, as a
2026-07-28 `subscriptions/listen` POST does there; every other GET is 405 Method Not Allowed.
The updates of the resources a caller subscribed to ride the same streams.
A POST body is read
(up to the limit) and through the strict intake before the SDK sees it:
refusals are the body of a 400 (413 when too large), a tools/call the SDK would refuse
without detail is answered by the gateway as a tool result, the plain requests a remote host
sends most (tools/call, tools/list, ping) are answered on strictcall's own path
(`strictcall.transports.mcp.direct`) with the SDK's checks and the SDK's answer, and
everything else is replayed to the SDK's session manager.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

import mcp_types as types
import orjson
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response

from strictcall.core.gateway import Gateway
from strictcall.core.ids import mint_call_id
from strictcall.core.policy.model import Claims
from strictcall.core.record import refusal_record
from strictcall.core.refusals import protocol_refusal
from strictcall.errors import JSONValue
from strictcall.transports.asgi import (
    CLAIMS_KEY,
    IDENTITY_KEY,
    Later,
    Message,
    Receive,
    Scope,
    Send,
    declared_length,
    read_body,
)
from strictcall.transports.asgi import Response as Answered
from strictcall.transports.jsonrpc import Recorder
from strictcall.transports.mcp.adapter import (
    Context,
    McpTools,
    listing_message,
    listing_offers,
    protocol_version,
    result_message,
)
from strictcall.transports.mcp.cancel import CallCancelled, Cancellable, cancelled_message
from strictcall.transports.mcp.changes import ChangeStreams
from strictcall.transports.mcp.content import ContentServer, McpContent
from strictcall.transports.mcp.direct import DirectRequest, direct_request
from strictcall.transports.mcp.intake import DirectCall, Refused, read_message, refuse_too_large
from strictcall.transports.mcp.peer import ASKS, log_level_of, progress_token_of
from strictcall.transports.mcp.sdk_errors import scrubbed
from strictcall.transports.offload import off_loop, read_off_loop
from strictcall.transports.serving import DEFAULT_SERVING, Serving
from strictcall.transports.streams import StreamLimits

_CANCELLED: Final = "notifications/cancelled"
LISTEN: Final = "subscriptions/listen"
_ASKING: Final = frozenset({"progressToken", types.LOG_LEVEL_META_KEY})
"""The `_meta` members that ask for a stream (`progress_token_of`, `log_level_of`)."""


def identity_in_scope(ctx: Context) -> str | None:
    """The identity `strictcall.server.router` put in the HTTP request's scope, or None."""
    request = ctx.request
    if not isinstance(request, Request):
        return None
    identity = request.scope.get(IDENTITY_KEY)
    return identity if isinstance(identity, str) else None


def claims_in_scope(ctx: Context) -> Claims | None:
    """The caller's token's claims admission put in the HTTP request's scope (None: absent,
    strictcall's own token)."""
    request = ctx.request
    if not isinstance(request, Request):
        return None
    return _claims(request.scope)


def _claims(scope: Scope) -> Claims | None:
    claims = scope.get(CLAIMS_KEY)  # absent: strictcall's own token, no scope limits it
    return claims if isinstance(claims, frozenset) else None


class McpHttpApp:
    """MCP streamable HTTP, stateless with JSON responses, as an ASGI app for `RpcApp`'s
    mounts: it expects the caller's identity in the scope
    (`strictcall.transports.asgi.IDENTITY_KEY`), and
    `lifespan()` must be running while it serves."""

    def __init__(
        self,
        gateway: Gateway,
        serving: Serving = DEFAULT_SERVING,
        *,
        direct: bool = True,
        streams: StreamLimits | None = None,
    ) -> None:
        """`serving`: the server's options (`strictcall.transports.serving`: the record, the
        resources and prompts served beside the tools, a federation's; its lifespans are the
        server's to enter, around this app's `lifespan()`); `direct`: answer plain requests on
        strictcall's own path (False: the SDK answers every request it is given, the reference
        the tests hold the direct path to); `streams`: where the listing can change
        (`serving.tools_change`: a proxy's, a federation's), the change streams' budgets
        (None: no change streams, and GET is 405)."""
        self.limits: Final = gateway.limits
        self.serving: Final = serving
        self._direct = direct
        self._record = serving.record
        self.changes: Final = changes_of(gateway, serving.content, streams, serving.record)
        """The change streams (None where the listing never changes)."""
        changes = self.changes
        # stateless: each request is a connection of its own, with a scope of its own; a
        # subscription is the identity's, told on its change streams
        tools = McpTools(
            gateway,
            identity_in_scope,
            functools.partial(mint_call_id, "http"),  # called in C: no frame of its own
            serving,
            claims_of=claims_in_scope,
            subscriber_of=None
            if changes is None or not changes.tells_content
            else lambda ctx: changes.subscriber(identity_in_scope(ctx)),
        )
        tools.cancellable = self._cancellable = Cancellable()
        self._tools = tools
        self.manager: Final = StreamableHTTPSessionManager(
            announcing(tools, self.changes),
            json_response=True,
            stateless=True,
            max_request_body_size=gateway.limits.max_size,
        )
        self.streaming: Final = StreamableHTTPSessionManager(
            announcing(tools, self.changes),
            json_response=False,
            stateless=True,
            max_request_body_size=gateway.limits.max_size,
        )
        """Answers a tools/call whose caller asked for progress or messages on an SSE stream
        (when its Accept takes one): the upstream's notifications during it ride there."""

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """The session managers' run, to be entered at startup and left at shutdown."""
        return self._run()

    @asynccontextmanager
    async def _run(self) -> AsyncIterator[None]:
        async with self.manager.run(), self.streaming.run():
            if self.changes is None:
                yield
                return
            async with self.changes.running():
                yield

    def stop_streams(self) -> None:
        """End the change streams now, and open no more (the server's graceful stop begins:
        a stream would hold it for all its grace)."""
        if self.changes is not None:
            self.changes.stop()

    def _streams(self, scope: Scope, message: dict[str, JSONValue]) -> bool:
        """Whether a tools/call's caller asked for progress (its token) or messages (a level:
        the request's, or its identity's) and takes an SSE answer."""
        if message.get("method") != "tools/call":
            return False
        params = message.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        asked = (
            isinstance(meta, dict)
            and not _ASKING.isdisjoint(meta)  # the usual envelope asks for neither: no call
            and (progress_token_of(meta) is not None or log_level_of(meta) is not None)
        )
        if not asked and self._tools.levels:
            asked = scope.get(IDENTITY_KEY) in self._tools.levels
        return asked and _accepts_stream(scope)

    def _sdks(self, scope: Scope, message: dict[str, JSONValue]) -> bool:
        """Whether a request is the SDK's to answer, never the direct path's: a tools/call
        that streams (`_streams`), or one whose upstream may ask during it and whose
        2026-07-28 caller offers to answer (its rounds: `McpTools.call_tool`)."""
        if self._streams(scope, message):
            return True
        if not self.serving.tools_change or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        declared = meta.get(types.CLIENT_CAPABILITIES_META_KEY) if type(meta) is dict else None
        # a capability declared null is not declared (`offered` reads it so)
        return type(declared) is dict and any(declared.get(kind) is not None for kind in ASKS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "GET":
            changes = self.changes
            if changes is not None and opens_stream(scope):
                await changes.serve(scope, receive, send)
                return
            # No stream is offered here (a listing that never changes, a GET that takes no
            # event stream, the 2026-07-28 wire): the spec's answer is 405, never an event
            # stream that stays silent until shutdown.
            allow = "GET, POST" if changes is not None else "POST"
            response = Response(status_code=405, headers={"Allow": allow})
            await response(scope, receive, send)
            return
        manager = self.manager
        listening = False
        if scope["method"] == "POST":
            # a declared length past the limit is refused before a byte of the body is read
            too_long = declared_length(scope) > self.limits.max_size
            body = None if too_long else await read_body(receive, self.limits.max_size)
            if body is None:
                await self._refuse(refuse_too_large(self.limits), 413, scope, receive, send)
                return
            tools = self._tools
            answers_itself = (
                (
                    lambda read: (
                        None
                        if self._sdks(scope, read)
                        else direct_request(scope, read, tools.declares_headers)
                    )
                )
                if self._direct
                else None
            )

            def read() -> Any:
                return read_message(body, self.limits, self._serves, answers_itself=answers_itself)

            message = await read_off_loop(read) if off_loop(body) else read()
            if isinstance(message, DirectRequest):
                await self._answer_request(message, scope, send)
                return
            if isinstance(message, Refused):
                await self._refuse(message, message.status, scope, receive, send)
                return
            if isinstance(message, DirectCall):
                await self._answer_directly(message, scope, receive, send)
                return
            if isinstance(message, types.JSONRPCNotification) and message.method == _CANCELLED:
                identity = scope.get(IDENTITY_KEY)
                if isinstance(identity, str):  # a call of this identity's alone
                    self._cancellable.cancel(identity, message.params)
            receive = _replay(body, receive)
            listening = isinstance(message, types.JSONRPCRequest) and message.method == LISTEN
            if isinstance(message, types.JSONRPCRequest) and self._streams(
                scope, message.model_dump(by_alias=True, exclude_none=True)
            ):
                manager = self.streaming
        identity = scope.get(IDENTITY_KEY)
        caller = identity if isinstance(identity, str) else None
        watched = SdkErrors(send, caller, self._record)
        listens = self.changes if listening else None
        if listens is None or caller is None:
            await manager.handle_request(scope, receive, watched)
            return
        # a listen stream takes a place within the change streams' budgets for as long as it
        # is open: refused here past them, before the SDK sees it
        if not await listens.admit(caller, send):
            return
        try:
            await manager.handle_request(scope, receive, watched)
        finally:
            listens.release(caller)

    def _serves(self, method: str) -> bool:
        """`McpTools.serves`, and 2026-07-28's `subscriptions/listen` where the listing can
        change."""
        if method == LISTEN:
            return self.changes is not None
        return self._tools.serves(method)

    async def _answer_directly(
        self, call: DirectCall, scope: Scope, receive: Receive, send: Send
    ) -> None:
        identity = scope.get(IDENTITY_KEY)
        try:
            result = await self._tools.answer_call(
                call.params,
                call.request_id,
                identity if isinstance(identity, str) else None,
                _claims(scope),
            )
        except CallCancelled:
            body = orjson.dumps(cancelled_message(call.request_id))
        else:
            reply = result_message(call.request_id, result, protocol_version(call.params))
            body = orjson.dumps(reply.model_dump(by_alias=True, mode="json", exclude_none=True))
        response = Response(body, status_code=200, media_type="application/json")
        await response(scope, receive, send)

    async def _answer_request(self, request: DirectRequest, scope: Scope, send: Send) -> None:
        """A plain request answered here, as the SDK's stateless JSON-response path answers it."""
        identity = scope.get(IDENTITY_KEY)
        caller = identity if isinstance(identity, str) else None
        reply = self._reply_now(request, caller, _claims(scope))
        body = reply if isinstance(reply, bytes) else await reply  # a tool to await
        status, headers, body = _json_response(body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Answered | Later | None:
        """A POST whose whole `body` has arrived, answered in place when it is a plain request
        (`strictcall.transports.mcp.direct`): made now, or a `Later` for a call whose tool must
        be awaited (an async tool's, a proxied one's: read once, here, and answered without the
        ASGI cycle around it); None, with nothing run or audited, otherwise (the server then
        runs the app on it)."""
        if not self._direct or len(body) > self.limits.max_size or off_loop(body):
            return None  # a long body is read off the loop, by the app
        tools = self._tools
        message = read_message(
            bytes(body),
            self.limits,
            self._serves,
            answers_itself=lambda read: (
                None
                if self._sdks(scope, read)
                else direct_request(scope, read, tools.declares_headers)
            ),
        )
        if not isinstance(message, DirectRequest):
            return None
        identity = scope.get(IDENTITY_KEY)
        caller = identity if isinstance(identity, str) else None
        reply = self._reply_now(message, caller, _claims(scope))
        if isinstance(reply, bytes):
            return _json_response(reply)
        return _answer_later(reply)  # a call whose tool must be awaited

    def _reply_now(
        self, request: DirectRequest, caller: str | None, claims: Claims | None
    ) -> bytes | Coroutine[Any, Any, bytes]:
        """A plain request's reply, made now, or made by the coroutine returned for a call
        whose tool must be awaited."""
        request_id = request.request_id
        if request.method == "tools/call":
            line = self._tools.answer_call_line_now(
                request.params, request_id, caller, request.version, claims
            )
            if isinstance(line, bytes):
                return line[:-1]  # the line's newline: a body is the message alone
            return _body_of(line)
        if request.method == "tools/list":
            gateway = self._tools.gateway
            # stateless: a handshake-era caller has no session to be asked on (`listing_offers`)
            offers = listing_offers(gateway, request.params, None, self._tools.asks_in_rounds)
            listing = [] if caller is None else gateway.listing(caller, "mcp", claims, offers)
            return orjson.dumps(listing_message(request_id, listing, request.version))
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}})  # ping

    async def _refuse(
        self, refused: Refused, status: int, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if self._record is not None:
            identity = scope.get(IDENTITY_KEY)
            caller = identity if isinstance(identity, str) else None
            self._record(
                self._tools.refusal_record(refused.request_id, refused.name, refused.error, caller)
            )
        if refused.answered:
            body = refused.body()
            response = Response(body, status_code=status, media_type="application/json")
        else:  # a notification: accepted, as the SDK acknowledges every notification
            response = Response(status_code=202)
        await response(scope, receive, send)


class SdkErrors:
    """The ASGI send of the SDK's responses: a JSON body that is a JSON-RPC error the SDK wrote
    itself is audited and scrubbed of what the caller sent (`strictcall.transports.mcp.sdk_errors`);
    everything else passes unchanged."""

    def __init__(self, send: Send, identity: str | None, record: Recorder | None) -> None:
        self._send = send
        self._identity = identity
        self._record = record
        self._start: Message | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and _is_json(message):
            self._start = message  # held until the body shows what it is
            return
        start, self._start = self._start, None
        if start is None:
            await self._send(message)
            return
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            body = self._scrubbed(message.get("body", b""))
            if body is not None:
                await self._send({**start, "headers": _with_length(start["headers"], body)})
                await self._send({**message, "body": body})
                return
        await self._send(start)
        await self._send(message)

    def _scrubbed(self, body: bytes) -> bytes | None:
        """The body with its SDK error scrubbed, or None when it is not an SDK error reply."""
        if b'"error"' not in body:  # a result: left unread
            return None
        try:
            reply = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if type(reply) is not dict or type(reply.get("error")) is not dict:
            return None
        error = reply["error"]
        data = error.get("data")
        if type(data) is dict and "stage" in data:  # strictcall's own structured error
            return None
        code = error.get("code")
        if self._record is not None and type(code) is int:
            refusal = protocol_refusal(code).as_error()
            self._record(refusal_record(refusal, self._identity))
        return orjson.dumps({**reply, "error": scrubbed(error)})


async def _body_of(line: Coroutine[Any, Any, bytes]) -> bytes:
    return (await line)[:-1]  # the line's newline: a body is the message alone


async def _answer_later(reply: Coroutine[Any, Any, bytes]) -> Answered:
    """A call's reply once awaited, as the 200 that carries it."""
    return _json_response(await reply)


def _json_response(body: bytes) -> Answered:
    """A 200 carrying a JSON body, as the SDK's JSON responses are sent."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
    ]
    return 200, headers, body


def changes_of(
    gateway: Gateway,
    content: McpContent | None,
    limits: StreamLimits | None,
    record: Recorder | None,
) -> ChangeStreams | None:
    """The change streams of a listing that can change (`limits` given), else None."""
    return None if limits is None else ChangeStreams(gateway, content, limits, record)


def announcing(tools: McpTools, changes: ChangeStreams | None) -> Server[Any]:
    """A new SDK server for `tools`, whose initialize announces `listChanged` for what the
    change streams tell (the tools; resources and prompts where content is served), and which
    serves 2026-07-28's `subscriptions/listen` for the same changes."""
    server = tools.server()
    if changes is not None and isinstance(server, ContentServer):
        server.announces = NotificationOptions(
            tools_changed=True,
            resources_changed=changes.tells_content,
            prompts_changed=changes.tells_content,
        )
        server.updates = changes.tells_content  # resources/updated ride the change streams
        server.add_request_handler(
            LISTEN,
            types.SubscriptionsListenRequestParams,
            changes.listen_handler(identity_in_scope, claims_in_scope),
        )
    return server


def opens_stream(scope: Scope) -> bool:
    """Whether a GET opens a change stream: its Accept takes `text/event-stream` and its
    `MCP-Protocol-Version` (absent: 2025-03-26, as the SDK reads it) is a handshake-era one;
    2026-07-28 has no standing stream (its stream is a `subscriptions/listen` POST's answer)."""
    accepts = version = None
    for name, value in scope.get("headers", []):
        lowered = name.lower()
        if lowered == b"accept":
            accepts = value.lower()
        elif lowered == b"mcp-protocol-version":
            version = value.decode("latin-1")
    if accepts is None or b"text/event-stream" not in accepts:
        return False
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def _accepts_stream(scope: Scope) -> bool:
    """Whether the request's Accept takes an SSE stream (and JSON, as the SDK requires)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"accept":
            lowered = value.lower()
            return b"text/event-stream" in lowered and b"application/json" in lowered
    return False


def _is_json(start: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"application/json")
        for name, value in start.get("headers", [])
    )


def _with_length(headers: list[tuple[bytes, bytes]], body: bytes) -> list[tuple[bytes, bytes]]:
    kept = [(name, value) for name, value in headers if name.lower() != b"content-length"]
    return [*kept, (b"content-length", str(len(body)).encode("ascii"))]


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body already read, then whatever the client sends next."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
