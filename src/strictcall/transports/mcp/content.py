"""MCP's resources and prompts, served from a source other than the gateway's tools (a
federation's upstreams): resources/list, resources/templates/list, resources/read,
prompts/list and prompts/get on the official SDK's low-level server.

The source decides who sees and reads what; a refusal is its `ToolFailure`, answered as a
JSON-RPC error whose code is the stage's (`strictcall.transports.jsonrpc.ERROR_CODES`: -32002
for forbidden_or_missing) and whose data is the structured error {code, stage, retryable, ...}.
The capabilities advertise resources and prompts only while the source offers them, and a
request for them otherwise is -32601 (`McpTools.serves`).

resources/subscribe and resources/unsubscribe are served where a caller can be sent
notifications of its own (a `Subscriber`: a stdio session's, or on /mcp the caller's identity,
told on its change streams), and advertised (`resources.subscribe`) only while the source offers
subscriptions: the source sends each `notifications/resources/updated` to the subscribers of its
URI, and forgets a subscriber's subscriptions when it ends.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, NamedTuple, Protocol, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from strictcall.core.policy.model import Claims
from strictcall.core.record import PROMPT_GET, RESOURCE_READ, content_record
from strictcall.core.refusals import NO_TOKEN
from strictcall.core.tools import ToolFailure
from strictcall.errors import JSONValue, Stage
from strictcall.transports.jsonrpc import ERROR_CODES, Recorder

Kind = Literal["resources", "prompts"]
Context = ServerRequestContext[Any, Any]
IdentityOf = Callable[[Context], str | None]
SubscriberOf = Callable[[Context], "Subscriber | None"]
"""Who holds the subscriptions a request makes (None: nobody may)."""
ResultT = TypeVar("ResultT")

CONTENT_METHODS: Final[dict[str, Kind]] = {
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "prompts/list": "prompts",
    "prompts/get": "prompts",
}
"""The methods served from a content source, and what the source must offer for each."""

SUBSCRIBE_METHODS: Final = frozenset({"resources/subscribe", "resources/unsubscribe"})
"""The methods served to a `Subscriber`'s session while the source offers subscriptions."""

Send = Callable[[types.ServerNotification], Awaitable[None]]
"""Sends one notification to a subscribed session."""


class Subscriber(NamedTuple):
    """A session that may hold subscriptions: its key among the source's callers, and how a
    notification reaches it."""

    caller: str
    send: Send


class McpContent(Protocol):
    """Resources and prompts as a caller (`identity`) may see and read them."""

    def offers(self) -> frozenset[Kind]:
        """What is served now: "resources", "prompts", both or neither."""
        ...

    def watch(self, watcher: Callable[[Kind], None]) -> Callable[[], None]:
        """Have `watcher` told each time what is listed of a kind changes (resources and their
        templates, or prompts); returns the function that stops it."""
        ...

    def resources(self, identity: str, claims: Claims | None = None) -> list[types.Resource]:
        """The resources `identity` (with its token's `claims`) may read, in a stable order."""
        ...

    def templates(
        self, identity: str, claims: Claims | None = None
    ) -> list[types.ResourceTemplate]:
        """The resource templates `identity` may read through, in a stable order."""
        ...

    def prompts(self, identity: str, claims: Claims | None = None) -> list[types.Prompt]:
        """The prompts `identity` may get, in a stable order."""
        ...

    def routes(self, kind: Kind, key: str) -> bool:
        """Whether `key` (a URI for "resources", a prompt's name for "prompts") names one that
        is served, whoever may read it (what its audit record may keep)."""
        ...

    async def read_resource(
        self, identity: str, uri: str, claims: Claims | None = None
    ) -> types.ReadResourceResult:
        """The resource at `uri`.

        Raises:
            ToolFailure: the caller may not read it, or it failed (the catalogue's kind).
        """
        ...

    async def get_prompt(
        self,
        identity: str,
        name: str,
        arguments: dict[str, str] | None,
        claims: Claims | None = None,
    ) -> types.GetPromptResult:
        """The prompt `name` with `arguments`.

        Raises:
            ToolFailure: the caller may not get it, or it failed (the catalogue's kind).
        """
        ...

    async def complete(
        self, identity: str, params: types.CompleteRequestParams, claims: Claims | None = None
    ) -> types.CompleteResult:
        """The completions of a served prompt's or template's argument.

        Raises:
            ToolFailure: the caller may not use it, or it failed (the catalogue's kind).
        """
        ...

    def subscribes(self) -> bool:
        """Whether resources/subscribe is served now (an upstream offers it)."""
        ...

    async def subscribe(
        self, identity: str, caller: str, uri: str, send: Send, claims: Claims | None = None
    ) -> None:
        """Send the session `caller` (of `identity`) the updates of the resource at `uri`.

        Raises:
            ToolFailure: the caller may not read it, holds too many, or it failed.
        """
        ...

    async def unsubscribe(self, caller: str, uri: str) -> None:
        """The session `caller` no longer wants the updates of `uri`."""
        ...

    async def forget(self, caller: str) -> None:
        """The session `caller` ended: its subscriptions go."""
        ...


