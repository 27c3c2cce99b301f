"""A session of strictcall's MCP server as stdio serves one, held by the official client on
in-memory streams: the server's notifications go on the session's own write side
(`strictcall.transports.mcp.stdio.Answers`), as on stdio."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.client.client import Client
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.memory import create_client_server_memory_streams

from strictcall.transports.mcp.adapter import McpTools
from strictcall.transports.mcp.stdio import Answers


@asynccontextmanager
async def memory_session(
    tools_for: Callable[[Answers], McpTools], **client_options: Any
) -> AsyncIterator[Client]:
    """The official client (with `client_options`: its mode, callbacks, message handler) of
    the server `tools_for` makes, given the session's write side."""
    async with create_client_server_memory_streams() as (client_streams, (read, write)):
        answers = Answers(write)
        server = tools_for(answers).server()
        options = server.create_initialization_options(NotificationOptions())

        @asynccontextmanager
        async def transport() -> AsyncIterator[Any]:
            yield client_streams

        async with anyio.create_task_group() as group:
            group.start_soon(server.run, read, answers, options)
            try:
                async with Client(transport(), **client_options) as client:
                    yield client
            finally:
                group.cancel_scope.cancel()
