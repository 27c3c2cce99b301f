"""Admission: who may reach a wire (/rpc, /mcp), decided before a byte of its body is read.

Each step is ASGI middleware in the shape Starlette's is (a class wrapping `app`, one concern
each), and `Admission.around(app)` composes them, outermost first, first refusal wins:

    OriginCheck     a browser page from an origin not admitted: 403 (before the token is read:
                    a foreign page learns nothing of tokens)
    BearerIdentity  the bearer token's identity, put in the scope under `IDENTITY_KEY`:
                    strictcall's own tokens (the store) and, with an `[oauth]` block, the
                    identity provider's (`strictcall.identity`), whose scopes go under
                    `CLAIMS_KEY` for the wires (what the token may list and call); 401
                    without a known token
                    (the challenge points at the protected resource metadata), 403 for a
                    provider's token without the scopes every call needs, 503 while the
                    store or the provider cannot say
    CallsInFlight   one identity's calls being answered at once: 429 past the limit
    ToolScopes      a provider's token without the scopes a called tool needs: 403 (it reads
                    the body: the only step that does)

(quotas, issue #27, are a further step here.)

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
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Protocol

import orjson

from strictcall.core.jsontext import MAX_SIZE
from strictcall.core.record import refusal_record
from strictcall.core.refusals import AUTH_DOWN, CALLER_BUSY, FOREIGN_ORIGIN, NO_TOKEN, too_large
from strictcall.errors import (
    AUTH_THROTTLED,
    AUTH_UNAVAILABLE,
    BUSY,
    FORBIDDEN_ORIGIN,
    INSUFFICIENT_SCOPE,
    RETRY_AFTER_MS,
    TOKEN_STORE_UNAVAILABLE,
    UNAUTHENTICATED,
    ErrorKind,
    JSONValue,
    Rejection,
)
from strictcall.identity.challenge import forbidden, unauthorized
from strictcall.identity.principal import (
    Principal,
    Refused,
    Throttled,
    Unavailable,
    Verdict,
    missing_scopes,
)
from strictcall.server.bearer import PRINCIPAL_KEY, called_tools, claims_of
from strictcall.server.edge import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_UNAUTHENTICATED_RATE,
    ClientBudget,
    OriginPolicy,
    client_key,
)
from strictcall.storage import StoreUnavailable, TokenStore
from strictcall.transports.asgi import (
    CLAIMS_KEY,
    IDENTITY_KEY,
    ASGIApp,
    ClientGone,
    Later,
    Message,
    Receive,
    Response,
    Scope,
    Send,
    bearer_token,
    declared_length,
    read_body,
    response_headers,
    send_response,
)
from strictcall.transports.jsonrpc import Recorder, refusal_reply

if TYPE_CHECKING:  # the verifier needs the oauth extra; a server without [oauth] loads none of it
    from strictcall.identity.verifier import OAuthVerifier

HTTP_STATUS: Final[Mapping[ErrorKind, int]] = MappingProxyType(
    {
        FORBIDDEN_ORIGIN: 403,
        UNAUTHENTICATED: 401,
        AUTH_THROTTLED: 429,
        INSUFFICIENT_SCOPE: 403,
        BUSY: 429,
        AUTH_UNAVAILABLE: 503,
        TOKEN_STORE_UNAVAILABLE: 503,
    }
)
"""The HTTP status of each refusal admission makes (pinned by a test)."""

BEARER_CHALLENGE: Final = b'Bearer realm="strictcall"'
"""The `WWW-Authenticate` of a 401."""


class Await(enum.Enum):
    """A step's word that its rule must be awaited (`admit`), not decided in place."""

    AWAIT = enum.auto()


AWAIT: Final = Await.AWAIT


