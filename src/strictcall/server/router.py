"""The HTTP face of the service: a plain ASGI app, no framework, that routes.

    POST /rpc      JSON-RPC 2.0 (see `strictcall.transports.jsonrpc`), identity from the bearer
    token
    GET  /healthz  {"status": "ok"}; 503 {"status": "store_unavailable", ...} while the store
                   cannot serve (a load balancer takes the server out until it can)
    /mcp, ...      mounted apps (MCP streamable HTTP), behind the same admission
    /, /metrics..  routes: apps at exact paths that check their callers themselves (the
                   operator's page and metrics, `strictcall.server.ops`)

/rpc and every mounted app are reached only through admission (`strictcall.server.admission`:
Origin, bearer token, calls in flight), which puts the caller's identity in the scope under
`IDENTITY_KEY`; a body longer than the limit is refused unread (request_too_large, -32700). A
request that is answered with nothing (notifications only) is HTTP 204.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Final, cast

import orjson

from strictcall.core.record import refusal_record
from strictcall.core.refusals import too_large
from strictcall.errors import RETRY_AFTER_MS
from strictcall.server.admission import Admission, AwaitedOnly, Wire
from strictcall.storage import Store
from strictcall.transports.asgi import (
    CLAIMS_KEY,
    IDENTITY_KEY,
    ASGIApp,
    Later,
    Receive,
    Response,
    Scope,
    Send,
    declared_length,
    error_body,
    read_body,
    respond,
    response_headers,
    run_lifespans,
    send_response,
)
from strictcall.transports.jsonrpc import AWAIT, Recorder, RpcService, refusal_reply

_HEALTHY: Final = b'{"status":"ok"}'
_STORE_DOWN: Final = b'{"status":"store_unavailable","retry_after_ms":%d}' % RETRY_AFTER_MS


class RpcEndpoint:
    """POST /rpc for the identity admission found: the body read up to `max_body` bytes and
    answered by the JSON-RPC service, awaited or in place."""

    __slots__ = ("max_body", "record", "service")

    def __init__(self, service: RpcService, max_body: int, record: Recorder) -> None:
        self.service: Final = service
        self.max_body: Final = max_body
        self.record: Final = record

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await respond(send, 405, error_body(405), allow=b"POST")
            return
        identity = scope[IDENTITY_KEY]
        too_long = declared_length(scope) > self.max_body  # refused before a byte is read
        body = None if too_long else await read_body(receive, self.max_body)
        if body is None:
            await send_response(send, self._too_large(identity))
            return
        reply = await self.service.answer(body, identity, scope.get(CLAIMS_KEY))
        if reply is None:
            await respond(send, 204, b"")
        else:
            await respond(send, 200, reply)

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | None:
        """A POST whose whole `body` has arrived, answered now; None when a call in it must be
        awaited (an async tool, one with a time limit), with nothing run or audited."""
        identity = scope[IDENTITY_KEY]
        if len(body) > self.max_body:  # all of it is here: its length is the declared one
            return self._too_large(identity)
        reply = self.service.answer_now(bytes(body), identity, scope.get(CLAIMS_KEY))
        if reply is AWAIT:
            return None
        if reply is None:
            return 204, response_headers(b""), b""
        return 200, response_headers(reply), reply

    def _too_large(self, identity: str) -> Response:
        refusal = too_large(self.max_body)
        self.record(refusal_record(refusal.as_error(), identity))
        body = orjson.dumps(refusal_reply(None, refusal))
        return 200, response_headers(body), body


class RpcApp:
    """The ASGI app: /rpc, /healthz, and any extra apps mounted at their own paths, each
    reached only through `admission`.

    `lifespans` are entered, in order, when the server starts and left when it stops (e.g. the
    MCP session manager's run).
    """

    def __init__(
        self,
        service: RpcService,
        store: Store,
        *,
        max_body: int,
        record: Recorder,
        admission: Admission | None = None,
        mounts: dict[str, ASGIApp] | None = None,
        routes: dict[str, ASGIApp] | None = None,
        lifespans: Sequence[Callable[[], AbstractAsyncContextManager[None]]] = (),
        count_in_flight: bool = False,
    ) -> None:
        """`admission`: who may reach /rpc and the mounts (by default, callers with a token in
        `store`, without an Origin, within the default calls in flight). `count_in_flight`:
        keep `requests_in_flight`, all requests (for the metrics)."""
        self.admission: Final = admission if admission is not None else Admission(store, record)
        self.service: Final = service
        service.calls_in_flight = self.admission.in_flight  # a batch counts as its calls
        self.store: Final = store
        self.max_body: Final = max_body
        self.rpc: Final[Wire] = self.admission.around(RpcEndpoint(service, max_body, record))
        """POST /rpc, behind admission."""
        self.mounts: Final = {
            prefix: self.admission.around(_wire_of(app))
            for prefix, app in (mounts if mounts is not None else {}).items()
        }
        self.routes: Final = dict(routes) if routes is not None else {}
        self.lifespans: Final = tuple(lifespans)
        self._count_in_flight = count_in_flight
        self.on_stop: Final[list[Callable[[], None]]] = []
        """Told as the server's graceful stop begins, before the requests in flight are waited
        for: what holds a response open (/mcp's change streams) ends it then."""
        self.requests_in_flight = 0
        """HTTP requests being answered now (counted with `count_in_flight`)."""

    def stopping(self) -> None:
        """The server's graceful stop begins: tell `on_stop`."""
        for told in self.on_stop:
            told()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespans(self.lifespans, receive, send)
            return
        if scope["type"] != "http":
            return
        if not self._count_in_flight:
            await self._http(scope, receive, send)
            return
        self.requests_in_flight += 1  # a plain int on the loop: a gauge's lock costs more
        try:
            await self._http(scope, receive, send)
        finally:
            self.requests_in_flight -= 1

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if path == "/rpc":
            await self.rpc(scope, receive, send)
            return
        if path == "/healthz":
            if scope["method"] in ("GET", "HEAD"):
                # a database a round trip away is awaited, not waited on
                if await self.store.healthy_async():
                    await respond(send, 200, _HEALTHY)
                else:
                    await respond(send, 503, _STORE_DOWN)
            else:
                await respond(send, 405, error_body(405), allow=b"GET, HEAD")
            return
        if path in self.routes:  # the operator's paths: they check their callers themselves
            await self.routes[path](scope, receive, send)
            return
        mounted = self._mounted(path)
        if mounted is None:
            await respond(send, 404, error_body(404))
            return
        await mounted(scope, receive, send)

    def _mounted(self, path: str) -> Wire | None:
        for prefix, app in self.mounts.items():
            if path == prefix or path.startswith(prefix + "/"):
                return app
        return None

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | Later | None:
        """A POST to /rpc (or to a mount that answers in place: /mcp's plain requests) whose
        whole `body` has arrived, answered in place (status, headers, body) as `__call__` would
        answer it: admission, size, then the wire; a `Later` for a call /mcp awaits in place
        (an async tool's). None, with nothing run or audited, when the app must run (a token
        looked up over the network, /rpc's async tools, one with a time limit)."""
        path = scope["path"]
        if path == "/rpc":
            return self.rpc.answer_now(scope, body)
        mounted = self._mounted(path)
        return None if mounted is None else mounted.answer_now(scope, body)


def _wire_of(app: ASGIApp) -> Wire:
    """A mounted app as admission wraps it: itself when it answers in place (it has an
    `answer_now`), else an `AwaitedOnly`."""
    return cast(Wire, app) if callable(getattr(app, "answer_now", None)) else AwaitedOnly(app)
