"""The one home of uvicorn's internals: every class of uvicorn's that strictcall subclasses, and
every private name of uvicorn's it reads, overrides or calls, is here and nowhere else; each is
pinned by tests/test_dependencies.py, which fails naming what changed when a new release does
(then check the release and move the bound in pyproject.toml).

What is leaned on (all of uvicorn 0.30 to 0.54):

    uvicorn._types.ASGI3Application                 the type of a protocol's app
    httptools_impl.HttpToolsProtocol                subclassed: one write per response, answers
                                                    in place, the connection's guard
      ._start_asgi_task(cycle, app)                 overridden and called: a request's task
      ._unset_keepalive_if_required()               called: a request answered in place ends
      .on_headers_complete / on_message_complete /  parser callbacks, overridden
       on_message_begin / on_body / data_received /
       connection_made / connection_lost
      ._should_upgrade(), ._unsupported_upgrade_warning()  overridden: an Upgrade is refused 400
      .parser.should_upgrade()                      called: a request to switch protocols
      .on_response_complete, .timeout_keep_alive_handler, .pipeline, .flow,
       .server_state.total_requests, .connections, .timeout_keep_alive, .loop, .app, .logger
    httptools_impl.RequestResponseCycle             .scope .body .keep_alive
                                                    .waiting_for_100_continue .default_headers
                                                    .response_started .response_complete
    httptools_impl.STATUS_LINE                      written by an answer made in place
    uvicorn.Server._captured_signals                cleared: a graceful stop exits 0
      .handle_exit(sig, frame)                      overridden (sse_starlette, loaded by the
                                                    MCP SDK, wraps it too, calling uvicorn's)
    supervisors.Multiprocess.init_processes,        overridden: ready once every worker serves
      .processes, .should_exit,
      Process.wait_until_ready(timeout, should_exit)

Three parts:

- `Server` and `Workers`: uvicorn's server and its supervisor of worker processes, telling the
  caller the bound address once it listens (and, for the workers, once every one serves).

- `CoalescingHttpToolsProtocol`: one write per response. uvicorn writes a response's status
  line and headers when the app sends `http.response.start`, and its body, separately, on
  `http.response.body`: two send() system calls, and on a busy loopback two wake-ups of the
  client for one answer. Measured on `strictcall serve` (2 cores, wrk at 16 connections),
  joining them saves about a quarter of the server's CPU per call. `CoalescedWrites` holds
  every write made during one turn of the event loop and hands them to the socket's transport
  as one, on the loop's next turn (`call_soon`): the same bytes, in the same order, a few
  microseconds later. `close()` writes what it holds first; what is still held when the
  connection is already closing is dropped, as the transport itself would drop it.

  Answered in place: an app with an `answer_now(scope, body)` method
  (`strictcall.server.router.RpcApp`, through `strictcall.server.admission`) is asked for a
  POST to /rpc whose body arrives in the same read as its headers, in a callback on the loop's
  next turn, with no task made: it answers there (one write), or hands back a `Later` (a call
  to a tool that must be awaited, e.g. a proxied one: awaited in a task of its own, without
  uvicorn's receive, send and ASGI messages, and written as an answer made there), or says
  None, and the request then runs through the app as any other. A body still on the way
  when the read is parsed, an `Expect: 100-continue`, a request pipelined behind one in
  progress: these run through the app, as uvicorn runs them. uvicorn's per-request task, its
  receive and send coroutines and the ASGI messages cost more than a call to a tool that
  answers in microseconds (bench/RESULTS.md, HTTP). Answered in place or through the app, a
  request to one of these paths is told when its connection closes (`CONNECTION_GONE`): a
  2026-07-28 call on /mcp is cancelled by its closed stream however its body arrived.

- `guarded_protocol`: the connection's guard, deadlines for a request's headers and body and a
  cap on connections. uvicorn times out an idle keep-alive connection, but not a client that
  sends its request slowly: a connection that trickles one header byte a second stays open for
  as long as the client likes, and a few hundred of them hold every connection a server can
  take. The guard gives the protocol three limits (`strictcall.server.edge.EdgeLimits`):

  - a request's headers must arrive within `header_timeout_s` of its first byte (or of the
    connection, for its first request): else 408 and the connection is closed;
  - its body must keep up a minimum rate: `body_grace_s`, plus one second per `body_min_rate`
    bytes received; else the connection is closed (the app sees the client disconnect);
  - at most `max_connections` are open at once, at most `max_connections_per_client` from one
    client address (`client_key`: an IPv6 client's /64): one more is answered 503 and closed
    at once, so one address's idle sockets leave the others their share;
  - a request line longer than `MAX_REQUEST_LINE_BYTES` is answered 414, a head (line and
    headers) longer than `MAX_HEADER_BYTES` 431, and the connection closed: counted as the
    bytes arrive, before the parser sees more of them (httptools spends quadratic time on one
    long header line, and holds what it is given);
  - a request to switch protocols (`Upgrade:`, a WebSocket handshake among them) is answered
    400 and closed: nothing here speaks another protocol, and uvicorn would hand a WebSocket
    to the app, which answers none (500).

  None of this holds a worker: the deadlines are timers on the event loop. A connection keeps
  at most one timer, moved only when a deadline comes sooner than it: a request that ends
  before its deadline costs two timestamps, not a timer made and cancelled (the timer, when it
  fires, finds the next deadline, or none).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import logging
import socket
from collections.abc import Callable, Iterable
from contextvars import Context, copy_context
from types import FrameType
from typing import Any, Final, cast

from strictcall.errors import MissingExtra

try:
    import uvicorn
    from uvicorn._types import ASGI3Application
    from uvicorn.protocols.http.httptools_impl import (
        STATUS_LINE,
        HttpToolsProtocol,
        RequestResponseCycle,
    )
    from uvicorn.supervisors import Multiprocess
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("server", "uvicorn") from None

from strictcall.server.edge import (
    MAX_HEADER_BYTES,
    MAX_REQUEST_LINE_BYTES,
    EdgeLimits,
    client_key,
)
from strictcall.server.logs import log_config
from strictcall.transports.asgi import CONNECTION_GONE, ASGIApp, Later, Response

log = logging.getLogger("strictcall")


# --- the server and its worker processes -------------------------------------------------------


def server_config(
    app: ASGIApp | str, host: str, port: int, *, graceful_s: int, **more: object
) -> uvicorn.Config:
    """uvicorn's settings for strictcall: uvloop where installed, lifespan on, no access log,
    no Server or Date header, `graceful_s` seconds for the requests in flight at a stop."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        lifespan="on",
        access_log=False,
        proxy_headers=False,  # nothing here reads the client's address
        log_level="warning",
        log_config=log_config(),
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=graceful_s,
        **more,  # type: ignore[arg-type]
    )


