"""Running the service: the notes gateway behind JSON-RPC and MCP on uvicorn.

uvicorn (with httptools, and uvloop where installed) is the ASGI server, its socket writes
coalesced to one per response (`strictcall.server._uvicorn`, the one home of uvicorn's
internals). On SIGTERM or SIGINT it stops accepting, finishes the requests in flight, and only
then does the store close. Every write is committed
before its answer is sent, so no acknowledged write is lost.

`serve_workers` runs N such servers as processes on one listening socket (uvicorn's supervisor:
it restarts a worker that dies; SIGINT or SIGTERM to it stops them all, each finishing its
requests in flight). Each worker (`strictcall.server.processes`) opens its own store, with its own
connections and token cache.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import importlib.util
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Final, cast

import orjson

from strictcall.audit.log import KEEP_ALL, AuditLog, AuditRetention
from strictcall.audit.sampling import sampled
from strictcall.core.gateway import Gateway
from strictcall.core.pipeline import Limits
from strictcall.core.policy import PolicyHolder
from strictcall.core.record import refusal_record
from strictcall.core.refusals import too_large
from strictcall.errors import MissingExtra, PolicyFileError
from strictcall.identity.settings import OAuthSettings
from strictcall.server._uvicorn import Server, Workers, guarded_protocol, server_config
from strictcall.server.admission import Admission
from strictcall.server.edge import EdgeLimits, OriginPolicy
from strictcall.server.listen import bind_listeners
from strictcall.server.router import RpcApp
from strictcall.services.notes import notes_gateway
from strictcall.storage import AuditRecord, Store, StoreUnavailable
from strictcall.transports.asgi import (
    IDENTITY_KEY,
    ASGIApp,
    Later,
    Message,
    Receive,
    Response,
    Scope,
    Send,
    declared_length,
    response_headers,
    send_response,
)
from strictcall.transports.jsonrpc import Recorder, RpcService, refusal_reply
from strictcall.transports.serving import DEFAULT_SERVING, Serving
from strictcall.transports.streams import StreamLimits

if TYPE_CHECKING:
    from strictcall.ops.health import StoreHealth
    from strictcall.ops.metrics import Metrics
    from strictcall.ops.tracing import CallTracer
    from strictcall.ops.window import RecentCalls
    from strictcall.transports.mcp import McpHttpApp

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
GRACEFUL_SHUTDOWN_S: Final = 10
WORKER_START_S: Final = 60.0
"""How long `serve_workers` waits for each worker to be ready before it says it listens."""

WORKER_ENV: Final = "STRICTCALL_WORKER"
"""Where a worker process finds its parent's settings (spawned, it shares nothing else)."""

log = logging.getLogger("strictcall")


def audit_recorder(store: Store) -> Recorder:
    """Record calls in `store`'s audit log; a record the store cannot take is logged as lost."""

    def record(entry: AuditRecord) -> None:
        try:
            store.record_call(entry)
        except StoreUnavailable:
            log.warning("audit record lost: the store is unavailable")

    return record


def build_app(
    store: Store,
    *,
    limits: Limits | None = None,
    origins: OriginPolicy | None = None,
    edge: EdgeLimits | None = None,
    close_store: bool = False,
    open_to_operators: bool = False,
    observe: bool = True,
    oauth: OAuthSettings | None = None,
    policy: PolicyHolder | None = None,
    audit_retention: AuditRetention | None = None,
) -> RpcApp:
    """The ASGI app serving the notes tools from `store` (see `build_gateway_app`). With
    `close_store`, the app closes the store when the server stops, after the last audit batch.
    `policy`: who may list and call which tools, and how often (None: everyone, every tool)."""

    @asynccontextmanager
    async def closing() -> AsyncIterator[None]:
        try:
            yield
        finally:
            if close_store:
                store.close()

    return build_gateway_app(
        notes_gateway(_traced(store) if observe else store, limits=limits, policy=policy),
        store,
        origins=origins,
        edge=edge,
        lifespans=[closing],  # entered first, left last
        open_to_operators=open_to_operators,
        observe=observe,
        oauth=oauth,
        audit_retention=audit_retention,
    )


