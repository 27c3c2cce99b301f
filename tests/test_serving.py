"""The serving options (`strictcall.transports.serving.Serving`): one value, built once, serves
every MCP wire alike: the tools (`McpTools`), stdio (`serve_stdio`, run here in process on
pipes, as `strictcall serve --mcp-stdio` runs it) and streamable HTTP (`McpHttpApp`). Each call
is recorded where the value says, the content it carries is served beside the tools, and its
lifespans and call context are entered where the wire enters them; the server app
(`build_gateway_app`) takes the same value for /mcp, entering its lifespans itself."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Final

import anyio
import httpx
import mcp_types as types
import pytest

from running_app import running
from strictcall import Gateway, Tool
from strictcall.core.record import RESOURCE_READ
from strictcall.core.tools import ToolFailure
from strictcall.errors import FORBIDDEN_OR_MISSING
from strictcall.server.app import build_gateway_app
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.asgi import IDENTITY_KEY, Receive, Scope, Send
from strictcall.transports.mcp import McpHttpApp, McpTools, Serving, serve_stdio
from strictcall.transports.mcp.content import Kind
from strictcall.transports.mcp.content import Send as Notify
from strictcall.transports.serving import DEFAULT_SERVING

DEADLINE_S: Final = 30.0
NOTE_URI: Final = "note://refunds"
HANDSHAKE: Final = "2025-11-25"


class OneNote:
    """A content source of one resource (a library user's own `McpContent`): anyone may read
    it; no prompts, no subscriptions."""

    def offers(self) -> frozenset[Kind]:
        return frozenset({"resources"})

    def watch(self, watcher: Callable[[Kind], None]) -> Callable[[], None]:
        return lambda: None

    def resources(self, identity: str, claims: Any = None) -> list[types.Resource]:
        return [types.Resource(uri=NOTE_URI, name="refunds")]

    def templates(self, identity: str, claims: Any = None) -> list[types.ResourceTemplate]:
        return []

    def prompts(self, identity: str, claims: Any = None) -> list[types.Prompt]:
        return []

    def routes(self, kind: Kind, key: str) -> bool:
        return kind == "resources" and key == NOTE_URI

    async def read_resource(
        self, identity: str, uri: str, claims: Any = None
    ) -> types.ReadResourceResult:
        if uri != NOTE_URI:
            raise ToolFailure(FORBIDDEN_OR_MISSING)
        text = types.TextResourceContents(uri=NOTE_URI, text="7 days")
        return types.ReadResourceResult(contents=[text])

    async def get_prompt(
        self, identity: str, name: str, arguments: dict[str, str] | None, claims: Any = None
    ) -> types.GetPromptResult:
        raise ToolFailure(FORBIDDEN_OR_MISSING)

    async def complete(
        self, identity: str, params: types.CompleteRequestParams, claims: Any = None
    ) -> types.CompleteResult:
        raise ToolFailure(FORBIDDEN_OR_MISSING)

    def subscribes(self) -> bool:
        return False

    async def subscribe(
        self, identity: str, caller: str, uri: str, send: Notify, claims: Any = None
    ) -> None:
        raise ToolFailure(FORBIDDEN_OR_MISSING)

    async def unsubscribe(self, caller: str, uri: str) -> None:
        return None

    async def forget(self, caller: str) -> None:
        return None


class Options:
    """One serving value and what it saw: its records, its lifespan's entries and exits, the
    tools/calls its call context was entered around."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.lifespan_events: list[str] = []
        self.calls_in_context = 0
        self.serving = Serving(
            record=self.records.append,
            content=OneNote(),
            tools_change=True,
            call_context=self._call_context,
            lifespans=(self._lifespan,),
        )

    @contextmanager
    def _call_context(self) -> Iterator[None]:
        self.calls_in_context += 1
        yield

    @asynccontextmanager
    async def _lifespan(self) -> AsyncIterator[None]:
        self.lifespan_events.append("entered")
        try:
            yield
        finally:
            self.lifespan_events.append("left")


def echo_gateway() -> Gateway:
    return Gateway(
        [
            Tool(
                "echo",
                "Echoes its text.",
                {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"echoed": {"type": "string"}},
                    "required": ["echoed"],
                    "additionalProperties": False,
                },
                lambda ctx, args: {"echoed": args["text"]},
            )
        ]
    )


