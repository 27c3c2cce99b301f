"""The budgets of /mcp's change streams (a GET with `Accept: text/event-stream`): how many may
be open, per identity and in all, and how often an idle one is kept alive. A light module, free
of the MCP SDK, so that the edge's flags can name its defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_MAX_STREAMS: Final = 256
"""Change streams open at once on one server, every identity's together."""

DEFAULT_MAX_STREAMS_PER_IDENTITY: Final = 4
"""Change streams one identity may hold open at once (a host keeps one; a few reconnect)."""

DEFAULT_STREAM_KEEPALIVE_S: Final = 15.0
"""Seconds an open stream may go without a byte before a keep-alive comment is sent, so that a
proxy between the host and strictcall does not take it for dead."""


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """How many change streams may be open (`max_streams` in all, `max_streams_per_identity`
    of one identity's) and how often an idle one gets a keep-alive comment (`keepalive_s`)."""

    max_streams: int = DEFAULT_MAX_STREAMS
    max_streams_per_identity: int = DEFAULT_MAX_STREAMS_PER_IDENTITY
    keepalive_s: float = DEFAULT_STREAM_KEEPALIVE_S

    def __post_init__(self) -> None:
        if min(self.max_streams, self.max_streams_per_identity) < 1 or not self.keepalive_s > 0:
            raise ValueError("the change streams' limits are at least 1, the keep-alive positive")
