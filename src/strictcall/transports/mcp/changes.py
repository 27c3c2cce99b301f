"""/mcp's change streams: a GET with `Accept: text/event-stream` (the handshake era's) or a
2026-07-28 `subscriptions/listen` request opens an SSE stream on which the caller is sent
`notifications/tools/list_changed` (and resources' and prompts', where content is served beside
the tools) each time what it may see of that listing changes. The listen stream is the SDK's to
write (its acknowledgement first, each frame stamped with the request's id, its result last);
the GET stream is written here.

/mcp is stateless: the stream belongs to no session, and carries nothing but these
notifications and, every `keepalive_s` of silence, a comment that keeps it alive. A change is
told to a stream only when the caller's own listing differs from the one it was last told of
(or found when it opened): a tool another identity cannot see changes nothing for it.

Resource subscriptions ride the same streams where content is served and an upstream offers
them. On the handshake era, /mcp being stateless, a `resources/subscribe` is the caller's
identity's: the `notifications/resources/updated` of its URI go to each GET stream that identity
holds open (none open: nowhere, until one opens), and the identity's subscriptions end with its
last GET stream (or its `resources/unsubscribe`). On 2026-07-28 a listen's `resourceSubscriptions`
are that listen stream's alone, and end with it. Either way an identity holds at most
`MAX_SUBSCRIPTIONS` per holder (the identity on the handshake era, each listen stream on
2026-07-28), and the upstream is subscribed once per URI however many hold it
(`strictcall.services.proxy.subscriptions`).

Budgets (`strictcall.transports.streams.StreamLimits`): an identity past its streams is 429,
the server past its total 503, both `busy` with `retry_after_ms` and the budget's name; a stop
(`stop`, told by the server as its graceful stop begins) ends every stream at once, cleanly, so
that no stream holds the stop for its grace period.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
import mcp_types as types
import orjson
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
    event_to_notification,
)

from strictcall.core.gateway import Gateway
from strictcall.core.ids import mint_call_id
from strictcall.core.policy.model import Claims
from strictcall.core.record import refusal_record
from strictcall.core.refusals import IDENTITY_STREAMS_FULL, STREAMS_FULL
from strictcall.core.tools import ToolFailure
from strictcall.errors import Rejection
from strictcall.transports.asgi import (
    CLAIMS_KEY,
    IDENTITY_KEY,
    Receive,
    Scope,
    Send,
    response_headers,
    send_response,
)
from strictcall.transports.jsonrpc import Recorder, refusal_reply
from strictcall.transports.mcp.adapter import envelope_capabilities, offered
from strictcall.transports.mcp.content import (
    Context,
    IdentityOf,
    Kind,
    McpContent,
    Subscriber,
    refused,
)
from strictcall.transports.streams import StreamLimits

KINDS: Final = ("tools", "resources", "prompts")
"""The listings a stream is told of, in the order one change to several is told."""

ClaimsOf = Callable[[Context], Claims | None]
ListenHandler = Callable[
    [Context, types.SubscriptionsListenRequestParams], Awaitable[types.SubscriptionsListenResult]
]

_EVENTS: Final[dict[str, ServerEvent]] = {
    "tools": ToolsListChanged(),
    "resources": ResourcesListChanged(),
    "prompts": PromptsListChanged(),
}

HOLDER_PREFIX: Final = "mcp:"
"""How an identity's handshake-era subscriptions are named among a source's subscribers (a
stdio session's name is a minted id, a listen stream's too: never this)."""

KEEPALIVE: Final = b": keep-alive\n\n"
"""An SSE comment: no event, only bytes on the wire."""

_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),  # a buffering proxy would hold every event back
]


def changed_event(kind: str) -> bytes:
    """The SSE event that tells a host the listing of `kind` changed."""
    message = {"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"}
    return b"event: message\ndata: " + orjson.dumps(message) + b"\n\n"


def updated_event(notification: types.ResourceUpdatedNotification) -> bytes:
    """The SSE event that carries an upstream's `notifications/resources/updated`, as checked."""
    dumped = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
    return b"event: message\ndata: " + orjson.dumps({"jsonrpc": "2.0", **dumped}) + b"\n\n"


