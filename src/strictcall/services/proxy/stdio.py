"""The upstream server's process and its pipes, strictcall's own, on the event loop.

The official client's stdio transport spends a task, a memory stream and a model dump on every
message it writes, and a task, a text decoder, a model validation and a memory stream on every
line it reads; for a proxy, that is half of what a call costs. Here the server's stdout is a
protocol of the loop's read pipe and its stdin a write pipe (`strictcall.transports.pipes`), with no
task of their own:

- `read` and `write` are the streams the official `ClientSession` runs on: every message the
  session sends is written as the SDK's transport writes it, and every line the server writes
  is read as the SDK's transport reads it (`jsonrpc_message_adapter`, an unreadable line handed
  on as the exception), except the answers to `call_tool`;
- `call_tool` is the proxy's hot path: a tools/call written with orjson under an id of its own
  (from `CALL_IDS`, apart from the session's, which count from 0), its answer taken off the
  pipe by that id as it is read and handed to the waiting call as the parsed JSON-RPC message,
  never reaching the session. Abandoned (a timeout, a caller gone), it sends
  `notifications/cancelled` as the session does.

The server is started as the SDK's `stdio_client` starts it (its own session and process group,
stderr to `errlog`, the environment given) and stopped as it stops it: stdin closed, then,
after `TERMINATION_S`, the group terminated and killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final, TextIO

import anyio
import mcp_types as types
import orjson
from mcp.shared.message import SessionMessage

from strictcall.errors import JSONValue, StrictcallError
from strictcall.services.proxy._asyncio import close_transport
from strictcall.services.proxy._mcp_sdk import terminate_tree
from strictcall.transports.pipes import TOO_LONG, Output, Splitter, pipe_output

CALL_IDS: Final = 1 << 32
"""The first id of `call_tool`'s requests: the session's own ids count from 0."""

TERMINATION_S: Final = 2.0
"""How long the server has to exit once its stdin is closed, and then once terminated (the
SDK's PROCESS_TERMINATION_TIMEOUT and FORCE_KILL_TIMEOUT)."""

_EXIT_POLL_S: Final = 0.01
_QUEUED_MAX: Final = 64
"""Messages for the session not yet taken before the server's stdout is no longer read."""
_LINE_MAX: Final = sys.maxsize
"""No limit on a line from the server, as the SDK's transport has none."""


class PipeClosed(StrictcallError):
    """The server's stdout has ended, or its stdin broke: no answer will come."""


class _Inbox:
    """What the server wrote for the session, taken by its dispatcher: the `ReadStream` the
    SDK's transports hand a `ClientSession`."""

    def __init__(self, pause: Any) -> None:
        self._queue: deque[SessionMessage | Exception] = deque()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self._pause = pause
        self._paused = False

    def put(self, item: SessionMessage | Exception) -> None:
        self._queue.append(item)
        if len(self._queue) >= _QUEUED_MAX and not self._paused:
            self._paused = True
            self._pause(True)
        self._wake()

    def end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def receive(self) -> SessionMessage | Exception:
        while not self._queue:
            if self._ended:
                raise anyio.EndOfStream
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        item = self._queue.popleft()
        if self._paused and len(self._queue) < _QUEUED_MAX // 2:
            self._paused = False
            self._pause(False)
        return item

    async def aclose(self) -> None:
        self._ended = True
        self._queue.clear()
        self._wake()

    def __aiter__(self) -> _Inbox:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Inbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _Outbox:
    """The session's messages to the server: the `WriteStream` of the SDK's transports."""

    def __init__(self, pipe: UpstreamPipe) -> None:
        self._pipe = pipe

    async def send(self, item: SessionMessage, /) -> None:
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        await self._pipe.write_line((text + "\n").encode())

    async def aclose(self) -> None:
        """The pipe stays open until the server is stopped (`open_upstream` closes it)."""

    async def __aenter__(self) -> _Outbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class UpstreamPipe(asyncio.Protocol):
    """The server's stdout, read on the loop: the answers to `call_tool` to their calls, every
    other message to the session's `read`."""

    def __init__(self) -> None:
        self._splitter = Splitter(_LINE_MAX)
        self._lines: deque[bytes | object] = deque()
        self._calls: dict[int, asyncio.Future[dict[str, JSONValue]]] = {}
        self._next_id = CALL_IDS
        self._output: Output | None = None
        self._transport: asyncio.ReadTransport | None = None
        self.ended = False
        """The server's stdout has ended."""
        self.exit_status: int | None = None
        """The server's exit status, once stopped, when its stdout had ended before it was
        stopped (it exited, or closed its output, by itself); None otherwise."""
        self.read: Final = _Inbox(self._pause)
        self.write: Final = _Outbox(self)

    # --- the loop's side -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a read pipe transport

    def data_received(self, data: bytes) -> None:
        lines = self._lines
        self._splitter.feed(data, lines)  # type: ignore[arg-type]  # bytes or TOO_LONG
        while lines:
            self._take(lines.popleft())

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self._end()

    def _pause(self, paused: bool) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.pause_reading() if paused else transport.resume_reading()

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        lines = self._lines
        self._splitter.end(lines)  # type: ignore[arg-type]
        while lines:
            self._take(lines.popleft())
        for call in self._calls.values():
            if not call.done():
                call.set_exception(PipeClosed())
        self.read.end()

    def _take(self, line: bytes | object) -> None:
        if line is TOO_LONG:  # pragma: no cover - no limit is set (_LINE_MAX)
            self.read.put(ValueError("a line from the server was too long"))
            return
        assert isinstance(line, bytes)
        if self._calls:
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                message = None
            if type(message) is dict and "method" not in message:
                request_id = _call_id(message.get("id"))
                call = None if request_id is None else self._calls.get(request_id)
                if call is not None:
                    if not call.done():  # else abandoned: dropped, as the session drops it
                        call.set_result(message)
                    return
        if not line.strip():
            return  # a blank line carries no message
        try:
            parsed = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:  # as the SDK's transport: the session is told
            self.read.put(exc)
            return
        self.read.put(SessionMessage(parsed))

    # --- the proxy's side ------------------------------------------------------------------

    def attach(self, output: Output) -> None:
        self._output = output

    async def write_line(self, frame: bytes) -> None:
        """Write one line to the server's stdin.

        Raises:
            anyio.BrokenResourceError: the pipe is closed or broken (as a closed stream raises
                in the SDK's transport).
        """
        output = self._output
        if output is None or output.broken or self.ended:
            raise anyio.BrokenResourceError
        await output.write(frame)
        if output.broken:
            raise anyio.BrokenResourceError

    async def call_tool(
        self, name: str, arguments: Mapping[str, JSONValue]
    ) -> dict[str, JSONValue]:
        """Send a tools/call and return its answer as the server wrote it: a JSON-RPC message,
        read but not checked.

        Raises:
            PipeClosed: the server's stdout ended, or its stdin broke, before the answer.
        """
        if self.ended:
            raise PipeClosed
        request_id = self._next_id
        self._next_id += 1
        call: asyncio.Future[dict[str, JSONValue]] = asyncio.get_running_loop().create_future()
        self._calls[request_id] = call
        request = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        try:
            try:
                await self.write_line(orjson.dumps(request, option=orjson.OPT_APPEND_NEWLINE))
            except anyio.BrokenResourceError:
                raise PipeClosed from None
            return await call
        except asyncio.CancelledError:
            self._cancel(request_id)
            raise
        finally:
            del self._calls[request_id]

    def _cancel(self, request_id: int) -> None:
        """Tell the server a call was abandoned (without waiting: the caller is leaving)."""
        output = self._output
        if output is None or output.broken or self.ended:
            return
        notification = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "abandoned by the caller"},
        }
        frame = orjson.dumps(notification, option=orjson.OPT_APPEND_NEWLINE)
        task = asyncio.get_running_loop().create_task(output.write(frame))
        _LEFT.add(task)
        task.add_done_callback(_LEFT.discard)


