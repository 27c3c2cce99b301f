"""The README's MCP section says what the code does: a host started with either configuration
snippet lists and calls the notes tools, and the example answers are the real ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from doc_pages import REFERENCE_PAGES, pages
from node_client import TS_DIR, node_with_packages
from servers import RunningServer, create_token, start_server

_FIRST, _END = REFERENCE_PAGES.index("mcp.md"), REFERENCE_PAGES.index("development.md")
SECTION = pages(*REFERENCE_PAGES[_FIRST:_END])
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
    return {k: wire[k] for k in ("content", "structuredContent", "isError") if k in wire}


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


def snippet(language: str) -> str:
    """The one code block of `language` in the MCP section that starts an MCP host."""
    blocks = re.findall(rf"```{language}\n(.*?)```", SECTION, re.S)
    blocks = [block for block in blocks if "--mcp-stdio" in block]
    assert len(blocks) == 1
    block: str = blocks[0]
    return block


def with_real_paths(code: str, db: Path) -> str:
    command = str(Path(sys.executable).parent / "strictcall")
    return code.replace(README_COMMAND, command).replace(README_DB, str(db))


def test_the_typescript_host_snippet_runs(tmp_path: Path) -> None:
    node = node_with_packages()
    code = with_real_paths(snippet("js"), tmp_path / "ts-host.sqlite3")
    script = TS_DIR / f"readme-snippet-{uuid.uuid4().hex}.mjs"  # where its imports resolve
    script.write_text(code, encoding="utf-8")
    try:
        done = subprocess.run(
            [node, str(script)], capture_output=True, text=True, timeout=DEADLINE_S, check=False
        )
    finally:
        script.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "structuredContent: { result: 0 }" in done.stdout
