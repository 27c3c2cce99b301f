"""The README's proxy section says what the code does: its host configuration starts a proxy
the official client uses, and its allow-list example is one the proxy reads."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from doc_pages import page
from mcp_peers import fastmcp_command
from stdio_peer import DEADLINE_S
from strictcall.services.proxy import allow_list

SECTION = page("proxy.md")
(HOST,) = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", SECTION, re.S)]
(ALLOW,) = [json.loads(b) for b in re.findall(r"```text\n\s*(.*?)\s*```", SECTION, re.S)]


def test_the_host_snippet_starts_a_proxy_the_official_client_uses(tmp_path: Path) -> None:
    entry = HOST["mcpServers"]["my-tools"]
    assert entry["command"] == "/path/to/strictcall/.venv/bin/strictcall"
    replaced = {
        "node /path/to/your/server.js": fastmcp_command(),
        "/path/to/strictcall.sqlite3": str(tmp_path / "strictcall.sqlite3"),
    }
    args = [replaced.get(arg, arg) for arg in entry["args"]]
    assert args != entry["args"]
    command = str(Path(sys.executable).parent / "strictcall")

    async def session() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with Client(StdioServerParameters(command=command, args=args)) as client:
                tools = await client.list_tools()
                assert "read_note" in {tool.name for tool in tools.tools}
                result = await client.call_tool("read_note", {"note_id": "n1"})
                assert result.structured_content is not None
                assert result.structured_content["note_id"] == "n1"

    anyio.run(session)


def test_the_allow_list_example_is_one_the_proxy_reads() -> None:
    allowed = allow_list(ALLOW)
    assert allowed("u1") == {"read_note", "add"}
    assert allowed("anyone else") == {"read_note"}
