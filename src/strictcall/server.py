"""Running the service: the notes gateway behind JSON-RPC and MCP on uvicorn.

uvicorn (with httptools, and uvloop where installed) is the ASGI server, its socket writes
coalesced to one per response (`strictcall.coalesce`). On SIGTERM or SIGINT it stops accepting,
finishes the requests in flight, and only then does the store close. Every write is committed
before its answer is sent, so no acknowledged write is lost.

`serve_workers` runs N such servers as processes on one listening socket (uvicorn's supervisor:
it restarts a worker that dies; SIGINT or SIGTERM to it stops them all, each finishing its
requests in flight). Each worker (`strictcall.workers`) opens its own store, with its own
connections and token cache.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from types import FrameType
from typing import Final

from strictcall.errors import MissingExtra

try:
    import uvicorn
    from uvicorn.supervisors import Multiprocess
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("server", "uvicorn") from None

from strictcall.audit import AuditLog
from strictcall.edge import EdgeLimits, OriginPolicy
from strictcall.guard import guarded_protocol
from strictcall.http import RpcApp
from strictcall.jsonrpc import Recorder, RpcService
from strictcall.notes import notes_gateway
from strictcall.pipeline import Limits
from strictcall.storage import AuditRecord, Store, StoreUnavailable

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
) -> RpcApp:
    """The ASGI app serving the notes tools from `store`: JSON-RPC at /rpc, MCP at /mcp, for
    the browser `origins` admitted and within `edge.max_in_flight` calls per identity. With
    `close_store`, the app closes the store when the server stops, after the last audit batch."""
    from strictcall.mcp import McpHttpApp  # the MCP SDK loads only for a server

    gateway = notes_gateway(store, limits=limits)
    audit = AuditLog(store)
    mcp = McpHttpApp(gateway, record=audit.record)

    @asynccontextmanager
    async def closing() -> AsyncIterator[None]:
        try:
            yield
        finally:
            if close_store:
                store.close()

    return RpcApp(
        RpcService(gateway, audit.record),
        store,
        max_body=gateway.limits.max_size,
        record=audit.record,
        mounts={"/mcp": mcp},
        lifespans=[closing, audit.running, mcp.lifespan],  # left in reverse order
        origins=origins,
        max_in_flight=(edge if edge is not None else EdgeLimits()).max_in_flight,
    )


class _Server(uvicorn.Server):
    """uvicorn's server, telling `on_ready` the bound address once it listens."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[str, int], None]) -> None:
        super().__init__(config)
        self._on_ready = on_ready

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
) -> None:
    """Serve `app` until SIGTERM or SIGINT; `port` 0 lets the system choose one. Requests
    must arrive within `edge`'s deadlines, on at most `edge.max_connections` connections."""
    # httptools, one write per response, slow requests cut off (strictcall.guard)
    protocol = guarded_protocol(edge if edge is not None else EdgeLimits())
    _Server(_config(app, host, port, http=protocol), on_ready).run()


class _Workers(Multiprocess):
    """uvicorn's supervisor, telling `on_ready` the bound address once every worker serves."""

    def __init__(
        self, config: uvicorn.Config, sock: socket.socket, on_ready: Callable[[str, int], None]
    ) -> None:
        super().__init__(config, sockets=[sock])
        self._sock = sock
        self._on_ready = on_ready

    def init_processes(self) -> None:
        super().init_processes()
        for process in self.processes:
            if not process.wait_until_ready(WORKER_START_S, self.should_exit):
                log.error("a worker did not start; stopping")
                self.should_exit.set()
                return
        host, port = self._sock.getsockname()[:2]
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
) -> None:
    """Serve the notes tools from `db` in `workers` processes on one socket, until SIGTERM or
    SIGINT to this process (or SIGINT to its process group, as Ctrl-C sends): each worker then
    finishes its requests in flight and closes its store. Each applies `edge` to its own
    connections and calls (so N workers take N times `edge.max_connections`)."""
    settings = {
        "db": db,
        "edge": asdict(edge if edge is not None else EdgeLimits()),
        "origins": sorted(allow_origins),
        "loopback": loopback,
    }
    os.environ[WORKER_ENV] = json.dumps(settings)  # inherited by the spawned workers
    config = _config(
        "strictcall.workers:app",
        host,
        port,
        factory=True,
        workers=workers,
        http="strictcall.workers:Protocol",  # a class made in each worker, from its settings
    )
    sock = config.bind_socket()
    try:
        _Workers(config, sock, on_ready).run()
    finally:
        sock.close()
