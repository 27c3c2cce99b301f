"""A FastMCP server (PyPI) that talks during its calls, as long-running tools do: the tests run
it behind `strictcall proxy` and `strictcall federate`, on stdio and on HTTP.

    python fastmcp_chatty.py [--call-log PATH] [--http PORT]

`count` reports progress and logs at two levels at each step; `hold` waits until cancelled (it
writes "cancelled" to the call log when it is); `ask` asks its caller a question
(elicitation) and answers with what it was told.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")  # no network here

import anyio
from fastmcp import Context, FastMCP
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


if __name__ == "__main__":
    if "--http" in sys.argv:  # streamable HTTP on 127.0.0.1, at /mcp
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run(transport="http", host="127.0.0.1", port=port, show_banner=False)
    else:
        server.run(show_banner=False)
