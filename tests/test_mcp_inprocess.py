"""The MCP transports' own parts in process: stdin's line reader and intake, the wait for answers
at the end of stdin, and /mcp inside the HTTP app with its lifespan, driven over ASGI."""

from __future__ import annotations

import gc
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from running_app import running
from strictcall import Gateway
from strictcall.core.pipeline import Limits
from strictcall.errors import INVALID_JSON, INVALID_REQUEST, REQUEST_TOO_LARGE, UNAUTHENTICATED
from strictcall.server.app import build_app
from strictcall.server.router import RpcApp
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.asgi import Message
from strictcall.transports.jsonrpc import ERROR_CODES
from strictcall.transports.mcp import Answers, McpTools, StdioIntake, take_lines

DEADLINE_S = 30
LIMIT = 64


def run(work: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(DEADLINE_S):
            await work()

    anyio.run(bounded)


def notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


# --- stdio -------------------------------------------------------------------------------------


def test_stdin_lines_are_passed_on_answered_or_skipped_in_order() -> None:
    stdin = io.BytesIO(
        notification("notifications/initialized")
        + b"\n\n \t\r\n"
        + b"{not json}\r\n"
        + b'"x' + b"y" * (LIMIT * 3) + b'"\n'
        + b"[]\n"
        + notification("notifications/roots/list_changed")  # the last line, unended
    )  # fmt: skip
    audit: list[AuditRecord] = []
    passed: list[SessionMessage | Exception] = []
    replies: list[SessionMessage] = []

    async def scenario() -> None:
        messages_in, messages_out = anyio.create_memory_object_stream[SessionMessage | Exception](9)
        replies_in, replies_out = anyio.create_memory_object_stream[SessionMessage](9)
        tools = McpTools(Gateway(limits=Limits(LIMIT)), lambda ctx: "u1", lambda: "test")
        intake = StdioIntake(messages_in, Answers(replies_in), tools, "u1", audit.append)
        with messages_out, replies_out:
            await take_lines(stdin, LIMIT, intake)
            passed.extend([item async for item in messages_out])  # closed by the end of stdin
            replies_in.close()
            replies.extend([item async for item in replies_out])

    run(scenario)
    assert [
        item.message.method
        for item in passed
        if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCNotification)
    ] == ["notifications/initialized", "notifications/roots/list_changed"]
    assert len(passed) == 2
    codes = []
    for reply in replies:
        assert isinstance(reply.message, types.JSONRPCError) and reply.message.id is None
        codes.append((reply.message.error.code, reply.message.error.data["code"]))
    assert codes == [
        (ERROR_CODES[INVALID_JSON.stage][0], INVALID_JSON.code),
        (ERROR_CODES[REQUEST_TOO_LARGE.stage][0], REQUEST_TOO_LARGE.code),
        (ERROR_CODES[INVALID_REQUEST.stage][0], INVALID_REQUEST.code),
    ]
    assert [(r.identity, r.code) for r in audit] == [
        ("u1", INVALID_JSON.code),
        ("u1", REQUEST_TOO_LARGE.code),
        ("u1", INVALID_REQUEST.code),
    ]


def test_the_end_of_stdin_waits_for_every_answer_by_id_and_type() -> None:
    events: list[str] = []

    async def scenario() -> None:
        replies_in, replies_out = anyio.create_memory_object_stream[SessionMessage](9)
        messages_in, messages_out = anyio.create_memory_object_stream[SessionMessage | Exception](9)
        answers = Answers(replies_in)
        tools = McpTools(Gateway(), lambda ctx: "u1", lambda: "test")
        intake = StdioIntake(messages_in, answers, tools, "u1", None)
        for line in (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}',
            b'{"jsonrpc":"2.0","id":"7","method":"tools/list"}',
            b'{"jsonrpc":"2.0","id":8,"method":"tools/list"}',
            notification("notifications/cancelled", {"requestId": 8}),  # never answered
        ):
            await intake.take(line)

        async def end() -> None:
            await intake.end()
            events.append("ended")

        async with anyio.create_task_group() as tg:
            tg.start_soon(end)
            for answered in (7, "7"):
                await anyio.wait_all_tasks_blocked()
                assert "ended" not in events
                reply = types.JSONRPCResponse(jsonrpc="2.0", id=answered, result={})
                await answers.send(SessionMessage(reply))
                events.append(f"answered {answered!r}")
        assert events == ["answered 7", "answered '7'", "ended"]
        with messages_out, replies_out:
            assert len([item async for item in messages_out]) == 4
            async with answers:
                pass
            assert len([item async for item in replies_out]) == 2

    run(scenario)