class Server(uvicorn.Server):
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


class Workers(Multiprocess):
    """uvicorn's supervisor, telling `on_ready` the bound address once every worker serves."""

    def __init__(
        self,
        config: uvicorn.Config,
        sockets: list[socket.socket],
        on_ready: Callable[[str, int], None],
        *,
        start_s: float,
        before_restart: Callable[[], bool] | None = None,
    ) -> None:
        """`start_s`: how long to wait for each worker to be ready before saying it listens;
        `before_restart`: asked on SIGHUP, before uvicorn restarts the workers (False: they
        serve on as they are; a policy file that does not check)."""
        super().__init__(config, sockets=sockets)
        self._sockets = sockets
        self._on_ready = on_ready
        self._start_s = start_s
        self._before_restart = before_restart

    def handle_hup(self) -> None:
        if self._before_restart is not None and not self._before_restart():
            return
        super().handle_hup()

    def init_processes(self) -> None:
        super().init_processes()
        for process in self.processes:
            if not process.wait_until_ready(self._start_s, self.should_exit):
                log.error("a worker did not start; stopping")
                self.should_exit.set()
                return
        host, port = self._sockets[0].getsockname()[:2]
        self._on_ready(str(host), int(port))


# --- one write per response, and answers made in place ----------------------------------------