class _Stream:
    """One open stream: whose it is, what it was last told of, what has changed since, and
    whose resource updates it carries (`holder`) with those not yet written, by URI (a second
    update of one URI before the first is written is the same news: one is kept)."""

    __slots__ = (
        "claims",
        "holder",
        "identity",
        "kinds",
        "offers",
        "pending",
        "seen",
        "updated",
        "wake",
    )

    def __init__(
        self,
        identity: str,
        claims: Claims | None,
        kinds: tuple[str, ...],
        holder: str,
        offers: frozenset[str] = frozenset(),
    ) -> None:
        self.identity: Final = identity
        self.claims: Final = claims
        self.offers: Final = offers
        """What its caller's client offers to answer (`peer.ASKS`): its tools' listing is the
        one that caller is given."""
        self.kinds: Final = kinds
        self.holder: Final = holder
        self.seen: dict[str, object] = {}
        self.pending: set[str] = set()
        self.updated: dict[str, types.ResourceUpdatedNotification] = {}
        self.wake: Final = asyncio.Event()


class ChangeStreams:
    """The change streams open on /mcp, within `limits`; `running()` must be entered (on the
    serving loop) while they are served."""

    def __init__(
        self,
        gateway: Gateway,
        content: McpContent | None,
        limits: StreamLimits,
        record: Recorder | None = None,
    ) -> None:
        self.limits: Final = limits
        self._gateway = gateway
        self._content = content
        self._record = record
        self._open: set[_Stream] = set()
        """The streams told of changes."""
        self._held = 0
        """The places `admit` has taken and not given back: the streams open, and those of
        listen requests on their way to the SDK's handler."""
        self._per_identity: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    @property
    def tells_content(self) -> bool:
        """Whether resources' and prompts' changes are told too (content is served)."""
        return self._content is not None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Watch the gateway's listing (and the content's) while the streams are served; every
        stream ends when it is left."""
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        unwatch = self._gateway.watch_tools(lambda: self._changed("tools"))
        content = self._content
        unwatch_content = None if content is None else content.watch(self._changed)
        try:
            yield
        finally:
            unwatch()
            if unwatch_content is not None:
                unwatch_content()
            self.stop()

    def stop(self) -> None:
        """End every open stream now (the server is stopping); none opens after it."""
        self._stopping = True
        for stream in self._open:
            stream.wake.set()

    def _changed(self, kind: Kind | str) -> None:
        # told in whatever thread replaced the listing: the streams are woken on their loop
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake, kind)

    def _wake(self, kind: str) -> None:
        for stream in self._open:
            stream.pending.add(kind)
            stream.wake.set()

    def subscriber(self, identity: str | None) -> Subscriber | None:
        """Who holds a handshake-era `resources/subscribe` of `identity`'s on /mcp: the
        identity itself, told on its GET streams (None: no identity, or no content served)."""
        if identity is None or self._content is None:
            return None
        holder = HOLDER_PREFIX + identity
        return Subscriber(holder, functools.partial(self._send_update, holder))

    async def _send_update(self, holder: str, notification: types.ServerNotification) -> None:
        # sent from whatever loop the upstream's session runs on: written on the streams' own
        loop = self._loop
        if (
            isinstance(notification, types.ResourceUpdatedNotification)
            and loop is not None
            and not loop.is_closed()
        ):
            loop.call_soon_threadsafe(self._tell_updated, holder, notification)

    def _tell_updated(self, holder: str, notification: types.ResourceUpdatedNotification) -> None:
        for stream in self._open:
            if stream.holder == holder:
                stream.updated[str(notification.params.uri)] = notification
                stream.wake.set()

    async def _forget(self, holder: str) -> None:
        """`holder`'s subscriptions end (within the source's bound, even when cancelled)."""
        content = self._content
        if content is None or any(stream.holder == holder for stream in self._open):
            return
        with anyio.CancelScope(shield=True):
            await content.forget(holder)

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a GET that asked for an event stream: the stream, open until the client
        leaves or the server stops, or the refusal of one past a budget."""
        identity = scope.get(IDENTITY_KEY)
        if not await self.admit(identity, send):
            return
        assert isinstance(identity, str)
        try:
            claims = scope.get(CLAIMS_KEY)
            held = claims if isinstance(claims, frozenset) else None
            stream = _Stream(identity, held, KINDS, HOLDER_PREFIX + identity)
            self._watch(stream)
            try:
                await self._pump(stream, receive, send)
            finally:
                self._open.discard(stream)
                await self._forget(stream.holder)  # the identity's last GET stream: they end
        finally:
            self.release(identity)

    async def admit(self, identity: object, send: Send) -> bool:
        """Take a stream's place for `identity` (True), or answer its refusal on `send`: past
        a budget, or the server stopping. `release` gives the place back."""
        if not isinstance(identity, str) or self._stopping:
            # no identity: admission let nothing through without one; stopping: come back later
            await send_response(send, (503, response_headers(b""), b""))
            return False
        refusal = self._refusal(identity)
        if refusal is not None:
            await self._refuse(refusal, identity, send)
            return False
        self._held += 1
        self._per_identity[identity] += 1
        return True

    def release(self, identity: str) -> None:
        """Give back a place `admit` took."""
        self._held -= 1
        self._per_identity[identity] -= 1
        if not self._per_identity[identity]:
            del self._per_identity[identity]

    def _watch(self, stream: _Stream) -> None:
        for kind in stream.kinds:
            stream.seen[kind] = self._listing(stream, kind)
        self._open.add(stream)

    def _refusal(self, identity: str) -> tuple[int, Rejection] | None:
        if self._per_identity[identity] >= self.limits.max_streams_per_identity:
            return 429, IDENTITY_STREAMS_FULL
        if self._held >= self.limits.max_streams:
            return 503, STREAMS_FULL
        return None

    def listen_handler(self, identity_of: IdentityOf, claims_of: ClaimsOf) -> ListenHandler:
        """The SDK's handler of 2026-07-28's `subscriptions/listen`, for a request whose place
        `admit` took: acknowledged with the list changes it asked for that are told and the
        resources it asked for (`resourceSubscriptions`, where an upstream offers
        subscriptions), then told each change of the caller's listings and each update of those
        resources, each frame stamped with the request's id, until the client leaves or the
        server stops (then the result ends the stream). A resource it may not subscribe to
        refuses the listen before the acknowledgement, as `resources/subscribe` is refused."""

        async def listen(
            ctx: Context, params: types.SubscriptionsListenRequestParams
        ) -> types.SubscriptionsListenResult:
            identity = identity_of(ctx)
            if identity is None or ctx.request_id is None:
                raise MCPError(types.INVALID_REQUEST, "subscriptions/listen needs an id")
            asked = params.notifications
            told = {
                "tools": asked.tools_list_changed is True,
                "resources": asked.resources_list_changed is True and self.tells_content,
                "prompts": asked.prompts_list_changed is True and self.tells_content,
            }
            meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
            claims = claims_of(ctx)
            holder = mint_call_id("listen")
            raw = ctx.params if ctx.params is not None else {}
            offers = offered(envelope_capabilities(raw))  # 2026-07-28: asked in rounds
            stream = _Stream(identity, claims, tuple(k for k in KINDS if told[k]), holder, offers)
            self._watch(stream)
            related = ctx.request_id
            try:
                subscribed = await self._subscribe_all(
                    identity, holder, asked.resource_subscriptions, claims
                )
                honored = types.SubscriptionFilter(
                    tools_list_changed=True if told["tools"] else None,
                    resources_list_changed=True if told["resources"] else None,
                    prompts_list_changed=True if told["prompts"] else None,
                    resource_subscriptions=subscribed or None,
                )
                ack = types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                )
                await ctx.session.send_notification(ack, related_request_id=related)
                while not self._stopping:
                    await stream.wake.wait()
                    stream.wake.clear()
                    if self._stopping:
                        break
                    events = [_EVENTS[kind] for kind in self._changed_kinds(stream)]
                    events += [ResourceUpdated(uri=uri) for uri in _updates(stream)]
                    for event in events:
                        notification = event_to_notification(event, meta)
                        await ctx.session.send_notification(
                            notification, related_request_id=related
                        )
            finally:
                self._open.discard(stream)
                await self._forget(holder)
            return types.SubscriptionsListenResult(_meta=meta)

        return listen

    async def _subscribe_all(
        self, identity: str, holder: str, uris: list[str] | None, claims: Claims | None
    ) -> list[str]:
        """Subscribe `holder` to each of `uris`, in order: those it is subscribed to (none where
        no upstream offers subscriptions).

        Raises:
            MCPError: one it may not subscribe to, as `resources/subscribe` refuses it (one it
                may not read or nobody serves: forbidden_or_missing; past `MAX_SUBSCRIPTIONS`:
                invalid_request, max_items), nothing held.
        """
        content = self._content
        if not uris or content is None or not content.subscribes():
            return []
        send = functools.partial(self._send_update, holder)
        subscribed = list(dict.fromkeys(uris))  # one URI asked twice is held once
        for uri in subscribed:
            try:
                await content.subscribe(identity, holder, uri, send, claims)
            except ToolFailure as failure:  # the listen is refused, as a subscribe would be
                with anyio.CancelScope(shield=True):
                    await content.forget(holder)
                raise refused(failure) from None
        return subscribed

    async def _refuse(self, refused: tuple[int, Rejection], identity: str, send: Send) -> None:
        status, refusal = refused
        if self._record is not None:
            self._record(refusal_record(refusal.as_error(), identity))
        body = orjson.dumps(refusal_reply(None, refusal))
        retry_ms = refusal.details["retry_after_ms"]
        assert type(retry_ms) is int
        retry_after = str(-(-retry_ms // 1000)).encode("ascii")
        await send_response(send, (status, response_headers(body, retry_after=retry_after), body))

    def _listing(self, stream: _Stream, kind: str) -> object:
        """What `stream`'s caller may see of the listing of `kind` now."""
        if kind == "tools":
            return self._gateway.listing(stream.identity, "mcp", stream.claims, stream.offers)
        content = self._content
        if content is None or kind not in content.offers():
            return None
        if kind == "resources":
            return (
                content.resources(stream.identity, stream.claims),
                content.templates(stream.identity, stream.claims),
            )
        return content.prompts(stream.identity, stream.claims)

    def _changed_kinds(self, stream: _Stream) -> list[str]:
        """What changed of `stream`'s caller's listings since it was last told, in `KINDS`'s
        order (those it is told of alone)."""
        pending, stream.pending = stream.pending, set()
        changed = []
        for kind in stream.kinds:
            if kind not in pending:
                continue
            now = self._listing(stream, kind)
            if now != stream.seen[kind]:
                stream.seen[kind] = now
                changed.append(kind)
        return changed

    async def _pump(self, stream: _Stream, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            while not self._stopping and not gone.done():
                woken = asyncio.ensure_future(stream.wake.wait())
                await asyncio.wait(
                    (woken, gone),
                    timeout=self.limits.keepalive_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                woken.cancel()
                if self._stopping or gone.done():
                    break
                if stream.wake.is_set():
                    stream.wake.clear()
                    events = [changed_event(kind) for kind in self._changed_kinds(stream)]
                    events += [updated_event(n) for n in stream_updates(stream)]
                    for event in events:
                        await send({"type": "http.response.body", "body": event, "more_body": True})
                else:
                    await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
            if not gone.done():  # the server stops: the stream ends, its last chunk written
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            gone.cancel()


def stream_updates(stream: _Stream) -> list[types.ResourceUpdatedNotification]:
    """The resource updates `stream` has not yet written, in the order they came; taken."""
    updated, stream.updated = stream.updated, {}
    return list(updated.values())


def _updates(stream: _Stream) -> list[str]:
    """The URIs of `stream_updates`."""
    return [str(n.params.uri) for n in stream_updates(stream)]


async def _disconnected(receive: Receive) -> None:
    """Return once the client has left (a GET's empty body is read first)."""
    while (await receive())["type"] != "http.disconnect":
        pass
