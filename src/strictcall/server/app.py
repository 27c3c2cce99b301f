"""Running the service: the notes gateway behind JSON-RPC and MCP on uvicorn.

uvicorn (with httptools, and uvloop where installed) is the ASGI server, its socket writes
coalesced to one per response (`strictcall.server.coalesce`). On SIGTERM or SIGINT it stops
accepting,
finishes the requests in flight, and only then does the store close. Every write is committed
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
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict
from types import FrameType
from typing import TYPE_CHECKING, Final

from strictcall.errors import MissingExtra

try:
    import uvicorn
    from uvicorn.supervisors import Multiprocess
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("server", "uvicorn") from None

from strictcall.audit.log import AuditLog
from strictcall.core.gateway import Gateway
from strictcall.core.pipeline import Limits
from strictcall.core.tools import Tool
from strictcall.server.edge import EdgeLimits, OriginPolicy
from strictcall.server.guard import guarded_protocol
from strictcall.server.listen import bind_listeners
from strictcall.server.router import RpcApp
from strictcall.services.notes import notes_gateway
from strictcall.storage import AuditRecord, Store, StoreUnavailable
from strictcall.transports.asgi import ASGIApp, Receive, Scope, Send
from strictcall.transports.jsonrpc import Recorder, RpcService

if TYPE_CHECKING:
    from strictcall.ops.metrics import Metrics
    from strictcall.ops.tracing import CallTracer

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
) -> RpcApp:
    """The ASGI app serving the notes tools from `store` (see `build_gateway_app`). With
    `close_store`, the app closes the store when the server stops, after the last audit batch."""

    @asynccontextmanager
    async def closing() -> AsyncIterator[None]:
        try:
            yield
        finally:
            if close_store:
                store.close()

    return build_gateway_app(
        notes_gateway(store, limits=limits),
        store,
        origins=origins,
        edge=edge,
        lifespans=[closing],  # entered first, left last
        open_to_operators=open_to_operators,
        observe=observe,
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
    tool_changes: Callable[[], int] | None = None,
) -> RpcApp:
    """The ASGI app serving any gateway's tools: JSON-RPC at /rpc, MCP at /mcp, the callers'
    tokens and the audit log in `store`, for the browser `origins` admitted and within
    `edge.max_in_flight` calls per identity; and for operators the page at /,
    /ops/stats.json and /metrics (`strictcall.server.ops`), which need an operator's token unless
    `open_to_operators` (a server bound to a loopback address). `lifespans` are entered at
    startup before the server's own (e.g. a proxy's upstream session) and left after them.

    Every call's audit record also feeds the Prometheus metrics (with strictcall[metrics]) and
    an OpenTelemetry span (with strictcall[otel] and an SDK's tracer provider set); with
    `observe` false, neither (the floor `bench/ops.py` measures their cost against).
    `tool_changes` counts the pinned tools seen changed (a federation's), for /metrics.
    """
    from strictcall.server.ops import PATHS, OpsApp

    metrics = _metrics(gateway.tools) if observe else None
    if metrics is not None and tool_changes is not None:
        metrics.tool_changes = tool_changes
    audit = AuditLog(store, on_fault=None if metrics is None else metrics.audit_fault)
    record = observed(audit.record, metrics, _tracer() if observe else None)
    mcp = LoadingMcp(gateway, record)
    ops = OpsApp(
        store,
        open_without_token=open_to_operators,
        exposition=None if metrics is None else metrics.exposition,
        health=lambda: {"audit records waiting": audit.pending, "audit records lost": audit.lost},
    )
    app = RpcApp(
        RpcService(gateway, record),
        store,
        max_body=gateway.limits.max_size,
        record=record,
        mounts={"/mcp": mcp},
        routes=dict.fromkeys(PATHS, ops),
        lifespans=[
            *lifespans,
            audit.running,
            mcp.lifespan,
            *([] if metrics is None else [metrics.running]),
        ],
        origins=origins,
        max_in_flight=(edge if edge is not None else EdgeLimits()).max_in_flight,
        count_in_flight=metrics is not None,
    )
    if metrics is not None:
        metrics.requests_in_flight = lambda: app.requests_in_flight
    return app


class LoadingMcp:
    """/mcp (`strictcall.transports.mcp.McpHttpApp`), its SDK loaded on a thread once the server has
    started: the MCP SDK (pydantic, starlette, ...) is most of a server's start-up, and /rpc and
    /healthz need none of it. A request to /mcp that arrives before it is loaded waits for it;
    should it fail to load (logged), /mcp answers 503."""

    def __init__(self, gateway: Gateway, record: Recorder) -> None:
        self._gateway = gateway
        self._record = record
        self._app: ASGIApp | None = None
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
            app = loaded.McpHttpApp(self._gateway, record=self._record)
            async with app.lifespan():
                self._app = app
                self._ready.set()
                # The SDK lives as long as the server: out of the collector's generations, like
                # everything loaded before it (see _Server.startup); left in, each full
                # collection walked all of it (~50 ms with the loop stalled).
                gc.freeze()
                await stop.wait()
        except Exception:
            log.exception("the MCP app could not start: /mcp answers 503")
        finally:
            self._app = None
            self._ready.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None and self._ready is not None:
            await self._ready.wait()
        app = self._app
        if app is None:  # not loaded (it failed), or the server is stopping
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)


def observed(record: Recorder, metrics: Metrics | None, tracer: CallTracer | None) -> Recorder:
    """`record`, with each record also counted in `metrics` and traced by `tracer`."""
    if metrics is None and tracer is None:
        return record

    def observe(entry: AuditRecord) -> None:
        if metrics is not None:
            metrics.observe(entry)
        if tracer is not None:
            tracer.observe(entry)
        record(entry)

    return observe


def _metrics(tools: Sequence[Tool]) -> Metrics | None:
    """The app's metrics, or None without strictcall[metrics] (then /metrics says so)."""
    try:
        from strictcall.ops.metrics import Metrics
    except MissingExtra:
        return None
    return Metrics(tool.name for tool in tools)


def _tracer() -> CallTracer | None:
    """A tracer of calls, or None without the OpenTelemetry API (no cost at all then)."""
    from strictcall.ops import tracing

    return tracing.CallTracer() if tracing.available() else None


class _Server(uvicorn.Server):
    """uvicorn's server, telling `on_ready` the bound address once it listens."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_ready: Callable[[str, int], None],
        on_stopping: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._on_stopping = on_stopping

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Begin the graceful stop; the signal is not raised again after it (uvicorn would),
        so the store is closed and the process exits 0."""
        super().handle_exit(sig, frame)
        self._captured_signals.clear()

    async def startup(self, sockets: list[object] | None = None) -> None:  # type: ignore[override]
        await super().startup(sockets)  # type: ignore[arg-type]
        # Everything loaded so far lives as long as the server: keep it out of the collector's
        # generations, so that collections triggered by calls look at calls' objects only.
        gc.freeze()
        if self.started and self.servers:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self._on_ready(str(host), int(port))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Told here, on the loop, not in the signal handler, which may interrupt a write.
        if self._on_stopping is not None and self.started:
            self._on_stopping()
        await super().shutdown(sockets)


def _config(app: RpcApp | str, host: str, port: int, **more: object) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        lifespan="on",
        access_log=False,
        proxy_headers=False,  # nothing here reads the client's address
        log_level="warning",
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        **more,  # type: ignore[arg-type]
    )


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
    # httptools, one write per response, slow requests cut off (strictcall.server.guard)
    protocol = guarded_protocol(edge if edge is not None else EdgeLimits())
    _Server(_config(app, host, port, http=protocol), on_ready, on_stopping).run(sockets=sockets)


class _Workers(Multiprocess):
    """uvicorn's supervisor, telling `on_ready` the bound address once every worker serves."""

    def __init__(
        self,
        config: uvicorn.Config,
        sockets: list[socket.socket],
        on_ready: Callable[[str, int], None],
    ) -> None:
        super().__init__(config, sockets=sockets)
        self._sockets = sockets
        self._on_ready = on_ready

    def init_processes(self) -> None:
        super().init_processes()
        for process in self.processes:
            if not process.wait_until_ready(WORKER_START_S, self.should_exit):
                log.error("a worker did not start; stopping")
                self.should_exit.set()
                return
        host, port = self._sockets[0].getsockname()[:2]
        self._on_ready(str(host), int(port))


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
    }
    os.environ[WORKER_ENV] = json.dumps(settings)  # inherited by the spawned workers
    config = _config(
        "strictcall.server.processes:app",
        host,
        port,
        factory=True,
        workers=workers,
        http="strictcall.server.processes:Protocol",  # a class made in each worker,
        # from its settings
    )
    sockets = bind_listeners(host, port)
    try:
        _Workers(config, sockets, on_ready).run()
    finally:
        for sock in sockets:
            sock.close()
