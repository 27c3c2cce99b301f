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
  (from `CALL_IDS`, apart from the session's, which count from 0), the lines of the calls made
  in one turn of the loop written as one on its next turn (no lock, no task: under load one
  write carries every call a turn of HTTP requests made), its answer taken off the
  pipe by that id as it is read and handed to the waiting call as the parsed JSON-RPC message,
  never reaching the session. Abandoned (a timeout, a caller gone), it sends
  `notifications/cancelled` as the session does.

The server is started as the SDK's `stdio_client` starts it (its own session and process group,
stderr to `errlog`, the environment given) and stopped as it stops it: stdin closed, then,
after `TERMINATION_S`, the group terminated and killed. On Linux it is also killed by the kernel
when the gateway's process ends without stopping it (`PR_SET_PDEATHSIG`, what bubblewrap's
`--die-with-parent` does for a sandboxed one): a host that closes strictcall's stdin and then
terminates it before its upstream has been stopped (the SDK's client waits 2 s), or a gateway
killed, leaves no server running.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import gc
import os
import re
import signal
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO

import anyio
import mcp_types as types
import orjson
from mcp.shared.message import SessionMessage

from strictcall.errors import JSONValue, StrictcallError
from strictcall.services.proxy._asyncio import close_transport
from strictcall.services.proxy._mcp_sdk import terminate_tree
from strictcall.services.proxy.budgets import NotificationRate
from strictcall.transports.pipes import Output, pipe_output

CALL_IDS: Final = 1 << 32
"""The first id of `call_tool`'s requests: the session's own ids count from 0."""

TERMINATION_S: Final = 2.0
"""How long the server has to exit once its stdin is closed, and then once terminated (the
SDK's PROCESS_TERMINATION_TIMEOUT and FORCE_KILL_TIMEOUT)."""

_EXIT_POLL_S: Final = 0.01
_QUEUED_MAX: Final = 64
"""Messages for the session not yet taken before the server's stdout is no longer read."""

MAX_RESULT_BYTES: Final = 8 * 1024 * 1024
"""The longest answer (one line) a proxied tool's call may get from its server, unless the proxy
is given another (`--max-result-bytes`): a longer one is not kept, and the call is answered
result_too_large at once."""

RATE_PAUSE_S: Final = 0.1
"""How long a server past its notification rate is not read: its flood waits in its own pipe
(and its writes block), not on the loop; lines read meanwhile that name no id are dropped
unread."""

_EDGE: Final = 512
"""How much of each end of a line over the limit is kept: where its id is written."""

_ID: Final = re.compile(rb'"id"\s*:\s*"?(\d{1,20})')


class PipeClosed(StrictcallError):
    """The server's stdout has ended, or its stdin broke: no answer will come."""


class UnreadableAnswer(StrictcallError):
    """The upstream's answer to a call is not a JSON-RPC response (not JSON, NaN, a lone
    surrogate, nested too deep, an id of the wrong kind): withheld like a result that is not a
    tools/call result."""


class AnswerTooLarge(StrictcallError):
    """The upstream's answer to a call is longer than the limit: not kept, not read."""


GC_PAUSED_BYTES: Final = 1 << 20
"""A line at least this long (a listing of tens of thousands of tools) is parsed with the
garbage collector paused: its full collections, each a walk of the whole heap, came during
the parse of a 60,000-tool listing and held the loop 1.8 times as long on average, up to 3
times (docs/BUDGETS.md)."""

TOO_LARGE_CODE: Final = -32099
"""The code of the error a session request is answered with, in place of an answer longer than
the limit (one in JSON-RPC's range for implementations: no upstream's own reaches the session
for that request, whose answer was this line)."""


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit: only its two ends (where its id is) were kept."""

    head: bytes
    tail: bytes


class _LineCutter:
    """Cuts the server's stdout into lines of at most `limit` bytes; of a longer one only its
    ends are kept (`Oversized`), so that its call can be told without holding the rest."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._head: bytes | None = None  # set while a line over the limit is being skipped
        self._tail = bytearray()

    def feed(self, data: bytes, out: deque[bytes | Oversized]) -> None:
        last = len(data) - 1
        if (
            not self._buffer
            and self._head is None
            and 0 <= last <= self._limit
            and data.find(b"\n") == last
        ):  # the common chunk, one whole line: no copy
            out.append(data[:-1])
            return
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._add(memoryview(data)[start:end])
            self._finish(out)
            start = end + 1
        self._add(memoryview(data)[start:])

    def end(self, out: deque[bytes | Oversized]) -> None:
        if self._buffer or self._head is not None:
            self._finish(out)

    def _add(self, piece: memoryview) -> None:
        if self._head is None:
            if len(self._buffer) + len(piece) <= self._limit:
                self._buffer += piece
                return
            self._head = bytes((self._buffer + piece[:_EDGE])[:_EDGE])
            self._tail = bytearray(self._buffer[-_EDGE:])
            self._buffer.clear()
        self._tail += piece[-_EDGE:]
        del self._tail[:-_EDGE]

    def _finish(self, out: deque[bytes | Oversized]) -> None:
        if self._head is None:
            out.append(bytes(self._buffer))
            self._buffer.clear()
        else:
            out.append(Oversized(self._head, bytes(self._tail)))
            self._head = None
            self._tail.clear()


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

    def __init__(
        self,
        max_answer_bytes: int = MAX_RESULT_BYTES,
        notifications_per_second: int | None = None,
        note: Callable[[str], None] | None = None,
        max_listed: Mapping[str, int] | None = None,
    ) -> None:
        self._splitter = _LineCutter(max_answer_bytes)
        self._max_listed = dict(max_listed or {})
        """The most members of each listing's array (`tools`: max_tools...): a longer one is
        cut to one past its budget before the SDK reads it (refused whole then, as past its
        budget), so 60,000 tools cost one orjson parse, not 60,000 models."""
        self._rate = (
            None
            if notifications_per_second is None
            else NotificationRate(notifications_per_second, time.monotonic())
        )
        self._note = note
        self._inbox_full = False
        self._over_rate = False
        self._said_at = 0.0
        self._said_dropped = 0
        self._missed: dict[str, bytes] = {}
        """The list_changed notifications dropped past the rate, sent on once it allows."""
        self._lines: deque[bytes | Oversized] = deque()
        self._calls: dict[int, asyncio.Future[dict[str, JSONValue]]] = {}
        self._next_id = CALL_IDS
        self._held: list[bytes] = []
        self._held_ids: list[int] = []
        self._output: Output | None = None
        self._transport: asyncio.ReadTransport | None = None
        self.ended = False
        """The server's stdout has ended."""
        self.exit_status: int | None = None
        """The server's exit status, once stopped, when its stdout had ended before it was
        stopped (it exited, or closed its output, by itself); None otherwise."""
        self.grace_s = TERMINATION_S
        """How long the server has to exit once its stdin is closed, before its process group
        is terminated (and as long again before it is killed)."""
        self.read: Final = _Inbox(self._pause)
        self.write: Final = _Outbox(self)
        self.on_notification: Callable[[str, object], bool] | None = None
        """Takes the server's notifications before the session (their method and params),
        synchronously, in the order read; True: taken (the session never sees it)."""

    # --- the loop's side -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a read pipe transport

    def data_received(self, data: bytes) -> None:
        lines = self._lines
        self._splitter.feed(data, lines)
        while lines:
            self._take(lines.popleft())

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self._end()

    def _pause(self, paused: bool) -> None:
        self._inbox_full = paused
        self._read_or_not()

    def _read_or_not(self) -> None:
        """Read the server's stdout unless the session's inbox is full or the server is past
        its notification rate (then it waits `RATE_PAUSE_S`: what it floods costs the others
        little)."""
        transport = self._transport
        if transport is not None and not transport.is_closing():
            if self._inbox_full or self._over_rate:
                transport.pause_reading()
            else:
                transport.resume_reading()

    def _rate_allows(self) -> None:
        self._over_rate = False
        self._read_or_not()

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        lines = self._lines
        self._splitter.end(lines)
        while lines:
            self._take(lines.popleft())
        for call in self._calls.values():
            if not call.done():
                call.set_exception(PipeClosed())
        self.read.end()

    def _take(self, line: bytes | Oversized) -> None:
        if isinstance(line, Oversized):
            # a call's answer over the limit fails that call at once; anything else of that
            # size is nothing the session could use either
            call = self._call_named(line.head + b" " + line.tail, alone=True)
            if call is not None:
                call.set_exception(AnswerTooLarge())
                return
            named = _ID.search(line.head)
            if named is not None:  # a session request's answer: it fails at once, too large
                error = types.ErrorData(code=TOO_LARGE_CODE, message="answer too large")
                answer = types.JSONRPCError(jsonrpc="2.0", id=int(named.group(1)), error=error)
                self.read.put(SessionMessage(answer))
            else:
                self.read.put(ValueError("a line from the server was too long"))
            return
        message: Any = None
        if self._over_rate and b'"id"' not in line and b"list_changed" not in line:
            # past the rate: a line that names no id is dropped unread (one that writes its
            # id escaped is the server's own loss)
            assert self._rate is not None
            self._rate.dropped += 1
            return
        if self._calls or self._rate is not None:
            try:
                message = parse_line(line)
            except orjson.JSONDecodeError:
                message = None
            if type(message) is dict and "id" not in message and not self._admit(message, line):
                return
        if self._calls:
            if type(message) is dict and "method" not in message:
                request_id = _call_id(message.get("id"))
                call = None if request_id is None else self._calls.get(request_id)
                if call is not None:
                    if not call.done():  # else abandoned: dropped, as the session drops it
                        call.set_result(message)
                    return
            if message is None or (type(message) is dict and "method" not in message):
                # not JSON, or an answer whose id is of no kind an id has (1.5, true, " 7"),
                # that names a call in flight: that call is answered at once, not timed out
                call = self._call_named(line, alone=False)
                if call is not None:
                    call.set_exception(UnreadableAnswer())
                    return
        if not line.strip():
            return  # a blank line carries no message
        try:
            if type(message) is dict and self._cut_listing(message):
                parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
            else:
                parsed = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:  # as the SDK's transport: the session is told
            self.read.put(exc)
            return
        taken = self.on_notification
        if (
            taken is not None
            and isinstance(parsed, types.JSONRPCNotification)
            and taken(parsed.method, parsed.params)
        ):
            return
        self.read.put(SessionMessage(parsed))

    def _cut_listing(self, message: dict[str, Any]) -> bool:
        """Cut each array of a listing's result past its budget to one past it; whether one
        was."""
        result = message.get("result")
        if type(result) is not dict or "id" not in message:
            return False
        cut = False
        for key, limit in self._max_listed.items():
            items = result.get(key)
            if type(items) is list and len(items) > limit + 1:
                result[key] = items[: limit + 1]
                cut = True
        return cut

    def _admit(self, message: dict[str, Any], line: bytes) -> bool:
        """Whether a notification (`message`, read from `line`) is within the upstream's rate;
        one past it is dropped (a list_changed is kept, and sent on when the rate allows), and
        the server's stdout is not read for `RATE_PAUSE_S`."""
        rate = self._rate
        if rate is None:
            return True
        now = time.monotonic()
        if rate.admit(now):
            return True
        if not self._over_rate:
            self._over_rate = True
            self._read_or_not()
            asyncio.get_running_loop().call_later(RATE_PAUSE_S, self._rate_allows)
        method = message.get("method")
        if isinstance(method, str) and method.endswith("/list_changed"):
            if not self._missed:
                asyncio.get_running_loop().call_later(1.0, self._send_missed)
            self._missed[method] = line
        if self._note is not None and now - self._said_at >= 1.0:
            dropped = rate.dropped - self._said_dropped
            self._said_at, self._said_dropped = now, rate.dropped
            self._note(
                f"upstream sent notifications past notifications_per_second ="
                f" {rate.per_second}: {dropped} dropped"
            )
        return False

    def _send_missed(self) -> None:
        missed, self._missed = self._missed, {}
        for line in missed.values():
            if not self.ended:
                self._take(line)

    def _call_named(
        self, text: bytes, *, alone: bool
    ) -> asyncio.Future[dict[str, JSONValue]] | None:
        """The call in flight, not yet answered, whose id `text` writes as an `"id"` member
        (the text may be unreadable); with `alone`, the only call in flight if none is named."""
        waiting = {key: call for key, call in self._calls.items() if not call.done()}
        named = {int(found) for found in _ID.findall(text)} & waiting.keys()
        if len(named) == 1:
            return waiting[named.pop()]
        if alone and not named and len(waiting) == 1:
            return next(iter(waiting.values()))
        return None

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
        self,
        name: str,
        arguments: Mapping[str, JSONValue],
        meta: Mapping[str, JSONValue] | None = None,
    ) -> dict[str, JSONValue]:
        """Send a tools/call (with `meta` as its params' `_meta`, when given) and return its
        answer as the server wrote it: a JSON-RPC message, read but not checked.

        Raises:
            PipeClosed: the server's stdout ended, or its stdin broke, before the answer.
        """
        if self.ended:
            raise PipeClosed
        request_id = self._next_id
        self._next_id += 1
        call: asyncio.Future[dict[str, JSONValue]] = asyncio.get_running_loop().create_future()
        self._calls[request_id] = call
        params: dict[str, object] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        try:
            self._hold(request_id, orjson.dumps(request, option=orjson.OPT_APPEND_NEWLINE))
            await self._output_drained()
            return await call
        except asyncio.CancelledError:
            self._cancel(request_id)
            raise
        finally:
            del self._calls[request_id]

    def _hold(self, request_id: int, frame: bytes) -> None:
        """Hold a call's line; the lines held in one turn of the loop are written as one, on
        its next turn (one write for every call the turn's requests made).

        Raises:
            PipeClosed: the server's stdin is closed or broken.
        """
        output = self._output
        if output is None or output.broken or self.ended:
            raise PipeClosed
        if not self._held:
            asyncio.get_running_loop().call_soon(self._write_held)
        self._held.append(frame)
        self._held_ids.append(request_id)

    def _write_held(self) -> None:
        frames, ids = self._held, self._held_ids
        self._held, self._held_ids = [], []
        output = self._output
        if output is not None:
            output.write_nowait(b"".join(frames))
        if output is None or output.broken or self.ended:  # none of them reaches the server
            for request_id in ids:
                call = self._calls.get(request_id)
                if call is not None and not call.done():
                    call.set_exception(PipeClosed())

    async def _output_drained(self) -> None:
        """Wait while the server's stdin is full (its calls wait: the server is behind)."""
        output = self._output
        if output is not None:
            await output.drained()

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
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    errlog: TextIO,
    max_answer_bytes: int = MAX_RESULT_BYTES,
    notifications_per_second: int | None = None,
    note: Callable[[str], None] | None = None,
    max_listed: Mapping[str, int] | None = None,
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
            preexec_fn=_dies_with_gateway(),
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
    pipe = UpstreamPipe(max_answer_bytes, notifications_per_second, note, max_listed)
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
            await _stop(process, output, pipe.grace_s)
            if ended_first:
                pipe.exit_status = process.returncode
            if reading is not None:
                reading.close()
            else:
                stdout_file.close()


