"""A hostile stdio MCP server (standard library only): each tool tries to reach what a sandboxed
upstream must not, and answers what it got as JSON text {"ok": bool, "detail": ...}.

Tools: environ, read(path), list(path), write(path), connect(host, port), processes,
fork(count), memory(mib). The fork bomb and the memory eater are bounded (`count` children
that sleep and are then killed; `mib` allocated in 16 MiB pieces, then freed), so that run
unsandboxed they cost the machine a moment, not its life.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from typing import Any


def _tool(name: str, **properties: str) -> dict[str, Any]:
    schema = {name: {"type": kind} for name, kind in properties.items()}
    return {
        "name": name,
        "description": f"tries {name}",
        "inputSchema": {"type": "object", "properties": schema, "required": list(schema)},
    }


TOOLS = [
    _tool("environ"),
    _tool("read", path="string"),
    _tool("list", path="string"),
    _tool("write", path="string"),
    _tool("connect", host="string", port="integer"),
    _tool("processes"),
    _tool("fork", count="integer"),
    _tool("memory", mib="integer"),
]


def _denied(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "detail": type(exc).__name__}


def environ(_: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "detail": dict(os.environ)}


def read(args: dict[str, Any]) -> dict[str, Any]:
    try:
        with open(args["path"], encoding="utf-8", errors="replace") as file:
            return {"ok": True, "detail": file.read(100_000)}
    except OSError as exc:
        return _denied(exc)


def listing(args: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"ok": True, "detail": sorted(os.listdir(args["path"]))}
    except OSError as exc:
        return _denied(exc)


def write(args: dict[str, Any]) -> dict[str, Any]:
    try:
        with open(args["path"], "w", encoding="utf-8") as file:
            file.write("written by the hostile upstream\n")
        return {"ok": True, "detail": args["path"]}
    except OSError as exc:
        return _denied(exc)


def connect(args: dict[str, Any]) -> dict[str, Any]:
    try:
        with socket.create_connection((args["host"], args["port"]), timeout=5):
            return {"ok": True, "detail": "connected"}
    except OSError as exc:
        return _denied(exc)


def processes(_: dict[str, Any]) -> dict[str, Any]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as file:
                    found.append(file.read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return {"ok": True, "detail": found}


def fork(args: dict[str, Any]) -> dict[str, Any]:
    children = []
    refused = None
    for _ in range(args["count"]):
        try:
            child = os.fork()
        except OSError as exc:
            refused = type(exc).__name__
            break
        if child == 0:
            time.sleep(30)
            os._exit(0)
        children.append(child)
    for child in children:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    return {"ok": refused is None, "detail": {"forked": len(children), "refused": refused}}


def memory(args: dict[str, Any]) -> dict[str, Any]:
    pieces = []
    try:
        for _ in range(args["mib"] // 16):
            pieces.append(bytearray(16 * 1024 * 1024))
    except MemoryError as exc:
        held = len(pieces) * 16
        pieces.clear()
        return {"ok": False, "detail": {"refused": type(exc).__name__, "held_mib": held}}
    held = len(pieces) * 16
    pieces.clear()
    return {"ok": True, "detail": {"held_mib": held}}


HANDLERS = {
    "environ": environ,
    "read": read,
    "list": listing,
    "write": write,
    "connect": connect,
    "processes": processes,
    "fork": fork,
    "memory": memory,
}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method = message.get("method")
    if "id" not in message:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        params = message["params"]
        got = HANDLERS[params["name"]](params.get("arguments") or {})
        result = {"content": [{"type": "text", "text": json.dumps(got)}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "?"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
