"""A small Redis client on asyncio for one command, the quotas' script (EVALSHA, EVAL when the
server does not know it): requests pipelined on one connection, each answer matched to its
request in order. redis.asyncio spent 60-70 µs of CPU per call on this machine, more than the
call it guards (bench/POLICY.md); this spends a few. It speaks RESP2 over TCP to a `redis://`
URL with an optional password and database; anything else (TLS, a unix socket) is left to
redis-py (`strictcall.storage.quotas`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import Sequence
from typing import cast
from urllib.parse import unquote, urlsplit

from strictcall.core.quota import QuotaStoreDown


def _command(*parts: bytes) -> bytes:
    """One RESP2 command: an array of bulk strings."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


class _Protocol(asyncio.Protocol):
    """The connection: replies parsed as they come, handed to the waiters in order."""

    def __init__(self) -> None:
        self.waiters: deque[asyncio.Future[list[int] | str]] = deque()
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not a subclass of asyncio.Transport, but is one)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.waiters:
            parsed = _reply(self.buffer)
            if parsed is None:
                return
            reply, used = parsed
            del self.buffer[:used]
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(QuotaStoreDown("the connection closed"))


def _reply(buffer: bytearray) -> tuple[list[int] | str, int] | None:
    """One complete reply at the start of `buffer` and its length, or None while it is not
    all there: an array of integers, an integer or OK ([n] / []), or an error's text.

    Raises:
        QuotaStoreDown: a reply this client does not read (the server is not what it seems).
    """
    end = buffer.find(b"\r\n")
    if end < 0:
        return None
    kind, head = buffer[:1], bytes(buffer[1:end])
    if kind == b"-":
        return head.decode("utf-8", "replace"), end + 2
    if kind == b"+":
        return [], end + 2
    if kind == b":":
        return [int(head)], end + 2
    if kind != b"*":
        raise QuotaStoreDown("an unexpected reply")
    count, at, items = int(head), end + 2, []
    for _ in range(count):
        close = buffer.find(b"\r\n", at)
        if close < 0:
            return None
        if buffer[at : at + 1] != b":":
            raise QuotaStoreDown("an unexpected reply")
        items.append(int(buffer[at + 1 : close]))
        at = close + 2
    return items, at


class RespScript:
    """One Lua script run on a Redis server by `run`, pipelined on one connection (made again
    after it is lost)."""

    def __init__(self, url: str, script: str, timeout_s: float) -> None:
        """Raises: ValueError: not a redis:// URL this client reads."""
        parts = urlsplit(url)
        if parts.scheme != "redis" or parts.hostname is None:
            raise ValueError("a redis://host:port/db URL")
        self._host = parts.hostname
        self._port = 6379 if parts.port is None else parts.port
        path = parts.path.strip("/")
        self._db = int(path) if path else 0
        self._password = None if parts.password is None else unquote(parts.password)
        self._user = None if parts.username in (None, "") else unquote(parts.username or "")
        self._script = script.encode()
        self._sha = hashlib.sha1(self._script).hexdigest().encode()
        self._timeout = timeout_s
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None

    async def run(self, keys: Sequence[str], args: Sequence[str]) -> list[int]:
        """The script's answer (an array of integers).

        Raises:
            QuotaStoreDown: no connection, no answer within the timeout, or an error.
        """
        body = [str(len(keys)).encode(), *(k.encode() for k in keys), *(a.encode() for a in args)]
        reply = await self._ask(_command(b"EVALSHA", self._sha, *body))
        if isinstance(reply, str) and reply.startswith("NOSCRIPT"):
            reply = await self._ask(_command(b"EVAL", self._script, *body))
        if isinstance(reply, str):
            raise QuotaStoreDown("the script failed")
        return reply

    async def _ask(self, command: bytes) -> list[int] | str:
        protocol = await self._connected()
        waiter: asyncio.Future[list[int] | str] = asyncio.get_running_loop().create_future()
        protocol.waiters.append(waiter)
        assert protocol.transport is not None
        protocol.transport.write(command)
        try:
            return await asyncio.wait_for(waiter, self._timeout)
        except TimeoutError:
            self._drop(protocol)  # its later replies would answer the wrong waiters
            raise QuotaStoreDown("no answer in time") from None

    async def _connected(self) -> _Protocol:
        protocol = self._protocol
        if protocol is not None and not protocol.lost:
            return protocol
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            protocol = self._protocol
            if protocol is not None and not protocol.lost:
                return protocol
            loop = asyncio.get_running_loop()
            try:
                _, made = await asyncio.wait_for(
                    loop.create_connection(_Protocol, self._host, self._port), self._timeout
                )
            except (OSError, TimeoutError):
                raise QuotaStoreDown("cannot connect") from None
            assert isinstance(made, _Protocol)
            self._protocol = made
            try:
                await self._hello(made)
            except QuotaStoreDown:
                self._drop(made)
                raise
            return made

    async def _hello(self, protocol: _Protocol) -> None:
        """AUTH and SELECT, where the URL asks for them."""
        setup: list[bytes] = []
        if self._password is not None:
            who = [] if self._user is None else [self._user.encode()]
            setup.append(_command(b"AUTH", *who, self._password.encode()))
        if self._db:
            setup.append(_command(b"SELECT", str(self._db).encode()))
        for command in setup:
            waiter: asyncio.Future[list[int] | str] = asyncio.get_running_loop().create_future()
            protocol.waiters.append(waiter)
            assert protocol.transport is not None
            protocol.transport.write(command)
            try:
                reply = await asyncio.wait_for(waiter, self._timeout)
            except TimeoutError:
                raise QuotaStoreDown("no answer in time") from None
            if isinstance(reply, str):
                raise QuotaStoreDown("the server refused AUTH or SELECT")

    def _drop(self, protocol: _Protocol) -> None:
        if protocol.transport is not None:
            protocol.transport.abort()
        protocol.connection_lost(None)
        if self._protocol is protocol:
            self._protocol = None

    async def aclose(self) -> None:
        """Close the connection."""
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()