def build_gateway_app(
    gateway: Gateway,
    store: Store,
    *,
    origins: OriginPolicy | None = None,
    edge: EdgeLimits | None = None,
    lifespans: Sequence[Callable[[], AbstractAsyncContextManager[None]]] = (),
    open_to_operators: bool = False,
    observe: bool = True,
    oauth: OAuthSettings | None = None,
    tool_changes: Callable[[], int] | None = None,
    redactions: Callable[[], Mapping[tuple[str, str], int]] | None = None,
    budget_refusals: Callable[[], Mapping[tuple[str, str], int]] | None = None,
    instances: Callable[[], Mapping[str, tuple[int, int, int]]] | None = None,
    serving: Serving = DEFAULT_SERVING,
    upstreams: Callable[[], list[dict[str, object]]] | None = None,
    audit_retention: AuditRetention | None = None,
    audit_to: Callable[[Recorder], None] | None = None,
) -> RpcApp:
    """The ASGI app serving any gateway's tools: JSON-RPC at /rpc, MCP at /mcp, the callers'
    tokens and the audit log in `store`, for the browser `origins` admitted and within
    `edge.max_in_flight` calls per identity; and for operators the page at /,
    /ops/stats.json and /metrics (`strictcall.server.ops`), which need an operator's token unless
    `open_to_operators` (a server bound to a loopback address). `lifespans`, then `serving`'s,
    are entered at startup before the server's own (e.g. a proxy's upstream session) and left
    after them.

    Every call's audit record also feeds the Prometheus metrics (with strictcall[metrics]), an
    OpenTelemetry span (with strictcall[otel] and an SDK's tracer provider set) and the page's
    in-memory counts of the last hour (`strictcall.ops.window`), each told its wire (rpc, mcp,
    or http for a request refused at the edge before either); with `observe` false, none of
    them (the floor `bench/ops.py` measures their cost against).

    With `oauth`, the identity provider's access tokens are accepted too (or instead), and its
    protected resource metadata is served at `/.well-known/oauth-protected-resource` (and its
    path-aware forms) to anyone (`strictcall.server.bearer`). `tool_changes` counts the pinned
    tools seen changed (a federation's), for /metrics, `budget_refusals` each upstream's
    listings refused past a budget, and `instances` counts each per-identity upstream's
    instances; `serving` holds what /mcp serves beside the tools (a proxy's or a federation's
    upstreams' resources and prompts, `strictcall.transports.serving`), its calls recorded in
    the audit log (the server's record, in place of `serving.record`); where its listing can
    change (`serving.tools_change`: a proxy's or a federation's), /mcp announces `listChanged`
    and serves change streams, within `edge`'s budgets for them
    (`strictcall.transports.mcp.changes`); its input_required rounds are held within `edge`'s
    budgets for them (in place of `serving.rounds`). `upstreams` says each upstream's state
    for the page (a proxy's or a federation's). `audit_retention`: how much of the audit log
    the server keeps (None: all of it). `audit_to` is given the recorder of the records of an
    upstream's requests of callers (a proxy's or a federation's): the audit log's, counted in
    /metrics.
    """
    from strictcall.ops.health import StoreHealth, cause_of
    from strictcall.server.ops import PATHS, OpsApp

    health = StoreHealth()
    metrics = _metrics(gateway) if observe else None
    holder = gateway.policy
    if metrics is not None and holder is not None:
        limiter = holder.limiter
        metrics.quota_faults = lambda: limiter.faults
    if metrics is not None and tool_changes is not None:
        metrics.tool_changes = tool_changes
    if metrics is not None and redactions is not None:
        metrics.redactions = redactions
    if metrics is not None and budget_refusals is not None:
        metrics.budget_refusals = budget_refusals
    if metrics is not None and instances is not None:
        metrics.instances = instances
    window = _window(health) if observe else None
    if window is not None and holder is not None:
        window.nearest_quotas = holder.nearest_by_identity
    tracer = _tracer() if observe else None
    if tracer is not None:  # each traced call's stages get their own times
        gateway.marks_stages = True

    def audit_fault(fault: StoreUnavailable) -> None:
        health.failed(cause=cause_of(fault))
        if metrics is not None:
            metrics.audit_fault()

    def store_answered() -> None:
        if window is not None:  # the refused calls not yet tallied belong to the outage
            window.drain()
        health.answered()

    kept = audit_retention if audit_retention is not None else KEEP_ALL
    audit = AuditLog(
        store,
        on_fault=audit_fault,
        on_written=store_answered,
        retention=kept,
    )

    if audit_to is not None:  # counted in /metrics too, not spans or the page's calls
        audit_to(observed(audit.record, metrics, None, wire="mcp"))

    def record_of(wire: str) -> Recorder:
        return observed(audit.record, metrics, tracer, window=window, wire=wire)

    # the serving's lifespans are the server's, below (/rpc serves the same tools)
    limits = edge if edge is not None else EdgeLimits()
    served = replace(serving, record=record_of("mcp"), lifespans=(), rounds=limits.rounds)
    streams = limits.streams
    mcp = LoadingMcp(gateway, served, streams if serving.tools_change else None)
    ops = OpsApp(
        store,
        open_without_token=open_to_operators,
        exposition=None if metrics is None else metrics.exposition,
        health=lambda: {"audit records waiting": audit.pending, "audit records lost": audit.lost},
        window=window,
        store_health=health,
        upstreams=upstreams,
    )
    routes: dict[str, ASGIApp] = dict.fromkeys(PATHS, ops)
    verifier = None
    if oauth is not None:
        from strictcall.identity.challenge import metadata_paths
        from strictcall.identity.verifier import OAuthVerifier
        from strictcall.server.bearer import MetadataApp

        verifier = OAuthVerifier(oauth)
        # what admission refuses to call (403 insufficient_scope), tools/list does not show
        gateway.require_scopes(oauth.tool_scopes)
        routes.update(dict.fromkeys(metadata_paths(oauth), MetadataApp(oauth)))
    # refusals before the wire: admission's and the body's size (those without a token sampled)
    sampler = sampled(audit.record)
    record = observed(sampler, metrics, tracer, window=window, wire="http")
    admission = Admission(
        store,
        record,
        origins=origins,
        max_in_flight=(edge if edge is not None else EdgeLimits()).max_in_flight,
        oauth=verifier,
        max_body=gateway.limits.max_size,
        unauthenticated_rate=(edge if edge is not None else EdgeLimits()).unauthenticated_rate,
    )
    app = (RpcApp if metrics is None and tracer is None else ObservedRpcApp)(
        RpcService(gateway, record_of("rpc")),
        store,
        max_body=gateway.limits.max_size,
        record=record,
        admission=admission,
        mounts={"/mcp": mcp},
        routes=routes,
        lifespans=[
            *lifespans,
            *serving.lifespans,
            *([] if verifier is None else [verifier.lifespan]),
            *([] if gateway.policy is None else [gateway.policy.serving]),
            audit.running,
            sampler.running,  # left before the audit stops: its waiting count rows written
            mcp.lifespan,
            *([] if metrics is None else [metrics.running]),
            *([] if window is None else [window.running]),
        ],
        count_in_flight=metrics is not None,
    )
    app.on_stop.append(mcp.stop_streams)
    if isinstance(app, ObservedRpcApp):
        app.tracer = tracer
        app.on_response = None if metrics is None else metrics.http_response
    if metrics is not None:
        metrics.requests_in_flight = lambda: app.requests_in_flight
        metrics.audit_backlog = lambda: audit.pending
        metrics.audit_lost = lambda: audit.lost_total
        metrics.store_available = lambda: health.outage is None
        metrics.store_outages = lambda: health.outages
    return app


