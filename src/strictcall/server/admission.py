"""Admission: who may reach a wire (/rpc, /mcp), decided before a byte of its body is read.

Each step is ASGI middleware in the shape Starlette's is (a class wrapping `app`, one concern
each), and `Admission.around(app)` composes them, outermost first, first refusal wins:

    OriginCheck     a browser page from an origin not admitted: 403 (before the token is read:
                    a foreign page learns nothing of tokens)
    BearerIdentity  the bearer token's identity, put in the scope under `IDENTITY_KEY`: 401
                    without a known token, 503 while the token store cannot say
    CallsInFlight   one identity's calls being answered at once: 429 past the limit

(quotas and an identity provider's tokens, issues #26 and #27, are further steps here.)

Every step has two forms that read one rule, its `admit_now`: `__call__`, the ASGI form, which
awaits what must be awaited (a token looked up over the network), and `answer_now(scope,
body)`, the in-place form the server's protocol asks first (`strictcall.server._uvicorn`): an
answer (status, headers, body), or None to run the request through the ASGI form instead, with
nothing run or audited. So the same request gets the same status, headers and audit record on
either path.

A refusal's HTTP status and headers are decided once, by `refusal_response` from `HTTP_STATUS`;
it is audited once, by the step that refuses it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, Protocol

import orjson

from strictcall.core.record import refusal_record
from strictcall.core.refusals import AUTH_DOWN, CALLER_BUSY, FOREIGN_ORIGIN, NO_TOKEN
from strictcall.errors import (
    AUTH_UNAVAILABLE,
    BUSY,
    FORBIDDEN_ORIGIN,
    UNAUTHENTICATED,
    ErrorKind,
    JSONValue,
    Rejection,
)
from strictcall.server.edge import DEFAULT_MAX_IN_FLIGHT, OriginPolicy
from strictcall.storage import StoreUnavailable, TokenStore
from strictcall.transports.asgi import (
    IDENTITY_KEY,
    ASGIApp,
    ClientGone,
    Receive,
    Response,
    Scope,
    Send,
    bearer_token,
    response_headers,
    send_response,
)
from strictcall.transports.jsonrpc import Recorder, refusal_reply

HTTP_STATUS: Final[Mapping[ErrorKind, int]] = MappingProxyType(
    {
        FORBIDDEN_ORIGIN: 403,
        UNAUTHENTICATED: 401,
        BUSY: 429,
        AUTH_UNAVAILABLE: 503,
    }
)
"""The HTTP status of each refusal admission makes (pinned by a test)."""

BEARER_CHALLENGE: Final = b'Bearer realm="strictcall"'
"""The `WWW-Authenticate` of a 401."""


class Await(enum.Enum):
    """A step's word that its rule must be awaited (`admit`), not decided in place."""

    AWAIT = enum.auto()


AWAIT: Final = Await.AWAIT


def refusal_response(refusal: Rejection) -> Response:
    """A refused request's answer: its status from `HTTP_STATUS`, `WWW-Authenticate` on a
    401, `Retry-After` (whole seconds, rounded up) where the refusal says when to retry, and a
    JSON-RPC error body (id null) carrying the structured error."""
    status = HTTP_STATUS[refusal.kind]
    body = orjson.dumps(refusal_reply(None, refusal))
    retry_after = refusal.details.get("retry_after_ms")  # absent: no hint (0 would be one)
    return (
        status,
        response_headers(
            body,
            authenticate=BEARER_CHALLENGE if status == 401 else None,
            retry_after=None if retry_after is None else _seconds_up(retry_after),
        ),
        body,
    )


