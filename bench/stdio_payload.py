"""An MCP stdio server that answers from canned lines, so that what is measured behind it is
the proxy, not the upstream: bench/proxy_overhead.py's upstream for answers of a given shape.

    python bench/stdio_payload.py

Tools (no arguments): `text` (one short text block), `text_64k` (one text block of 64 KiB of
prose, no secret in it) and `image_64k` (one image block of 64 KiB of base64). It answers
initialize (the client's protocol version when it knows it), tools/list, tools/call and ping;
notifications are read and left unanswered. The answers are written once, at start-up.
"""

from __future__ import annotations

import base64
import random
import string
import sys

import orjson

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
SIZE = 64 * 1024


def prose(size: int) -> str:
    """`size` characters of lower-case words and full stops, the same on every run."""
    rng = random.Random(7)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(3000)]
    text = ""
    while len(text) < size:
        text += " ".join(rng.choices(words, k=12)) + ".\n"
    return text[:size]


def image(size: int) -> str:
    """`size` characters of base64 (of random bytes: what a PNG's data looks like)."""
    return base64.b64encode(random.Random(8).randbytes(size // 4 * 3)).decode("ascii")


ANSWERS = {
    "text": [{"type": "text", "text": "Echo: hi"}],
    "text_64k": [{"type": "text", "text": prose(SIZE)}],
    "image_64k": [{"type": "image", "data": image(SIZE), "mimeType": "image/png"}],
}
"""Each tool's content blocks."""

TOOLS = [
    {
        "name": name,
        "description": f"Answers {name.replace('_', ' ')}",
        "inputSchema": {"type": "object", "properties": {}},
    }
    for name in ANSWERS
]


def main() -> None:
    results = {
        name: orjson.dumps({"content": blocks, "isError": False})
        for name, blocks in ANSWERS.items()
    }
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = orjson.loads(line)
        method = message.get("method")
        if "id" not in message or method is None:
            continue
        ident = orjson.dumps(message["id"])
        if method == "tools/call":
            result = results.get(message["params"]["name"])
            if result is None:
                body = b'"error":{"code":-32602,"message":"unknown tool"}'
            else:
                body = b'"result":' + result
        elif method == "initialize":
            asked = message["params"].get("protocolVersion")
            version = asked if asked in VERSIONS else VERSIONS[-1]
            body = b'"result":' + orjson.dumps(
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "payload", "version": "1"},
                }
            )
        elif method == "tools/list":
            body = b'"result":' + orjson.dumps({"tools": TOOLS})
        elif method == "ping":
            body = b'"result":{}'
        else:
            body = b'"error":{"code":-32601,"message":"method not found"}'
        out.write(b'{"jsonrpc":"2.0","id":' + ident + b"," + body + b"}\n")
        out.flush()


if __name__ == "__main__":
    main()
