"""The README's MCP section says what the code does: a host started with either configuration
snippet lists and calls the notes tools, and the example answers are the real ones."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from servers import RunningServer, create_token, start_server

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
SECTION = README[README.index("\n## MCP\n") : README.index("\n## Development\n")]
SNIPPETS = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", SECTION, re.S)]
STDIO, HTTP, SUCCESS, FAILURE = SNIPPETS
DEADLINE_S = 60
README_COMMAND = "/path/to/strictcall/.venv/bin/strictcall"
README_DB = "/path/to/strictcall.sqlite3"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-readme") / "strictcall.sqlite3"


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[RunningServer]:
    create_token(db, "operator")
    running = start_server(db)
    yield running
    assert running.stop() == 0


def shown(result: Any) -> dict[str, Any]:
    """A tool result as the README shows it: on the wire, without the SDK's _meta stamp."""
    wire: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {k: wire[k] for k in ("content", "structuredContent", "isError")}


async def use(client: Client) -> None:
    tools = await client.list_tools()
    assert {tool.name for tool in tools.tools} >= {"count_notes", "list_notes", "create_note"}
    assert shown(await client.call_tool("list_notes", {})) == SUCCESS
    assert shown(await client.call_tool("create_note", {"text": "x", "admin": True})) == FAILURE


def test_the_stdio_snippet_starts_a_server_the_official_client_uses(db: Path) -> None:
    entry = STDIO["mcpServers"]["strictcall-notes"]
    assert entry["command"] == README_COMMAND and README_DB in entry["args"]
    command = str(Path(sys.executable).parent / "strictcall")
    args = [str(db) if arg == README_DB else arg for arg in entry["args"]]

    async def session() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with Client(StdioServerParameters(command=command, args=args)) as client:
                await use(client)

    anyio.run(session)


def test_the_http_snippet_reaches_the_server_with_its_token(server: RunningServer) -> None:
    entry = HTTP["mcpServers"]["strictcall-notes"]
    assert entry["type"] == "http"
    url = entry["url"].replace("http://127.0.0.1:8765", server.base_url)
    token = create_token(server.db, "readme-http")
    headers = {name: value.replace("sc_...", token) for name, value in entry["headers"].items()}

    async def session() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with (
                httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                await use(client)

    anyio.run(session)