# --- /mcp in the HTTP app ----------------------------------------------------------------------


LIST_NOTES = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_notes"}}'


def mcp_headers(token: str) -> dict[str, str]:
    """A streamable HTTP client's headers, with `token`."""
    return {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }


def test_mcp_is_mounted_behind_the_token_and_serves_the_callers_notes(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "app.sqlite3"))
    token = store.create_token("u1")
    store.add_note("u1", "mine")
    app = build_app(store)
    headers = mcp_headers(token)

    async def scenario() -> None:
        async with running(app) as client:
            refused = await client.post("/mcp", content=LIST_NOTES)
            assert refused.status_code == 401
            assert refused.json()["error"]["data"]["code"] == UNAUTHENTICATED.code
            answered = await client.post("/mcp", content=LIST_NOTES, headers=headers)
            assert answered.status_code == 200
            notes = answered.json()["result"]["structuredContent"]["result"]
            assert [note["text"] for note in notes] == ["mine"]
            too_large = await client.post("/mcp", content=b" " * (1 << 21), headers=headers)
            assert too_large.status_code == 413
            unparsable = await client.post("/mcp/", content=b"{", headers=headers)
            assert unparsable.status_code == 400
            assert (await client.get("/elsewhere", headers=headers)).status_code == 404

    try:
        run(scenario)
    finally:
        store.close()


def test_the_mcp_sdk_once_loaded_is_kept_out_of_the_collectors_generations(
    tmp_path: Path,
) -> None:
    """The SDK, loaded after the server started, lives as long as it: left in the collector's
    generations, each full collection walked all of it with the loop stalled (~50 ms)."""
    store = SQLiteStore(str(tmp_path / "app.sqlite3"))
    token = store.create_token("u1")
    app = build_app(store)
    headers = mcp_headers(token)
    frozen: list[int] = []

    async def scenario() -> None:
        gc.unfreeze()
        async with running(app) as client:
            answered = await client.post("/mcp", content=LIST_NOTES, headers=headers)
            assert answered.status_code == 200
            frozen.append(gc.get_freeze_count())

    try:
        run(scenario)
    finally:
        gc.unfreeze()
        store.close()
    assert frozen[0] > 0


@asynccontextmanager
async def failing() -> AsyncIterator[None]:
    raise RuntimeError("cannot start")
    yield  # pragma: no cover


@asynccontextmanager
async def failing_at_exit() -> AsyncIterator[None]:
    yield
    raise RuntimeError("cannot stop")


@pytest.mark.parametrize(
    ("lifespan", "outcome"),
    [(failing, "lifespan.startup.failed"), (failing_at_exit, "lifespan.shutdown.failed")],
    ids=["startup", "shutdown"],
)
def test_a_lifespan_that_fails_is_reported_to_the_server(
    tmp_path: Path, lifespan: Callable[[], AbstractAsyncContextManager[None]], outcome: str
) -> None:
    store = SQLiteStore(str(tmp_path / "app.sqlite3"))
    plain = build_app(store)
    app = RpcApp(
        plain.service,
        store,
        max_body=plain.max_body,
        record=store.record_call,
        lifespans=[lifespan],
    )
    received: list[str] = []

    async def scenario() -> None:
        events = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])

        async def receive() -> Message:
            return next(events)

        async def send(message: Message) -> None:
            received.append(message["type"])

        await app({"type": "lifespan"}, receive, send)

    try:
        run(scenario)
    finally:
        store.close()
    assert received[-1] == outcome
