"""The downstream caller of one tools/call as its wire offers it to the tool: a key naming its
session, its progress token, its log level, and the notifications sent on the call's own stream.

A wire sets the peer around a call it can carry notifications for (`serving_peer`); a proxied
tool reads it (`current_peer`) and routes what its upstream sends during the call there and
nowhere else. A call without a peer gets nothing but its answer, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types

from strictcall.errors import StrictcallError

LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's log levels (RFC 5424's), least severe first."""

Notify = Callable[[types.ServerNotification], Awaitable[None]]
"""Sends one notification on the call's own stream (the answer's, on HTTP)."""

Ask = Callable[[types.ServerRequest, Any], Awaitable[Any]]
"""Sends one request to the caller, related to its call, and returns its result read as the
model given (raises the SDK's MCPError for the caller's error answer)."""

ASKS: Final = ("sampling", "elicitation", "roots")
"""The client capabilities a server's requests during a call need."""


class NotAsked(StrictcallError):
    """The caller was not asked: `outcome` says why, as its audit record does."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


@dataclass(frozen=True, slots=True)
class CallPeer:
    """One downstream call's way back: `caller` names the downstream session (two calls of one
    session share it, two sessions never do), `progress_token` is the caller's own (None: it
    asked for no progress), `log_level` the least severe level it takes (None: no messages)."""

    caller: str
    progress_token: types.ProgressToken | None
    log_level: str | None
    notify: Notify
    offers: frozenset[str] = frozenset()
    """Which of `ASKS` the caller's client declared."""
    ask: Ask | None = None
    """How to ask the caller (None: its wire cannot carry a request of the server's)."""

    def takes_log(self, level: str) -> bool:
        """Whether a message of `level` reaches this caller."""
        if self.log_level is None or level not in LEVELS or self.log_level not in LEVELS:
            return False
        return LEVELS.index(level) >= LEVELS.index(self.log_level)


_PEER: ContextVar[CallPeer | None] = ContextVar("strictcall_call_peer", default=None)


def current_peer() -> CallPeer | None:
    """The peer of the call running in this context, if its wire gave one."""
    return _PEER.get()


@contextmanager
def serving_peer(peer: CallPeer | None) -> Iterator[None]:
    """Run a call with `peer` as its way back (None: none)."""
    token = _PEER.set(peer)
    try:
        yield
    finally:
        _PEER.reset(token)


def progress_token_of(meta: object) -> types.ProgressToken | None:
    """The progress token a request's `_meta` holds (a str or an int, never a bool), or None."""
    if not isinstance(meta, dict):
        return None
    token = meta.get("progressToken")
    if isinstance(token, bool) or not isinstance(token, str | int):
        return None
    return token


def log_level_of(meta: object) -> str | None:
    """The log level a 2026-07-28 request's `_meta` asks for, or None."""
    if not isinstance(meta, dict):
        return None
    level = meta.get(types.LOG_LEVEL_META_KEY)
    return level if isinstance(level, str) and level in LEVELS else None
