"""What a proxied call's answer costs the proxy in process, by the shape of the answer: a short
text, a 64 KiB image, a 64 KiB text (with and without redaction), and what redaction alone
costs on that text, as a share of the whole.

Each way is the proxy's own work on one answer after it is read off the pipe and before it is
written back: the upstream's JSON-RPC line parsed, read as the SDK's CallToolResult, turned into
content (`content_of`), climbed through the gateway's ladder (stage output's checks and
redaction included), and written as the host's JSON-RPC line (`McpTools.answer_call_line`'s
writer). No process, no pipe: the figures are CPU on this thread, the minimum of 7 repeats of
200 calls (the least disturbed by a loaded machine), and every ratio is taken in the same run.

    .venv/bin/python bench/content_overhead.py        # prints a Markdown table
"""

from __future__ import annotations

import base64
import random
import string
import sys
import timeit
from typing import Any

import orjson

from strictcall import Gateway, Tool
from strictcall.core.redact import Redaction, redact_text
from strictcall.services.proxy import content_of
from strictcall.services.proxy.results import call_result
from strictcall.transports.mcp import McpTools

CALLS = 200
REPEATS = 7


def _prose(size: int) -> str:
    random.seed(7)
    words = [
        "".join(random.choices(string.ascii_lowercase, k=random.randint(2, 9))) for _ in range(3000)
    ]
    text = ""
    while len(text) < size:
        text += " ".join(random.choices(words, k=12)) + ".\n"
    return text[:size]


def _answers() -> dict[str, bytes]:
    image = base64.b64encode(random.randbytes(48 * 1024)).decode()  # 64 KiB of base64
    shapes = {
        "short text": [{"type": "text", "text": "Echo: hi"}],
        "64 KiB image": [{"type": "image", "data": image, "mimeType": "image/png"}],
        "64 KiB text": [{"type": "text", "text": _prose(64 * 1024)}],
    }
    return {
        name: orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": blocks}})
        for name, blocks in shapes.items()
    }


def _per_call(run: Any) -> float:
    """µs of this thread's time per call, the least disturbed of the repeats."""
    best = min(timeit.repeat(run, number=CALLS, repeat=REPEATS, timer=_thread_time))
    return best / CALLS * 1e6


def _thread_time() -> float:
    import time

    return time.thread_time()


def main() -> None:
    rows: list[tuple[str, float]] = []
    answers = _answers()
    for redact in (False, True):
        for name, line in answers.items():
            if redact and name == "64 KiB image":
                continue
            holder: dict[str, Any] = {}

            def handler(ctx: Any, args: Any, holder: dict[str, Any] = holder) -> Any:
                return content_of(call_result(orjson.loads(holder["line"]), frozenset()))

            tool = Tool(
                "t", "", {"type": "object"}, None, handler, redact=Redaction() if redact else None
            )
            tools = McpTools(Gateway([tool]), lambda ctx: "u1", lambda: "s")
            holder["line"] = line
            params: dict[str, Any] = {"name": "t", "arguments": {}}

            def one(tools: McpTools = tools, params: dict[str, Any] = params) -> None:
                written = tools.answer_call_line_now(params, 1, "u1")
                assert type(written) is bytes

            one()
            label = f"{name}, redaction {'on' if redact else 'off'}"
            rows.append((label, _per_call(one)))
    text = _prose(64 * 1024)
    redaction = Redaction()
    redact_text(text, redaction, {})
    alone = _per_call(lambda: redact_text(text, redaction, {}))
    whole = dict(rows)["64 KiB text, redaction on"]
    print("| answer | proxy's in-process CPU µs per call |")
    print("|---|---:|")
    for label, micros in rows:
        print(f"| {label} | {micros:.0f} |")
    print(f"| redaction alone, 64 KiB text | {alone:.0f} |")
    print()
    print(f"redaction is {alone / whole:.1%} of the in-process answer of a 64 KiB text")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
