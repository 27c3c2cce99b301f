"""A hand-written MCP server on stdio (no SDK) that lists its tools by what the client's
initialize offers, as server-everything lists the tools that ask the client something.

    python asking_upstream.py [--hang-offering-none]

Tools (each takes no arguments and answers "ok"):

    plain             listed to every client
    sample            listed to a client offering sampling
    ask               listed to a client offering elicitation
    sample_in_roots   listed to a client offering both sampling and roots

`--hang-offering-none`: a client offering none of the three never gets its tools/list answered.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from line_server import serve

NEEDS: dict[str, frozenset[str]] = {
    "plain": frozenset(),
    "sample": frozenset({"sampling"}),
    "ask": frozenset({"elicitation"}),
    "sample_in_roots": frozenset({"sampling", "roots"}),
}
HANG = "--hang-offering-none" in sys.argv[1:]
offered: frozenset[str] = frozenset()


def answer(message: dict[str, Any]) -> dict[str, Any]:
    global offered
    method = message["method"]
    if method == "initialize":
        capabilities = message["params"].get("capabilities", {})
        offered = frozenset(
            kind for kind in ("sampling", "elicitation", "roots") if kind in capabilities
        )
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "asking", "version": "1"},
        }
    if method == "tools/list":
        if HANG and not offered:
            time.sleep(3600)
        tools = [
            {"name": name, "inputSchema": {"type": "object"}}
            for name, needs in NEEDS.items()
            if needs <= offered
        ]
        return {"tools": tools}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "ok"}]}
    return {}  # ping


serve(answer)