def refused(failure: ToolFailure) -> MCPError:
    """A source's failure as the JSON-RPC error that answers it: the stage's code and message,
    the structured error as data (nothing of the caller's in it)."""
    return error_of(failure_error(failure))


def failure_error(failure: ToolFailure) -> dict[str, JSONValue]:
    """A source's failure as its structured error {code, stage, retryable, ...}."""
    error: dict[str, JSONValue] = failure.kind.as_error()
    if failure.retry_after_ms is not None:
        error["retry_after_ms"] = failure.retry_after_ms
    if failure.details:
        error.update(failure.details)
    return error


def error_of(error: dict[str, JSONValue]) -> MCPError:
    """A structured error as the JSON-RPC error that carries it (the stage's code)."""
    code, message = ERROR_CODES[Stage(error["stage"])]
    return MCPError(code=code, message=message, data=error)


class ContentHandlers:
    """The SDK server's handlers for a content source's methods, the caller named by
    `identity_of` (None: a transport that forgot the caller, shown nothing) with its token's
    claims `claims_of` (scopes, groups: what the policy and the scopes judge); each read and get
    audited with `record` (`strictcall.core.record.content_record`), its call id `call_id_of`
    the request's."""

    def __init__(
        self,
        content: McpContent,
        identity_of: IdentityOf,
        record: Recorder | None = None,
        call_id_of: Callable[[Context], str] | None = None,
        claims_of: Callable[[Context], Claims | None] | None = None,
        subscriber_of: SubscriberOf | None = None,
    ) -> None:
        self.content: Final = content
        self.subscriber_of: Final = subscriber_of
        """Who holds a request's subscriptions (None: a wire that cannot send its own)."""
        self._identity_of = identity_of
        self._claims_of = claims_of
        self._record = record
        self._call_id_of = call_id_of

    async def list_resources(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        identity = self._identity_of(ctx)
        shown = [] if identity is None else self.content.resources(identity, self._claims(ctx))
        return types.ListResourcesResult(resources=shown)

    async def list_resource_templates(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        identity = self._identity_of(ctx)
        shown = [] if identity is None else self.content.templates(identity, self._claims(ctx))
        return types.ListResourceTemplatesResult(resource_templates=shown)

    async def list_prompts(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        identity = self._identity_of(ctx)
        shown = [] if identity is None else self.content.prompts(identity, self._claims(ctx))
        return types.ListPromptsResult(prompts=shown)

    async def read_resource(
        self, ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = params.uri
        read = functools.partial(self.content.read_resource, uri=uri)
        return await self._answered(ctx, "resources", uri, read)

    async def get_prompt(
        self, ctx: Context, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        name, arguments = params.name, params.arguments
        got = functools.partial(self.content.get_prompt, name=name, arguments=arguments)
        return await self._answered(ctx, "prompts", name, got)

    async def complete(
        self, ctx: Context, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            kind: Kind = "prompts"
            key = ref.name
        else:
            kind, key = "resources", ref.uri
        completed = functools.partial(self.content.complete, params=params)
        return await self._answered(ctx, kind, key, completed)

    async def subscribe(
        self, ctx: Context, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        identity = self._identity_of(ctx)
        subscriber = None if self.subscriber_of is None else self.subscriber_of(ctx)
        if identity is None or subscriber is None:  # refuse, never guess
            raise error_of(NO_TOKEN.as_error())
        try:
            await self.content.subscribe(
                identity, subscriber.caller, params.uri, subscriber.send, self._claims(ctx)
            )
        except ToolFailure as failure:
            raise refused(failure) from None
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: Context, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        subscriber = None if self.subscriber_of is None else self.subscriber_of(ctx)
        if subscriber is not None:
            await self.content.unsubscribe(subscriber.caller, params.uri)
        return types.EmptyResult()

    async def _answered(
        self, ctx: Context, kind: Kind, key: str, answer: Callable[..., Awaitable[ResultT]]
    ) -> ResultT:
        """`answer(identity=...)` for the caller, its failure as the JSON-RPC error that
        answers it, audited either way."""
        started = time.perf_counter_ns()
        identity = self._identity_of(ctx)
        error: dict[str, JSONValue] | None = None
        try:
            if identity is None:  # a transport that forgot the caller: refuse, never guess
                error = NO_TOKEN.as_error()
                raise error_of(error)
            try:
                return await answer(identity=identity, claims=self._claims(ctx))
            except ToolFailure as failure:
                error = failure_error(failure)
                raise error_of(error) from None
        finally:
            self._audit(ctx, kind, key, identity, error, started)

    def _claims(self, ctx: Context) -> Claims | None:
        """What the caller's token says of it (None: strictcall's own token, or stdio's)."""
        return None if self._claims_of is None else self._claims_of(ctx)

    def _audit(
        self,
        ctx: Context,
        kind: Kind,
        key: str,
        identity: str | None,
        error: dict[str, JSONValue] | None,
        started: int,
    ) -> None:
        if self._record is None:
            return
        served = key if self.content.routes(kind, key) else None
        call_id = None if self._call_id_of is None else self._call_id_of(ctx)
        latency_us = (time.perf_counter_ns() - started) // 1000
        prefix = RESOURCE_READ if kind == "resources" else PROMPT_GET
        self._record(content_record(prefix, served, identity, error, latency_us, call_id))


class ContentServer(Server[Any]):
    """The SDK's low-level server, its capabilities advertising resources and prompts only
    while `offers()` says they are served (asked at each initialize and server/discover)."""

    offers: Callable[[], frozenset[Kind]] = staticmethod(frozenset)
    subscribes: Callable[[], bool] = staticmethod(bool)
    """Whether resources/subscribe is served now (its handler alone says nothing)."""
    updates: bool = True
    """Whether a caller can be sent `notifications/resources/updated`: else
    `resources.subscribe` is never advertised, whatever the era."""
    announces: NotificationOptions | None = None
    """The list changes an initialize announces where its runner names none (/mcp's, told on
    its change streams)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> InitializationOptions:
        chosen = notification_options if notification_options is not None else self.announces
        return super().create_initialization_options(chosen, *args, **kwargs)

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        resources = capabilities.resources
        if (
            resources is not None
            and resources.subscribe
            and not (self.updates and self.subscribes())
        ):
            resources = resources.model_copy(update={"subscribe": False})
            capabilities = capabilities.model_copy(update={"resources": resources})
        offered = self.offers()
        hidden: dict[str, None] = {kind: None for kind in ("resources", "prompts")}
        for kind in offered:
            hidden.pop(kind)
        return capabilities.model_copy(update=hidden) if hidden else capabilities
