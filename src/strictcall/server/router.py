"""The HTTP face of the service: a plain ASGI app, no framework.

    POST /rpc      JSON-RPC 2.0 (see `strictcall.transports.jsonrpc`), identity from the bearer
    token
    GET  /healthz  {"status": "ok"}; 503 {"status": "store_unavailable", ...} while the store
                   cannot serve (a load balancer takes the server out until it can)
    /mcp, ...      mounted apps (MCP streamable HTTP), behind the same token check
    /, /metrics..  routes: apps at exact paths that check their callers themselves (the
                   operator's page and metrics, `strictcall.server.ops`)

The identity comes from `Authorization: Bearer <token>` and from nothing else. A missing or
unknown token is HTTP 401 with a JSON-RPC error body (stage auth) and never reaches a tool or a
mounted app, which finds the identity in its scope under `IDENTITY_KEY`; a body longer than the
limit is refused unread (request_too_large, -32700). A request that is answered with nothing
(notifications only) is HTTP 204.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Final

import orjson

from strictcall.core.record import refusal_record
from strictcall.core.refusals import AUTH_DOWN, CALLER_BUSY, FOREIGN_ORIGIN, NO_TOKEN, too_large
from strictcall.errors import RETRY_AFTER_MS, Rejection
from strictcall.server.edge import DEFAULT_MAX_IN_FLIGHT, InFlight, OriginPolicy
from strictcall.storage import AwaitedNotes, Store, StoreUnavailable
from strictcall.transports.asgi import (
    IDENTITY_KEY,
    ASGIApp,
    ClientGone,
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
    token_of,
)
from strictcall.transports.jsonrpc import AWAIT, Recorder, RpcService, refusal_reply

_HEALTHY: Final = b'{"status":"ok"}'
_STORE_DOWN: Final = b'{"status":"store_unavailable","retry_after_ms":%d}' % RETRY_AFTER_MS


class RpcApp:
    """The ASGI app: /rpc, /healthz, and any extra apps mounted at their own paths, each
    reached only with a valid token.

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
        mounts: dict[str, ASGIApp] | None = None,
        routes: dict[str, ASGIApp] | None = None,
        lifespans: Sequence[Callable[[], AbstractAsyncContextManager[None]]] = (),
        origins: OriginPolicy | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        count_in_flight: bool = False,
    ) -> None:
        """`origins`: which browser origins may call (`OriginPolicy`; none but requests without
        an Origin by default). `max_in_flight`: one identity's calls answered at once.
        `count_in_flight`: keep `requests_in_flight`, all requests (for the metrics)."""
        self.origins: Final = origins if origins is not None else OriginPolicy()
        self.in_flight: Final = InFlight(max_in_flight)
        self.service: Final = service
        service.calls_in_flight = self.in_flight  # a batch counts as the calls it holds
        self.store: Final = store
        self._awaited = store if isinstance(store, AwaitedNotes) else None
        """The store, when its token lookups are awaited (PostgreSQL), else None."""
        self.max_body: Final = max_body
        self._record = record
        self.mounts: Final = dict(mounts) if mounts is not None else {}
        self.routes: Final = dict(routes) if routes is not None else {}
        self.lifespans: Final = tuple(lifespans)
        self._count_in_flight = count_in_flight
        self.requests_in_flight = 0
        """HTTP requests being answered now (counted with `count_in_flight`)."""

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
        if path == "/healthz":
            if scope["method"] in ("GET", "HEAD"):
                awaited = self._awaited  # a database a round trip away: awaited, not waited on
                if self.store.healthy() if awaited is None else await awaited.healthy_async():
                    await respond(send, 200, _HEALTHY)
                else:
                    await respond(send, 503, _STORE_DOWN)
            else:
                await respond(send, 405, error_body(405), allow=b"GET, HEAD")
            return
        if path in self.routes:  # the operator's paths: they check their callers themselves
            await self.routes[path](scope, receive, send)
            return
        if path == "/rpc":
            app: ASGIApp = self._rpc
        else:
            mounted = self._mounted(path)
            if mounted is None:
                await respond(send, 404, error_body(404))
                return
            app = mounted
        await self._guarded(app, scope, receive, send)

    def _mounted(self, path: str) -> ASGIApp | None:
        for prefix, app in self.mounts.items():
            if path == prefix or path.startswith(prefix + "/"):
                return app
        return None

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | None:
        """A POST to /rpc whose whole `body` has arrived, answered in place (status, headers,
        body) as `__call__` would answer it: origin, token, calls in flight, size, then the
        service. None, with nothing run or audited, when a call in it must be awaited (an
        async tool, one with a time limit): the caller then runs the app on the request."""
        if self._awaited is not None:  # its token may need a round trip: the app awaits it
            return None
        refused = self._admit(scope)
        if not isinstance(refused, str):
            return refused
        identity = refused
        if not self.in_flight.enter(identity):
            return self._refusal(429, CALLER_BUSY, identity)
        try:
            if len(body) > self.max_body:  # all of it is here: its length is the declared one
                return self._too_large(identity)
            reply = self.service.answer_now(bytes(body), identity)
        finally:
            self.in_flight.leave(identity)
        if reply is AWAIT:
            return None
        if reply is None:
            return 204, response_headers(b""), b""
        return 200, response_headers(reply), reply

    async def _guarded(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """`app` for an admitted origin and a known caller within its calls in flight, in this
        order: the origin before the token (a foreign page learns nothing of tokens)."""
        awaited = self._awaited
        refused = (
            self._admit(scope) if awaited is None else await self._admit_awaited(scope, awaited)
        )
        if not isinstance(refused, str):
            await send_response(send, refused)
            return
        identity = refused
        if not self.in_flight.enter(identity):
            await send_response(send, self._refusal(429, CALLER_BUSY, identity))
            return
        try:
            await app({**scope, IDENTITY_KEY: identity}, receive, send)
        except ClientGone:
            pass  # nothing to answer: the client left (or was cut off by the edge's deadlines)
        finally:
            self.in_flight.leave(identity)

    def _admit(self, scope: Scope) -> str | Response:
        """The caller's identity, or its refusal: 403 for a foreign origin (checked before the
        token: a foreign page learns nothing of tokens), 401 without a known token, 503 when
        the token store is down."""
        token = self._presented_token(scope)
        if isinstance(token, tuple):
            return token
        try:
            identity = None if token is None else self.store.identity_for_token(token)
        except StoreUnavailable:
            return self._refusal(503, AUTH_DOWN)
        return self._refusal(401, NO_TOKEN) if identity is None else identity

    async def _admit_awaited(self, scope: Scope, store: AwaitedNotes) -> str | Response:
        """`_admit`, the token looked up on the loop without blocking it."""
        token = self._presented_token(scope)
        if isinstance(token, tuple):
            return token
        try:
            identity = None if token is None else await store.identity_for_token_async(token)
        except StoreUnavailable:
            return self._refusal(503, AUTH_DOWN)
        return self._refusal(401, NO_TOKEN) if identity is None else identity

    def _presented_token(self, scope: Scope) -> str | Response | None:
        """The bearer token the request presents (None: none), or 403 for a foreign origin."""
        origin = None
        authorization = None
        for name, value in scope["headers"]:  # one pass for both
            if name == b"authorization":
                if authorization is None:
                    authorization = value
            elif name == b"origin" and origin is None:
                origin = value
        if not self.origins.admits(None if origin is None else origin.decode("latin-1")):
            return self._refusal(403, FOREIGN_ORIGIN)
        return None if authorization is None else token_of(authorization)

    async def _rpc(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await respond(send, 405, error_body(405), allow=b"POST")
            return
        identity = scope[IDENTITY_KEY]
        too_long = declared_length(scope) > self.max_body  # refused before a byte is read
        body = None if too_long else await read_body(receive, self.max_body)
        if body is None:
            await send_response(send, self._too_large(identity))
            return
        reply = await self.service.answer(body, identity)
        if reply is None:
            await respond(send, 204, b"")
        else:
            await respond(send, 200, reply)

    def _too_large(self, identity: str) -> Response:
        refusal = too_large(self.max_body)
        self._audit(refusal, identity)
        body = orjson.dumps(refusal_reply(None, refusal))
        return 200, response_headers(body), body

    def _refusal(self, status: int, refusal: Rejection, identity: str | None = None) -> Response:
        """A refusal before the JSON-RPC service, audited."""
        self._audit(refusal, identity)
        body = orjson.dumps(refusal_reply(None, refusal))
        if status == 401:
            return status, response_headers(body, authenticate=b'Bearer realm="strictcall"'), body
        if status == 429:
            retry_s = -(-int(refusal.details["retry_after_ms"]) // 1000)  # whole seconds, up
            return status, response_headers(body, retry_after=str(retry_s).encode("ascii")), body
        return status, response_headers(body), body

    def _audit(self, refusal: Rejection, identity: str | None) -> None:
        """Record a request refused before it reached the JSON-RPC service."""
        self._record(refusal_record(refusal.as_error(), identity))