_PR_SET_PDEATHSIG: Final = 1
"""prctl(2)'s option: the signal the calling process gets when its parent thread ends."""


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once in the gateway (never in a forked child), on Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def _dies_with_gateway() -> Callable[[], None] | None:
    """What the server's child runs before it execs: the kernel is to kill it when the thread
    that started it ends (the gateway's event loop's: the gateway's end). None off Linux.

    Only a call into libc runs in the child: no lock of the gateway's threads is taken there."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the gateway ended before the signal was asked for
            os.kill(os.getpid(), signal.SIGKILL)

    return in_child


async def _stop(process: asyncio.subprocess.Process, stdin: Output | None, grace_s: float) -> None:
    """Stop the server as the SDK's transport does: close its stdin, wait `grace_s`, then
    terminate its process group (and kill what survives as long again)."""
    if stdin is not None:
        stdin.close()
    if not await _exited(process, grace_s):
        await terminate_tree(process, grace_s)
        await _exited(process, grace_s)
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


def parse_line(line: bytes) -> Any:
    """`orjson.loads(line)`: a long line's with the garbage collector paused (`GC_PAUSED_BYTES`:
    the objects it builds are alive until it returns, so no collection meanwhile frees any)."""
    if len(line) < GC_PAUSED_BYTES or not gc.isenabled():
        return orjson.loads(line)
    gc.disable()
    try:
        return orjson.loads(line)
    finally:
        gc.enable()
