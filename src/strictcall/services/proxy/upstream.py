"""One upstream MCP server, through the official MCP client: started, watched, restarted.

The session runs in a task of the serving event loop (`running()`, a lifespan). A call that
finds no session, or whose session ends under it (the process exited, the connection closed),
is answered `upstream_unavailable` with a `retry_after_ms`; the supervisor starts the server
again after a backoff that doubles up to `RESTART_MAX_S` and is reset by a good start. The
hint is when the server should answer again: the next start's backoff (the schedule in use)
plus how long its last good start took (spawn, initialize, tools/list: seconds for some), or,
while a start is under way, what is left of that. A call
that times out makes the supervisor ping the server: one that does not answer the ping within
`PING_S` is taken for hung and restarted. `notifications/tools/list_changed` lists the tools
again, and `on_listing` receives every listing, the first one before `running()` yields.

The official `ClientSession` runs every session: initialize, tools/list, list_changed, pings,
the server's own requests. Over stdio it runs on strictcall's pipes
(`strictcall.services.proxy.stdio`),
and a tools/call goes by the pipe's own path rather than the session's `send_request`: the same
request on the wire, its answer read by id off the pipe and validated once as the SDK's
`CallToolResult` (after dropping the members of later revisions, as the session does). What
that path leaves out of the session's: the OpenTelemetry span and trace context in `_meta` (the
proxy runs no tracer), progress (the proxy asks for none). An answer that is not exactly a
result object or an error {code: int, message: str} is withheld (the SDK's envelope would read
one with both as an error). Over streamable HTTP, a tools/call in a handshake-era session is one
POST on the session's client (`strictcall.services.proxy.http`), read the same way; in a
2026-07-28 session it is the session's.
"""

from __future__ import annotations

import io
import logging
import math
import re
import shlex
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Final, TextIO, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import mcp_types as types
import orjson
from anyio import to_thread
from anyio.abc import TaskStatus
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from pydantic import BaseModel

from strictcall.core.terminal import counted
from strictcall.core.tools import ToolContext, ToolFailure
from strictcall.errors import RETRY_AFTER_MS, UPSTREAM_UNAVAILABLE, JSONValue, StrictcallError
from strictcall.services.proxy._mcp_sdk import WatchedStream, http_client
from strictcall.services.proxy.budgets import (
    DEFAULT_BUDGETS,
    NAMES,
    Budgets,
    NotificationRate,
    content_refusal,
    name_refusal,
    tools_refusal,
)
from strictcall.services.proxy.content import UpstreamContent, list_content
from strictcall.services.proxy.credentials import ClientCredentials, ClientCredentialsAuth
from strictcall.services.proxy.http import HttpCaller, HttpCallFailed
from strictcall.services.proxy.results import call_result, later_members
from strictcall.services.proxy.session import Conversation, Conversations
from strictcall.services.proxy.spawn import (
    Launch,
    SandboxUnavailable,
    Spawn,
    launch,
    make_home,
    release,
    temporary_homes,
)
from strictcall.services.proxy.stderr import relayed_stderr
from strictcall.services.proxy.stdio import (
    MAX_RESULT_BYTES,
    TOO_LARGE_CODE,
    AnswerTooLarge,
    PipeClosed,
    UnreadableAnswer,
    UpstreamPipe,
    open_upstream,
)
from strictcall.services.proxy.subscriptions import UNSUBSCRIBE_S
from strictcall.transports.mcp.peer import ASKS, CallPeer

log = logging.getLogger("strictcall")

RESTART_MIN_S: Final = 0.25
RESTART_MAX_S: Final = 8.0
START_TIMEOUT_S: Final = 30.0
"""How long a start (spawn, initialize, first tools/list) may take before it counts as failed."""
REINIT_S: Final = 10.0
"""How long a call whose HTTP upstream forgot its session waits for a new one to be sent on."""
PING_S: Final = 5.0
"""How long a server suspected of hanging has to answer a ping."""
PROBE_S: Final = 10.0
"""How long learning which tools the upstream lists only to a client offering sampling,
elicitation or roots may take (`Upstream.asks`), its probing sessions together."""
PROBE_GRACE_S: Final = 0.25
"""How long a probing process has to exit once its stdin is closed, before it is terminated
(it has only listed: nothing of it is to be waited for)."""