def refusal_response(refusal: Rejection, challenge: bytes | None = None) -> Response:
    """A refused request's answer: its status from `HTTP_STATUS`, `WWW-Authenticate` on a
    401 (`challenge`, or `BEARER_CHALLENGE` without an identity provider) and on a 403 for a
    scope (`challenge`), `Retry-After` (whole seconds, rounded up) where the refusal says when
    to retry, and a JSON-RPC error body (id null) carrying the structured error."""
    status = HTTP_STATUS[refusal.kind]
    body = orjson.dumps(refusal_reply(None, refusal))
    retry_after = refusal.details.get("retry_after_ms")  # absent: no hint (0 would be one)
    return (
        status,
        response_headers(
            body,
            authenticate=challenge if challenge is not None or status != 401 else BEARER_CHALLENGE,
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


def refused(
    record: Recorder,
    refusal: Rejection,
    identity: str | None,
    challenge: bytes | None = None,
    tool: str | None = None,
) -> Response:
    """`refusal`'s answer, the refusal audited (no call id: the request was not read; the
    `tool` a scope was missing for)."""
    record(refusal_record(refusal.as_error(), identity, tool=tool))
    return refusal_response(refusal, challenge)


AnswerNow = Callable[[Scope, bytes | bytearray], Response | Later | None]
"""A wire's `answer_now(scope, body)`."""


class Wire(Protocol):
    """An app admission wraps: ASGI, and answering in place what it can."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | Later | None:
        """The answer to a request whose whole `body` has arrived, made now, or a `Later` that
        makes it once awaited; None (nothing run or audited) when the server is to run
        `__call__` on it."""
        ...


class AwaitedOnly:
    """A plain ASGI app as a `Wire` that answers nothing in place (e.g. MCP)."""

    __slots__ = ("app",)

    def __init__(self, app: ASGIApp) -> None:
        self.app: Final = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | Later | None:
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
            await send_response(send, self.refuse(scope, refusal))

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | Later | None:
        refusal = self.admit_now(scope)
        if refusal is None:
            return self.app.answer_now(scope, body)
        if refusal is AWAIT:
            return None
        return self.refuse(scope, refusal)

    def refuse(self, scope: Scope, refusal: Rejection) -> Response:
        """`refusal`'s answer, audited."""
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
    without a token the store (or the identity provider) knows, 503 while it cannot answer. A
    store whose lookup waits on the network (`tokens_inline` false), a provider's key to fetch
    or its introspection endpoint are awaited, never waited on in place. A provider's token
    leaves its `Principal` under `PRINCIPAL_KEY` (its scopes, for `ToolScopes`), and is 403
    `insufficient_scope` without the scopes every call needs."""

    __slots__ = ("_inline", "_own", "budget", "oauth", "tokens")

    def __init__(
        self,
        app: Wire,
        record: Recorder,
        tokens: TokenStore,
        oauth: OAuthVerifier | None = None,
        budget: ClientBudget | None = None,
    ) -> None:
        """`budget`: requests without a valid token, per client address (none: unlimited)."""
        super().__init__(app, record)
        self.tokens: Final = tokens
        self._inline: Final = tokens.tokens_inline
        self.oauth: Final = oauth
        self._own: Final = oauth is None or oauth.settings.own_tokens
        self.budget: Final = budget

    def admit_now(self, scope: Scope) -> Rejection | Await | None:
        token = bearer_token(scope)
        if token is None:
            return NO_TOKEN
        oauth = self.oauth
        if oauth is not None and oauth.owns(token):
            verdict = oauth.check_now(token)
            if verdict is None and self._throttled(scope):
                return NO_TOKEN  # its budget is spent: not asked of the provider (refuse: 429)
            return AWAIT if verdict is None else self._judged(scope, verdict)
        if not self._own:
            return NO_TOKEN
        if not self._inline:
            return NO_TOKEN if self._throttled(scope) else AWAIT
        try:
            identity = self.tokens.identity_for_token(token)
        except StoreUnavailable:
            return AUTH_DOWN
        return self._identified(scope, identity)

    async def admit(self, scope: Scope) -> Rejection | None:
        token = bearer_token(scope)
        if token is None:
            return NO_TOKEN
        oauth = self.oauth
        if oauth is not None and oauth.owns(token):
            client = client_key(scope.get("client"))
            return self._judged(scope, await oauth.check(token, client))
        if not self._own:
            return NO_TOKEN
        try:
            identity = await self.tokens.identity_for_token_async(token)
        except StoreUnavailable:
            return AUTH_DOWN
        return self._identified(scope, identity)

    def _identified(self, scope: Scope, identity: str | None) -> Rejection | None:
        """An own token's identity in the scope; beside an identity provider, never one in the
        provider's namespace (`identity_prefix`), and holding `own_token_scopes` for the tools
        `tool_scopes` names (it is not held to `scopes`)."""
        if identity is None:
            return NO_TOKEN
        oauth = self.oauth
        if oauth is not None:
            settings = oauth.settings
            if settings.identity_prefix and identity.startswith(settings.identity_prefix):
                return NO_TOKEN  # would pass for the provider's caller of that name
            own = Principal(identity, frozenset(settings.own_token_scopes))
            scope[PRINCIPAL_KEY] = own
            scope[CLAIMS_KEY] = claims_of(own)
        scope[IDENTITY_KEY] = identity
        return None

    def _judged(self, scope: Scope, verdict: Verdict) -> Rejection | None:
        if isinstance(verdict, Refused):
            return NO_TOKEN
        if isinstance(verdict, Throttled):
            return throttled(verdict.retry_after_s)
        if isinstance(verdict, Unavailable):
            retry_ms = max(RETRY_AFTER_MS, math.ceil(verdict.retry_after_s * 1000))
            return Rejection(AUTH_UNAVAILABLE, MappingProxyType({"retry_after_ms": retry_ms}))
        assert self.oauth is not None
        scope[PRINCIPAL_KEY] = verdict  # its scopes, for ToolScopes (and the audit of a 403)
        every = self.oauth.settings.scopes
        if every and missing_scopes(verdict.scopes, every):
            return insufficient_scope(every)
        scope[IDENTITY_KEY] = verdict.identity
        scope[CLAIMS_KEY] = claims_of(verdict)  # what the policy and tools/list read of it
        return None

    def _throttled(self, scope: Scope) -> bool:
        """Whether the request's client address has no budget left for an unknown token."""
        budget = self.budget
        return budget is not None and budget.exhausted(client_key(scope.get("client")))

    def refuse(self, scope: Scope, refusal: Rejection) -> Response:
        """`refusal`'s answer, with the provider's challenge when one is configured; a request
        without a valid token spends its client address's budget, and past it is 429
        `auth_throttled` instead of 401."""
        budget = self.budget
        if refusal is NO_TOKEN and budget is not None:
            wait = budget.spend(client_key(scope.get("client")))
            if wait > 0.0:
                return refused(self.record, throttled(wait), None)
        oauth = self.oauth
        if oauth is None:
            return refused(self.record, refusal, None)
        if refusal.kind is INSUFFICIENT_SCOPE:
            principal: Principal = scope[PRINCIPAL_KEY]
            needed = tuple(str(refusal.details["scope"]).split())
            challenge = forbidden(oauth.settings, needed)
            return refused(self.record, refusal, principal.identity, challenge)
        sent = bearer_token(scope) is not None
        return refused(self.record, refusal, None, unauthorized(oauth.settings, token_sent=sent))


def throttled(wait_s: float) -> Rejection:
    """429 `auth_throttled` for a client address to wait `wait_s` before it sends again."""
    retry_ms = max(RETRY_AFTER_MS, math.ceil(wait_s * 1000))
    return Rejection(AUTH_THROTTLED, MappingProxyType({"retry_after_ms": retry_ms}))


def insufficient_scope(needed: tuple[str, ...]) -> Rejection:
    """403 for a token without the scopes `needed` (named in the error and the challenge)."""
    return Rejection(INSUFFICIENT_SCOPE, MappingProxyType({"scope": " ".join(needed)}))


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

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | Later | None:
        identity: str = scope[IDENTITY_KEY]
        if not self.in_flight.enter(identity):
            return refused(self.record, CALLER_BUSY, identity)
        try:
            answer = self.app.answer_now(scope, body)
        except BaseException:
            self.in_flight.leave(identity)
            raise
        if answer is None or isinstance(answer, tuple):
            self.in_flight.leave(identity)
            return answer
        return self._held(identity, answer)  # its place kept until it is answered

    async def _held(self, identity: str, later: Later) -> Response:
        try:
            return await later
        finally:
            self.in_flight.leave(identity)


class ToolScopes:
    """403 `insufficient_scope` for a call by a provider's token (a `Principal` under
    `PRINCIPAL_KEY`) to a tool whose scopes (`tool_scopes`) it lacks: the body's tools/call
    requests (one, or a batch: refused whole) are read for their tools' names before the wire
    runs them, audited with the identity and the tool. strictcall's own tokens beside the
    provider hold `own_token_scopes` (none by default)."""

    __slots__ = ("app", "max_body", "needed", "record", "settings")

    def __init__(self, app: Wire, record: Recorder, oauth: OAuthVerifier, max_body: int) -> None:
        self.app: Final = app
        self.record: Final = record
        self.settings: Final = oauth.settings
        self.needed: Final = dict(oauth.settings.tool_scopes)
        self.max_body: Final = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal: Principal | None = scope.get(PRINCIPAL_KEY)  # absent: an own token
        unread = principal is None or scope["method"] != "POST"
        if unread or declared_length(scope) > self.max_body:  # too long: the wire refuses it
            await self.app(scope, receive, send)
            return
        assert principal is not None
        body = await read_body(receive, self.max_body)
        if body is None:  # longer than it said: read up to the limit only
            refusal = too_large(self.max_body)
            self.record(refusal_record(refusal.as_error(), principal.identity))
            answer = orjson.dumps(refusal_reply(None, refusal))
            await send_response(send, (413, response_headers(answer), answer))
            return
        scoped = self._refusal(principal, body)
        if scoped is not None:
            await send_response(send, scoped)
            return
        await self.app(scope, _replay(body, receive), send)

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | Later | None:
        principal: Principal | None = scope.get(PRINCIPAL_KEY)
        if principal is not None:
            scoped = self._refusal(principal, body)
            if scoped is not None:
                return scoped
        return self.app.answer_now(scope, body)

    def _refusal(self, principal: Principal, body: bytes | bytearray) -> Response | None:
        for tool in called_tools(body):
            needed = self.needed.get(tool)  # absent: the tool needs no scope of its own
            if needed is not None and missing_scopes(principal.scopes, needed):
                asked = tuple(dict.fromkeys((*self.settings.scopes, *needed)))
                challenge = forbidden(self.settings, asked)
                refusal = insufficient_scope(asked)
                return refused(self.record, refusal, principal.identity, challenge, tool)
        return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body already read, then whatever the client sends next."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed


class Admission:
    """One server's admission: its origin policy, its token store (and identity provider), its
    calls in flight (shared by every wire it wraps) and where refusals are audited."""

    def __init__(
        self,
        tokens: TokenStore,
        record: Recorder,
        *,
        origins: OriginPolicy | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        oauth: OAuthVerifier | None = None,
        max_body: int = MAX_SIZE,
        unauthenticated_rate: int = DEFAULT_UNAUTHENTICATED_RATE,
    ) -> None:
        """`origins`: which browser origins may call (none but requests without an Origin by
        default). `max_in_flight`: one identity's calls answered at once. `oauth`: an identity
        provider's tokens too (or instead); `max_body`: the longest body `ToolScopes` reads;
        `unauthenticated_rate`: requests a second one client address may send without a valid
        token."""
        self.budget: Final = ClientBudget(unauthenticated_rate)
        self.tokens: Final = tokens
        self.record: Final = record
        self.origins: Final = origins if origins is not None else OriginPolicy()
        self.in_flight: Final = InFlight(max_in_flight)
        self.oauth: Final = oauth
        self.max_body: Final = max_body

    def around(self, app: Wire) -> Wire:
        """`app` behind every step, in order: origin, token, calls in flight (and a tool's
        scopes, with an identity provider that names some)."""
        record = self.record
        oauth = self.oauth
        if oauth is not None and oauth.settings.tool_scopes:
            app = ToolScopes(app, record, oauth, self.max_body)
        in_flight = CallsInFlight(app, record, self.in_flight)
        bearer = BearerIdentity(in_flight, record, self.tokens, oauth, self.budget)
        return OriginCheck(bearer, record, self.origins)
