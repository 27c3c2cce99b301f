"""The quotas' small Redis client reads replies that arrive in pieces, in order, and fails
every waiting call when its connection is lost."""

from __future__ import annotations

import asyncio

import pytest

from strictcall.core.quota import QuotaStoreDown
from strictcall.storage.resp import _Protocol, _reply


def test_a_reply_in_pieces_is_read_once_whole_and_in_order() -> None:
    async def run() -> list[object]:
        protocol = _Protocol()
        loop = asyncio.get_running_loop()
        waiters = [loop.create_future() for _ in range(3)]
        protocol.waiters.extend(waiters)
        stream = b"*2\r\n:-1\r\n:0\r\n-NOSCRIPT No matching script\r\n*2\r\n:1\r\n:1500\r\n"
        for byte in stream:
            protocol.data_received(bytes([byte]))
        return [await w for w in waiters]

    assert asyncio.run(run()) == [[-1, 0], "NOSCRIPT No matching script", [1, 1500]]


def test_an_incomplete_reply_waits_and_an_unknown_one_is_refused() -> None:
    assert _reply(bytearray(b"*2\r\n:1\r\n")) is None
    assert _reply(bytearray(b":7\r\n")) == ([7], 4)
    with pytest.raises(QuotaStoreDown):
        _reply(bytearray(b"$3\r\nabc\r\n"))


def test_a_lost_connection_fails_every_waiting_call() -> None:
    async def run() -> None:
        protocol = _Protocol()
        waiter = asyncio.get_running_loop().create_future()
        protocol.waiters.append(waiter)
        protocol.connection_lost(None)
        with pytest.raises(QuotaStoreDown):
            await waiter

    asyncio.run(run())
