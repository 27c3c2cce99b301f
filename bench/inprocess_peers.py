"""In-process, text in and text out: the MCP SDK's and FastMCP's call_tool against the floor.

Run by bench/run.py with bench/.venv-peers (mcp and fastmcp are not the package's
dependencies); prints one JSON document. Each call is what a server does at its boundary:
json.loads the call text, `await server.call_tool(name, arguments)` on an `async def` tool over
the same dict, and the MCP result as JSON text (`model_dump_json(by_alias, exclude_none)`); a
refusal (the SDKs raise) becomes an isError result's JSON text. Neither API has a per-call
identity, so there is no cross-owner row: the tool reads as u1. FastMCP's per-refusal WARNING
log (a rich handler) is switched off, as in the anchors; its real error path is slower.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

import harness
from harness import CALL_ID, INVALID, N1_TEXT, NOTES, VALID, Target

EXPECTED = {"note_id": "n1", "text": N1_TEXT}


def _refusal_text(exc: Exception) -> str:
    return json.dumps({"content": [{"type": "text", "text": str(exc)}], "isError": True})


def check_mcp_text(case: str, out: Any) -> str | None:
    """The valid call's answer holds note n1 (structured or as the text block's JSON); the
    invalid call's is an isError result."""
    answer = json.loads(out)
    if case == "valid":
        if answer.get("isError"):
            return f"refused: {out[:200]}"
        structured = answer.get("structuredContent")
        if structured == EXPECTED:
            return None
        blocks = answer.get("content") or []
        if blocks and blocks[0].get("type") == "text":
            try:
                if json.loads(blocks[0]["text"]) == EXPECTED:
                    return None
            except ValueError:
                pass
        return f"not the note: {out[:200]}"
    return None if answer.get("isError") is True else f"not a refusal: {out[:200]}"


def mcp_target() -> Target:
    import mcp
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    async def read_note(note_id: str) -> dict[str, str]:
        """Read one of the caller's notes by its id."""
        return {"note_id": note_id, "text": NOTES["u1"][note_id]}

    call_tool = server.call_tool

    async def call(raw: str) -> str:
        call = json.loads(raw)
        try:
            result = await call_tool(call["name"], call["arguments"])
        except Exception as exc:
            return _refusal_text(exc)
        return result.model_dump_json(by_alias=True, exclude_none=True)

    version = getattr(mcp, "__version__", None) or _dist_version("mcp")
    return Target(
        f"MCP SDK {version} MCPServer.call_tool",
        "json.loads + await MCPServer.call_tool (async tool) + result JSON",
        {"valid": lambda: call(VALID), "invalid": lambda: call(INVALID)},
        check_mcp_text,
        is_async=True,
    )


def fastmcp_target() -> Target:
    import fastmcp
    from fastmcp import FastMCP
    from mcp.types import CallToolResult

    server = FastMCP("bench")

    @server.tool
    async def read_note(note_id: str) -> dict[str, str]:
        """Read one of the caller's notes by its id."""
        return {"note_id": note_id, "text": NOTES["u1"][note_id]}

    for name in ("fastmcp", "FastMCP"):
        logging.getLogger(name).setLevel(logging.ERROR)
    call_tool = server.call_tool

    async def call(raw: str) -> str:
        call = json.loads(raw)
        try:
            result = await call_tool(call["name"], call["arguments"])
        except Exception as exc:
            return _refusal_text(exc)
        wire = CallToolResult(
            content=result.content,
            structured_content=result.structured_content,
            is_error=result.is_error,
        )
        return wire.model_dump_json(by_alias=True, exclude_none=True)

    return Target(
        f"FastMCP {fastmcp.__version__} server.call_tool",
        "json.loads + await FastMCP.call_tool (async tool, middleware on) + result JSON",
        {"valid": lambda: call(VALID), "invalid": lambda: call(INVALID)},
        check_mcp_text,
        is_async=True,
    )


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _unavailable(name: str, exc: Exception) -> Target:
    why = f"{type(exc).__name__}: {str(exc)[:200]}"
    return Target(name, "", {}, lambda case, out: "not available", unavailable=why)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=float, default=0.05, help="seconds per timed batch")
    args = parser.parse_args(argv)
    targets: list[Target] = []
    for name, make in (("MCP SDK MCPServer.call_tool", mcp_target), ("FastMCP", fastmcp_target)):
        try:
            targets.append(make())
        except Exception as exc:
            targets.append(_unavailable(name, exc))
    rows = harness.run_rounds(targets, ["valid", "invalid"], args.rounds, args.batch)
    versions = {name: _safe_version(name) for name in ("mcp", "fastmcp", "pydantic", "uvicorn")}
    harness.emit(
        {
            "process": "peers",
            "python": harness.python_version(),
            "versions": versions,
            "call_id": CALL_ID,
            "rows": rows,
        }
    )
    return 0


def _safe_version(name: str) -> str | None:
    try:
        return _dist_version(name)
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