class ObservedRpcApp(RpcApp):
    """`RpcApp`, telling `on_response` the path and status of every HTTP response (the
    metrics' count of statuses), those answered in place (`answer_now`) too; and while
    `tracer` makes spans, answering each request in its caller's trace context (W3C
    `traceparent`), the store's work kept for its calls' spans."""

    on_response: Callable[[str, int], None] | None = None
    tracer: CallTracer | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        on_response = self.on_response
        if on_response is None:
            answer = send
        else:
            path = scope["path"]

            async def answer(message: Message) -> None:
                if message["type"] == "http.response.start":
                    on_response(path, message["status"])
                await send(message)

        tracer = self.tracer
        if tracer is None or not tracer.active():
            await super().__call__(scope, receive, answer)
            return
        from strictcall.ops.tracing import request_context

        with request_context(scope["headers"]):
            await super().__call__(scope, receive, answer)

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | Later | None:
        tracer = self.tracer
        if tracer is None or not tracer.active():
            response = super().answer_now(scope, body)
        else:
            from strictcall.ops.tracing import request_context

            with request_context(scope["headers"]):
                response = super().answer_now(scope, body)
            if response is not None and not isinstance(response, tuple):
                response = self._traced(scope, response)
        if response is None or self.on_response is None:
            return response
        if isinstance(response, tuple):
            self.on_response(scope["path"], response[0])
            return response
        return self._observed(scope["path"], response, self.on_response)

    async def _traced(self, scope: Scope, later: Later) -> Response:
        """`later` awaited in its caller's trace context, as `__call__` answers."""
        from strictcall.ops.tracing import request_context

        with request_context(scope["headers"]):
            return await later

    async def _observed(
        self, path: str, later: Later, on_response: Callable[[str, int], None]
    ) -> Response:
        response = await later
        on_response(path, response[0])
        return response