AnswerNow = Callable[[Any, bytearray], "Response | Later | None"]
"""An app's `answer_now(scope, body)`: a request answered in place (now, or once a `Later` is
awaited), or None to run the app."""

IN_PLACE_PATHS: Final = frozenset({"/rpc", "/mcp"})
"""The paths whose POSTs are offered to the app's `answer_now` (JSON-RPC, and MCP's plain
stateless requests)."""

_FAILED: Final = (
    500,
    [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21")],
    b"Internal Server Error",
)


class CoalescedWrites:
    """A transport that joins the writes of one loop turn into one write to `transport`."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes) -> None:
        """Hold `data`; everything held is written on the loop's next turn."""
        if not self._held:
            self._loop.call_soon(self._write_held)
        self._held.append(data)

    def _write_held(self) -> None:
        if not self._held:
            return
        data = b"".join(self._held)
        self._held.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def writelines(self, chunks: Iterable[bytes]) -> None:
        for data in chunks:
            self.write(data)

    def close(self) -> None:
        """Write what is held, then close the transport (which sends its buffer first)."""
        self._write_held()
        self._transport.close()

    def write_eof(self) -> None:
        self._write_held()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        """Bytes held here and in the transport's own buffer."""
        return sum(map(len, self._held)) + self._transport.get_write_buffer_size()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)  # everything else is the transport's own


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing through `CoalescedWrites`, answering in place
    what its app can answer in place (see the module's docstring)."""

    _deferred: tuple[RequestResponseCycle, ASGI3Application] | None = None
    _in_headers = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._answer_now: AnswerNow | None = getattr(self.app, "answer_now", None)
        self._gone: list[Callable[[], None]] = []
        coalesced = cast(asyncio.Transport, CoalescedWrites(transport, self.loop))
        super().connection_made(coalesced)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        deferred = self._deferred
        if deferred is not None:  # its body is still on the way: the app awaits it as usual
            self._deferred = None
            if not self.transport.is_closing():
                self._run_app(*deferred)

    def connection_lost(self, exc: Exception | None) -> None:
        gone, self._gone = self._gone, []
        for told in gone:  # the calls awaited for this connection that asked to be told
            told()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._in_headers = True
        try:
            super().on_headers_complete()
        finally:
            self._in_headers = False

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if (
            self._in_headers
            and self._answer_now is not None
            and app is self.app
            and cycle.scope["path"] in IN_PLACE_PATHS
            and cycle.scope["method"] == "POST"
            and not cycle.waiting_for_100_continue
        ):
            self._deferred = (cycle, app)  # answered in place if its body is in this read
            return
        if cycle.scope["path"] in IN_PLACE_PATHS:
            self._run_app(cycle, app)
            return
        super()._start_asgi_task(cycle, app)

    def _run_app(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        """A request to an in-place path run through the app (its body came in a later read,
        or the app would not answer it in place): its task is told when its connection closes
        (`CONNECTION_GONE`), as one answered in place is; else a call awaited there (a proxied
        one's) would run on, its upstream never told, after its caller closed its stream."""
        self._told_when_gone().run(super()._start_asgi_task, cycle, app)

    def _told_when_gone(self) -> Context:
        """A context whose tasks are told when this connection closes (`CONNECTION_GONE`)."""
        context = copy_context()
        context.run(CONNECTION_GONE.set, self._gone)
        return context

    def on_message_complete(self) -> None:
        super().on_message_complete()
        deferred = self._deferred
        if deferred is None:
            return
        cycle, app = deferred
        self._deferred = None
        # Answered on the loop's next turn, not here in the read: measured at 64 connections,
        # answering inside the read held the answers of one turn behind the next turn's reads
        # (p99 several times uvicorn's own); from the ready queue, p99 is uvicorn's or better.
        self.loop.call_soon(self._answer, cycle, app)

    def _answer(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if self.transport.is_closing():  # the client left: nothing to answer
            return
        assert self._answer_now is not None  # deferred only then
        try:
            response = self._answer_now(cycle.scope, cycle.body)
        except Exception as exc:  # as uvicorn answers an app's exception
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            response, cycle.keep_alive = _FAILED, False
        if response is None:  # the app runs, its body already here
            self._run_app(cycle, app)
            return
        if not isinstance(response, tuple):  # a call to await: in a task, without the ASGI cycle
            task = self.loop.create_task(
                self._answer_later(cycle, response), context=self._told_when_gone()
            )
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)  # the server's shutdown waits for it, as for the app's
            return
        self._write_now(cycle, response)

    async def _answer_later(self, cycle: RequestResponseCycle, later: Later) -> None:
        try:
            response = await later
        except Exception as exc:  # as uvicorn answers an app's exception
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            response, cycle.keep_alive = _FAILED, False
        if self.transport.is_closing():  # the client left while its call ran
            return
        self._write_now(cycle, response)

    def _write_now(self, cycle: RequestResponseCycle, response: Response) -> None:
        """Write an answer made in place, and end its request as uvicorn's cycle would."""
        status, headers, body = response
        content = [STATUS_LINE[status]]
        for name, value in (*cycle.default_headers, *headers):
            content.extend((name, b": ", value, b"\r\n"))
        if not cycle.keep_alive:
            content.append(b"connection: close\r\n")
        content.extend((b"\r\n", body))
        cycle.response_started = cycle.response_complete = True
        # held to the loop's next turn, as every write here: the answers made in one turn
        # leave together (written at once, each would wake the client alone: measured, more
        # CPU per request on a busy machine)
        self.transport.write(b"".join(content))
        if not cycle.keep_alive:
            self.transport.close()
        self._answered_now()

    def _answered_now(self) -> None:
        """A request answered in place is done: as uvicorn ends one (and starts the next
        request pipelined behind it, if any)."""
        self.on_response_complete()


# --- the connection's guard: deadlines and a cap on connections --------------------------------

_TIMED_OUT: Final = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 16\r\nconnection: close\r\n\r\nrequest too slow"
)
_FULL: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"retry-after: 1\r\ncontent-length: 20\r\nconnection: close\r\n\r\ntoo many connections"
)