def _call_id(request_id: object) -> int | None:
    """The id of a call an answer names: an int, or its decimal text (the session takes "7"
    for 7, as the TypeScript SDK does); never a bool or a float."""
    if type(request_id) is int:
        return request_id
    if type(request_id) is str and request_id.isascii() and request_id.isdigit():
        return int(request_id)
    return None


_LEFT: set[asyncio.Task[None]] = set()
"""Writes nobody waits for, kept until done."""


@contextlib.asynccontextmanager
async def open_upstream(
    command: Sequence[str], *, env: Mapping[str, str], errlog: TextIO
) -> AsyncIterator[UpstreamPipe]:
    """Start the server and yield its pipes; stop it on leaving (stdin closed, then the process
    group terminated and killed if it has not exited).

    Raises:
        OSError: the server could not be started.
    """
    loop = asyncio.get_running_loop()
    their_stdin, our_stdin = os.pipe()
    our_stdout, their_stdout = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=their_stdin,
            stdout=their_stdout,
            stderr=errlog,
            env=dict(env),
            start_new_session=True,
        )
    except BaseException:
        for fd in (our_stdin, our_stdout):
            os.close(fd)
        raise
    finally:
        os.close(their_stdin)
        os.close(their_stdout)
    # the files own the descriptors from here on: each is closed by its transport, or here
    stdout_file = os.fdopen(our_stdout, "rb", buffering=0)
    stdin_file = os.fdopen(our_stdin, "wb", buffering=0)
    pipe = UpstreamPipe()
    reading: asyncio.BaseTransport | None = None
    output: Output | None = None
    try:
        reading, _ = await loop.connect_read_pipe(lambda: pipe, stdout_file)
        output = await pipe_output(stdin_file)
        pipe.attach(output)
        yield pipe
    finally:
        with anyio.CancelScope(shield=True):
            ended_first = pipe.ended
            if output is None:
                stdin_file.close()  # the server sees its stdin end, as `_stop` would do
            await _stop(process, output)
            if ended_first:
                pipe.exit_status = process.returncode
            if reading is not None:
                reading.close()
            else:
                stdout_file.close()


async def _stop(process: asyncio.subprocess.Process, stdin: Output | None) -> None:
    """Stop the server as the SDK's transport does: close its stdin, wait, then terminate its
    process group (and kill what survives)."""
    if stdin is not None:
        stdin.close()
    if not await _exited(process, TERMINATION_S):
        await terminate_tree(process, TERMINATION_S)
        await _exited(process, TERMINATION_S)
    # asyncio's transport of a process without pipes of its own is closed by nobody else
    close_transport(process)


async def _exited(process: asyncio.subprocess.Process, within_s: float) -> bool:
    """Whether the process has exited within `within_s` (polled: a child that inherited its
    pipes must not make an exited server look alive)."""
    with anyio.move_on_after(within_s):
        while process.returncode is None:
            await anyio.sleep(_EXIT_POLL_S)
        return True
    return False