def request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


INITIALIZE: Final = {
    "protocolVersion": HANDSHAKE,
    "capabilities": {},
    "clientInfo": {"name": "serving-test", "version": "1"},
}
CALL: Final = {"name": "echo", "arguments": {"text": "hi"}}


@contextmanager
def stdout_on_a_pipe() -> Iterator[queue.Queue[bytes | None]]:
    """Fd 1 pointed at a pipe for the block (the wire `serve_stdio` writes), its lines read by
    a thread into the queue yielded (None: the pipe closed)."""
    read_end, write_end = os.pipe()
    saved = os.dup(1)
    lines: queue.Queue[bytes | None] = queue.Queue()

    def pump() -> None:
        with os.fdopen(read_end, "rb") as wire:
            for line in wire:
                lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    os.dup2(write_end, 1)
    os.close(write_end)
    try:
        yield lines
    finally:
        os.dup2(saved, 1)  # the pipe's last writer closed: the reader sees its end
        os.close(saved)
        reader.join(DEADLINE_S)


def serve_stdio_session(serving: Serving, host: Callable[[Callable[[bytes], Any]], None]) -> None:
    """`serve_stdio` on pipes as u1 with `serving`, `host` given the function that sends one
    line and returns the answer to it (within the deadline) while it serves; stdin ends when
    `host` returns."""
    stdin_read, stdin_write = os.pipe()
    failures: list[BaseException] = []
    with stdout_on_a_pipe() as lines, os.fdopen(stdin_read, "rb") as stdin:
        writer = os.fdopen(stdin_write, "wb", buffering=0)

        def ask(line: bytes) -> Any:
            writer.write(line + b"\n")
            if b'"id"' not in line:
                return None
            answer = lines.get(timeout=DEADLINE_S)
            assert answer is not None, "stdout closed before the answer"
            return json.loads(answer)

        def drive() -> None:
            try:
                host(ask)
            except BaseException as exc:  # raised again on the test's own thread
                failures.append(exc)
            finally:
                writer.close()  # stdin ends: so does the session

        driver = threading.Thread(target=drive, daemon=True)
        driver.start()
        try:
            serve_stdio(echo_gateway(), "u1", serving, stdin=stdin)
        finally:
            gc.unfreeze()  # serving froze the test process's objects, as it freezes its own
            driver.join(DEADLINE_S)
    if failures:
        raise failures[0]


async def post_mcp(app: McpHttpApp, body: bytes) -> Any:
    """One POST to /mcp as u1 (the identity admission would put in the scope)."""

    async def as_u1(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, IDENTITY_KEY: "u1"}, receive, send)

    transport = httpx.ASGITransport(app=as_u1)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post(
            "/mcp",
            content=body,
            headers={
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": HANDSHAKE,
            },
        )
    assert response.status_code == 200, response.status_code
    return response.json()


