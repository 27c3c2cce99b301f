"""Where an upstream's notifications go (strictcall.services.proxy.session): progress by
strictcall's own token to that call's caller with the caller's token, messages to the one
caller with calls in flight and never to another, the rest to the log, escaped and limited."""

from __future__ import annotations

import asyncio

import mcp_types as types

from strictcall.services.proxy.session import LOG_BURST, MAX_PENDING, Conversations
from strictcall.transports.mcp.peer import CallPeer


class Caller:
    """A downstream caller that keeps what it was sent."""

    def __init__(self, name: str, token: types.ProgressToken | None, level: str | None) -> None:
        self.heard: list[types.ServerNotification] = []
        self.peer = CallPeer(name, token, level, self.notify)

    async def notify(self, notification: types.ServerNotification) -> None:
        self.heard.append(notification)


def _message(level: str, data: object) -> dict[str, object]:
    return {"level": level, "data": data}


def test_progress_goes_to_its_call_with_the_callers_own_token() -> None:
    lines: list[str] = []
    conversations = Conversations(lines.append)
    alice, bob = Caller("alice", 7, None), Caller("bob", 7, None)  # the same token, chosen by both

    async def run() -> None:
        with conversations.open(alice.peer) as a, conversations.open(bob.peer) as b:
            assert a.token != b.token
            conversations.take("notifications/progress", {"progressToken": b.token, "progress": 1})
            conversations.take("notifications/progress", {"progressToken": "7", "progress": 2})
            await b.settled()
            await a.settled()

    asyncio.run(run())
    assert alice.heard == []
    assert [n.params.progress_token for n in bob.heard] == [7]  # type: ignore[union-attr]
    assert lines == []


def test_a_message_outside_any_stream_never_reaches_a_caller_when_two_are_in_flight() -> None:
    lines: list[str] = []
    conversations = Conversations(lines.append)
    alice, bob = Caller("alice", None, "debug"), Caller("bob", None, "debug")

    async def run() -> None:
        with conversations.open(alice.peer) as a:
            conversations.take("notifications/message", _message("info", "for alice"))
            with conversations.open(bob.peer) as b:
                conversations.take("notifications/message", _message("info", "whose?"))
                await b.settled()
            await a.settled()

    asyncio.run(run())
    assert [n.params.data for n in alice.heard] == ["for alice"]  # type: ignore[union-attr]
    assert bob.heard == []
    assert len(lines) == 1 and "whose?" in lines[0]


def test_a_message_below_the_callers_level_is_not_sent() -> None:
    conversations = Conversations(lambda line: None)
    alice = Caller("alice", None, "warning")

    async def run() -> None:
        with conversations.open(alice.peer) as a:
            for level in ("debug", "info", "warning", "error"):
                conversations.take("notifications/message", _message(level, level))
            await a.settled()

    asyncio.run(run())
    assert [n.params.level for n in alice.heard] == ["warning", "error"]  # type: ignore[union-attr]


def test_messages_outside_any_call_are_escaped_and_held_back_beyond_the_burst() -> None:
    lines: list[str] = []
    conversations = Conversations(lines.append)
    for n in range(LOG_BURST + 5):
        conversations.take("notifications/message", _message("info", f"line {n}\x1b[2J\nforged"))
    assert len(lines) == LOG_BURST
    assert all("\x1b" not in line and "\n" not in line for line in lines)
    assert lines[0].startswith("upstream log info: line 0")


def test_a_message_of_another_shape_is_dropped_and_said() -> None:
    lines: list[str] = []
    conversations = Conversations(lines.append)
    assert conversations.take("notifications/message", {"level": "loud", "data": 1})
    assert len(lines) == 1 and "another shape" in lines[0]
    assert not conversations.take("notifications/tools/list_changed", None)


def test_no_more_than_max_pending_notifications_wait_for_one_caller() -> None:
    conversations = Conversations(lambda line: None)
    alice = Caller("alice", "t", None)

    async def run() -> int:
        with conversations.open(alice.peer) as a:
            for n in range(MAX_PENDING + 3):  # all queued before the writer runs once
                params = {"progressToken": a.token, "progress": n}
                conversations.take("notifications/progress", params)
            await a.settled()
            return a.dropped

    assert asyncio.run(run()) == 3
    assert len(alice.heard) == MAX_PENDING
