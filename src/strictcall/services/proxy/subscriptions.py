"""Who subscribed to which of an upstream's resources, and where its
`notifications/resources/updated` go: to each caller subscribed to that URI, and to nobody else.

The upstream is subscribed once per URI however many callers are (`subscribe` says when the
first one comes), and unsubscribed when the last one leaves or its session ends (`unsubscribe`,
`forget`). A caller holds at most `MAX_SUBSCRIPTIONS` at once; an update of another shape, or
naming a URI nobody subscribed to, goes nowhere.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

import mcp_types as types
from pydantic import ValidationError

from strictcall.errors import StrictcallError

MAX_SUBSCRIPTIONS: Final = 100
"""Resource subscriptions one downstream session may hold at once."""

UNSUBSCRIBE_S: Final = 5.0
"""How long an upstream's answer to resources/unsubscribe (or to a subscription made again in a
new session) is waited for: a caller's session that ends never waits longer for it."""

Send = Callable[[types.ServerNotification], Awaitable[None]]
"""Sends one notification to a subscribed caller's session."""


class TooManySubscriptions(StrictcallError):
    """The caller already holds `MAX_SUBSCRIPTIONS`."""


class Subscriptions:
    """One upstream's resource subscriptions, by URI (its own) and caller (a session's key)."""

    def __init__(self) -> None:
        self._by_uri: dict[str, dict[str, Send]] = {}
        self._counts: dict[str, int] = {}

    def subscribe(self, caller: str, uri: str, send: Send) -> bool:
        """Subscribe `caller` to `uri`; whether it is the first (the upstream is to be told).

        Raises:
            TooManySubscriptions: `caller` holds `MAX_SUBSCRIPTIONS` already.
        """
        subscribers = self._by_uri.get(uri)
        if subscribers is not None and caller in subscribers:
            subscribers[caller] = send
            return False
        if self._counts.get(caller, 0) >= MAX_SUBSCRIPTIONS:
            raise TooManySubscriptions
        first = subscribers is None
        self._by_uri.setdefault(uri, {})[caller] = send
        self._counts[caller] = self._counts.get(caller, 0) + 1
        return first

    def unsubscribe(self, caller: str, uri: str) -> bool:
        """Unsubscribe `caller` from `uri`; whether it was the last (the upstream is to be
        told). One `caller` never subscribed to changes nothing."""
        subscribers = self._by_uri.get(uri)
        if subscribers is None or subscribers.pop(caller, None) is None:
            return False
        left = self._counts[caller] - 1
        if left:
            self._counts[caller] = left
        else:
            del self._counts[caller]
        if subscribers:
            return False
        del self._by_uri[uri]
        return True

    def forget(self, caller: str) -> list[str]:
        """`caller`'s session ended: its subscriptions go; the URIs nobody holds any more."""
        held = [uri for uri, subscribers in self._by_uri.items() if caller in subscribers]
        return [uri for uri in held if self.unsubscribe(caller, uri)]

    def subscribed(self) -> list[str]:
        """The URIs someone holds (to subscribe again on a new upstream session)."""
        return list(self._by_uri)

    async def updated(self, params: object) -> int:
        """Send an upstream's `notifications/resources/updated` to each subscriber of its URI,
        checked as the protocol's; how many were sent. A subscriber whose session is gone is
        skipped, the others still told."""
        try:
            checked = types.ResourceUpdatedNotificationParams.model_validate(params, by_name=False)
        except ValidationError:
            return 0
        sent = 0
        for send in list(self._by_uri.get(str(checked.uri), {}).values()):
            try:
                await send(types.ResourceUpdatedNotification(params=checked))
            except Exception:  # that caller's stream is gone: the others are still told
                continue
            sent += 1
        return sent
