"""CoalescedWrites over a real TCP connection on 127.0.0.1: the writes of one loop turn reach
the socket's transport as one write, in order, and nothing held is lost or written late."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from strictcall.server._uvicorn import CoalescedWrites

DEADLINE_S = 5.0


class _Counted:
    """The real transport, with the writes it is handed counted (everything else is its own)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class _Peer:
    """The other end: everything it received, and whether the connection ended."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def read_exactly(self, size: int) -> bytes:
        return await asyncio.wait_for(self.reader.readexactly(size), DEADLINE_S)

    async def read_to_end(self) -> bytes:
        return await asyncio.wait_for(self.reader.read(), DEADLINE_S)


@asynccontextmanager
async def _connection() -> AsyncIterator[tuple[CoalescedWrites, _Counted, _Peer]]:
    accepted: asyncio.Queue[_Peer] = asyncio.Queue()

    async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(_Peer(reader, writer))

    server = await asyncio.start_server(on_accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
    counted = _Counted(transport)
    peer = await asyncio.wait_for(accepted.get(), DEADLINE_S)
    try:
        yield CoalescedWrites(counted, loop), counted, peer  # type: ignore[arg-type]
    finally:
        transport.abort()
        peer.writer.close()
        server.close()
        await server.wait_closed()


async def _next_turns(count: int = 2) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def _run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def test_writes_made_in_one_turn_reach_the_transport_as_one_write_in_order() -> None:
    async def scenario() -> None:
        async with _connection() as (coalesced, counted, peer):
            coalesced.write(b"HTTP/1.1 200 OK\r\n\r\n")
            coalesced.write(b"{}")
            assert counted.writes == []  # held until the loop turns
            assert await peer.read_exactly(21) == b"HTTP/1.1 200 OK\r\n\r\n{}"
            assert counted.writes == [b"HTTP/1.1 200 OK\r\n\r\n{}"]

    _run(scenario)


def test_writes_in_different_turns_are_written_separately_and_in_order() -> None:
    async def scenario() -> None:
        async with _connection() as (coalesced, counted, peer):
            coalesced.write(b"one,")
            await _next_turns()
            coalesced.writelines([b"two,", b"three"])
            assert await peer.read_exactly(13) == b"one,two,three"
            assert counted.writes == [b"one,", b"two,three"]

    _run(scenario)


def test_close_writes_what_is_held_first() -> None:
    async def scenario() -> None:
        async with _connection() as (coalesced, counted, peer):
            coalesced.write(b"last words")
            coalesced.close()
            assert await peer.read_to_end() == b"last words"
            assert counted.writes == [b"last words"]
            await _next_turns()
            assert counted.writes == [b"last words"]  # not written twice

    _run(scenario)


def test_what_is_held_when_the_connection_is_closing_is_dropped_quietly() -> None:
    async def scenario() -> None:
        async with _connection() as (coalesced, counted, peer):
            coalesced.write(b"too late")
            counted.transport.close()  # the connection goes before the loop turns
            await _next_turns()
            assert counted.writes == []
            assert await peer.read_to_end() == b""

    _run(scenario)


def test_abort_drops_what_is_held() -> None:
    async def scenario() -> None:
        async with _connection() as (coalesced, counted, _):
            coalesced.write(b"never sent")
            coalesced.abort()
            await _next_turns()
            assert counted.writes == []
            assert coalesced.is_closing()

    _run(scenario)


def test_the_write_buffer_size_counts_what_is_held() -> None:
    async def scenario() -> None:
        async with _connection() as (coalesced, _, peer):
            coalesced.write(b"12345")
            assert coalesced.get_write_buffer_size() >= 5
            assert await peer.read_exactly(5) == b"12345"

    _run(scenario)


def test_write_eof_writes_what_is_held_first() -> None:
    async def scenario() -> None:
        async with _connection() as (coalesced, counted, peer):
            coalesced.write(b"all of it")
            coalesced.write_eof()
            assert await peer.read_to_end() == b"all of it"
            assert counted.writes == [b"all of it"]

    _run(scenario)
