"""MCP's view of the gateway: tools/list and tools/call on the official SDK's low-level server.

- tools/list gives each tool's name, description, inputSchema and outputSchema, and its title,
  annotations, icons and `_meta` where it has them, as `strictcall.core.listing` lists them for
  MCP (a result that is not declared an object is listed wrapped, as the schema of
  {"result": value}).
- tools/call hands the raw params (never the SDK's coerced model) to the gateway. Success:
  structuredContent holds the validated value (wrapped as {"result": value} for those tools)
  and one text block holds the value as JSON, so [], "" and null are never an empty content
  list. Failure: isError, and one text block holding the structured error {code, stage,
  retryable, ...} as JSON; no structuredContent, which would have to match the tool's
  outputSchema (the TypeScript client checks it even on errors, and throws).

On 2026-07-28 a request an upstream makes of the caller during a call (sampling, elicitation,
roots) is answered as an input_required round, where the served tools may ask and the caller's
envelope offers the kind (`strictcall.transports.mcp.rounds`).

A call id names one call to the gateway (writes are idempotent per identity and call id). An
MCP request id is only unique within one connection, and hosts restart their ids at every
launch, so the call id is the request id qualified by its connection (`call_scope`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final

import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.methods import SPEC_CLIENT_METHODS, serialize_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from strictcall.core.content import Content, blocks_known, content_size
from strictcall.core.gateway import AWAIT, Gateway, Outcome
from strictcall.core.jsontext import dump_text
from strictcall.core.listing import RESULT_MEMBER, result_is_wrapped
from strictcall.core.pipeline import CONTENT, fail
from strictcall.core.policy.model import Claims
from strictcall.core.record import AuditRecord, record_of, refusal_record
from strictcall.core.refusals import NO_TOKEN, UNKNOWN_STATE, WITHHELD, withheld_for_size
from strictcall.errors import JSONValue
from strictcall.transports.jsonrpc import MAX_REPLY_BYTES
from strictcall.transports.mcp.cancel import (
    REQUEST_CANCELLED,
    CallCancelled,
    Cancellable,
    cancelled_message,
)
from strictcall.transports.mcp.content import (
    CONTENT_METHODS,
    SUBSCRIBE_METHODS,
    ContentHandlers,
    ContentServer,
    SubscriberOf,
)
from strictcall.transports.mcp.peer import (
    ASKS,
    Ask,
    CallPeer,
    Notify,
    log_level_of,
    progress_token_of,
    serving_peer,
)
from strictcall.transports.mcp.rounds import KEY, HeldCall, HeldRounds
from strictcall.transports.serving import DEFAULT_SERVING, Serving

SERVER_NAME: Final = "strictcall"

MCP_PARAMS: Final = frozenset({"_meta", "task", "inputResponses", "requestState"})
"""Members of tools/call params that belong to MCP itself, not to the call; any other member
besides name and arguments reaches the gateway, which refuses it."""

HANDSHAKE_ERA: Final = "2025-11-25"
"""The wire version of answers to requests without the 2026-07-28 envelope (every version
reached by the initialize handshake shares its result shapes)."""

Context = ServerRequestContext[Any, Any]
IdentityOf = Callable[[Context], str | None]
ClaimsOf = Callable[[Context], Claims | None]


# --- tools/list --------------------------------------------------------------------------------


def describe_tools(
    gateway: Gateway,
    identity: str | None = None,
    claims: Claims | None = None,
    offers: frozenset[str] | None = None,
) -> list[types.Tool]:
    """The gateway's tools as MCP lists them (`Gateway.listing(identity, "mcp", claims,
    offers)`, kept by the gateway; non-object output schemas wrapped there), as SDK models;
    with `identity` (and its token's `claims`), only those that caller may call; with `offers`
    (`listing_offers`), only those whose upstream lists them to a client offering that."""
    return [
        _plain_tool(listed) if _PLAIN.issuperset(listed) else types.Tool.model_validate(listed)
        for listed in gateway.listing(identity, "mcp", claims, offers)
    ]


def listing_offers(
    gateway: Gateway,
    params: Mapping[str, JSONValue],
    handshake: types.ClientCapabilities | None,
    asked: bool = True,
) -> frozenset[str] | None:
    """What a caller's tools/list (its `params`) offers to answer of `peer.ASKS`: its 2026-07-28
    envelope's, where the wire asks such a caller (`asked`: in input_required rounds), else
    those its session's `handshake` declared (None on stateless /mcp: it cannot be asked).
    None while no tool of the gateway's `asks` anything (then nothing need be read)."""
    if not gateway.asking:
        return None
    if protocol_version(params) != HANDSHAKE_ERA:
        return offered(envelope_capabilities(params)) if asked else frozenset()
    return offered(handshake)


_PLAIN: Final = frozenset({"name", "description", "inputSchema", "outputSchema"})
"""The members of a listed tool without a display (title, annotations, icons, `_meta`)."""


def _plain_tool(listed: dict[str, JSONValue]) -> types.Tool:
    """A listed tool without a display as the SDK's model (built without validating again)."""
    return types.Tool(
        name=listed["name"],
        description=listed["description"],
        input_schema=listed["inputSchema"],
        output_schema=listed.get("outputSchema"),
    )


# --- tools/call --------------------------------------------------------------------------------


def tool_result(answer: dict[str, JSONValue], *, wrapped: bool | None) -> types.CallToolResult:
    """A gateway answer as an MCP tool result: a value in structuredContent and, as JSON, in
    exactly one text block; a structured error as JSON in exactly one text block, with
    isError."""
    return answered(answer, wrapped=wrapped)[0]


def answered(
    answer: dict[str, JSONValue], *, wrapped: bool | None, version: str = HANDSHAKE_ERA
) -> tuple[types.CallToolResult, dict[str, JSONValue] | None]:
    """A gateway answer as an MCP tool result for wire `version`, and the structured error it
    carries (None for a success). `wrapped`: a value is written {"result": value} in
    structuredContent (True), as it is (False), or not there at all (None: a tool that
    declares no output schema)."""
    written, error = answered_json(answer, wrapped=wrapped, version=version)
    return types.CallToolResult.model_validate(written, by_name=False), error


def error_result(error: dict[str, JSONValue]) -> types.CallToolResult:
    """A structured error as an isError tool result: the error as JSON in the one text block,
    and no structuredContent (it would have to match the tool's outputSchema; clients that
    check it, such as the TypeScript SDK's, throw instead of showing the error)."""
    text = json_text(error)  # the catalogue's errors always write; None never reaches here
    return types.CallToolResult(
        content=[types.TextContent(text="" if text is None else text)], is_error=True
    )


def answered_json(
    answer: dict[str, JSONValue],
    *,
    wrapped: bool | None,
    version: str = HANDSHAKE_ERA,
    sized: bool = True,
) -> tuple[dict[str, JSONValue], dict[str, JSONValue] | None]:
    """`answered`, the tool result as the JSON the handshake era writes (members and block
    members in the order the SDK writes them), and the structured error it carries. With
    `sized` false, a content result's length as JSON is left to its writer (`McpTools._line`
    measures the line it writes, which holds that JSON whole).

    A `Content` result is written as its blocks, in order, as they passed stage output (an
    error result's with isError); one holding a block type `version` does not know is
    withheld (invalid_tool_result), never written half-read."""
    if answer["ok"] is True:
        value = answer["result"]
        if type(value) is Content:
            error = _content_refusal(value, version, sized)
            if error is None:
                return value.as_json(), None
        else:
            written = _result_text(value)
            if type(written) is str:
                block: dict[str, JSONValue] = {"text": written, "type": "text"}
                if wrapped is None:
                    return {"content": [block], "isError": False}, None
                structured = {RESULT_MEMBER: value} if wrapped else value
                return {"content": [block], "isError": False, "structuredContent": structured}, None
            error = written if type(written) is dict else WITHHELD.as_error()
    else:
        error = answer["error"]
        content = answer.get(CONTENT)
        if type(content) is Content:
            refused = _content_refusal(content, version, sized)
            if refused is None:
                return content.as_json(), error
            error = refused
    text = json_text(error)
    block = {"text": "" if text is None else text, "type": "text"}
    return {"content": [block], "isError": True}, error


def _content_refusal(
    content: Content, version: str, sized: bool = True
) -> dict[str, JSONValue] | None:
    """Why a content result cannot be written on wire `version` (a block type it does not
    know: invalid_tool_result; unwritable or longer than `MAX_REPLY_BYTES` as JSON, unless not
    `sized`: invalid_tool_result, result_too_large), or None."""
    if not blocks_known(content.blocks, version):
        return WITHHELD.as_error()
    if not sized:
        return None
    size = content_size(content)
    if size is None:
        return WITHHELD.as_error()
    if size > MAX_REPLY_BYTES:
        return withheld_for_size(MAX_REPLY_BYTES, batch=False).as_error()
    return None


def _result_line(result: dict[str, JSONValue], request_id: types.RequestId, version: str) -> bytes:
    """A tools/call result as the line of JSON-RPC that carries it on wire `version` (on
    2026-07-28: `resultType` and the server's name in `_meta`, beside the result's own)."""
    if version in MODERN_PROTOCOL_VERSIONS:
        result["resultType"] = "complete"
        own = result.get("_meta")  # a proxied tool's upstream's: kept beside the server's name
        kept = own if isinstance(own, dict) else {}
        result["_meta"] = {**kept, types.SERVER_INFO_META_KEY: _server_info()}
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
    return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)  # `dump_line`, inline


def dump_line(message: dict[str, JSONValue]) -> bytes:
    """A JSON-RPC message as one line of UTF-8 JSON (its values all JSON: validated ones)."""
    return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)


def protocol_version(params: Mapping[str, JSONValue]) -> str:
    """The wire version a request's answer is written for: the one its 2026-07-28 envelope
    names (params._meta), otherwise the handshake era's."""
    meta = params.get("_meta")
    if isinstance(meta, dict):
        version = meta.get(types.PROTOCOL_VERSION_META_KEY)
        if isinstance(version, str) and version in MODERN_PROTOCOL_VERSIONS:
            return version
    return HANDSHAKE_ERA


def result_message(
    request_id: types.RequestId, result: types.CallToolResult, version: str = HANDSHAKE_ERA
) -> types.JSONRPCResponse:
    """A tool result as the JSON-RPC response that carries it, written for wire `version` (on
    2026-07-28: `resultType` "complete" and the server's name in `_meta`, as the SDK writes its
    own results)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if version in MODERN_PROTOCOL_VERSIONS:
        dumped["resultType"] = "complete"
        server_info = {"name": SERVER_NAME, "version": _version()}
        # beside the result's own _meta (a proxied tool's upstream's), never in its place
        dumped["_meta"] = {**dumped.get("_meta", {}), types.SERVER_INFO_META_KEY: server_info}
    dumped = serialize_server_result("tools/call", version, dumped)
    return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=dumped)


def listing_message(
    request_id: types.RequestId, listing: list[dict[str, JSONValue]], version: str = HANDSHAKE_ERA
) -> dict[str, JSONValue]:
    """A tools/list answer as the JSON-RPC response the SDK writes for wire `version` (on
    2026-07-28 with the freshness hints it fills in, private and ttl 0, `resultType` and the
    server's name in `_meta`). `listing` is the gateway's (`Gateway.listing(identity, "mcp")`),
    which is what the SDK's models of it dump to: 12 µs to build them and 68 µs to dump them
    again, for five tools, are saved on every tools/list."""
    dumped: dict[str, Any] = {"tools": listing}  # not changed: serialize_server_result copies
    if version in MODERN_PROTOCOL_VERSIONS:
        dumped |= {"cacheScope": "private", "resultType": "complete", "ttlMs": 0}
        server_info = {"name": SERVER_NAME, "version": _version()}
        dumped["_meta"] = {types.SERVER_INFO_META_KEY: server_info}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": serialize_server_result("tools/list", version, dumped),
    }


def _result_text(value: JSONValue) -> str | dict[str, JSONValue] | None:
    """A result as JSON text; or, when it is longer than `MAX_REPLY_BYTES`, the error it is
    withheld with (result_too_large, the limit named); None when it cannot be written."""
    text = dump_text(value)
    if text is None:
        return None
    if len(text) > MAX_REPLY_BYTES:
        return withheld_for_size(MAX_REPLY_BYTES, batch=False).as_error()
    return text.decode("utf-8")


def json_text(value: JSONValue) -> str | None:
    """`value` as compact JSON text, or None when it cannot be written as UTF-8 JSON."""
    text = dump_text(value)
    return None if text is None else text.decode("utf-8")


MAX_LEVELS: Final = 10_000
"""Identities whose logging/setLevel is remembered at once (the oldest forgotten first)."""


class McpTools:
    """The gateway's tools behind the SDK's low-level `Server`: tools/list and tools/call, and
    with `serving.content` (a proxy's or a federation's upstreams) resources and prompts
    (`strictcall.transports.mcp.content`).

    The wire's own hooks: `identity_of` says who is calling (None refuses the call as
    unauthenticated), `claims_of` what its token says of it (the scopes that decide with the
    identity what it may list and call; None, or no `claims_of`: strictcall's own token);
    `call_scope` gives the connection part of call ids.
    """

    def __init__(
        self,
        gateway: Gateway,
        identity_of: IdentityOf,
        call_scope: Callable[[], str],
        serving: Serving = DEFAULT_SERVING,
        *,
        claims_of: ClaimsOf | None = None,
        subscriber_of: SubscriberOf | None = None,
    ) -> None:
        """`serving`: the server's options (`strictcall.transports.serving`: the record, the
        content beside the tools, the context entered around each tools/call);
        `subscriber_of`: who holds a request's subscriptions to the content's resources (a
        stdio session, or on /mcp the caller's identity; None: resources/subscribe is not
        served)."""
        self.gateway: Final = gateway
        self.serving: Final = serving
        record = serving.record
        content = serving.content
        self._content = (
            None
            if content is None
            else ContentHandlers(
                content,
                identity_of,
                record,
                self._call_id_of,
                claims_of,
                subscriber_of,
            )
        )
        self._identity_of = identity_of
        self._claims_of: Final[ClaimsOf] = claims_of if claims_of is not None else _no_claims
        self._call_scope = call_scope
        self._record = record
        self._call_context = serving.call_context
        self._rounds: Final = HeldRounds(serving.rounds) if serving.tools_change else None
        """The 2026-07-28 rounds held for their callers (where tools may ask), else None."""
        self.asks_in_rounds: Final = self._rounds is not None
        """Whether a 2026-07-28 caller is asked what a tool's upstream asks (`listing_offers`)."""
        self.levels: Final[dict[str, str]] = {}
        self.cancellable: Cancellable | None = None
        """The calls a host may cancel (/mcp's; None: the wire's session cancels its own)."""
        """The log level each identity asked for with logging/setLevel (at most
        `MAX_LEVELS` identities, the oldest forgotten first)."""
        # follows the gateway's tools, which may change while serving (a proxy's upstream
        # lists new ones): rebuilt when its generation moves
        self._generation = -1
        self._wrapping: dict[str, bool | None] = {}
        """Each tool's `wrapped` (`answered`): None for one that declares no output schema."""
        self.declares_headers: frozenset[str] = frozenset()
        """The tools whose input schema declares `x-mcp-header` (2026-07-28's `Mcp-Param-*`
        headers: their calls are the SDK's to check)."""
        self._follow()
        answering = self.server()
        self._methods: Final = frozenset(
            method
            for method in SPEC_CLIENT_METHODS
            if answering.get_request_handler(method) is not None
        ) | {"initialize"}

    def _follow(self) -> None:
        """Forget what was derived from the gateway's tools if they changed since."""
        generation = self.gateway.generation
        if generation != self._generation:
            self._generation = generation
            self._wrapping = {
                tool.name: None
                if tool.output_schema is None
                else result_is_wrapped(tool.output_schema)
                for tool in self.gateway.tools
            }
            self.declares_headers = frozenset(
                tool.name
                for tool in self.gateway.tools
                if b"x-mcp-header" in orjson.dumps(tool.input_schema)
            )

    def serves(self, method: str) -> bool:
        """Whether the server answers requests for `method` (any other gets -32601 from
        strictcall, which echoes nothing of it): resources and prompts only while the content
        source offers them."""
        if method == "completion/complete":  # a prompt's or a template's arguments
            return self._content is not None and bool(self._content.content.offers())
        if method in SUBSCRIBE_METHODS:  # a session of its own, an upstream that offers it
            handlers = self._content
            return (
                handlers is not None
                and handlers.subscriber_of is not None
                and handlers.content.subscribes()
            )
        kind = CONTENT_METHODS.get(method)
        if kind is not None:
            return self._content is not None and kind in self._content.content.offers()
        return method in self._methods

    def server(self) -> Server[Any]:
        """A new low-level SDK server answering with these tools, without the SDK's own span
        per message: it is named by the model's tool name and carries its request id, and
        strictcall's span per call replaces it (`strictcall.ops.tracing`)."""
        content = self._content
        server = ContentServer(
            SERVER_NAME,
            version=_version(),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=None if content is None else content.list_resources,
            on_list_resource_templates=None if content is None else content.list_resource_templates,
            on_read_resource=None if content is None else content.read_resource,
            on_list_prompts=None if content is None else content.list_prompts,
            on_get_prompt=None if content is None else content.get_prompt,
            on_completion=None if content is None else content.complete,
        )
        if content is not None:
            server.offers = content.content.offers
            server.subscribes = content.content.subscribes
            if content.subscriber_of is not None:
                server.add_request_handler(
                    "resources/subscribe", types.SubscribeRequestParams, content.subscribe
                )
                server.add_request_handler(
                    "resources/unsubscribe", types.UnsubscribeRequestParams, content.unsubscribe
                )
        # added, not passed: passing it warns that 2026-07-28 deprecates logging (it still
        # carries it, and handshake-era hosts set their level with it)
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self.set_level)
        server.middleware[:] = [
            m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"
        ]
        return server

    async def list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """tools/list: every tool the caller may call, on one page (those whose upstream lists
        them only to a client offering sampling, elicitation or roots, to a caller whose client
        offers them)."""
        raw = ctx.params if ctx.params is not None else {}
        offers = listing_offers(
            self.gateway, raw, ctx.session.client_capabilities, self.asks_in_rounds
        )
        return types.ListToolsResult(
            tools=self.listing(self._identity_of(ctx), self._claims_of(ctx), offers)
        )

    def listing(
        self,
        identity: str | None,
        claims: Claims | None = None,
        offers: frozenset[str] | None = None,
    ) -> list[types.Tool]:
        """Every tool `identity` (with its token's `claims`, its client's `offers`) may call
        (none for a transport that forgot the caller): the gateway's listing
        (`Gateway.listing`, kept there), as SDK models."""
        if identity is None:
            return []
        self._follow()
        return describe_tools(self.gateway, identity, claims, offers)

    async def set_level(
        self, ctx: Context, params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """logging/setLevel: the least severe level of the messages the caller's calls get
        (kept per identity: a stateless /mcp request's session ends with it)."""
        identity = self._identity_of(ctx)
        if identity is not None:
            self.levels.pop(identity, None)
            if len(self.levels) >= MAX_LEVELS:
                del self.levels[next(iter(self.levels))]
            self.levels[identity] = params.level
        return types.EmptyResult()

    def peer_of(
        self,
        params: Mapping[str, JSONValue],
        identity: str | None,
        caller: str,
        notify: Notify,
        offers: frozenset[str] = frozenset(),
        ask: Ask | None = None,
    ) -> CallPeer | None:
        """The way back for a call whose caller asked for progress (its token) or messages
        (its level: the request's own on 2026-07-28, else its identity's), or can be asked
        (`offers`, by `ask`); None for one that can have none of them."""
        meta = params.get("_meta")
        token = progress_token_of(meta)
        level = log_level_of(meta)
        if level is None and identity is not None:
            level = self.levels.get(identity)
        if token is None and level is None and not (offers and ask is not None):
            return None
        return CallPeer(caller, token, level, notify, offers, ask)

    async def call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """tools/call as the SDK hands it over: the raw params go to the gateway; the SDK's
        parsed `params` are unused (pydantic would have coerced what the gateway must see as
        sent). The upstream's notifications during the call ride the request's own stream."""
        raw = dict(ctx.params) if ctx.params is not None else {}
        identity = self._identity_of(ctx)
        session, request_id = ctx.session, ctx.request_id

        async def notify(notification: types.ServerNotification) -> None:
            await session.send_notification(notification, related_request_id=request_id)

        async def ask(request: types.ServerRequest, result_type: Any) -> Any:
            related = ServerMessageMetadata(related_request_id=request_id)
            return await session.send_request(request, result_type, metadata=related)

        claims = self._claims_of(ctx)
        if protocol_version(raw) != HANDSHAKE_ERA:
            # 2026-07-28 carries no request of the server's: its input_required rounds do
            offers = offered(envelope_capabilities(raw))
            rounds = self._rounds
            if rounds is not None and identity is not None and (offers or "requestState" in raw):
                try:
                    back = (notify, offers)
                    return await self._round(rounds, raw, request_id, identity, claims, back)
                except CallCancelled:
                    raise MCPError(REQUEST_CANCELLED, "Request cancelled") from None
            peer = self.peer_of(raw, identity, self._call_scope(), notify, offers)
        else:
            offers = offered(session.client_capabilities)
            peer = self.peer_of(raw, identity, self._call_scope(), notify, offers, ask)
        with serving_peer(peer):
            try:
                return await self.answer_call(raw, request_id, identity, claims)
            except CallCancelled:
                raise MCPError(REQUEST_CANCELLED, "Request cancelled") from None

    async def _round(
        self,
        rounds: HeldRounds,
        raw: dict[str, JSONValue],
        request_id: types.RequestId | None,
        identity: str,
        claims: Claims | None,
        back: tuple[Notify, frozenset[str]],
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A 2026-07-28 tools/call where its upstream may ask (`strictcall.transports.mcp.rounds`):
        a follow-up (requestState) resumes the call its round holds, with the caller's answer;
        a first call starts one, its way `back` the call's notify and the caller's offers.
        Either is answered the call's next round, or its result."""
        if "requestState" in raw:
            held = rounds.take(raw["requestState"], identity)
            if held is None:
                return self._unknown_round(raw, request_id, identity)
            responses = raw.get("inputResponses")
            held.answer.set_result(responses.get(KEY) if isinstance(responses, dict) else None)
            return await held.call.next()
        call = HeldCall(identity, rounds)
        notify, offers = back
        peer = self.peer_of(raw, identity, self._call_scope(), notify, offers, call.ask)
        with serving_peer(peer):  # the call's task runs in a copy of this context
            call.start(self.answer_call(raw, request_id, identity, claims))
        return await call.next()

    def _unknown_round(
        self, raw: dict[str, JSONValue], request_id: types.RequestId | None, identity: str
    ) -> types.CallToolResult:
        """The answer (audited) to a requestState of no round held for `identity`."""
        error = UNKNOWN_STATE.as_error()
        if self._record is not None:
            name = raw.get("name")
            self._record(
                self.refusal_record(
                    request_id, name if isinstance(name, str) else None, error, identity
                )
            )
        return error_result(error)

    async def answer_call(
        self,
        params: dict[str, JSONValue],
        request_id: types.RequestId | None,
        identity: str | None,
        claims: Claims | None = None,
    ) -> types.CallToolResult:
        """A tools/call's params through the gateway, answered as a tool result and audited.

        Every tools/call comes here (or to `answer_call_line`): those the SDK passes on, and
        those it would refuse with a bare -32602 (no tool name, arguments that are not an
        object), so that the gateway's ladder decides them all alike (route before shape, the
        same details).
        """
        if self._call_context is not None:
            with self._call_context():
                return await self._answer_call(params, request_id, identity, claims)
        return await self._answer_call(params, request_id, identity, claims)

    async def _answer_call(
        self,
        params: dict[str, JSONValue],
        request_id: types.RequestId | None,
        identity: str | None,
        claims: Claims | None,
    ) -> types.CallToolResult:
        outcome = await self._settle(params, request_id, identity, claims)
        version = protocol_version(params)
        result, error = answered(
            outcome.answer, wrapped=_wrapping(self._wrapping, outcome.tool), version=version
        )
        self._audit(outcome, error, identity)
        return result

    async def answer_call_line(
        self,
        params: dict[str, JSONValue],
        request_id: types.RequestId,
        identity: str | None,
        version: str = HANDSHAKE_ERA,
        claims: Claims | None = None,
    ) -> bytes:
        """`answer_call`, its answer written at once as the line of JSON-RPC that carries it
        for wire `version` (the JSON `result_message` and the SDK's transports write, without
        building and dumping their models)."""
        if self._call_context is not None:
            with self._call_context():
                outcome = await self._settle(params, request_id, identity, claims)
                return self._line(outcome, request_id, identity, version)
        outcome = await self._settle(params, request_id, identity, claims)
        return self._line(outcome, request_id, identity, version)

    def answer_call_line_now(
        self,
        params: dict[str, JSONValue],
        request_id: types.RequestId,
        identity: str | None,
        version: str = HANDSHAKE_ERA,
        claims: Claims | None = None,
    ) -> bytes | Coroutine[Any, Any, bytes]:
        """`answer_call_line` answered in place, inside the event loop; for a call that names
        a tool that must be awaited, the coroutine that answers it (nothing of it run or
        audited until it is awaited; the call read and its call id made once)."""
        call, call_id = self._call_of(params, request_id)
        if identity is None:  # a transport that forgot the caller: refuse, never guess
            outcome = self._refused_unknown(call, call_id)
        else:
            settled = self.gateway.settle(call, identity, call_id, in_place=True, claims=claims)
            if settled is AWAIT:
                return self._line_later(call, call_id, request_id, identity, version, claims)
            assert isinstance(settled, Outcome)
            outcome = settled
        return self._line(outcome, request_id, identity, version)

    async def _line_later(
        self,
        call: dict[str, JSONValue],
        call_id: str,
        request_id: types.RequestId,
        identity: str,
        version: str,
        claims: Claims | None,
    ) -> bytes:
        settling = self.gateway.settle_async(call, identity, call_id, claims=claims)
        if self.cancellable is None:
            return self._line(await settling, request_id, identity, version)
        try:
            outcome = await self.cancellable.run(identity, request_id, version, settling)
        except CallCancelled:
            return dump_line(cancelled_message(request_id))
        return self._line(outcome, request_id, identity, version)

    def _line(
        self, outcome: Outcome, request_id: types.RequestId, identity: str | None, version: str
    ) -> bytes:
        """An outcome audited and written as the line of JSON-RPC that carries it.

        A content result is written before its length is known: the line holds its JSON whole,
        so a line no longer than `MAX_REPLY_BYTES` holds a result that is not either. Only a
        longer line, or one that cannot be written, has the result measured on its own (and
        refused as `answered_json` refuses it): one dump of the result, not two."""
        tool = outcome.tool  # `_wrapping`, written out: every call's path
        wrapped = None if tool is None else self._wrapping.get(tool)
        result, error = answered_json(outcome.answer, wrapped=wrapped, version=version, sized=False)
        try:
            line = _result_line(result, request_id, version)
        except orjson.JSONEncodeError:
            line = None
        if line is None or len(line) > MAX_REPLY_BYTES:
            result, error = answered_json(outcome.answer, wrapped=wrapped, version=version)
            self._audit(outcome, error, identity)
            return _result_line(result, request_id, version)
        self._audit(outcome, error, identity)
        return line

    def _call_of(
        self, params: dict[str, JSONValue], request_id: types.RequestId | None
    ) -> tuple[dict[str, JSONValue], str]:
        """A tools/call's params as the gateway reads a call, and its call id."""
        if self.gateway.generation != self._generation:  # `_follow`'s test, without its call
            self._follow()
        if MCP_PARAMS.isdisjoint(params):  # the usual call: nothing of MCP's own to take out
            return params, self.call_id(request_id)
        call = {key: value for key, value in params.items() if key not in MCP_PARAMS}
        return call, self.call_id(request_id)

    def _refused_unknown(self, call: dict[str, JSONValue], call_id: str) -> Outcome:
        """The outcome of a call from a caller the transport did not name."""
        answer = fail(call_id, NO_TOKEN)
        stage = answer["error"]["stage"]
        return Outcome(answer, self.gateway.tool_named(call), None, stage, 0)

    async def _settle(
        self,
        params: dict[str, JSONValue],
        request_id: types.RequestId | None,
        identity: str | None,
        claims: Claims | None = None,
    ) -> Outcome:
        """The gateway's outcome of a call, its call id the request's in this connection."""
        call, call_id = self._call_of(params, request_id)
        if identity is None:  # a transport that forgot the caller: refuse, never guess
            return self._refused_unknown(call, call_id)
        settling = self.gateway.settle_async(call, identity, call_id, claims=claims)
        if self.cancellable is None:
            return await settling
        version = protocol_version(params)
        return await self.cancellable.run(identity, request_id, version, settling)

    def _call_id_of(self, ctx: Context) -> str:
        """The call id of the request `ctx` answers (a resources/read's, a prompts/get's)."""
        return self.call_id(ctx.request_id)

    def call_id(self, request_id: types.RequestId | None) -> str:
        """The call id of a request in this connection (`call_scope`): MCP's request ids are
        unique only within one."""
        # an int's JSON text is its str (a bool is no request id), written without orjson
        written = str(request_id) if type(request_id) is int else json_text(request_id)
        return f"mcp-{self._call_scope()}:{written}"

    def _audit(
        self, outcome: Outcome, error: dict[str, JSONValue] | None, identity: str | None
    ) -> None:
        """Record a call: as the gateway settled it, or withheld when its value cannot be
        written (`error`, from `answered`, where the outcome was a success)."""
        if self._record is not None:
            if error is not None and outcome.answer["ok"] is True:
                call_id = outcome.answer["call_id"]
                entry = refusal_record(error, identity, call_id, outcome.tool, outcome.latency_us)
            else:
                entry = record_of(outcome, identity)
            self._record(entry)

    def refusal_record(
        self,
        request_id: types.RequestId | None,
        name: str | None,
        error: dict[str, JSONValue],
        identity: str | None,
    ) -> AuditRecord:
        """The audit record of a message refused before the SDK saw it, with its call id and
        tool when they could be read (a tool only when it is one of the gateway's)."""
        call_id = None if request_id is None else self.call_id(request_id)
        tool = self.gateway.tool_named({"name": name})
        return refusal_record(error, identity, call_id, tool)


def envelope_capabilities(params: Mapping[str, JSONValue]) -> types.ClientCapabilities | None:
    """The client capabilities a 2026-07-28 request's envelope declares (None: none readable)."""
    meta = params.get("_meta")
    declared = meta.get(types.CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    if not isinstance(declared, dict):
        return None
    try:
        return types.ClientCapabilities.model_validate(declared, by_name=False)
    except ValidationError:
        return None


def offered(capabilities: types.ClientCapabilities | None) -> frozenset[str]:
    """Which of the requests a server may make during a call a client's capabilities offer."""
    if capabilities is None:
        return frozenset()
    return frozenset(kind for kind in ASKS if getattr(capabilities, kind, None) is not None)


def _wrapping(wrapping: dict[str, bool | None], tool: str | None) -> bool | None:
    """How `tool`'s values are written in structuredContent (`answered`'s `wrapped`)."""
    return None if tool is None else wrapping.get(tool)


def _no_claims(ctx: Context) -> None:
    """No caller's claims: a transport whose callers are strictcall's own (stdio's identity)."""
    return None


@functools.cache
def _server_info() -> dict[str, JSONValue]:
    """The server's name and version, as a 2026-07-28 result's `_meta` names them."""
    return {"name": SERVER_NAME, "version": _version()}


@functools.cache
def _version() -> str:
    """strictcall's version, read once from its metadata (a read parses the whole file)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("strictcall")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return ""
