"""A small MCP server written with the official MCP Python SDK (`MCPServer`), on stdio: the
federation's tests run it beside the FastMCP and npm servers.

    python sdk_notes.py [--call-log PATH]

Every tool run appends its name to the call log, so a test can tell whether a value reached a
tool. It has resources (`notes://n1`, and the template `notes://{note_id}`) and a prompt
(`summarize`), which a federation lists and reads through.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-notes")
CALL_LOG = sys.argv[sys.argv.index("--call-log") + 1] if "--call-log" in sys.argv else None
NOTES = {"n1": "The refund window is 7 days."}


def _called(name: str) -> None:
    if CALL_LOG is not None:
        with open(CALL_LOG, "a", encoding="utf-8") as log:
            log.write(name + "\n")


@server.tool()
async def read_note(note_id: str) -> str:
    """Read one note by its id."""
    _called("read_note")
    return NOTES.get(note_id, "no such note")


@server.tool()
async def add(a: int, b: int) -> int:
    """Add two integers."""
    _called("add")
    return a + b


@server.resource("notes://n1", name="refund_note", mime_type="text/plain")
def refund_note() -> str:
    """The refund note."""
    return NOTES["n1"]


@server.resource("notes://{note_id}", name="note", mime_type="text/plain")
def note(note_id: str) -> str:
    """Any note by its id."""
    return NOTES.get(note_id, "no such note")


@server.prompt(name="summarize")
def summarize(note_id: str) -> str:
    """Ask for a note's summary."""
    return f"Summarize the note {note_id}."


if __name__ == "__main__":
    server.run()
