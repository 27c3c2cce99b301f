"""Stdio's bytes on the event loop: stdin cut into lines, answers written to stdout.

A pipe or a socket is read and written by the event loop itself (`connect_read_pipe`,
`connect_write_pipe`): no thread, no hop per line, one write per answer. Anything else (a
regular file, a terminal, a stream without a descriptor) is read by one daemon thread that
hands the loop whole chunks, and written with plain blocking writes: the loop's pipe transports
refuse regular files, and would switch a terminal shared with the shell to non-blocking mode.

`read_lines` cuts stdin into lines of at most `limit` bytes (the newline aside); a longer line
is skipped unread and reported as `TOO_LONG`, so that it is answered all the same.
`stdout_writer` keeps fd 1 for the wire alone while it is open: the wire is written through a
private duplicate and fd 1 points at stderr, so a stray print cannot corrupt a frame.

The proxy's upstream pipes use the same parts (`Splitter`, `pipe_output`), the other way round.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
import sys
import threading
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from typing import IO, Final, Protocol

import anyio


class _TooLong:
    """A line longer than the limit, skipped unread."""

    __slots__ = ()


TOO_LONG: Final = _TooLong()
Line = bytes | _TooLong

_CHUNK: Final = 1 << 16
_QUEUED_MAX: Final = 256
"""Lines waiting to be taken before reading stops until the intake catches up."""


class Splitter:
    """Cuts a byte stream into lines of at most `limit` bytes; a longer one is skipped."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, data: bytes, out: deque[Line]) -> None:
        buffer = self._buffer
        last = len(data) - 1
        if not buffer and not self._skipping and last >= 0 and data.find(b"\n") == last:
            # the common chunk, one whole line: no copy into the buffer and out again
            if last > self._limit:
                out.append(TOO_LONG)
            else:
                out.append(data[:-1])
            return
        buffer += data
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            if self._skipping:
                self._skipping = False
                out.append(TOO_LONG)
            elif end - start > self._limit:
                out.append(TOO_LONG)
            else:
                out.append(bytes(buffer[start:end]))
            start = end + 1
        del buffer[:start]
        if self._skipping or len(buffer) > self._limit:
            self._skipping = True  # no newline within the limit: the rest of it is not kept
            buffer.clear()

    def end(self, out: deque[Line]) -> None:
        """Stdin has ended: its last line may have had no newline."""
        if self._skipping:
            out.append(TOO_LONG)
        elif self._buffer:
            out.append(bytes(self._buffer))
        self._skipping = False
        self._buffer.clear()


class _Source(Protocol):
    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class _Lines(asyncio.Protocol):
    """The lines read so far, taken by one consumer; reading pauses while too many wait."""

    def __init__(self, limit: int) -> None:
        self._splitter = Splitter(limit)
        self._queue: deque[Line] = deque()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self._source: _Source | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._source = transport  # type: ignore[assignment]  # a read pipe transport

    def data_received(self, data: bytes) -> None:
        self._splitter.feed(data, self._queue)
        if len(self._queue) >= _QUEUED_MAX and not self._paused and self._source is not None:
            self._paused = True
            self._source.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self._end()  # an error reading stdin is its end, as for any reader

    def _end(self) -> None:
        if not self._ended:
            self._splitter.end(self._queue)
            self._ended = True
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next(self) -> Line | None:
        """The next line, or None once stdin has ended and every line was taken. A line that
        was waiting already is taken after one turn of the loop, so that a burst of lines
        never holds it (a signal, the calls started, answers to write); one that had to be
        waited for comes from the loop just now."""
        if self._queue:
            await asyncio.sleep(0)
        while not self._queue:
            if self._ended:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        line = self._queue.popleft()
        if self._paused and len(self._queue) < _QUEUED_MAX // 2 and self._source is not None:
            self._paused = False
            self._source.resume_reading()
        return line


