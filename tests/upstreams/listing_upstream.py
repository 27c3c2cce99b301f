"""A hand-written MCP server on stdio (no SDK) whose listings a test rewrites while it runs: an
impostor, a rug pull, a flood. It lists what the JSON file LISTING holds, and when the file
changes it sends the three list_changed notifications (and any flood the file asks for).

    python listing_upstream.py LABEL LISTING

LISTING holds {"tools": [...], "resources": [...], "templates": [...], "prompts": [...],
"many": N, "flood": N, "wave": K}: a tool is a name or a tool object (its inputSchema
defaults to an empty object schema); "many" adds N small tools `t0`...; "flood" sends N
`notifications/message` each time "wave" changes. A tools/call answers the text
"LABEL NAME ARGUMENTS", a resources/read "LABEL URI", a prompts/get "LABEL NAME": a test sees
which upstream got a call, and with what.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

LABEL = sys.argv[1]
LISTING = sys.argv[2]
POLL_S = 0.02
OBJECT = {"type": "object"}

_lock = threading.Lock()


def write(message: dict[str, Any]) -> None:
    line = json.dumps(message, ensure_ascii=False) + "\n"
    with _lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def read_listing() -> dict[str, Any]:
    try:
        with open(LISTING, encoding="utf-8") as file:
            found = json.load(file)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def tools_of(listing: dict[str, Any]) -> list[dict[str, Any]]:
    tools = []
    for tool in listing.get("tools", []):
        if isinstance(tool, str):
            tools.append({"name": tool, "inputSchema": OBJECT})
        else:
            tools.append({"inputSchema": OBJECT, **tool})
    tools += [{"name": f"t{i}", "inputSchema": OBJECT} for i in range(listing.get("many", 0))]
    return tools


def watch() -> None:
    """Tell the client whenever the file changes (and flood it when asked)."""
    last = None
    wave = None
    while True:
        try:
            stamp: Any = os.stat(LISTING).st_mtime_ns
        except OSError:
            stamp = None
        if stamp != last:
            first = last is None
            last = stamp
            listing = read_listing()
            if not first:
                for kind in ("tools", "resources", "prompts"):
                    write({"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"})
            if listing.get("wave") != wave:
                wave = listing.get("wave")
                log = {"level": "info", "data": "flooding"}
                message = {"jsonrpc": "2.0", "method": "notifications/message", "params": log}
                line = json.dumps(message) + "\n"
                with _lock:
                    for _ in range(listing.get("flood", 0) if not first else 0):
                        sys.stdout.write(line)
                    sys.stdout.flush()
        time.sleep(POLL_S)


def result_of(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    listing = read_listing()
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {
                "tools": {"listChanged": True},
                "resources": {"listChanged": True},
                "prompts": {"listChanged": True},
            },
            "serverInfo": {"name": f"listing-{LABEL}", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": tools_of(listing)}
    if method == "resources/list":
        return {"resources": listing.get("resources", [])}
    if method == "resources/templates/list":
        return {"resourceTemplates": listing.get("templates", [])}
    if method == "prompts/list":
        return {"prompts": listing.get("prompts", [])}
    if method == "tools/call":
        said = f"{LABEL} {params['name']} {json.dumps(params.get('arguments', {}))}"
        return {"content": [{"type": "text", "text": said}], "isError": False}
    if method == "resources/read":
        uri = params["uri"]
        return {"contents": [{"uri": uri, "text": f"{LABEL} {uri}"}]}
    if method == "prompts/get":
        text = {"type": "text", "text": f"{LABEL} {params['name']}"}
        return {"messages": [{"role": "user", "content": text}]}
    if method == "ping":
        return {}
    return None


def main() -> None:
    threading.Thread(target=watch, daemon=True).start()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message or "method" not in message:
            continue
        result = result_of(message["method"], message.get("params") or {})
        if result is None:
            error = {"code": -32601, "message": "Method not found"}
            write({"jsonrpc": "2.0", "id": message["id"], "error": error})
        else:
            write({"jsonrpc": "2.0", "id": message["id"], "result": result})


if __name__ == "__main__":
    main()
