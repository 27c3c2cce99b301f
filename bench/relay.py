"""The floor of any extra process hop: a relay that runs an MCP server and forwards bytes both
ways, reading nothing of them (bench/proxy_overhead.py's reference row).

    .venv/bin/python bench/relay.py COMMAND [ARG...]

The relay is written as `strictcall proxy` moves bytes (one event loop, uvloop when installed,
the loop's own pipe transports, no thread): what it costs per call is what a second process in
Python costs before it does anything with a message: two more pipe transits, two more wake-ups.
It ends when its stdin does, after the server has exited (its stdin closed).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from typing import cast


class _Upstream(asyncio.SubprocessProtocol):
    """The server's stdout, written on to the relay's stdout as it comes."""

    def __init__(self, out: asyncio.WriteTransport, exited: asyncio.Future[None]) -> None:
        self._out = out
        self._exited = exited

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._out.write(data)

    def process_exited(self) -> None:
        if not self._exited.done():
            self._exited.set_result(None)


class _Downstream(asyncio.Protocol):
    """The relay's stdin, written on to the server's stdin as it comes."""

    def __init__(self, into: asyncio.WriteTransport, ended: asyncio.Future[None]) -> None:
        self._into = into
        self._ended = ended

    def data_received(self, data: bytes) -> None:
        self._into.write(data)

    def eof_received(self) -> bool:
        self._into.close()
        if not self._ended.done():
            self._ended.set_result(None)
        return False


async def relay(command: list[str]) -> None:
    loop = asyncio.get_running_loop()
    stdout = os.fdopen(os.dup(1), "wb", buffering=0)
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, stdout)
    exited: asyncio.Future[None] = loop.create_future()
    ended: asyncio.Future[None] = loop.create_future()
    process, _ = await loop.subprocess_exec(
        lambda: _Upstream(out, exited), *command, stdin=asyncio.subprocess.PIPE, stderr=None
    )
    # uvloop's pipe transports are not asyncio.WriteTransport subclasses: a cast, not a check
    into = cast("asyncio.WriteTransport", process.get_pipe_transport(0))
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    await loop.connect_read_pipe(lambda: _Downstream(into, ended), stdin)
    await ended
    await exited
    process.close()


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: relay.py COMMAND [ARG...]")
    if importlib.util.find_spec("uvloop") is not None:
        import uvloop

        uvloop.run(relay(sys.argv[1:]))
    else:
        asyncio.run(relay(sys.argv[1:]))


if __name__ == "__main__":
    main()
