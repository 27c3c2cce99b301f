"""The bare JSON endpoint: a raw ASGI app that does json.loads, dict lookups and json.dumps.

The HTTP floor on the same server stack as `strictcall serve`: POST /rpc with a JSON-RPC 2.0
tools/call for read_note, the identity from `Authorization: Bearer <token>` looked up in a
dict, the note looked up in a dict, the answer dumped. No checks beyond what a lookup needs;
a missed lookup answers a JSON-RPC error. GET /healthz answers {"status":"ok"}.

    python -m uvicorn bare_asgi:app --app-dir bench --host 127.0.0.1 --port P
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

TOKENS = {"bench-token-u1": "u1", "bench-token-u2": "u2"}
NOTES = {"u1": {"n1": "退款窗口为 7 天。"}, "u2": {"n2": "另一份私人笔记。"}}

_JSON = [(b"content-type", b"application/json")]

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/healthz":
        await _send(send, 200, b'{"status":"ok"}')
        return
    if path != "/rpc" or scope["method"] != "POST":
        await _send(send, 404, b'{"error":"not found"}')
        return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    token = b""
    for name, value in scope["headers"]:
        if name == b"authorization":
            token = value[7:]  # "Bearer "
    identity = TOKENS.get(token.decode("latin-1"))
    request = json.loads(body)
    note_id = request["params"]["arguments"]["note_id"]
    text = NOTES.get(identity or "", {}).get(note_id)
    if text is None:
        answer = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32000, "message": "no"}}
    else:
        answer = {
            "jsonrpc": "2.0",
            "id": request["id"],
            "result": {"note_id": note_id, "text": text},
        }
    await _send(send, 200, json.dumps(answer).encode())


async def _send(send: Send, status: int, body: bytes) -> None:
    headers = [*_JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    """`python bench/bare_asgi.py --port P --coalesced`: the same app on uvicorn with
    strictcall's coalesced writes (`strictcall.coalesce`), the protocol `strictcall serve`
    uses; a reference row, so that the table shows what that protocol alone is worth."""
    import argparse

    import uvicorn

    from strictcall.coalesce import CoalescingHttpToolsProtocol

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--coalesced", action="store_true", required=True)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        http=CoalescingHttpToolsProtocol,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
