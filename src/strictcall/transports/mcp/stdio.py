"""MCP on stdio: `strictcall serve --mcp-stdio --identity ID`, the identity the operator's.

Stdin and stdout are strictcall's own, read and written on the event loop
(`strictcall.transports.pipes`): no thread hop per line, one write per answer, fd 1 kept for the
wire
alone (stray prints go to stderr). Every line gets an answer: blank lines carry no message and
are skipped; a line longer than the limit is skipped unread and refused; every other line goes
through the strict intake (`strictcall.transports.mcp.intake`) and on to the SDK's server, which
answers
each request in a task of its own, so that answers come in the order they are ready (as
JSON-RPC allows). When stdin ends, the requests still running are answered (within `DRAIN_S`)
before the session ends: the SDK alone would cancel them unanswered.

On SIGINT the session stops at once: one cancel scope around all of it is cancelled (asyncio's
own handling cancelled the main task once, and let the SDK's streams raise BrokenResourceError
out of the run), and `serve_stdio` raises KeyboardInterrupt. Whatever still holds the process
`INTERRUPT_GRACE_S` later (a thread in a query, a terminal's blocking write) is cut short with
`os._exit(130)`: SQLite keeps every committed write. The command line then ends the process
with `exit_interrupted` rather than through the interpreter's finalization, which could wait
forever on the lock of a stream a daemon thread was reading when it was frozen.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import io
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from typing import IO, Any, Final, Protocol, cast

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.message import SessionMessage

from strictcall.core.gateway import Gateway
from strictcall.core.ids import mint_call_id, valid_id
from strictcall.core.record import refusal_record
from strictcall.core.refusals import protocol_refusal
from strictcall.transports.jsonrpc import Recorder
from strictcall.transports.mcp.adapter import (
    HANDSHAKE_ERA,
    McpTools,
    protocol_version,
    result_message,
)
from strictcall.transports.mcp.content import Subscriber
from strictcall.transports.mcp.intake import DirectCall, Refused, read_message, refuse_too_large
from strictcall.transports.mcp.peer import ASKS, serving_peer
from strictcall.transports.mcp.sdk_errors import scrubbed_message
from strictcall.transports.pipes import TOO_LONG, Output, read_lines, stdout_writer
from strictcall.transports.serving import DEFAULT_SERVING, Serving


def serve_stdio(
    gateway: Gateway,
    identity: str,
    serving: Serving = DEFAULT_SERVING,
    *,
    stdin: IO[bytes] | None = None,
) -> None:
    """Serve MCP on this process's stdin and stdout as `identity` until stdin ends, with the
    server's options `serving` (`strictcall.transports.serving`): each call audited with its
    `record`, its `call_context` entered around each tools/call (a tracer's), its `content`
    served beside the tools (a federation's resources and prompts).

    With `serving.tools_change` (a proxy, whose upstream may list other tools), the server
    announces `tools.listChanged` and sends `notifications/tools/list_changed` to an
    initialized session each time the gateway's listing changes.

    `serving.lifespans` are entered, in order, in the serving event loop before the first line
    is read and left after the last answer (e.g. a proxy's upstream session); one that fails to
    enter raises here, and nothing is served.

    Raises:
        KeyboardInterrupt: SIGINT stopped the session (within `INTERRUPT_GRACE_S`).
    """
    source = stdin if stdin is not None else _private_stdin()
    # uvloop where installed (the `server` extra), as `strictcall serve` runs
    options = {"use_uvloop": importlib.util.find_spec("uvloop") is not None}
    if anyio.run(_serve_with, gateway, identity, serving, source, backend_options=options):
        # The reader may still be blocked on stdin, holding its buffer: leave it to the exit.
        raise KeyboardInterrupt
    if stdin is None:  # stdin has ended, so its reader has returned
        source.close()


log = logging.getLogger("strictcall")

INTERRUPT_GRACE_S: Final = 0.5
"""How long after SIGINT the process may take to stop cleanly before it is made to: half the
second promised, the other half left for a loaded machine to deliver the signal and end it."""

INTERRUPTED_EXIT: Final = 130
"""The exit status after SIGINT (128 + the signal's number), as the command line's."""


class _Interrupt:
    """SIGINT, received on the event loop: it cancels the session's scope."""

    def __init__(self) -> None:
        self.received = False

    async def watch(self, session: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self.received = True
                _exit_after(INTERRUPT_GRACE_S)
                session.cancel()
                return


def exit_interrupted() -> None:
    """End the process at once with INTERRUPTED_EXIT, its standard streams flushed (after the
    store is closed: the caller's part)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, or a pipe nobody reads any more
            pass
    os._exit(INTERRUPTED_EXIT)


def _exit_after(seconds: float) -> None:
    """End the process with INTERRUPTED_EXIT in `seconds`, unless it has ended by then."""

    def cut_short() -> None:
        time.sleep(seconds)
        try:
            sys.stderr.write("strictcall: stopped without finishing (interrupted)\n")
            sys.stderr.flush()
        finally:
            os._exit(INTERRUPTED_EXIT)

    threading.Thread(target=cut_short, name="strictcall-interrupt", daemon=True).start()


def _private_stdin() -> IO[bytes]:
    """A reader of fd 0 of its own: the reading thread may still block on it when the process
    ends (on SIGINT), and sys.stdin's buffer would then be locked while Python finalizes it."""
    try:
        return os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    except (AttributeError, OSError, ValueError):  # started with stdin closed: it has ended
        return io.BytesIO()


async def _serve_with(gateway: Gateway, identity: str, serving: Serving, stdin: IO[bytes]) -> bool:
    """`_serve_stdio` inside the serving's lifespans: whether SIGINT stopped it."""
    async with AsyncExitStack() as stack:
        for lifespan in serving.lifespans:
            await stack.enter_async_context(lifespan())
        # Everything loaded so far (the SDK, a proxy's upstream session) lives as long as the
        # session: out of the collector's generations, as `strictcall serve` keeps it, so that
        # a full collection walks the calls' objects only, not all of it with the loop stalled.
        # (A proxy's first upstream session is frozen with it: if the upstream restarts, that
        # one session's cycles are left to the process's end; later sessions are collected.)
        gc.freeze()
        return await _serve_stdio(gateway, identity, serving, stdin)


async def _serve_stdio(gateway: Gateway, identity: str, serving: Serving, stdin: IO[bytes]) -> bool:
    """Serve until stdin ends (False) or SIGINT (True)."""
    interrupt = _Interrupt()
    try:
        async with anyio.create_task_group() as everything:
            everything.start_soon(interrupt.watch, everything.cancel_scope)
            await _session(gateway, identity, serving, stdin)
            everything.cancel_scope.cancel()  # stdin ended: stop watching for SIGINT
    except BaseException:
        # Once interrupted, what the SDK's streams raise while they are torn down (closed or
        # broken streams, in exception groups) is the interrupt's doing, not a failure.
        if not interrupt.received:
            raise
    return interrupt.received


async def _session(gateway: Gateway, identity: str, serving: Serving, stdin: IO[bytes]) -> None:
    record, content = serving.record, serving.content
    scope = mint_call_id("stdio")
    direct = _Tasks()

    async def send_update(notification: types.ServerNotification) -> None:
        # in a task of its own: a slow host never holds up the upstream that sent it
        direct.spawn_now(answers.notify(notification))

    session = Subscriber(scope, send_update)  # the one session holds every subscription
    tools = McpTools(
        gateway,
        lambda ctx: identity,
        lambda: scope,
        serving,
        subscriber_of=lambda ctx: session,
    )
    server = tools.server()
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](
        _PASSED_MAX
    )
    # Reading and writing are strictcall's, on the event loop (`strictcall.transports.pipes`): every
    # line answered, one write per answer, fd 1 kept for the wire alone; the SDK's server
    # answers what strictcall passes on.
    async with stdout_writer() as output, anyio.create_task_group() as calls:

        def on_error(message: types.JSONRPCError) -> types.JSONRPCError:
            if record is not None:
                error = protocol_refusal(message.error.code).as_error()
                record(refusal_record(error, identity))
            return scrubbed_message(message)

        answers = Answers(Frames(output), on_error)
        with direct:
            intake = StdioIntake(
                read_send,
                answers,
                tools,
                identity,
                record,
                spawn=direct.spawn,
                scope=scope,
                may_ask=serving.tools_change,
            )
            calls.start_soon(take_lines, stdin, gateway.limits.max_size, intake)
            options = NotificationOptions(
                tools_changed=serving.tools_change,
                resources_changed=content is not None,
                prompts_changed=content is not None,
            )
            unwatch = gateway.watch_tools(lambda: direct.spawn_now(answers.tools_changed()))
            unwatch_content = (
                None
                if content is None
                else content.watch(lambda kind: direct.spawn_now(answers.tools_changed(kind)))
            )
            try:
                await server.run(
                    read_receive, answers, server.create_initialization_options(options)
                )
            finally:
                unwatch()
                if unwatch_content is not None:
                    unwatch_content()
                if content is not None:
                    # its subscriptions end with it (the upstream's unsubscribe is bounded)
                    with anyio.CancelScope(shield=True):
                        await content.forget(scope)


class _Tasks:
    """The direct calls' tasks: plain asyncio tasks (an anyio task group's costs several times
    more per task, at every call), cancelled when the session ends, which has waited for their
    answers (within DRAIN_S) unless it was interrupted."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    def spawn(
        self, call: Callable[[DirectCall], Coroutine[Any, Any, None]], message: DirectCall
    ) -> None:
        task = asyncio.get_running_loop().create_task(call(message))
        self._running.add(task)
        task.add_done_callback(self._done)

    def spawn_now(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._running.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # a fault of strictcall's own: said by its kind (its text may hold a caller's data)
            log.error("a direct tools/call failed: %s", type(task.exception()).__name__)

    def __enter__(self) -> _Tasks:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for task in self._running:
            task.cancel()


IN_FLIGHT_MAX: Final = 16
"""Requests of one stdio session running at once; stdin waits while that many are."""

_PASSED_MAX: Final = 64
"""Messages passed on to the SDK's server and not yet taken by it, before reading waits."""


class Frames:
    """The SDK's write stream on strictcall's stdout: one line of JSON per message, written as
    the SDK's stdio transport writes it (by alias, unset members left out)."""

    def __init__(self, output: Output) -> None:
        self._output = output

    async def send(self, item: SessionMessage, /) -> None:
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        await self._output.write(text.encode() + b"\n")

    async def send_line(self, line: bytes) -> None:
        """Send a message written already as one line of JSON (newline included)."""
        await self._output.write(line)

    async def aclose(self) -> None:
        """The output stays open until the session's end (answers to direct calls may follow
        the SDK's last)."""


DRAIN_S: Final = 10.0
"""How long the end of stdin waits for the answers to requests still running: the SDK cancels
them, unanswered, as soon as its read side ends."""


class WriteSide(Protocol):
    """The SDK stdio transport's write stream."""

    async def send(self, item: SessionMessage, /) -> None: ...

    async def aclose(self) -> None: ...


class Answers:
    """The write side of a stdio session, watched for the answers to the requests stdin passed
    on, so that the end of stdin can wait for them. The SDK's own error replies go through
    `on_error` (which audits and scrubs them); strictcall's own answers go by `send_own`."""

    def __init__(
        self,
        inner: WriteSide,
        on_error: Callable[[types.JSONRPCError], types.JSONRPCError] | None = None,
    ) -> None:
        self._inner = inner
        self._on_error = on_error
        self._waiting: Counter[str] = Counter()
        self._count = 0
        # Made only when someone waits (the end of stdin, a full window): not once per call.
        self._settled: asyncio.Event | None = None
        self._room: asyncio.Event | None = None
        self._initialize: str | None = None
        self.initialized = False
        """The SDK has answered the session's initialize request (with a result)."""

    def expect_initialize(self, request_id: types.RequestId) -> None:
        """An initialize request was passed on: its result initializes the session."""
        self._initialize = _key(request_id)
        self.expect(request_id)

    def expect(self, request_id: types.RequestId) -> None:
        """A request was passed on: its answer is awaited."""
        self._waiting[_key(request_id)] += 1
        self._count += 1

    def forget(self, request_id: types.RequestId) -> None:
        """A request was answered (or cancelled, and will never be)."""
        key = _key(request_id)
        if key in self._waiting:
            self._waiting[key] -= 1
            self._count -= 1
            if self._waiting[key] <= 0:
                del self._waiting[key]
            if self._room is not None:
                self._room.set()
                self._room = None
        if not self._waiting and self._settled is not None:
            self._settled.set()
            self._settled = None

    async def below(self, limit: int) -> None:
        """Return once fewer than `limit` requests passed on are waiting for their answer."""
        while self._count >= limit:
            if self._room is None:
                self._room = asyncio.Event()
            await self._room.wait()

    async def settled(self) -> None:
        """Return once every request passed on has its answer."""
        while self._waiting:
            if self._settled is None:
                self._settled = asyncio.Event()
            await self._settled.wait()

    async def send(self, item: SessionMessage, /) -> None:
        """Send what the SDK writes (its error replies through `on_error`)."""
        if self._on_error is not None and isinstance(item.message, types.JSONRPCError):
            item = SessionMessage(self._on_error(item.message), metadata=item.metadata)
        await self.send_own(item)

    async def send_own(self, item: SessionMessage) -> None:
        """Send an answer strictcall wrote itself."""
        await self._inner.send(item)
        message = item.message
        if (
            isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
            and message.id is not None
        ):
            if isinstance(message, types.JSONRPCResponse) and _key(message.id) == self._initialize:
                self.initialized = True
            self.forget(message.id)

    async def tools_changed(self, kind: str = "tools") -> None:
        """Tell an initialized session that the tools (or the `kind` "resources" or "prompts")
        listed have changed."""
        if self.initialized:
            notification = types.JSONRPCNotification(
                jsonrpc="2.0", method=f"notifications/{kind}/list_changed"
            )
            await self._inner.send(SessionMessage(notification))

    async def notify(self, notification: types.ServerNotification) -> None:
        """Send a notification of a call in flight (its progress, an upstream's message)."""
        dumped = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        message = types.JSONRPCNotification(jsonrpc="2.0", **dumped)
        await self._inner.send(SessionMessage(message))

    async def send_line(self, request_id: types.RequestId, line: bytes) -> None:
        """Send the answer to `request_id`, written already as a line of JSON."""
        if isinstance(self._inner, Frames):
            await self._inner.send_line(line)
        else:  # a write side of the SDK's own: it takes messages
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            await self._inner.send(SessionMessage(message))
        self.forget(request_id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Answers:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _key(request_id: types.RequestId) -> str:
    """A request id with its JSON type, so that 7 and "7" stay two ids."""
    return f"{type(request_id).__name__}:{request_id}"


class StdioIntake:
    """Where stdin's lines go: valid messages on to the SDK, refusals answered at once on the
    SDK's own write stream, tools/calls the SDK would refuse bare to the gateway (each in a task
    of its own when `spawn` is given, else before the next line)."""

    def __init__(
        self,
        messages: MemoryObjectSendStream[SessionMessage | Exception],
        answers: Answers,
        tools: McpTools,
        identity: str,
        record: Recorder | None,
        *,
        spawn: Callable[[Callable[[DirectCall], Coroutine[Any, Any, None]], DirectCall], object]
        | None = None,
        scope: str = "stdio",
        may_ask: bool = False,
    ) -> None:
        self._messages = messages
        self._spawn = spawn
        self._answers = answers
        self._tools = tools
        self._limits = tools.gateway.limits
        self._identity = identity
        self._record = record
        self._running: dict[str, asyncio.Task[Any]] = {}
        self._scope = scope
        """The session's name among the proxy's callers (`peer.CallPeer.caller`)."""
        self._may_ask = may_ask
        """Tools may ask the host during a call (a proxy's, a federation's upstreams)."""
        self._asked = False
        """The host's client may be asked during a call: its calls go through the SDK."""

    async def take(self, line: bytes) -> None:
        """Pass on or answer one line (its newline removed); a blank line carries no message."""
        if not line.strip(b" \t\r"):
            return
        # once the session is initialized, a plain tools/call goes to the gateway directly,
        # unless the host may be asked during it (sampling, elicitation, roots: the SDK's)
        direct = self._answers.initialized and self._spawn is not None and not self._asked
        message = read_message(line, self._limits, self._tools.serves, direct_calls=direct)
        if isinstance(message, Refused):
            await self._answer(message)
            return
        if isinstance(message, DirectCall):
            self._answers.expect(message.request_id)
            if self._spawn is None:
                await self._call(message)
            else:  # answered in its own time, as the SDK answers the requests passed on
                self._spawn(self._call, message)
            return
        if isinstance(message, types.JSONRPCRequest):
            if message.method == "initialize":
                self._answers.expect_initialize(message.id)
                params = message.params if isinstance(message.params, dict) else {}
                capabilities = params.get("capabilities")
                self._asked = (
                    self._may_ask
                    and isinstance(capabilities, dict)
                    and any(kind in capabilities for kind in ASKS)
                )
            else:
                self._answers.expect(message.id)
        elif isinstance(message, types.JSONRPCNotification):
            params = {} if message.params is None else message.params
            cancelled = valid_id({"id": params.get("requestId")})
            if message.method == "notifications/cancelled" and cancelled is not None:
                # neither the SDK nor strictcall answers a cancelled request
                running = self._running.pop(_key(cancelled), None)
                if running is not None:
                    running.cancel()
                self._answers.forget(cancelled)
        await self._messages.send(SessionMessage(message))

    async def _call(self, message: DirectCall) -> None:
        key = _key(message.request_id)
        # notifications/cancelled cancels the call's own task (`spawn` gives each its own; an
        # anyio cancel scope here cost more than the rest of the task's bookkeeping)
        task = asyncio.current_task() if self._spawn is not None else None
        if task is not None:
            self._running[key] = task
        # a plain call carries no progress token: it gets messages if its caller set a level
        peer = None
        if self._tools.levels:
            peer = self._tools.peer_of(
                message.params, self._identity, self._scope, self._answers.notify
            )
        version = protocol_version(message.params)
        try:
            if version == HANDSHAKE_ERA and peer is None:
                line = await self._tools.answer_call_line(
                    message.params, message.request_id, self._identity
                )
            else:
                with serving_peer(peer):
                    result = await self._tools.answer_call(
                        message.params, message.request_id, self._identity
                    )
        finally:
            if task is not None and self._running.get(key) is task:
                del self._running[key]
        if version == HANDSHAKE_ERA and peer is None:
            await self._answers.send_line(message.request_id, line)
        else:
            reply = result_message(message.request_id, result, version)
            await self._answers.send_own(SessionMessage(reply))

    async def room(self) -> None:
        """Wait until fewer than `IN_FLIGHT_MAX` requests are running: a burst of lines is
        taken a window at a time (and each line after a turn of the loop, `read_lines`), so
        that the loop stays free to answer a signal."""
        await self._answers.below(IN_FLIGHT_MAX)

    async def take_too_long(self) -> None:
        """Answer a line that was longer than the limit (and skipped unread)."""
        await self._answer(refuse_too_large(self._limits))

    async def _answer(self, refused: Refused) -> None:
        if self._record is not None:
            self._record(
                self._tools.refusal_record(
                    refused.request_id, refused.name, refused.error, self._identity
                )
            )
        if refused.answered:
            await self._answers.send_own(SessionMessage(refused.message()))

    async def end(self) -> None:
        """Stdin has ended: so does the session, once the requests still running are answered
        (within `DRAIN_S`)."""
        with anyio.move_on_after(DRAIN_S):
            await self._answers.settled()
        await self._messages.aclose()


_SESSION_OVER: Final = (anyio.ClosedResourceError, anyio.BrokenResourceError)
"""What passing a line on raises once the SDK's server has stopped."""


async def take_lines(stream: IO[bytes], limit: int, intake: StdioIntake) -> None:
    """Read `stream` line by line (each at most `limit` bytes, the newline aside; longer ones
    are skipped unread) and hand each line to `intake`, then its end."""
    try:
        async with contextlib.aclosing(read_lines(stream, limit)) as lines:
            async for line in lines:
                await intake.room()
                if line is TOO_LONG:
                    await intake.take_too_long()
                else:
                    await intake.take(cast("bytes", line))
        await intake.end()
    except _SESSION_OVER:
        return
