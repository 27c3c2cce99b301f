"""An upstream's resource updates reach the callers subscribed to that URI and nobody else; the
upstream is subscribed once per URI and unsubscribed when the last subscriber leaves."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from strictcall.services.proxy.subscriptions import (
    MAX_SUBSCRIPTIONS,
    Send,
    Subscriptions,
    TooManySubscriptions,
)


def _inbox() -> tuple[list[types.ServerNotification], Send]:
    got: list[types.ServerNotification] = []

    async def send(notification: types.ServerNotification) -> None:
        got.append(notification)

    return got, send


def test_an_update_reaches_its_subscribers_only() -> None:
    subscriptions = Subscriptions()
    a, send_a = _inbox()
    b, send_b = _inbox()
    assert subscriptions.subscribe("a", "test://1", send_a)
    assert not subscriptions.subscribe("b", "test://1", send_b)
    assert subscriptions.subscribe("b", "test://2", send_b)
    assert anyio.run(subscriptions.updated, {"uri": "test://2"}) == 1
    assert a == [] and len(b) == 1
    assert anyio.run(subscriptions.updated, {"uri": "test://1"}) == 2
    assert len(a) == 1 and len(b) == 2
    assert anyio.run(subscriptions.updated, {"uri": "test://none"}) == 0
    assert anyio.run(subscriptions.updated, {"uri": 3}) == 0  # not the protocol's shape


def test_the_last_to_leave_unsubscribes_the_upstream() -> None:
    subscriptions = Subscriptions()
    _, send = _inbox()
    subscriptions.subscribe("a", "test://1", send)
    subscriptions.subscribe("b", "test://1", send)
    assert not subscriptions.unsubscribe("c", "test://1")  # never subscribed: nothing
    assert not subscriptions.unsubscribe("a", "test://1")
    assert subscriptions.forget("b") == ["test://1"]
    assert subscriptions.subscribed() == []


def test_a_caller_holds_at_most_the_budget() -> None:
    subscriptions = Subscriptions()
    _, send = _inbox()
    for n in range(MAX_SUBSCRIPTIONS):
        subscriptions.subscribe("a", f"test://{n}", send)
    subscriptions.subscribe("a", "test://0", send)  # held already
    with pytest.raises(TooManySubscriptions):
        subscriptions.subscribe("a", "test://over", send)
    assert subscriptions.subscribe("b", "test://over", send)


def test_a_gone_subscriber_does_not_stop_the_others() -> None:
    subscriptions = Subscriptions()
    b, send_b = _inbox()

    async def gone(notification: types.ServerNotification) -> None:
        raise anyio.BrokenResourceError

    subscriptions.subscribe("a", "test://1", gone)
    subscriptions.subscribe("b", "test://1", send_b)
    assert anyio.run(subscriptions.updated, {"uri": "test://1"}) == 1
    assert len(b) == 1
