"""One write per response: uvicorn's httptools protocol with its socket writes coalesced.

uvicorn writes a response's status line and headers when the app sends `http.response.start`,
and its body, separately, on `http.response.body`: two send() system calls, and on a busy
loopback two wake-ups of the client for one answer. Measured on `strictcall serve` (2 cores,
wrk at 16 connections), joining them saves about a quarter of the server's CPU per call.

`CoalescedWrites` holds every write made during one turn of the event loop and hands them to
the socket's transport as one, on the loop's next turn (`call_soon`): the same bytes, in the
same order, a few microseconds later. `close()` writes what it holds first; what is still held
when the connection is already closing is dropped, as the transport itself would drop it.

Answered in place: an app with an `answer_now(scope, body)` method
(`strictcall.server.router.RpcApp`)
is asked for a POST to /rpc whose body arrives in the same read as its headers, in a callback
on the loop's next turn, with no task made: it answers there (one write) or says None (a call
it must await), and the request then runs through the app as any other. A
body still on the way when the read is parsed, an `Expect: 100-continue`, a request pipelined
behind one in progress: these run through the app, as uvicorn runs them. uvicorn's per-request
task, its receive and send coroutines and the ASGI messages cost more than a call to a tool
that answers in microseconds (bench/RESULTS.md, HTTP).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Final, cast

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

AnswerNow = Callable[[Any, bytearray], "tuple[int, list[tuple[bytes, bytes]], bytes] | None"]
"""An app's `answer_now(scope, body)`: a request answered in place, or None to run the app."""

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
        coalesced = cast(asyncio.Transport, CoalescedWrites(transport, self.loop))
        super().connection_made(coalesced)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        deferred = self._deferred
        if deferred is not None:  # its body is still on the way: the app awaits it as usual
            self._deferred = None
            if not self.transport.is_closing():
                super()._start_asgi_task(*deferred)

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
            and cycle.scope["path"] == "/rpc"
            and cycle.scope["method"] == "POST"
            and not cycle.waiting_for_100_continue
        ):
            self._deferred = (cycle, app)  # answered in place if its body is in this read
            return
        super()._start_asgi_task(cycle, app)

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
        if response is None:  # a call to await: the app runs, its body already here
            super()._start_asgi_task(cycle, app)
            return
        self._write_now(cycle, response)

    def _write_now(
        self, cycle: RequestResponseCycle, response: tuple[int, list[tuple[bytes, bytes]], bytes]
    ) -> None:
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
