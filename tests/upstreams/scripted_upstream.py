"""A hand-written MCP server on stdio (no SDK) whose tools answer tools/call in the odd ways a
real server may: the proxy's own path for calls must read each as the official client would.

    python scripted_upstream.py RECEIVED_LOG [REMOTE_REF]

Every line it receives is appended to RECEIVED_LOG, so that a test can see what the proxy sent
(a notifications/cancelled, for one). Tools (each takes no arguments):

    rpc_error     a JSON-RPC error, code -32000 (the code the SDK also uses for "connection
                  closed"), with a message of its own
    both          an answer with both a result and an error
    string_id     the result, under the request's id written as a string
    never         no answer at all
    chatty        first a log notification, a line that is not JSON, and an answer to an id
                  nobody sent; then the result
    big           a result of 300,000 characters (many pipe chunks)
    flood         first 2,000 log notifications (far more than the proxy queues before it stops
                  reading), then the result
    later_member  a result with `resultType`, a member of a later revision
    hang          no answer, and no more answers to anything (pings included): the server hangs
    nan           an answer holding NaN (not JSON)
    surrogate     an answer holding a lone surrogate escape (names no character)
    deep          an answer nested 5,000 levels deep
    wrong_id      the result under the request's id written as a float (4294967296.0)
    huge          a result of 100 MB in one line, written in pieces (the proxy must not keep it)

With REMOTE_REF (a URL), it also lists `remote_ref`, whose input schema refers to that URL and
to a file (`$ref`): the proxy must fetch and read neither, and serve the others.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

LOG = sys.argv[1]
REMOTE_REF = sys.argv[2] if len(sys.argv) > 2 else None
TOOLS = [
    "rpc_error",
    "both",
    "string_id",
    "never",
    "chatty",
    "big",
    "flood",
    "later_member",
    "hang",
    "nan",
    "surrogate",
    "deep",
    "wrong_id",
    "huge",
]
HUGE_MB = 100
FLOOD = 2_000
FLOOD_LOG = {"level": "info", "data": "flooding"}
BIG = "x" * 300_000


def write(message: dict[str, Any] | str) -> None:
    text = message if isinstance(message, str) else json.dumps(message)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def answer_call(request_id: Any, name: str) -> None:
    if name == "rpc_error":
        write({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "own"}})
    elif name == "both":
        error = {"code": 1, "message": "no"}
        write({"jsonrpc": "2.0", "id": request_id, "result": text_result("yes"), "error": error})
    elif name == "string_id":
        write({"jsonrpc": "2.0", "id": str(request_id), "result": text_result("by string")})
    elif name == "chatty":
        log = {"level": "info", "data": "working"}
        write({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
        write("this is not JSON")
        write({"jsonrpc": "2.0", "id": 999_999, "result": text_result("not yours")})
        write({"jsonrpc": "2.0", "id": request_id, "result": text_result("after the chatter")})
    elif name == "flood":
        notification = {"jsonrpc": "2.0", "method": "notifications/message", "params": FLOOD_LOG}
        line = json.dumps(notification)
        sys.stdout.write((line + "\n") * FLOOD)
        write({"jsonrpc": "2.0", "id": request_id, "result": text_result("after the flood")})
    elif name == "big":
        write({"jsonrpc": "2.0", "id": request_id, "result": text_result(BIG)})
    elif name == "later_member":
        result = {**text_result("complete"), "resultType": "complete"}
        write({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif name == "nan":
        result = {**text_result("not a number"), "n": float("nan")}
        write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))  # NaN
    elif name == "surrogate":
        escaped = json.dumps(text_result("\ud800"))  # ASCII: the escape \ud800, alone
        write(f'{{"jsonrpc":"2.0","id":{request_id},"result":{escaped}}}')
    elif name == "deep":
        nested = "[" * 5_000 + "]" * 5_000
        write(f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"content":[],"d":{nested}}}}}')
    elif name == "wrong_id":
        written = json.dumps(text_result("x"))
        write(f'{{"jsonrpc":"2.0","id":{request_id}.0,"result":{written}}}')
    elif name == "huge":
        out = sys.stdout.buffer
        sys.stdout.flush()
        head = f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"content":[{{"type":"text",'
        out.write((head + '"text":"').encode())
        chunk = b"x" * (1024 * 1024)
        for _ in range(HUGE_MB):
            out.write(chunk)
        out.write(b'"}],"isError":false}}\n')
        out.flush()
    elif name == "hang":
        time.sleep(3600)  # until the proxy gives up on it and stops it
    # "never": no answer


def main() -> None:
    schema = {"type": "object", "properties": {}}
    for line in sys.stdin:
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(line)
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "1"},
            }
            write({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": schema} for name in TOOLS]
            if REMOTE_REF is not None:
                remote = {"a": {"$ref": REMOTE_REF}, "b": {"$ref": "file:///etc/hostname"}}
                remote_schema = {"type": "object", "properties": remote}
                tools.append({"name": "remote_ref", "inputSchema": remote_schema})
            write({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": request_id, "result": {}})
        elif method == "tools/call":
            answer_call(request_id, message["params"]["name"])


if __name__ == "__main__":
    main()
