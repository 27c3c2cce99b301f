"""The one home of the MCP SDK's internals the proxy leans on: what is not the SDK's documented
API, each pinned by tests/test_dependencies.py, which fails naming what changed when a new
release does (then check the release and move the bound in pyproject.toml).

    mcp.shared._httpx_utils.create_mcp_http_client(headers=...)
        the HTTP client the SDK's own transports make, with their timeouts (30 s to connect,
        write and take a connection; 300 s to read, as a response stream may stay open): an
        HTTP upstream gets the client the SDK would give it, with the operator's headers
    mcp.os.posix.utilities.terminate_posix_process_tree(process, timeout)
        how the SDK's stdio transport stops a server: its process group terminated, then
        killed; a stdio upstream is stopped alike
    the read stream's `last_context` (mcp.shared._context_streams)
        the SDK's dispatcher reads the sender's context off its read stream there; a stream
        the proxy wraps passes it on (`sender_context`; `WatchedStream` is that wrapper)
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
from mcp.os.posix.utilities import terminate_posix_process_tree

__all__ = ["WatchedStream", "http_client", "sender_context", "terminate_tree"]


def http_client(headers: dict[str, str], auth: Any = None) -> Any:
    """The SDK's HTTP client for its transports, sending `headers` on every request and
    authenticated by `auth` (an httpx2.Auth: the proxy's own credentials), if given (its HTTP
    stack loads here, for an HTTP upstream only)."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    return create_mcp_http_client(headers=headers, auth=auth)


async def terminate_tree(process: asyncio.subprocess.Process, timeout_s: float) -> None:
    """Terminate `process` and its group as the SDK's stdio transport does, then kill what
    survives `timeout_s`."""
    await terminate_posix_process_tree(process, timeout_s)  # type: ignore[arg-type]


def sender_context(stream: object) -> object:
    """The context the SDK's read `stream` keeps of its last message's sender (None: none)."""
    return getattr(stream, "last_context", None)  # absent: a stream that keeps none


class WatchedStream:
    """The transport's read stream, telling when it ends: the connection is gone."""

    def __init__(self, inner: Any, ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> object:
        return sender_context(self._inner)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def __aenter__(self) -> WatchedStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
