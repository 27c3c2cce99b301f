"""The HTTP edge's policy: which origins may call, how slow a request may arrive, how many
connections may be open, how many calls one identity may have in flight.

It is decided here and enforced by `strictcall.server.admission` (origins, calls in flight) and
by the connection's guard in `strictcall.server._uvicorn` (deadlines, connections). The
defaults hold a load of 64 connections and a few identities well within them; every number is
a `strictcall serve` flag, but the head's sizes (`MAX_REQUEST_LINE_BYTES`, `MAX_HEADER_BYTES`).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from strictcall.transports.serving import INPUT_ROUND_WAIT_S, MAX_HELD_ROUNDS, Rounds
from strictcall.transports.streams import (
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_IDENTITY,
    DEFAULT_STREAM_KEEPALIVE_S,
    StreamLimits,
)

DEFAULT_HEADER_TIMEOUT_S: Final = 10.0
DEFAULT_BODY_GRACE_S: Final = 10.0
DEFAULT_BODY_MIN_RATE: Final = 16 * 1024
DEFAULT_MAX_CONNECTIONS: Final = 1024
DEFAULT_MAX_CONNECTIONS_PER_CLIENT: Final = 256
"""One client address's share of `max_connections` (an IPv6 client's: its /64's), so that one
address's idle sockets leave three quarters of the default cap to the others."""
DEFAULT_MAX_IN_FLIGHT: Final = 256
DEFAULT_UNAUTHENTICATED_RATE: Final = 20
"""Requests a second one client address may send without a valid token, after a burst of
`UNAUTHENTICATED_BURST_S` seconds' worth; past it they are 429 `auth_throttled`."""
UNAUTHENTICATED_BURST_S: Final = 5
CLIENTS_KEPT: Final = 10_000
"""The most client addresses a budget remembers (the one seen longest ago is forgotten)."""

MAX_REQUEST_LINE_BYTES: Final = 8 * 1024
"""The longest request line (method, URL, version) the edge reads: a longer one is 414."""

MAX_HEADER_BYTES: Final = 32 * 1024
"""The longest request head (request line and headers) the edge reads: a longer one is 431."""


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    """How slow a request may arrive and how much one caller may take.

    `header_timeout_s`: a request's headers must arrive within it. `body_grace_s` and
    `body_min_rate` (bytes a second): a body must arrive within the grace plus a second per
    `body_min_rate` bytes. `max_connections`: open at once. `max_in_flight`: calls of one
    identity being answered at once; one more is refused `busy` (retryable), never queued.
    `max_connections_per_client`: open at once from one client address (an IPv6 /64).
    `unauthenticated_rate`: requests a second one client address may send without a valid
    token (after a burst of `UNAUTHENTICATED_BURST_S` seconds' worth). `max_streams`,
    `max_streams_per_identity`, `stream_keepalive_s`: /mcp's change streams (`streams`).
    `round_wait_s`, `max_rounds_per_identity`: /mcp's 2026-07-28 input_required rounds
    (`rounds`).
    """

    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_grace_s: float = DEFAULT_BODY_GRACE_S
    body_min_rate: int = DEFAULT_BODY_MIN_RATE
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    max_connections_per_client: int = DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    unauthenticated_rate: int = DEFAULT_UNAUTHENTICATED_RATE
    max_streams: int = DEFAULT_MAX_STREAMS
    max_streams_per_identity: int = DEFAULT_MAX_STREAMS_PER_IDENTITY
    stream_keepalive_s: float = DEFAULT_STREAM_KEEPALIVE_S
    round_wait_s: float = INPUT_ROUND_WAIT_S
    max_rounds_per_identity: int = MAX_HELD_ROUNDS

    @property
    def rounds(self) -> Rounds:
        """/mcp's input_required rounds' budgets."""
        return Rounds(self.round_wait_s, self.max_rounds_per_identity)

    @property
    def streams(self) -> StreamLimits:
        """/mcp's change streams' budgets."""
        return StreamLimits(
            self.max_streams, self.max_streams_per_identity, self.stream_keepalive_s
        )

    def __post_init__(self) -> None:
        if not (self.header_timeout_s > 0 and self.body_grace_s > 0):
            raise ValueError("the edge's deadlines are positive numbers of seconds")
        least = min(self.body_min_rate, self.max_connections, self.max_in_flight)
        if min(least, self.max_connections_per_client, self.unauthenticated_rate) < 1:
            raise ValueError("the edge's rate, connection and in-flight limits are at least 1")
        self.streams  # noqa: B018 - the streams' limits check themselves
        self.rounds  # noqa: B018 - and the rounds' theirs


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    """Which browser origins may call /rpc and /mcp (DNS rebinding: the MCP specification says
    a streamable HTTP server MUST check the Origin of every request).

    A request without an Origin header is not a browser's cross-site request and passes. One
    with an Origin passes when it is in `allowed` (exactly, as the browser sends it: scheme,
    host and port), or, with `loopback` (a server bound to a loopback address), when it names a
    loopback host: localhost, 127.0.0.0/8 or [::1], on any port. Anything else, `null`
    included, is refused.
    """

    allowed: frozenset[str] = frozenset()
    loopback: bool = False

    def admits(self, origin: str | None) -> bool:
        """Whether a request carrying this Origin (None: no header) may be served."""
        if origin is None:
            return True
        if origin in self.allowed:
            return True
        return self.loopback and is_loopback_origin(origin)


def is_loopback_origin(origin: str) -> bool:
    """Whether an Origin is http(s) on a loopback host (any port)."""
    try:
        parts = urlsplit(origin)
        host = parts.hostname
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or host is None or parts.path not in ("", "/"):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ClientBudget:
    """A token bucket per client address (`client_key`): `rate` a second, holding at most
    `burst_s` seconds' worth; one event loop, no lock."""

    __slots__ = ("_buckets", "_clock", "burst", "rate")

    def __init__(
        self,
        rate: float,
        burst_s: float = UNAUTHENTICATED_BURST_S,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate: Final = rate
        self.burst: Final = rate * burst_s
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # tokens left, when counted

    def spend(self, client: str) -> float:
        """Spend one of `client`'s tokens: 0.0 when there was one, else the seconds until
        there is one (nothing spent)."""
        now = self._clock()
        bucket = self._buckets.pop(client, None)  # re-inserted: the dict's order is recency
        left = (
            self.burst
            if bucket is None
            else min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        )
        if left >= 1.0:
            self._buckets[client] = (left - 1.0, now)
            wait = 0.0
        else:
            self._buckets[client] = (left, now)
            wait = (1.0 - left) / self.rate
        if len(self._buckets) > CLIENTS_KEPT:
            del self._buckets[next(iter(self._buckets))]
        return wait

    def exhausted(self, client: str) -> bool:
        """Whether `client` has no token left now (nothing spent)."""
        bucket = self._buckets.get(client)
        if bucket is None:
            return False
        return bucket[0] + (self._clock() - bucket[1]) * self.rate < 1.0


def client_key(peer: object) -> str:
    """The address a connection's share is counted under: an IPv4 address as it is, an IPv6
    one by its /64 (one host holds a whole /64), "" for a socket without one (a Unix socket)."""
    if not isinstance(peer, tuple | list) or not peer or not isinstance(peer[0], str):
        return ""
    host = peer[0]
    if ":" not in host:
        return host
    try:
        address = ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return host
    mapped = address.ipv4_mapped
    if mapped is not None:
        return str(mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


def is_loopback_host(host: str) -> bool:
    """Whether a bind address is a loopback one (so only this machine can connect)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
