"""The notes tools through the official MCP client, as a host would use them: over stdio (a real
`strictcall serve --mcp-stdio` process) and over streamable HTTP (a real `strictcall serve`,
bearer token), each in the handshake era ("legacy") and the per-request era ("auto" picks it)."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from mcp_results import tool_error
from servers import RunningServer, create_token, start_server
from strictcall.errors import FORBIDDEN_OR_MISSING, INVALID_ARGUMENTS, UNKNOWN_TOOL, ErrorKind
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.mcp import RESULT_MEMBER

DEADLINE_S = 60
NOTES = {"read_note", "list_notes", "count_notes", "create_note", "delete_note"}
WRAPPED = {"list_notes", "count_notes", "delete_note"}

Mode = Literal["legacy", "auto"]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-client") / "notes.sqlite3"


@pytest.fixture(scope="module")
def http_server(db: Path) -> Iterator[RunningServer]:
    create_token(db, "operator")  # the store exists before the server opens it
    running = start_server(db)
    yield running
    assert running.stop() == 0


@dataclass(frozen=True)
class Transport:
    """How a test reaches the server: `connect(identity)` opens an official client."""

    kind: Literal["stdio", "http"]
    mode: Mode
    db: Path
    server: RunningServer

    @asynccontextmanager
    async def connect(self, identity: str) -> AsyncIterator[Client]:
        if self.kind == "stdio":
            serve = ["serve", "--mcp-stdio", "--identity", identity, "--db", str(self.db)]
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "strictcall", *serve]
            )
            async with Client(params, mode=self.mode, read_timeout_seconds=DEADLINE_S) as client:
                yield client
            return
        store = SQLiteStore(str(self.db))  # beside the server: SQLite in WAL mode
        try:
            token = store.create_token(identity)
        finally:
            store.close()
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http,
            Client(
                streamable_http_client(self.server.base_url + "/mcp", http_client=http),
                mode=self.mode,
                read_timeout_seconds=DEADLINE_S,
            ) as client,
        ):
            yield client


@pytest.fixture(
    params=[("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")],
    ids=["stdio-legacy", "stdio-auto", "http-legacy", "http-auto"],
)
def transport(request: pytest.FixtureRequest, db: Path, http_server: RunningServer) -> Transport:
    kind, mode = request.param
    return Transport(kind, mode, db, http_server)


def fresh_identity() -> str:
    """An identity with no notes yet."""
    return f"user-{uuid.uuid4().hex[:12]}"


def run(work: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(DEADLINE_S):
            await work()

    anyio.run(bounded)


def value_of(result: types.CallToolResult, name: str) -> Any:
    """A success's value: structuredContent (unwrapped where the tool's results are wrapped),
    checked against the one text block."""
    assert result.is_error is False
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    structured = result.structured_content
    if name in WRAPPED:
        assert isinstance(structured, dict) and set(structured) == {RESULT_MEMBER}
        structured = structured[RESULT_MEMBER]
    assert json.loads(block.text) == structured
    return structured


def error_of(result: types.CallToolResult, kind: ErrorKind) -> dict[str, Any]:
    """A failure's structured error, read from the one text block (there is no
    structuredContent on an error) and checked against `kind`."""
    error = tool_error(result)
    assert error["code"] == kind.code
    assert error["stage"] == kind.stage.value
    assert error["retryable"] is kind.retryable
    return error


def test_tools_list_gives_every_tool_with_object_schemas(transport: Transport) -> None:
    async def session() -> None:
        async with transport.connect(fresh_identity()) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == NOTES
        for name, tool in tools.items():
            assert tool.description
            assert tool.input_schema["type"] == "object"
            assert tool.input_schema["additionalProperties"] is False
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            wrapped = tool.output_schema["properties"].keys() == {RESULT_MEMBER}
            assert wrapped is (name in WRAPPED)
        count = tools["count_notes"].output_schema
        assert count is not None and count["required"] == [RESULT_MEMBER]
        assert count["properties"][RESULT_MEMBER]["type"] == "integer"

    run(session)


def test_every_tool_answers_and_falsy_values_arrive_intact(transport: Transport) -> None:
    async def session() -> None:
        async with transport.connect(fresh_identity()) as client:
            count = value_of(await client.call_tool("count_notes", {}), "count_notes")
            assert count == 0 and type(count) is int
            assert value_of(await client.call_tool("list_notes", {}), "list_notes") == []
            note = value_of(await client.call_tool("create_note", {"text": ""}), "create_note")
            assert note["text"] == "" and note["note_id"]
            read = await client.call_tool("read_note", {"note_id": note["note_id"]})
            assert value_of(read, "read_note") == note
            second = value_of(
                await client.call_tool("create_note", {"text": "第二"}), "create_note"
            )
            assert second["note_id"] != note["note_id"]
            listed = value_of(await client.call_tool("list_notes"), "list_notes")
            assert listed == [note, second]
            assert value_of(await client.call_tool("count_notes"), "count_notes") == 2
            deleted = await client.call_tool("delete_note", {"note_id": note["note_id"]})
            assert value_of(deleted, "delete_note") is None
            gone = await client.call_tool("read_note", {"note_id": note["note_id"]})
            error_of(gone, FORBIDDEN_OR_MISSING)
            assert value_of(await client.call_tool("list_notes"), "list_notes") == [second]

    run(session)


def test_argument_errors_are_tool_errors_with_stage_shape_and_a_pointer(
    transport: Transport,
) -> None:
    async def session() -> None:
        async with transport.connect(fresh_identity()) as client:
            extra = await client.call_tool("create_note", {"text": "x", "admin": True})
            error = error_of(extra, INVALID_ARGUMENTS)
            assert error["pointer"] == "/arguments/admin"
            assert error["reason"] == "unexpected_member"
            lax = await client.call_tool("read_note", {"note_id": True})
            assert error_of(lax, INVALID_ARGUMENTS)["pointer"] == "/arguments/note_id"
            empty = await client.call_tool("read_note", {"note_id": ""})
            assert error_of(empty, INVALID_ARGUMENTS)["reason"] == "min_length"
            unknown = error_of(await client.call_tool("drop_tables", {}), UNKNOWN_TOOL)
            assert set(unknown["available"]) == NOTES
            # nothing was written by any of them
            assert value_of(await client.call_tool("count_notes"), "count_notes") == 0

    run(session)


def test_another_owners_note_is_refused_exactly_like_a_missing_one(transport: Transport) -> None:
    async def session() -> None:
        owner_id, other_id = fresh_identity(), fresh_identity()
        async with transport.connect(owner_id) as owner, transport.connect(other_id) as other:
            created = await owner.call_tool("create_note", {"text": "private"})
            note = value_of(created, "create_note")
            for name in ("read_note", "delete_note"):
                theirs = await other.call_tool(name, {"note_id": note["note_id"]})
                missing = await other.call_tool(name, {"note_id": "n0000000000000000"})
                error_of(theirs, FORBIDDEN_OR_MISSING)
                assert theirs.model_dump() == missing.model_dump()
                assert "private" not in theirs.model_dump_json()
            still = await owner.call_tool("read_note", {"note_id": note["note_id"]})
            assert value_of(still, "read_note") == note

    run(session)