def _seconds_up(milliseconds: JSONValue) -> bytes:
    """A `retry_after_ms` hint as `Retry-After`'s whole seconds, rounded up.

    Raises:
        TypeError: the hint is not an int (a refusal made wrongly).
    """
    if type(milliseconds) is not int:
        raise TypeError("retry_after_ms is an int of milliseconds")
    return str(-(-milliseconds // 1000)).encode("ascii")


def refused(record: Recorder, refusal: Rejection, identity: str | None) -> Response:
    """`refusal`'s answer, the refusal audited (no call id or tool: the request was not read)."""
    record(refusal_record(refusal.as_error(), identity))
    return refusal_response(refusal)


AnswerNow = Callable[[Scope, bytes | bytearray], Response | None]
"""A wire's `answer_now(scope, body)`."""


class Wire(Protocol):
    """An app admission wraps: ASGI, and answering in place what it can."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | None:
        """The answer to a request whose whole `body` has arrived, made now; None (nothing
        run or audited) when it must be awaited: the server then runs `__call__`."""
        ...


class AwaitedOnly:
    """A plain ASGI app as a `Wire` that answers nothing in place (e.g. MCP)."""

    __slots__ = ("app",)

    def __init__(self, app: ASGIApp) -> None:
        self.app: Final = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | None:
        return None


class Step:
    """One concern of admission around `app`: a subclass says its rule in `admit_now` (and
    `admit`, when the rule may have to be awaited); the refusals it returns are audited
    without an identity, as the caller is not known yet (or not trusted)."""

    __slots__ = ("app", "record")

    def __init__(self, app: Wire, record: Recorder) -> None:
        self.app: Final = app
        self.record: Final = record

    def admit_now(self, scope: Scope) -> Rejection | Await | None:
        """The refusal of this request, None to pass it on, or `AWAIT`: ask `admit`."""
        raise NotImplementedError

    async def admit(self, scope: Scope) -> Rejection | None:
        """`admit_now`, awaited where it must be."""
        raise NotImplementedError  # only a step whose admit_now may say AWAIT has one

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.admit_now(scope)
        if refusal is AWAIT:
            refusal = await self.admit(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await send_response(send, refused(self.record, refusal, None))

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | None:
        refusal = self.admit_now(scope)
        if refusal is None:
            return self.app.answer_now(scope, body)
        if refusal is AWAIT:
            return None
        return refused(self.record, refusal, None)


class OriginCheck(Step):
    """403 for a request whose `Origin` the policy does not admit (a request without one is
    not a browser's cross-site request, and passes)."""

    __slots__ = ("origins",)

    def __init__(self, app: Wire, record: Recorder, origins: OriginPolicy) -> None:
        super().__init__(app, record)
        self.origins: Final = origins

    def admit_now(self, scope: Scope) -> Rejection | None:
        for name, value in scope["headers"]:  # the first Origin header, as with every header
            if name == b"origin":
                return None if self.origins.admits(value.decode("latin-1")) else FOREIGN_ORIGIN
        return None


class BearerIdentity(Step):
    """The identity of `Authorization: Bearer <token>`, in the scope under `IDENTITY_KEY`; 401
    without a token the store knows, 503 while the store cannot answer. A store whose lookup
    waits on the network (`tokens_inline` false) is awaited, never waited on in place."""

    __slots__ = ("_inline", "tokens")

    def __init__(self, app: Wire, record: Recorder, tokens: TokenStore) -> None:
        super().__init__(app, record)
        self.tokens: Final = tokens
        self._inline: Final = tokens.tokens_inline

    def admit_now(self, scope: Scope) -> Rejection | Await | None:
        if not self._inline:
            return AWAIT
        token = bearer_token(scope)
        if token is None:
            return NO_TOKEN
        try:
            identity = self.tokens.identity_for_token(token)
        except StoreUnavailable:
            return AUTH_DOWN
        return _identified(scope, identity)

    async def admit(self, scope: Scope) -> Rejection | None:
        token = bearer_token(scope)
        if token is None:
            return NO_TOKEN
        try:
            identity = await self.tokens.identity_for_token_async(token)
        except StoreUnavailable:
            return AUTH_DOWN
        return _identified(scope, identity)


def _identified(scope: Scope, identity: str | None) -> Rejection | None:
    if identity is None:
        return NO_TOKEN
    scope[IDENTITY_KEY] = identity
    return None


class InFlight:
    """Calls being answered, per identity, against a limit (one event loop: no lock)."""

    __slots__ = ("_count", "limit")

    def __init__(self, limit: int = DEFAULT_MAX_IN_FLIGHT) -> None:
        self.limit: Final = limit
        self._count: dict[str, int] = {}

    def enter(self, identity: str) -> bool:
        """Count one more call for `identity`; False (nothing counted) when it is at its limit."""
        count = self._count.get(identity, 0)  # absent: none in flight
        if count >= self.limit:
            return False
        self._count[identity] = count + 1
        return True

    def enter_many(self, identity: str, count: int) -> bool:
        """Count `count` more calls for `identity` (a batch's others), all or none."""
        held = self._count.get(identity, 0)  # absent: none in flight
        if held + count > self.limit:
            return False
        self._count[identity] = held + count
        return True

    def leave_many(self, identity: str, count: int) -> None:
        """`count` calls of `identity` are answered."""
        left = self._count[identity] - count
        if left > 0:
            self._count[identity] = left
        else:
            del self._count[identity]

    def leave(self, identity: str) -> None:
        """One call of `identity` is answered."""
        left = self._count[identity] - 1
        if left > 0:
            self._count[identity] = left
        else:
            del self._count[identity]

    def __getitem__(self, identity: str) -> int:
        """Calls of `identity` in flight now."""
        return self._count.get(identity, 0)


class CallsInFlight:
    """429 `busy` (retryable) for an identity with `in_flight.limit` calls being answered; one
    more is refused, never queued. Needs the identity: inside `BearerIdentity`. Not a `Step`:
    it holds its place for as long as the call runs, and the refusal is audited with the
    identity."""

    __slots__ = ("app", "in_flight", "record")

    def __init__(self, app: Wire, record: Recorder, in_flight: InFlight) -> None:
        self.app: Final = app
        self.record: Final = record
        self.in_flight: Final = in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        identity: str = scope[IDENTITY_KEY]
        if not self.in_flight.enter(identity):
            await send_response(send, refused(self.record, CALLER_BUSY, identity))
            return
        try:
            await self.app(scope, receive, send)
        except ClientGone:
            pass  # nothing to answer: the client left (or was cut off by the edge's deadlines)
        finally:
            self.in_flight.leave(identity)

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | None:
        identity: str = scope[IDENTITY_KEY]
        if not self.in_flight.enter(identity):
            return refused(self.record, CALLER_BUSY, identity)
        try:
            return self.app.answer_now(scope, body)
        finally:
            self.in_flight.leave(identity)


class Admission:
    """One server's admission: its origin policy, its token store, its calls in flight (shared
    by every wire it wraps) and where refusals are audited."""

    def __init__(
        self,
        tokens: TokenStore,
        record: Recorder,
        *,
        origins: OriginPolicy | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        """`origins`: which browser origins may call (none but requests without an Origin by
        default). `max_in_flight`: one identity's calls answered at once."""
        self.tokens: Final = tokens
        self.record: Final = record
        self.origins: Final = origins if origins is not None else OriginPolicy()
        self.in_flight: Final = InFlight(max_in_flight)

    def around(self, app: Wire) -> Wire:
        """`app` behind every step, in order: origin, token, calls in flight."""
        record = self.record
        in_flight = CallsInFlight(app, record, self.in_flight)
        return OriginCheck(BearerIdentity(in_flight, record, self.tokens), record, self.origins)