Listing = list[types.Tool]
ResultT = TypeVar("ResultT", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class UpstreamSpec:
    """Where the upstream server is: a command to run (stdio) or a URL (streamable HTTP);
    `headers` are sent to a URL, `env` added to a command's environment (its credentials),
    `spawn` says how a command is started (its environment, sandbox and limits)."""

    command: tuple[str, ...] = ()
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    credentials: ClientCredentials | None = None
    """The proxy's own OAuth client for the upstream (never the caller's token)."""
    env: dict[str, str] = field(default_factory=dict)
    spawn: Spawn = field(default_factory=Spawn)

    @classmethod
    def of_command(cls, command_line: str) -> UpstreamSpec:
        """A stdio upstream from a command line, split as a POSIX shell would (no shell runs).

        Raises:
            ValueError: the command line is empty or its quotes do not close.
        """
        words = tuple(shlex.split(command_line))
        if not words:
            raise ValueError("the upstream command is empty")
        return cls(command=words)

    @classmethod
    def of_url(
        cls, url: str, headers: list[str], credentials: ClientCredentials | None = None
    ) -> UpstreamSpec:
        """A streamable HTTP upstream, with headers written "Name: value", and the proxy's
        own OAuth client's credentials when given.

        Raises:
            ValueError: the URL is not http(s), a header has no name or no colon, or an
                Authorization header is given with credentials.
        """
        if not url.startswith(("http://", "https://")):
            raise ValueError("the upstream URL is http:// or https://")
        parsed: dict[str, str] = {}
        for header in headers:
            name, colon, value = header.partition(":")
            if not colon or not name.strip():
                raise ValueError('an upstream header is written "Name: value"')
            parsed[name.strip()] = value.strip()
        if credentials is not None and any(n.lower() == "authorization" for n in parsed):
            raise ValueError(
                "an Authorization header and the upstream's OAuth client exclude each other"
            )
        return cls(url=url, headers=parsed, credentials=credentials)

    def describe(self) -> str:
        """What the operator's log calls this upstream: the command, or the URL with its
        credentials and its query's values shown as *** (and never its headers' values)."""
        return shown_url(self.url) if self.url is not None else shlex.join(self.command)


def shown_url(url: str) -> str:
    """`url` as it may be printed: a user name and password, and every query value (a token
    may be there), shown as ***; the fragment left out."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = re.sub(r"=[^&;]*", "=***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


_LIST_CHANGED: Final = (
    types.ToolListChangedNotification,
    types.ResourceListChangedNotification,
    types.PromptListChangedNotification,
)
"""The notifications that have the upstream listed again (its tools, resources and prompts)."""


class _Connection:
    """One live session with the upstream and the events that end it; `pipe` when the upstream
    is on stdio (its calls take the pipe's own path)."""

    def __init__(
        self, session: ClientSession, ended: anyio.Event, pipe: UpstreamPipe | None
    ) -> None:
        self.session = session
        self.ended = ended
        self.pipe = pipe
        self.http: HttpCaller | None = None
        """The upstream's HTTP calls' own path, when it is on streamable HTTP."""
        self.suspect = anyio.Event()
        self.relist = anyio.Event()
        self.later_members: frozenset[str] = frozenset()
        self.capabilities: types.ServerCapabilities | None = None
        """The tools/call result members only later revisions than the session's define."""


class Upstream:
    """One upstream MCP server behind the official client, kept running while `running()` is.

    `on_listing` receives the upstream's tools at start and after every
    `notifications/tools/list_changed` (or restart); `errlog` gets one line per start, failure
    and restart (never a tool's arguments or results).
    """

    def __init__(
        self,
        spec: UpstreamSpec,
        on_listing: Callable[[Listing], None],
        *,
        errlog: TextIO,
        restart_min_s: float = RESTART_MIN_S,
        restart_max_s: float = RESTART_MAX_S,
        ping_s: float = PING_S,
        max_result_bytes: int = MAX_RESULT_BYTES,
        budgets: Budgets = DEFAULT_BUDGETS,
    ) -> None:
        self.spec: Final = spec
        self.budgets: Final = budgets
        """What it may list and send (`strictcall.services.proxy.budgets`)."""
        self._said: set[str] = set()
        """The refusals of its listings said already (each once, not per relisting)."""
        self._http_rate: NotificationRate | None = None
        self.budget_refusals: dict[str, int] = {}
        """Its listings refused past a budget, by the budget's name, each relisting again (and
        its tools left out for their names, under `NAMES`), for /metrics."""
        self.on_content: Callable[[UpstreamContent], None] | None = None
        """When set (a federation's), receives the upstream's resources, resource templates
        and prompts as `on_listing` receives its tools (listed only then)."""
        self.log_as = "strictcall proxy"
        """What each line of its log starts with."""
        self.name = "upstream"
        """Its home's name (a federation's upstreams are named by their config)."""
        self.identity: str | None = None
        """The caller identity this instance serves alone (None: every caller)."""
        self.homes: str | None = spec.spawn.homes
        """Where its home is made; None: a temporary directory of its own, while it runs."""
        self._said_spawn = False
        self.max_result_bytes: Final = max_result_bytes
        """The longest answer a call may get (one line on stdio; a result's JSON over HTTP)."""
        self._on_listing = on_listing
        self._errlog = errlog
        self._restart_min_s = restart_min_s
        self._restart_max_s = restart_max_s
        self._ping_s = ping_s
        self._live: _Connection | None = None
        self._current: _Connection | None = None
        self._caller: HttpCaller | None = None
        self._back_at = 0.0
        self.start_s = 0.0
        """How long the last good start took, from spawn to its first listing (0: none yet)."""
        self._starting_since: float | None = None
        self.starts = 0
        """How many times the server was started and answered its first tools/list."""
        self.http_status: int | None = None
        """The last HTTP error status an HTTP upstream answered in this session, if any."""
        self._started = anyio.Event()
        """Set (and made anew) each time a session starts."""
        self.conversations: Final = Conversations(self._note, budgets, lambda: self.name)
        """The calls in flight with a downstream peer, and where notifications go."""
        self.on_updated: Callable[[object], Awaitable[None]] | None = None
        """When set (a proxy's, a federation's), receives the params of each
        `notifications/resources/updated` the upstream sends."""
        self._subscribed: set[str] = set()
        """The URIs it is subscribed to (subscribed again in each new session)."""
        self.probes_asks = True
        """Whether it learns which tools it lists only to a client offering some of `ASKS`
        (`asks`); False: its tools are listed to every caller, whatever its client offers."""
        self.asks: dict[str, frozenset[str]] = {}
        """The tools it lists only to a client offering some of `ASKS`, by name: which ones.
        strictcall's session offers it all three, so that it lists every tool; a session of its
        own offering none, then (where tools are missing) one offering all but each in turn,
        tells which tools need what, whenever it lists names other than those last learnt of."""
        self._probed: frozenset[str] | None = None
        """The names of the listing `asks` was learnt of (None: none yet)."""

    def for_identity(self, identity: str) -> Upstream:
        """Another process of this upstream, serving `identity` alone: its settings (budgets,
        restarts, pings, the longest answer) and its log's name and homes, listing to nobody;
        its listings refused past a budget counted as this upstream's (no identity on /metrics)."""
        own = Upstream(
            self.spec,
            lambda listing: None,
            errlog=self._errlog,
            restart_min_s=self._restart_min_s,
            restart_max_s=self._restart_max_s,
            ping_s=self._ping_s,
            max_result_bytes=self.max_result_bytes,
            budgets=self.budgets,
        )
        own.log_as, own.name, own.homes = self.log_as, self.name, self.homes
        own.identity = identity
        own.budget_refusals = self.budget_refusals
        own.conversations.record = self.conversations.record
        return own

    def running(self) -> AbstractAsyncContextManager[None]:
        """Start the server and keep it running until left; a lifespan of the serving loop.

        Raises (on entering):
            UpstreamFailed: the first start failed (the server did not run, or did not answer
                initialize and tools/list within `START_TIMEOUT_S`).
        """
        return self._running()

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        made = None
        if self.homes is None and self.spec.command:
            made = self.homes = temporary_homes()
        try:
            async with anyio.create_task_group() as group:
                await group.start(self._supervise)
                try:
                    yield
                finally:
                    group.cancel_scope.cancel()
        finally:
            if made is not None:
                self.homes = None
                shutil.rmtree(made, ignore_errors=True)

    def retry_after_ms(self) -> int:
        """When a call may be worth sending again: once the next start (or the one under
        way) has taken as long as the last good one did; `RETRY_AFTER_MS` at the soonest."""
        began = self._starting_since
        ready = (self._back_at if began is None else began) + self.start_s
        wait_ms = math.ceil((ready - time.monotonic()) * 1000)
        return max(RETRY_AFTER_MS, wait_ms)

    def starts_at(self, moment: float) -> None:
        """Say when the next start is tried (`time.monotonic()`), for `retry_after_ms`: a
        federation retrying a first start that failed."""
        self._back_at = moment

    @property
    def state(self) -> str:
        """ "up" (serving), "starting" (a start under way), "restarting" (down, waiting for
        its next start) or "not started" (its first start has not succeeded yet)."""
        if self._live is not None:
            return "up"
        if self._starting_since is not None:
            return "starting"
        return "restarting" if self.starts else "not started"

    def unavailable(self) -> ToolFailure:
        """The failure a call gets while the upstream is down."""
        return ToolFailure(UPSTREAM_UNAVAILABLE, retry_after_ms=self.retry_after_ms())

    async def call(
        self,
        name: str,
        arguments: dict[str, JSONValue],
        peer: CallPeer | None = None,
        call: ToolContext | None = None,
    ) -> types.CallToolResult:
        """One tools/call, its result as the upstream sent it (read as the SDK's CallToolResult
        once; what it holds is the gateway's to check). With `peer` (the downstream caller's
        way back), the upstream's progress and messages during the call go to that caller
        (`strictcall.services.proxy.session`), its answer after them, and its requests to
        that caller as `call` (the gateway's context of it) allows them.

        Over stdio the call takes the pipe's own path (`strictcall.services.proxy.stdio`), not the
        session's: the session's would write and read the same message through two more tasks
        and validate the result three times (the envelope, the negotiated revision's model and
        its dump, then CallToolResult). Over HTTP it is one POST on the session's client in a
        handshake-era session (`strictcall.services.proxy.http`), else the session's
        `send_request`.

        Raises:
            ToolFailure: upstream_unavailable, when there is no session or it ended under the
                call.
            MCPError: the upstream answered with a JSON-RPC error.
            UnreadableAnswer: the upstream's answer is not a JSON-RPC response.
            AnswerTooLarge: the answer is longer than `max_result_bytes`.
            ValidationError: the upstream's result is not a tools/call result.
        """
        live = self._live
        if live is None or live.ended.is_set():  # gone, or going: its restart is on its way
            raise self.unavailable()
        conversations = self.conversations
        if peer is not None:
            with conversations.open(peer, call) as conversation:
                result = await self._call_once_more(live, name, arguments, conversation)
                await conversation.settled()
                return result
        with conversations.blind(call):  # a request during it could be its own: none asked
            return await self._call_once_more(live, name, arguments, None)

    async def _call_once_more(
        self,
        live: _Connection,
        name: str,
        arguments: dict[str, JSONValue],
        conversation: Conversation | None,
    ) -> types.CallToolResult:
        """`_call`, sent again once on a new session when the HTTP upstream answered 404 for
        its session (it restarted and forgot it, as the specification has it)."""
        try:
            return await self._call(live, name, arguments, conversation)
        except _SessionGone:
            pass
        with anyio.move_on_after(REINIT_S):
            while (again := self._live) is None or again is live or again.ended.is_set():
                await self._started.wait()
            return await self._call(again, name, arguments, conversation)
        raise self.unavailable()

    async def _call(
        self,
        live: _Connection,
        name: str,
        arguments: dict[str, JSONValue],
        conversation: Conversation | None,
    ) -> types.CallToolResult:
        meta = None if conversation is None else conversation.meta()
        try:
            if live.pipe is not None:
                try:
                    answer = await live.pipe.call_tool(name, arguments, meta)
                except PipeClosed:
                    live.ended.set()
                    raise self.unavailable() from None
                return call_result(answer, live.later_members)
            if live.http is not None and live.http.takes_calls():
                return await self._call_by_post(live, live.http, name, arguments, conversation)
            return await self._call_by_session(live, name, arguments, meta)
        except anyio.get_cancelled_exc_class():
            live.suspect.set()  # timed out (or the caller left): is the server still there?
            raise

    async def _call_by_post(
        self,
        live: _Connection,
        http: HttpCaller,
        name: str,
        arguments: dict[str, JSONValue],
        conversation: Conversation | None,
    ) -> types.CallToolResult:
        taken = None
        if conversation is not None:
            conversations = self.conversations

            def taken(method: str, params: object) -> None:
                conversations.take_of_call(conversation, method, params)

        try:
            answer = await http.call_tool(
                name, arguments, None if conversation is None else conversation.meta(), taken
            )
        except (httpx2.TransportError, HttpCallFailed) as exc:
            # 404 on a session: the upstream forgot it (it restarted): start a new one
            forgotten = isinstance(exc, HttpCallFailed) and exc.status == 404
            if forgotten and http.session_id is not None and not live.ended.is_set():
                self._note("upstream forgot its session (HTTP 404); starting a new one")
                live.ended.set()
                raise _SessionGone from None
            if live.ended.is_set() or forgotten or not await self._answers_ping(live):
                live.ended.set()
                raise self.unavailable() from None
            raise UnreadableAnswer from None
        except orjson.JSONDecodeError:
            raise UnreadableAnswer from None
        return call_result(answer, live.later_members)

    async def _call_by_session(
        self,
        live: _Connection,
        name: str,
        arguments: dict[str, JSONValue],
        meta: dict[str, JSONValue] | None,
    ) -> types.CallToolResult:
        params = types.CallToolRequestParams(name=name, arguments=arguments)
        if meta:
            params = types.CallToolRequestParams.model_validate(
                {"name": name, "arguments": arguments, "_meta": meta}, by_name=False
            )
        request = types.CallToolRequest(params=params)
        # send_request, not call_tool: call_tool validates structured content itself (and
        # may list the tools first); the gateway checks the result at stage output.
        return await self._send(live, request, types.CallToolResult)

    async def forward(self, request: types.ClientRequest, result_type: type[ResultT]) -> ResultT:
        """Any other request (resources/read, prompts/get) through the session, its result
        read as `result_type` (the SDK's model: its shape checked) and capped as a call's.

        Raises:
            ToolFailure: upstream_unavailable, when there is no session or it ended under it.
            MCPError: the upstream answered with a JSON-RPC error.
            AnswerTooLarge: the result is longer than `max_result_bytes` as JSON.
            ValidationError: the result is not of `result_type`'s shape.
        """
        live = self._live
        if live is None or live.ended.is_set():
            raise self.unavailable()
        try:
            return await self._send(live, request, result_type)
        except _SessionGone:
            raise self.unavailable() from None
        except anyio.get_cancelled_exc_class():
            live.suspect.set()
            raise

    @property
    def subscribes(self) -> bool:
        """Whether the live session's capabilities offer resources/subscribe."""
        live = self._live
        resources = (
            None if live is None or live.capabilities is None else live.capabilities.resources
        )
        return resources is not None and resources.subscribe is True

    async def subscribe(self, uri: str) -> None:
        """resources/subscribe for `uri`, kept for the sessions after this one.

        Raises:
            As `forward`.
        """
        params = types.SubscribeRequestParams(uri=uri)
        await self.forward(types.SubscribeRequest(params=params), types.EmptyResult)
        self._subscribed.add(uri)

    async def unsubscribe(self, uri: str) -> None:
        """resources/unsubscribe for `uri` (within `UNSUBSCRIBE_S`; an upstream that is down,
        fails or does not answer in time has nothing more to send for it anyway)."""
        self._subscribed.discard(uri)
        params = types.UnsubscribeRequestParams(uri=uri)
        with anyio.move_on_after(UNSUBSCRIBE_S), suppress(Exception):
            await self.forward(types.UnsubscribeRequest(params=params), types.EmptyResult)

    async def _subscribe_again(self, live: _Connection) -> None:
        """Subscribe a new session to the URIs callers still hold; one line if it fails."""
        failed = 0
        for uri in sorted(self._subscribed):
            params = types.SubscribeRequestParams(uri=uri)
            try:
                with anyio.fail_after(UNSUBSCRIBE_S):
                    await self._send(live, types.SubscribeRequest(params=params), types.EmptyResult)
            except Exception:
                failed += 1
        if failed:
            self._note(f"upstream refused {counted(failed, 'resource subscription')} again")

    async def _send(
        self, live: _Connection, request: types.ClientRequest, result_type: type[ResultT]
    ) -> ResultT:
        try:
            result = await live.session.send_request(request, result_type)
            # the SDK has read it whole by now: at least it is not passed on
            if len(result.model_dump_json(by_alias=True)) > self.max_result_bytes:
                raise AnswerTooLarge
            return result
        except MCPError as exc:
            if exc.code == TOO_LARGE_CODE and live.pipe is not None:  # the pipe's, not theirs
                raise AnswerTooLarge from None
            if self.http_status == 404 and live.pipe is None and not live.ended.is_set():
                self._note("upstream forgot its session (HTTP 404); starting a new one")
                live.ended.set()
                raise _SessionGone from None
            # The SDK answers a call whose connection broke with CONNECTION_CLOSED, a code
            # servers use for their own errors too: a ping tells the two apart.
            if live.ended.is_set() or (
                exc.code == CONNECTION_CLOSED and not await self._answers_ping(live)
            ):
                live.ended.set()
                raise self.unavailable() from None
            raise

    async def _answers_ping(self, live: _Connection) -> bool:
        """Whether the upstream answers a ping (any answer) within `ping_s`."""
        with anyio.move_on_after(self._ping_s):
            try:
                await live.session.send_ping()
            except MCPError as exc:
                return exc.code != CONNECTION_CLOSED
            except Exception:
                return False
            return True
        return False

    async def _supervise(
        self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        backoff = self._restart_min_s
        first = True
        while True:
            ended = anyio.Event()
            pipe: UpstreamPipe | None = None
            self.http_status = None
            began = self._starting_since = time.monotonic()
            try:
                # made in a thread: the first one may probe the sandbox (the container engine
                # can take its PROBE_S to answer), which must not hold the other upstreams
                launched = (
                    None if self.spec.url is not None else await to_thread.run_sync(self._launch)
                )
                async with (
                    self._connect(launched) as (read, write, pipe),
                    ClientSession(
                        WatchedStream(read, ended),
                        write,
                        message_handler=self._on_message,
                        sampling_callback=self._on_sampling,
                        elicitation_callback=self._on_elicitation,
                        list_roots_callback=self._on_roots,
                    ) as session,
                ):
                    live = _Connection(session, ended, pipe)
                    if pipe is not None:
                        pipe.on_notification = self.conversations.take
                    live.http = self._caller
                    self._current = live  # a list_changed during the start is kept
                    with anyio.fail_after(START_TIMEOUT_S):
                        started = await session.initialize()
                        live.later_members = later_members(started.protocol_version)
                        if live.http is not None:
                            live.http.version = started.protocol_version
                        listing = await self._listed_tools(session)
                    await self._probe(listing, fresh=True)  # bounded by PROBE_S apart
                    with anyio.fail_after(START_TIMEOUT_S):
                        self._on_listing(listing)
                        await self._list_content(live, started.capabilities)
                    self.starts += 1
                    self.start_s = time.monotonic() - began
                    self._starting_since = None
                    self._note(f"upstream started ({self.spec.describe()})")
                    self._live = live
                    if self._subscribed:
                        await self._subscribe_again(live)
                    self._started.set()
                    self._started = anyio.Event()
                    if first:
                        task_status.started()
                        first = False
                    backoff = self._restart_min_s
                    await self._watch(live)
            except Exception as exc:  # the server failed to start, or its session broke
                why = self._why(exc, pipe)
                if first:
                    raise UpstreamFailed(self.spec, why) from None
                self._note(f"upstream failed ({why})")
            finally:
                self._live = self._current = None
                self._starting_since = None
            self._back_at = time.monotonic() + backoff
            self._note(f"upstream unavailable; restarting in {backoff:g} s")
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, self._restart_max_s)

    async def _watch(self, live: _Connection) -> None:
        """Serve `live` until its connection ends or it is found hung; relist on request."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._relister, live)
            group.start_soon(self._pinger, live)
            await live.ended.wait()
            group.cancel_scope.cancel()

    async def _relister(self, live: _Connection) -> None:
        while True:
            await live.relist.wait()
            live.relist = anyio.Event()
            try:
                with anyio.fail_after(START_TIMEOUT_S):
                    listing = await self._listed_tools(live.session)
                await self._probe(listing, fresh=False)
                with anyio.fail_after(START_TIMEOUT_S):
                    self._on_listing(listing)
                    await self._list_content(live, live.capabilities)
            except Exception as exc:
                self._note(f"upstream tools/list failed ({_kind(exc)})")
                live.ended.set()
                return

    async def _list_content(
        self, live: _Connection, capabilities: types.ServerCapabilities | None
    ) -> None:
        """List the upstream's resources, templates and prompts for `on_content`, if any."""
        live.capabilities = capabilities
        if self.on_content is not None and capabilities is not None:
            content = await list_content(live.session, capabilities, self._note)
            refusal = content_refusal(
                content.resources, content.templates, content.prompts, self.budgets
            )
            if refusal is not None:
                self._refused(refusal.budget)
                self._say(
                    f"listing refused ({refusal.why}); none of its resources or prompts served"
                )
                content = UpstreamContent(offers=content.offers)
            self.on_content(content)

    async def _listed_tools(self, session: ClientSession) -> Listing:
        """The upstream's tools within its budgets: a listing past one is refused whole (one
        line; none of its tools served), a tool whose name breaks the specification's rules
        is left out (one line)."""
        listing = await _list_tools(session, self.budgets.max_tools)
        refusal = tools_refusal(listing, self.budgets)
        if refusal is not None:
            self._refused(refusal.budget)
            self._say(f"tools/list refused ({refusal.why}); none of its tools served")
            return []
        kept = []
        for tool in listing:
            why = name_refusal(tool.name)
            if why is None:
                kept.append(tool)
            else:
                self._refused(NAMES)
                self._say(f"tool not served: its {why}")
        return kept

    async def _probe(self, listing: Listing, *, fresh: bool) -> None:
        """Learn `asks` of `listing`, unless its names are those last learnt of (or this process
        serves one identity, or `probes_asks` is off): each probing session of its own (a
        process of its own, on stdio) initialized, listed and closed. `fresh`: `listing` is a
        new session's, as new as a probing one offering all three (none is opened). A probe
        that fails, or outlasts `PROBE_S`, leaves `asks` as it was (a tool it does not name is
        listed to every caller), said once."""
        names = frozenset(tool.name for tool in listing)
        if not names or not self.probes_asks or self.identity is not None or names == self._probed:
            return  # nothing listed (or refused) has nothing to learn: not held up for a probe
        asks: dict[str, frozenset[str]] = {}
        try:
            with anyio.fail_after(PROBE_S):
                hidden = names - await self._listed_offering(frozenset())
                if hidden:
                    shown: dict[str, frozenset[str]] = {}

                    async def listed_without(kind: str) -> None:
                        shown[kind] = await self._listed_offering(frozenset(ASKS) - {kind})

                    async def listed_offering_all() -> None:
                        shown[""] = await self._listed_offering(frozenset(ASKS))

                    if fresh:
                        shown[""] = names
                    async with anyio.create_task_group() as group:  # at once
                        if not fresh:
                            group.start_soon(listed_offering_all)
                        for kind in ASKS:
                            group.start_soon(listed_without, kind)
                    # a tool a new session offering all three is not listed either is not
                    # one that asks: the live session's own (a stateful server added it
                    # since its start)
                    hidden &= shown[""]
                    # one it lists only to a client offering any one of several is missed
                    # here: listed to every caller, as it would be without probing
                    for kind in ASKS:
                        for name in hidden - shown[kind]:
                            asks[name] = asks.get(name, frozenset()) | {kind}
        except Exception as exc:
            self._say(
                "could not learn which tools need a client's sampling, elicitation or roots"
                f" ({_kind(exc)}); each is listed to every caller"
            )
            return
        self.asks, self._probed = asks, names

    async def _listed_offering(self, offers: frozenset[str]) -> frozenset[str]:
        """The names of the tools the upstream lists to a client offering `offers` (of
        `ASKS`), in a session of its own, which asks nothing of anyone."""
        launched = None if self.spec.url is not None else await to_thread.run_sync(self._launch)
        connection: AbstractAsyncContextManager[tuple[Any, Any, UpstreamPipe | None]]
        if launched is not None:
            # its stderr and notes would repeat the running session's: not relayed
            connection = _stdio(
                launched, _Unheard(), self.max_result_bytes, self.budgets, _unsaid, self.log_as
            )
        else:
            assert self.spec.url is not None  # an upstream is a command or a URL
            credentials = self.spec.credentials
            auth = None if credentials is None else ClientCredentialsAuth(credentials)
            connection = _http(self.spec.url, http_client(dict(self.spec.headers), auth))
        async with (
            connection as (read, write, pipe),
            ClientSession(
                read,
                write,
                sampling_callback=_not_asked if "sampling" in offers else None,
                elicitation_callback=_not_asked if "elicitation" in offers else None,
                list_roots_callback=_roots_not_asked if "roots" in offers else None,
            ) as session,
        ):
            if pipe is not None:
                pipe.grace_s = PROBE_GRACE_S
            await session.initialize()
            return frozenset(t.name for t in await _list_tools(session, self.budgets.max_tools))

    def _refused(self, budget: str) -> None:
        self.budget_refusals[budget] = self.budget_refusals.get(budget, 0) + 1

    def _say(self, line: str) -> None:
        """Note `line` once per process (a relisting says nothing new)."""
        if line not in self._said:
            self._said.add(line)
            self._note(line)

    async def _pinger(self, live: _Connection) -> None:
        while True:
            await live.suspect.wait()
            live.suspect = anyio.Event()
            # an error answer is an answer: the server is not hung
            with anyio.move_on_after(self._ping_s) as scope, suppress(Exception):
                await live.session.send_ping()
            if scope.cancelled_caught:
                self._note("upstream hung (no answer to ping)")
                live.ended.set()
                return

    async def _on_sampling(
        self, context: object, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        request = types.CreateMessageRequest(params=params)
        return await self.conversations.ask("sampling", request, types.CreateMessageResult)

    async def _on_elicitation(
        self, context: object, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        request = types.ElicitRequest(params=params)
        return await self.conversations.ask("elicitation", request, types.ElicitResult)

    async def _on_roots(self, context: object) -> types.ListRootsResult | types.ErrorData:
        request = types.ListRootsRequest()
        return await self.conversations.ask("roots", request, types.ListRootsResult)

    async def _on_message(self, message: object) -> None:
        live = self._current
        if live is not None and isinstance(message, _LIST_CHANGED):
            live.relist.set()  # past the rate too: relistings coalesce, one at a time
        if self.spec.url is not None and isinstance(message, types.ServerNotification):
            # over HTTP the SDK has read it already: past the rate it goes no further
            rate = self._http_rate
            if rate is None:
                per_second = self.budgets.notifications_per_second
                rate = self._http_rate = NotificationRate(per_second, time.monotonic())
            if not rate.admit(time.monotonic()):
                if rate.dropped % rate.per_second == 1:
                    self._note(
                        "upstream sent notifications past notifications_per_second ="
                        f" {rate.per_second}: {rate.dropped} dropped"
                    )
                return
        if isinstance(message, types.ResourceUpdatedNotification) and self.on_updated is not None:
            await self.on_updated(message.params.model_dump(by_alias=True, mode="json"))
            return
        if isinstance(message, types.ProgressNotification | types.LoggingMessageNotification):
            params = message.params.model_dump(by_alias=True, mode="json", exclude_none=True)
            self.conversations.take(message.method, params)

    def _why(self, exc: BaseException, pipe: UpstreamPipe | None) -> str:
        """Why a start failed or a session broke, in the operator's words: never the text of
        an exception (it may quote a URL's credentials, or the upstream's data)."""
        found = _inner(exc, (OSError, TimeoutError, httpx2.TransportError))
        if isinstance(found, TimeoutError):
            return f"it did not answer initialize and tools/list within {START_TIMEOUT_S:g} s"
        if self.http_status is not None:
            return f"the upstream URL answered HTTP {self.http_status}"
        if isinstance(found, httpx2.TransportError):
            return f"could not connect to the upstream URL ({type(found).__name__})"
        if isinstance(found, SandboxUnavailable):
            return f"its sandbox cannot run: {found}"
        if isinstance(found, OSError) and self.spec.command:
            return _why_not_run(self.spec.command[0], found)
        if pipe is not None and pipe.exit_status is not None:
            status = pipe.exit_status
            if status < 0:
                return f"it was ended by signal {-status} before answering"
            return f"it exited before answering (exit status {status})"
        if pipe is not None and pipe.ended:
            return "it closed its standard output before answering"
        return _kind(exc)

    async def _saw_response(self, response: httpx2.Response) -> None:
        """An HTTP upstream's answer: an error status is kept, to name a failed start."""
        if response.status_code >= 400:
            self.http_status = response.status_code

    def _launch(self) -> Launch:
        """How the stdio upstream is run now, in a home of its own (blocking: run in a thread)."""
        assert self.homes is not None  # made by running()
        home = make_home(self.homes, self.name, self.identity)
        return launch(self.spec.command, self.spec.spawn, self.spec.env, home)

    def _connect(
        self, started: Launch | None
    ) -> AbstractAsyncContextManager[tuple[Any, Any, UpstreamPipe | None]]:
        if self.spec.url is not None:
            credentials = self.spec.credentials
            auth = None if credentials is None else ClientCredentialsAuth(credentials)
            client = http_client(dict(self.spec.headers), auth)
            caller = HttpCaller(self.spec.url, client, self.max_result_bytes)
            self._caller = caller

            async def saw(response: httpx2.Response) -> None:
                caller.saw(response)
                await self._saw_response(response)

            hooks = client.event_hooks
            client.event_hooks = {**hooks, "response": [*hooks["response"], saw]}
            return _http(self.spec.url, client)
        assert started is not None  # a stdio upstream's, made by _launch
        if not self._said_spawn:  # one line per upstream, not per restart
            self._said_spawn = True
            self._note(started.described)
        return _stdio(
            started, self._errlog, self.max_result_bytes, self.budgets, self._note, self.log_as
        )

    def _note(self, line: str) -> None:
        self._errlog.write(f"{self.log_as}: {line}\n")
        self._errlog.flush()


@asynccontextmanager
async def _http(url: str, client: Any) -> AsyncIterator[tuple[Any, Any, None]]:
    async with client, streamable_http_client(url, http_client=client) as (read, write):
        yield read, write, None


@asynccontextmanager
async def _stdio(
    started: Launch,
    errlog: TextIO,
    max_answer_bytes: int,
    budgets: Budgets,
    note: Callable[[str], None],
    log_as: str,
) -> AsyncIterator[tuple[Any, Any, UpstreamPipe]]:
    max_listed = {
        "tools": budgets.max_tools,
        "resources": budgets.max_resources,
        "resourceTemplates": budgets.max_templates,
        "prompts": budgets.max_prompts,
    }
    try:
        # its stderr reaches the log line by line, each prefixed with its name and escaped
        with relayed_stderr(log_as, errlog) as stderr:
            async with open_upstream(
                started.command,
                env=started.env,
                errlog=cast(TextIO, stderr),
                max_answer_bytes=max_answer_bytes,
                notifications_per_second=budgets.notifications_per_second,
                note=note,
                max_listed=max_listed,
            ) as pipe:
                yield pipe.read, pipe.write, pipe
    finally:
        with anyio.CancelScope(shield=True):
            await release(started)


async def _list_tools(session: ClientSession, max_tools: int) -> Listing:
    """Every page of the upstream's tools/list (no page more once past `max_tools`)."""
    tools: Listing = []
    cursor: str | None = None
    while True:
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        if page.next_cursor is None or len(tools) > max_tools:
            return tools
        cursor = page.next_cursor


class _Unheard(io.StringIO):
    """Where a probing session's stderr goes: nowhere (the running session's is relayed)."""

    def write(self, text: str) -> int:
        return len(text)


def _unsaid(line: str) -> None:
    """A probing session's note: unsaid (the running session's says it)."""


_PROBING: Final = types.ErrorData(
    code=types.INVALID_REQUEST, message="this session only lists the tools"
)
"""What a probing session answers a request of the upstream's (it makes no call)."""


async def _not_asked(context: object, params: object) -> types.ErrorData:
    """A probing session's answer to the upstream's sampling or elicitation request."""
    return _PROBING


async def _roots_not_asked(context: object) -> types.ErrorData:
    """A probing session's answer to the upstream's roots/list request."""
    return _PROBING


def _inner(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """The first exception of `kinds` in `exc`, its causes and its groups' members."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _inner(inner, kinds)
            if found is not None:
                return found
    cause = exc.__cause__ or exc.__context__
    return None if cause is None else _inner(cause, kinds)


def _why_not_run(program: str, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"the command {program} was not found"
    if isinstance(exc, PermissionError):
        return f"the command {program} may not be run (permission denied)"
    return f"the command {program} could not be started ({exc.strerror or type(exc).__name__})"


def _kind(exc: BaseException) -> str:
    """An exception's kind for the log, without its text (which may hold callers' data)."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _kind(exc.exceptions[0])
    if isinstance(exc, MCPError):
        return f"it answered with a JSON-RPC error (code {exc.code})"
    return type(exc).__name__


class _SessionGone(Exception):
    """The HTTP upstream answered 404 for its session: a new one is started."""


class UpstreamFailed(StrictcallError):
    """The upstream server did not start: it did not run, or did not answer in time."""

    def __init__(self, spec: UpstreamSpec, why: str) -> None:
        super().__init__(f"the upstream did not start ({spec.describe()}): {why}")
        self.why = why