class _ThreadSource:
    """Reads a stream the loop cannot watch in a daemon thread, chunk by chunk: a read blocked
    on a silent terminal must not hold up the process's exit."""

    def __init__(self, stream: IO[bytes], lines: _Lines, loop: asyncio.AbstractEventLoop) -> None:
        self._stream = stream
        self._lines = lines
        self._loop = loop
        self._running = threading.Event()
        self._running.set()
        self._stopped = False
        read = getattr(stream, "read1", None)
        self._read = read if read is not None else stream.read

    def pause_reading(self) -> None:
        self._running.clear()

    def resume_reading(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stopped = True
        self._running.set()

    def start(self) -> None:
        self._lines.connection_made(self)  # type: ignore[arg-type]  # pausable as a transport
        thread = threading.Thread(target=self._run, name="strictcall-mcp-stdin", daemon=True)
        thread.start()

    def _run(self) -> None:
        try:
            while True:
                self._running.wait()
                if self._stopped:
                    return
                chunk = self._read(_CHUNK)
                if not chunk:
                    break
                self._loop.call_soon_threadsafe(self._lines.data_received, chunk)
        except (OSError, ValueError):  # unreadable or closed under us: the same as its end
            pass
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            self._loop.call_soon_threadsafe(self._lines.eof_received)


def _is_pipe(stream: IO[bytes]) -> int | None:
    """The descriptor of `stream` when it is a pipe or a socket, else None."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


async def read_lines(stream: IO[bytes], limit: int) -> AsyncGenerator[Line]:
    """The lines of `stream` (their newlines removed), each at most `limit` bytes; a longer
    line is skipped unread and given as `TOO_LONG`. Ends when the stream does (or fails)."""
    loop = asyncio.get_running_loop()
    lines = _Lines(limit)
    fd = _is_pipe(stream)
    transport: asyncio.BaseTransport | None = None
    thread: _ThreadSource | None = None
    if fd is not None:
        # a duplicate of its own, so that closing the transport leaves `stream` to its owner
        pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
        try:
            transport, _ = await loop.connect_read_pipe(lambda: lines, pipe)
        except (OSError, ValueError):
            pipe.close()
            fd = None
    if transport is None:
        thread = _ThreadSource(stream, lines, loop)
        thread.start()
    try:
        while (line := await lines.next()) is not None:
            yield line
    finally:
        if transport is not None:
            transport.close()
        if thread is not None:
            thread.stop()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)  # the description is shared: leave it as it was


class _Drain(asyncio.Protocol):
    """Flow control of the write pipe: writers wait while the pipe is full."""

    def __init__(self) -> None:
        self.lost = False
        self._resumed: asyncio.Future[None] | None = None

    def pause_writing(self) -> None:
        if self._resumed is None:
            self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True
        self._wake()

    def _wake(self) -> None:
        resumed, self._resumed = self._resumed, None
        if resumed is not None and not resumed.done():
            resumed.set_result(None)

    async def drained(self) -> None:
        if self._resumed is not None:
            await asyncio.shield(self._resumed)


class Output:
    """Where answers go: each `write` is one whole frame (a line), never interleaved."""

    def __init__(
        self,
        fd: int | None,
        transport: asyncio.WriteTransport | None,
        drain: _Drain | None,
    ) -> None:
        self._fd = fd
        self._transport = transport
        self._drain = drain
        self.broken = False
        """Nothing written since reaches anybody: its reader has gone, or it was closed."""

    async def write(self, frame: bytes) -> None:
        """Write one frame; wait while the pipe is full (never for a terminal or a file)."""
        self.write_nowait(frame)
        await self.drained()

    async def drained(self) -> None:
        """Wait while the pipe is full."""
        drain = self._drain
        if drain is not None and not self.broken:
            await drain.drained()

    def write_nowait(self, frame: bytes) -> None:
        """Write whole frames, a pipe's share of them held by the loop's transport (`drained`
        waits for it to leave): for a writer that joins the frames of one loop turn."""
        if self.broken:
            return
        transport, drain = self._transport, self._drain
        if transport is not None and drain is not None:
            if drain.lost or transport.is_closing():
                self.broken = True
                return
            transport.write(frame)
            return
        if self._fd is None:
            return
        view = memoryview(frame)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:  # the reader has gone
            self.broken = True

    def close(self) -> None:
        """Close the pipe once what was written has left (nothing is written after)."""
        self.broken = True
        if self._transport is not None:
            self._transport.close()

    async def flush(self, within_s: float) -> None:
        """Wait (at most `within_s`) for what was written to leave the process."""
        transport, drain = self._transport, self._drain
        if transport is None or drain is None:
            return
        with anyio.move_on_after(within_s):
            while not drain.lost and transport.get_write_buffer_size() > 0:
                await anyio.sleep(0.001)


async def pipe_output(pipe: IO[bytes]) -> Output:
    """An `Output` writing `pipe` (a pipe or a socket) on the loop; `Output.close` closes it."""
    loop = asyncio.get_running_loop()
    transport, drain = await loop.connect_write_pipe(_Drain, pipe)
    return Output(None, transport, drain)


@contextlib.asynccontextmanager
async def stdout_writer() -> AsyncIterator[Output]:
    """The wire on fd 1, written on the loop; fd 1 itself points at stderr while open."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()  # what was printed before belongs before the first frame
    try:
        private = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # started with stdout closed: there is no wire to write
        yield Output(None, None, None)
        return
    diverted = _divert(1)
    transport: asyncio.WriteTransport | None = None
    drain: _Drain | None = None
    try:
        mode = os.fstat(private).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            loop = asyncio.get_running_loop()
            pipe = os.fdopen(private, "wb", buffering=0, closefd=False)
            transport, drain = await loop.connect_write_pipe(_Drain, pipe)
        output = Output(private, transport, drain)
        try:
            yield output
        finally:
            with anyio.CancelScope(shield=True):
                await output.flush(_FLUSH_S)
    finally:
        if transport is not None:
            transport.abort() if transport.get_write_buffer_size() else transport.close()
        with contextlib.suppress(OSError):
            os.set_blocking(private, True)
        if diverted:
            with contextlib.suppress(OSError):
                os.dup2(private, 1)
        with contextlib.suppress(OSError):
            os.close(private)


_FLUSH_S: Final = 1.0
"""How long the end of a session waits for its last answers to leave a full pipe."""


def _divert(fd: int) -> bool:
    """Point `fd` at stderr (or the null device): whether it was done."""
    try:
        target = os.dup(2)
    except OSError:
        try:
            target = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            return False
    try:
        os.dup2(target, fd)
    except OSError:
        return False
    finally:
        os.close(target)
    return True
