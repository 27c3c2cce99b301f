"""FastMCP's streamable HTTP server with the same read_note tool (run with bench/.venv-peers).

    python bench/fastmcp_server.py PORT

Served at POST /mcp by uvicorn, access log off, FastMCP's per-call logging left as it is.
"""

from __future__ import annotations

import sys

import uvicorn
from fastmcp import FastMCP

NOTES = {"u1": {"n1": "退款窗口为 7 天。"}, "u2": {"n2": "另一份私人笔记。"}}

server = FastMCP("bench")


@server.tool
async def read_note(note_id: str) -> dict[str, str]:
    """Read one of the caller's notes by its id."""
    return {"note_id": note_id, "text": NOTES["u1"][note_id]}


def main() -> None:
    port = int(sys.argv[1])
    uvicorn.run(
        server.http_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()