class LoadingMcp:
    """/mcp (`strictcall.transports.mcp.McpHttpApp`), its SDK loaded on a thread once the server has
    started: the MCP SDK (pydantic, starlette, ...) is most of a server's start-up, and /rpc and
    /healthz need none of it. A request to /mcp that arrives before it is loaded waits for it;
    should it fail to load (logged), /mcp answers 503."""

    def __init__(
        self, gateway: Gateway, serving: Serving, streams: StreamLimits | None = None
    ) -> None:
        """`streams`: the change streams' budgets, where the listing can change (`McpHttpApp`)."""
        self._gateway = gateway
        self._serving = serving
        self._streams = streams
        self._app: McpHttpApp | None = None
        self._ready: asyncio.Event | None = None

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Load and run the MCP app in a task of its own (which enters and leaves the SDK's
        session manager), while the server runs."""
        self._ready = asyncio.Event()
        stop = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._run(stop))
        try:
            yield
        finally:
            stop.set()
            await task

    async def _run(self, stop: asyncio.Event) -> None:
        assert self._ready is not None
        try:
            loaded = await asyncio.to_thread(importlib.import_module, "strictcall.transports.mcp")
            app = loaded.McpHttpApp(self._gateway, self._serving, streams=self._streams)
            async with app.lifespan():
                self._app = app
                self._ready.set()
                # The SDK lives as long as the server: out of the collector's generations, like
                # everything loaded before it (see _uvicorn.Server.startup); left in, each full
                # collection walked all of it (~50 ms with the loop stalled).
                gc.freeze()
                await stop.wait()
        except Exception:
            log.exception("the MCP app could not start: /mcp answers 503")
        finally:
            self._app = None
            self._ready.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self._gateway.limits.max_size
        if scope["method"] == "POST" and declared_length(scope) > limit:
            # refused before a byte of the body is read, and before the SDK is waited for
            refusal = too_large(limit)
            record = self._serving.record
            if record is not None:
                identity = scope.get(IDENTITY_KEY)
                caller = identity if isinstance(identity, str) else None
                record(refusal_record(refusal.as_error(), caller))
            answer = orjson.dumps(refusal_reply(None, refusal))
            await send_response(send, (413, response_headers(answer), answer))
            return
        if self._app is None and self._ready is not None:
            await self._ready.wait()
        app = self._app
        if app is None:  # not loaded (it failed), or the server is stopping
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    def stop_streams(self) -> None:
        """End /mcp's change streams now (the server's graceful stop begins)."""
        if self._app is not None:
            self._app.stop_streams()

    def answer_now(self, scope: Scope, body: bytes | bytearray) -> Response | Later | None:
        """A plain MCP request answered in place once the SDK is loaded (`McpHttpApp`); None
        (the app then runs on it) before, or for anything else."""
        app = self._app
        return None if app is None else app.answer_now(scope, body)


def observed(
    record: Recorder,
    metrics: Metrics | None,
    tracer: CallTracer | None,
    *,
    window: RecentCalls | None = None,
    wire: str = "rpc",
) -> Recorder:
    """`record`, with each record of `wire` also counted in `metrics` and `window` and traced
    by `tracer`."""
    if metrics is None and tracer is None and window is None:
        return record
    counted = None if metrics is None else metrics.observer(wire)
    tallied = None if window is None else window.observer(wire)

    def observe(entry: AuditRecord) -> None:
        if counted is not None:
            counted(entry)
        if tallied is not None:
            tallied(entry)
        if tracer is not None:
            tracer.observe(entry, wire)
        record(entry)

    return observe


def _metrics(gateway: Gateway) -> Metrics | None:
    """The app's metrics, or None without strictcall[metrics] (then /metrics says so)."""
    try:
        from strictcall.ops.metrics import Metrics
    except MissingExtra:
        return None
    names = _ToolNames(gateway)
    return Metrics(names, source_of=names.source_of)


class _ToolNames:
    """The names of the tools `gateway` serves now, as a container: a proxy's tools are
    listed after the app is built, and change (metrics label their calls by name)."""

    __slots__ = ("_gateway",)

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def __contains__(self, name: object) -> bool:
        return type(name) is str and self._gateway.tool_named({"name": name}) is not None

    def source_of(self, name: str) -> str | None:
        """The upstream the tool named forwards to (None: one of the server's own)."""
        return self._gateway.source_of(name)


