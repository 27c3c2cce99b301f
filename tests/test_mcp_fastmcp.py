"""FastMCP's client on a real `strictcall serve --mcp-stdio`: it reads the x-fastmcp-wrap-result
marker on the wrapped output schemas and hands back the bare values, falsy ones intact, and it
sees every refusal as an error result whose text is the structured error."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from strictcall.errors import FORBIDDEN_OR_MISSING, INVALID_ARGUMENTS, UNKNOWN_TOOL

DEADLINE_S = 60


def transport(db: Path) -> StdioTransport:
    args = ["-m", "strictcall", "serve", "--mcp-stdio", "--identity", "u1", "--db", str(db)]
    return StdioTransport(command=sys.executable, args=args)


def error_text(result: Any) -> dict[str, Any]:
    assert result.is_error is True
    assert result.structured_content is None
    assert len(result.content) == 1
    error: dict[str, Any] = json.loads(result.content[0].text)
    return error


def test_fastmcp_unwraps_wrapped_results_to_the_bare_falsy_values(tmp_path: Path) -> None:
    async def session() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with Client(transport(tmp_path / "notes.sqlite3")) as client:
                assert (await client.call_tool("count_notes", {})).data == 0
                assert (await client.call_tool("list_notes", {})).data == []
                created = await client.call_tool("create_note", {"text": ""})
                note = created.structured_content
                assert note is not None and note["text"] == ""
                deleted = await client.call_tool("delete_note", {"note_id": note["note_id"]})
                assert deleted.is_error is False and deleted.data is None
                gone = await client.call_tool(
                    "read_note", {"note_id": note["note_id"]}, raise_on_error=False
                )
                assert error_text(gone)["code"] == FORBIDDEN_OR_MISSING.code
                extra = await client.call_tool(
                    "create_note", {"text": "x", "admin": True}, raise_on_error=False
                )
                assert error_text(extra)["code"] == INVALID_ARGUMENTS.code
                assert error_text(extra)["pointer"] == "/arguments/admin"
                unknown = await client.call_tool("drop_tables", {}, raise_on_error=False)
                assert error_text(unknown)["code"] == UNKNOWN_TOOL.code

    anyio.run(session)


def test_fastmcp_sees_the_marker_on_every_wrapped_output_schema(tmp_path: Path) -> None:
    async def listing() -> dict[str, Any]:
        with anyio.fail_after(DEADLINE_S):
            async with Client(transport(tmp_path / "notes.sqlite3")) as client:
                return {tool.name: tool.output_schema for tool in await client.list_tools()}

    schemas = anyio.run(listing)
    for name in ("count_notes", "list_notes", "delete_note"):
        assert schemas[name]["x-fastmcp-wrap-result"] is True
        assert schemas[name]["required"] == ["result"]
    for name in ("read_note", "create_note"):
        assert "x-fastmcp-wrap-result" not in schemas[name]
