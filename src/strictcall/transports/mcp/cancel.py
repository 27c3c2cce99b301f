"""Calls on /mcp a host may cancel: each request there is a session of its own, so a
`notifications/cancelled` names its call by the caller's identity and the request id, and on
2026-07-28 a closed stream is the call's cancellation
(`strictcall.transports.asgi.CONNECTION_GONE`).

A cancelled call's tool is cancelled where it runs (a proxied one's upstream is sent
`notifications/cancelled`), and its request is answered `REQUEST_CANCELLED` (on 2026-07-28 its
stream is gone: nothing is written). At most `MAX_CANCELLABLE` calls are cancellable at once;
past it (or for a request id already running for that identity) a call runs uncancellable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Final, TypeVar

import anyio

from strictcall.core.jsontext import dump_text
from strictcall.errors import JSONValue, StrictcallError
from strictcall.transports.asgi import CONNECTION_GONE

MAX_CANCELLABLE: Final = 4096
"""Calls on /mcp cancellable at once (by `notifications/cancelled` or a closed stream)."""

REQUEST_CANCELLED: Final = -32800
"""The JSON-RPC error a cancelled request is answered with where its wire needs an answer (the
MCP SDK's, for 2025-11-25 streamable HTTP)."""

HANDSHAKE_ERA: Final = "2025-11-25"

T = TypeVar("T")


class CallCancelled(StrictcallError):
    """The host cancelled the call (its tool was stopped): it gets `REQUEST_CANCELLED`."""


def cancelled_message(request_id: JSONValue) -> dict[str, JSONValue]:
    """The JSON-RPC error that answers a cancelled request."""
    error: dict[str, JSONValue] = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


class Cancellable:
    """The calls in flight a host may cancel, by (identity, request id)."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, bytes], anyio.CancelScope] = {}

    async def run(
        self, identity: str, request_id: JSONValue, version: str, settle: Awaitable[T]
    ) -> T:
        """`settle` awaited, cancellable by `cancel` (and on 2026-07-28 by its connection's
        end). Raises CallCancelled when it was cancelled."""
        key = (identity, dump_text(request_id) or b"")
        running = self._running
        if key in running or len(running) >= MAX_CANCELLABLE:
            return await settle
        gone = None if version == HANDSHAKE_ERA else CONNECTION_GONE.get()
        with anyio.CancelScope() as scope:
            running[key] = scope
            if gone is not None:
                gone.append(scope.cancel)
            try:
                return await settle
            finally:
                del running[key]
                if gone is not None:
                    _discard(gone, scope.cancel)
        raise CallCancelled("the host cancelled the call")

    def cancel(self, identity: str, params: object) -> bool:
        """A host's `notifications/cancelled` (its `params`): whether it named a call of
        `identity`'s in flight (then cancelled)."""
        if not isinstance(params, dict) or "requestId" not in params:
            return False
        request_id = params["requestId"]
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return False
        scope = self._running.get((identity, dump_text(request_id) or b""))
        if scope is None:
            return False
        scope.cancel()
        return True


def _discard(entries: list[Callable[[], None]], entry: Callable[[], None]) -> None:
    with suppress(ValueError):  # already called and cleared
        entries.remove(entry)