def _window(health: StoreHealth) -> RecentCalls:
    """The page's in-memory counts of the last hour."""
    from strictcall.ops.window import RecentCalls

    return RecentCalls(health)


def _traced(store: Store) -> Store:
    """`store`, its operations timed for the spans of the calls they serve (with the
    OpenTelemetry API installed), else `store` itself."""
    from strictcall.ops import tracing

    if not tracing.available():
        return store
    return cast(Store, tracing.TracedStore(store))


def _tracer() -> CallTracer | None:
    """A tracer of calls, or None without the OpenTelemetry API (no cost at all then)."""
    from strictcall.ops import tracing

    return tracing.CallTracer() if tracing.available() else None


def serve(
    app: RpcApp,
    host: str,
    port: int,
    on_ready: Callable[[str, int], None],
    *,
    edge: EdgeLimits | None = None,
    on_stopping: Callable[[], None] | None = None,
) -> None:
    """Serve `app` until SIGTERM or SIGINT; `port` 0 lets the system choose one. Requests
    must arrive within `edge`'s deadlines, on at most `edge.max_connections` connections.

    `on_ready` is told the bound address once the server listens, `on_stopping` that a stop
    has begun (the requests in flight are then finished).

    Raises:
        ListenError: the host does not resolve, or the port cannot be bound (in use, say).
    """
    sockets = bind_listeners(host, port)
    # httptools, one write per response, slow requests cut off (strictcall.server._uvicorn)
    protocol = guarded_protocol(edge if edge is not None else EdgeLimits())
    config = server_config(app, host, port, graceful_s=GRACEFUL_SHUTDOWN_S, http=protocol)

    def stopping() -> None:
        app.stopping()  # the change streams end: none holds the stop for its grace
        if on_stopping is not None:
            on_stopping()

    Server(config, on_ready, stopping).run(sockets=sockets)


def _policy_checked(path: str) -> Callable[[], bool]:
    """SIGHUP to the workers' parent: whether the policy file checks (else one line says why,
    and the workers keep serving the old one; when it does, they restart one by one, each
    finishing its calls in flight, the new ones reading the file as they start)."""

    def check() -> bool:
        from strictcall.services.policy_file import read_policy

        try:
            read_policy(path)
        except PolicyFileError as exc:
            log.error("strictcall: policy %s not reloaded, the old one stays: %s", path, exc)
            return False
        return True

    return check


def serve_workers(
    db: str,
    host: str,
    port: int,
    workers: int,
    on_ready: Callable[[str, int], None],
    *,
    edge: EdgeLimits | None = None,
    allow_origins: Sequence[str] = (),
    loopback: bool = False,
    open_to_operators: bool = False,
    oauth_config: dict[str, object] | None = None,
    policy: str | None = None,
    audit_retention: AuditRetention | None = None,
) -> None:
    """Serve the notes tools from `db` in `workers` processes on the sockets bound to `host`
    and `port`, until SIGTERM or SIGINT to this process (or SIGINT to its process group, as
    Ctrl-C sends): each worker then finishes its requests in flight and closes its store. Each
    applies `edge` to its own connections and calls (so N workers take N times
    `edge.max_connections`) and admits the same origins and operators as one server would.

    Raises:
        ListenError: the host does not resolve, or the port cannot be bound (in use, say).
    """
    settings = {
        "db": db,
        "edge": asdict(edge if edge is not None else EdgeLimits()),
        "origins": sorted(allow_origins),
        "loopback": loopback,
        "open_to_operators": open_to_operators,
        "oauth": oauth_config,  # the config file's path and the flags: each worker reads them
        "policy": policy,
        "audit": None if audit_retention is None else asdict(audit_retention),
    }
    os.environ[WORKER_ENV] = json.dumps(settings)  # inherited by the spawned workers
    config = server_config(
        "strictcall.server.processes:app",
        host,
        port,
        graceful_s=GRACEFUL_SHUTDOWN_S,
        factory=True,
        workers=workers,
        http="strictcall.server.processes:Protocol",  # a class made in each worker,
        # from its settings
    )
    sockets = bind_listeners(host, port)
    try:
        checked = None if policy is None else _policy_checked(policy)
        Workers(config, sockets, on_ready, start_s=WORKER_START_S, before_restart=checked).run()
    finally:
        for sock in sockets:
            sock.close()
