"""A FastMCP server (PyPI) that talks during its calls, as long-running tools do: the tests run
it behind `strictcall proxy` and `strictcall federate`, on stdio and on HTTP.

    python fastmcp_chatty.py [--call-log PATH] [--http PORT]

`count` reports progress and logs at two levels at each step; `hold` waits until cancelled (it
writes "cancelled" to the call log when it is); `ask` asks its caller a question
(elicitation) and answers with what it was told; `sample` asks its caller's model for a
completion (sampling) and `roots` for its caller's roots, each answering with what it got, or
with the error it was answered (its code and message) as its own error.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")  # no network here

import anyio
import mcp_types as types
from fastmcp import Context, FastMCP
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

server = FastMCP("chatty")
CALL_LOG = sys.argv[sys.argv.index("--call-log") + 1] if "--call-log" in sys.argv else None


def _called(line: str) -> None:
    if CALL_LOG is not None:
        with open(CALL_LOG, "a", encoding="utf-8") as log:
            log.write(line + "\n")


@server.tool
async def count(steps: int, ctx: Context) -> str:
    """Count to `steps`, reporting progress and logging at each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await ctx.info(f"counted {step}")
        await ctx.debug(f"detail {step}")
    return f"counted to {steps}"


@server.tool
async def hold(seconds: float) -> str:
    """Wait `seconds` (or until the call is cancelled)."""
    _called("hold started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _called("cancelled")
        raise
    _called("hold finished")
    return "held"


class Answer(BaseModel):
    answer: str


@server.tool
async def ask(question: str, ctx: Context) -> str:
    """Ask the caller `question` and return its answer."""
    result = await ctx.elicit(question, response_type=Answer)
    if result.action == "accept":
        return f"told {result.data.answer}"
    return f"not told ({result.action})"


@server.tool
async def sample(prompt: str, ctx: Context) -> str:
    """Ask the caller's model to complete `prompt` and return its text."""
    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=prompt)
    )
    try:
        result = await ctx.session.create_message([message], max_tokens=16)
    except MCPError as exc:
        raise ValueError(f"refused {exc.error.code}: {exc.error.message}") from None
    content = result.content
    return f"sampled {content.text if isinstance(content, types.TextContent) else '?'}"


@server.tool
async def roots(ctx: Context) -> str:
    """Ask the caller for its roots and return their URIs."""
    try:
        result = await ctx.session.list_roots()
    except MCPError as exc:
        raise ValueError(f"refused {exc.error.code}: {exc.error.message}") from None
    return "roots " + " ".join(str(root.uri) for root in result.roots)


if __name__ == "__main__":
    if "--http" in sys.argv:  # streamable HTTP on 127.0.0.1, at /mcp
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run(transport="http", host="127.0.0.1", port=port, show_banner=False)
    else:
        server.run(show_banner=False)