_URI_TOO_LONG: Final = (
    b"HTTP/1.1 414 URI Too Long\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 21\r\nconnection: close\r\n\r\nrequest line too long"
)
_HEAD_TOO_LARGE: Final = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8"
    b"\r\ncontent-length: 25\r\nconnection: close\r\n\r\nrequest headers too large"
)
_NO_UPGRADE: Final = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 21\r\nconnection: close\r\n\r\nupgrade not supported"
)


def guarded_protocol(limits: EdgeLimits) -> type[CoalescingHttpToolsProtocol]:
    """uvicorn's httptools protocol class, coalesced and guarded by `limits`."""
    per_client: dict[str, int] = {}  # a server's connections open, by client address

    class GuardedHttpToolsProtocol(CoalescingHttpToolsProtocol):
        edge: Final = limits
        _client: str | None = None  # counted in per_client under this address
        _timer: asyncio.TimerHandle | None = None
        _timer_at = 0.0
        _due: float | None = None  # when the deadline armed passes; None: none is armed
        _then: Callable[[], None] | None = None
        _body_started = 0.0
        _body_received = 0
        _in_head = True  # the bytes arriving are a request's head
        _head_seen = 0  # of its bytes, how many have arrived before this chunk
        _line_seen = False  # its request line has ended
        _upgrade_refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            client = client_key(transport.get_extra_info("peername"))
            held = per_client.get(client, 0)  # absent: none open
            full = len(self.connections) > self.edge.max_connections
            if full or held >= self.edge.max_connections_per_client:
                self.transport.write(_FULL)
                self.transport.close()
                return
            per_client[client] = held + 1
            self._client = client
            self._arm(self.edge.header_timeout_s, self._headers_too_slow)

        def connection_lost(self, exc: Exception | None) -> None:
            client = self._client
            if client is not None:
                self._client = None
                left = per_client[client] - 1
                if left:
                    per_client[client] = left
                else:
                    del per_client[client]
            self._due = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                refusal = self._head_refusal(data)
                if refusal is not None:
                    if not self.transport.is_closing():
                        self.transport.write(refusal)
                        self.transport.close()
                    return
            super().data_received(data)

        def _head_refusal(self, data: bytes) -> bytes | None:
            """414 or 431 when `data` takes the request's line or head past its limit, else
            None (the bytes counted). A chunk that ends one request and begins the next
            pipelined one counts for neither: it is at most one read, far below the limits'
            reason (megabytes)."""
            seen = self._head_seen
            if not self._line_seen:
                line_end = data.find(b"\n")
                if (len(data) if line_end < 0 else line_end) + seen > MAX_REQUEST_LINE_BYTES:
                    return _URI_TOO_LONG
                self._line_seen = line_end >= 0
            head_end = data.find(b"\r\n\r\n")
            if (len(data) if head_end < 0 else head_end) + seen > MAX_HEADER_BYTES:
                return _HEAD_TOO_LARGE
            self._head_seen = seen + len(data)
            return None

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._due is None or self._then == self._idle_too_long:  # the next request
                self._arm(self.edge.header_timeout_s, self._headers_too_slow)

        def _answered_now(self) -> None:
            """After an answer made in place, the connection's keep-alive deadline is this
            guard's one timer too (uvicorn makes and cancels a timer per request for it)."""
            if self.pipeline:  # a request waits behind this one: uvicorn starts it
                super()._answered_now()
                return
            self.server_state.total_requests += 1
            if self.transport.is_closing():
                return
            self._unset_keepalive_if_required()
            self.flow.resume_reading()
            self._arm(self.timeout_keep_alive, self._idle_too_long)

        def _idle_too_long(self) -> None:
            self.timeout_keep_alive_handler()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._disarm()
            if self.parser.should_upgrade():  # Upgrade: (or CONNECT): not for this server
                self._upgrade_refused = True
                if not self.transport.is_closing():
                    self.transport.write(_NO_UPGRADE)
                    self.transport.close()
                return
            super().on_headers_complete()
            self._body_started = self.loop.time()
            self._body_received = 0
            self._arm(self.edge.body_grace_s, self._body_check)

        def on_body(self, body: bytes) -> None:
            self._body_received += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._disarm()
            self._in_head, self._head_seen, self._line_seen = True, 0, False
            if self._upgrade_refused:
                return
            super().on_message_complete()

        def _should_upgrade(self) -> bool:
            return False  # answered 400 above, never handed to a WebSocket protocol

        def _unsupported_upgrade_warning(self) -> None:
            pass  # answered 400 above: nothing to warn of

        def _arm(self, delay: float, then: Callable[[], None]) -> None:
            """Call `then` in `delay` seconds, unless disarmed (or armed again) first."""
            due = self.loop.time() + delay
            self._due, self._then = due, then
            if self._timer is None or self._timer_at > due:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer, self._timer_at = self.loop.call_at(due, self._fire), due

        def _disarm(self) -> None:
            self._due = None  # the timer stays: when it fires, it finds nothing due

        def _fire(self) -> None:
            """The timer: call what is due, or wait again for a deadline moved later."""
            self._timer = None
            due, then = self._due, self._then
            if due is None or then is None:
                return
            if self.loop.time() < due:
                self._timer, self._timer_at = self.loop.call_at(due, self._fire), due
                return
            self._due = None
            then()

        def _headers_too_slow(self) -> None:
            if not self.transport.is_closing():
                self.transport.write(_TIMED_OUT)
                self.transport.close()

        def _body_check(self) -> None:
            """At the body's deadline: close if the body fell below the minimum rate, else
            move the deadline to where the bytes received so far allow."""
            allowed = self.edge.body_grace_s + self._body_received / self.edge.body_min_rate
            left = self._body_started + allowed - self.loop.time()
            if left > 0:
                self._arm(left, self._body_check)
            elif not self.transport.is_closing():
                self.transport.close()

    return GuardedHttpToolsProtocol
