"""One write per response: uvicorn's httptools protocol with its socket writes coalesced.

uvicorn writes a response's status line and headers when the app sends `http.response.start`,
and its body, separately, on `http.response.body`: two send() system calls, and on a busy
loopback two wake-ups of the client for one answer. Measured on `strictcall serve` (2 cores,
wrk at 16 connections), joining them saves about a quarter of the server's CPU per call.

`CoalescedWrites` holds every write made during one turn of the event loop and hands them to
the socket's transport as one, on the loop's next turn (`call_soon`): the same bytes, in the
same order, a few microseconds later. `close()` writes what it holds first; what is still held
when the connection is already closing is dropped, as the transport itself would drop it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


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
    """uvicorn's httptools protocol, writing through `CoalescedWrites`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalesced = cast(asyncio.Transport, CoalescedWrites(transport, self.loop))
        super().connection_made(coalesced)
