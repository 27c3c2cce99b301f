"""An ASGI app run in process for the tests: its lifespan started and stopped as a server would,
and an HTTP client that reaches it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx

from strictcall.server.router import RpcApp
from strictcall.transports.asgi import Message


@asynccontextmanager
async def running(app: RpcApp) -> AsyncIterator[httpx.AsyncClient]:
    """`app` with its ASGI lifespan started (and stopped after), and a client for it."""
    to_app, app_receives = anyio.create_memory_object_stream[Message](2)
    app_sends, from_app = anyio.create_memory_object_stream[Message](2)

    async def send(message: Message) -> None:
        await app_sends.send(message)

    async with to_app, app_receives, app_sends, from_app, anyio.create_task_group() as tg:
        tg.start_soon(app, {"type": "lifespan"}, app_receives.receive, send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client
        await to_app.send({"type": "lifespan.shutdown"})
        assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"