def test_one_serving_value_serves_stdio_and_http_alike() -> None:
    options = Options()
    serving = options.serving
    seen: dict[str, Any] = {}

    def host(ask: Callable[[bytes], Any]) -> None:
        seen["initialize"] = ask(request(1, "initialize", INITIALIZE))
        ask(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        seen["lifespan at the first call"] = list(options.lifespan_events)
        seen["call"] = ask(request(2, "tools/call", CALL))
        seen["resources"] = ask(request(3, "resources/list"))
        seen["read"] = ask(request(4, "resources/read", {"uri": NOTE_URI}))

    serve_stdio_session(serving, host)

    capabilities = seen["initialize"]["result"]["capabilities"]
    assert capabilities["tools"] == {"listChanged": True}  # serving.tools_change
    assert "resources" in capabilities  # serving.content
    assert seen["lifespan at the first call"] == ["entered"]
    assert options.lifespan_events == ["entered", "left"]  # left after the last answer
    assert seen["call"]["result"]["structuredContent"] == {"echoed": "hi"}
    assert [r["uri"] for r in seen["resources"]["result"]["resources"]] == [NOTE_URI]
    assert seen["read"]["result"]["contents"][0]["text"] == "7 days"
    assert options.calls_in_context == 1  # serving.call_context, around the one tools/call
    stdio_records = list(options.records)
    assert [(r.tool, r.identity) for r in stdio_records] == [
        ("echo", "u1"),
        (RESOURCE_READ + NOTE_URI, "u1"),
    ]
    assert all(r.call_id is not None and r.call_id.startswith("mcp-stdio") for r in stdio_records)

    # the same value, unchanged, behind /mcp
    app = McpHttpApp(echo_gateway(), serving)
    assert app.serving is serving

    async def over_http() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with app.lifespan():
                seen["http call"] = await post_mcp(app, request(5, "tools/call", CALL))
                seen["http resources"] = await post_mcp(app, request(6, "resources/list"))

    anyio.run(over_http)
    assert seen["http call"]["result"]["structuredContent"] == {"echoed": "hi"}
    assert [r["uri"] for r in seen["http resources"]["result"]["resources"]] == [NOTE_URI]
    http_records = options.records[len(stdio_records) :]
    assert [(r.tool, r.identity) for r in http_records] == [("echo", "u1")]
    assert http_records[0].call_id is not None
    assert http_records[0].call_id.startswith("mcp-http")
    # the lifespans are the server's to enter over HTTP (`build_gateway_app`), not the app's
    assert options.lifespan_events == ["entered", "left"]


def test_the_server_app_enters_the_values_lifespans_and_serves_its_content(
    tmp_path: Path,
) -> None:
    options = Options()
    store = SQLiteStore(str(tmp_path / "serving.sqlite3"))
    token = store.create_token("u1")
    app = build_gateway_app(echo_gateway(), store, serving=options.serving, observe=False)
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with running(app) as client:
                seen["lifespan while serving"] = list(options.lifespan_events)
                for name, body in (
                    ("call", request(1, "tools/call", CALL)),
                    ("resources", request(2, "resources/list")),
                ):
                    answered = await client.post("/mcp", content=body, headers=headers)
                    assert answered.status_code == 200, answered.status_code
                    seen[name] = answered.json()

    try:
        anyio.run(scenario)
        recorded = store.recent_calls(5)  # the audit log's last batch is written at its stop
    finally:
        store.close()
    assert seen["lifespan while serving"] == ["entered"]
    assert options.lifespan_events == ["entered", "left"]
    assert seen["call"]["result"]["structuredContent"] == {"echoed": "hi"}
    assert [r["uri"] for r in seen["resources"]["result"]["resources"]] == [NOTE_URI]
    # the server records in its own audit log, in place of the value's record
    assert [(r.tool, r.identity) for r in recorded] == [("echo", "u1")]
    assert options.records == []


def test_the_tools_take_the_same_value() -> None:
    options = Options()
    tools = McpTools(echo_gateway(), lambda ctx: "u1", lambda: "s", options.serving)
    assert tools.serving is options.serving
    assert tools.serves("resources/list")  # its content
    answered = anyio.run(tools.answer_call, dict(CALL), 1, "u1")
    assert answered.structured_content == {"echoed": "hi"}
    assert options.calls_in_context == 1
    assert [(r.tool, r.call_id) for r in options.records] == [("echo", "mcp-s:1")]


def test_without_a_serving_value_the_tools_are_served_alone() -> None:
    tools = McpTools(echo_gateway(), lambda ctx: "u1", lambda: "s")
    assert tools.serving is DEFAULT_SERVING
    assert not tools.serves("resources/list")
    with pytest.raises(dataclasses.FrozenInstanceError):  # a value: nothing changes it
        DEFAULT_SERVING.record = print  # type: ignore[misc]
    assert DEFAULT_SERVING.record is None
