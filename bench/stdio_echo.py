"""strictcall's own MCP stdio server with one in-process tool shaped as the proxy serves
server-everything's `echo` (one text block, no output schema, a 60 s limit), audited in the
same SQLite file: bench/proxy_overhead.py's reference for what strictcall's checks cost without
an upstream.

    .venv/bin/python bench/stdio_echo.py AUDIT_DB
"""

from __future__ import annotations

import sys

from strictcall.audit.log import AuditLog
from strictcall.core.content import Content
from strictcall.core.gateway import Gateway
from strictcall.core.tools import Arguments, Tool, ToolContext
from strictcall.errors import JSONValue
from strictcall.server.proxy import DEFAULT_TIMEOUT_S
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.mcp import Serving, serve_stdio

INPUT: dict[str, JSONValue] = {
    "type": "object",
    "properties": {"message": {"type": "string"}},
    "required": ["message"],
}


async def echo(ctx: ToolContext, arguments: Arguments) -> Content:
    return Content.of_text(f"Echo: {arguments['message']}")


def main() -> None:
    tool = Tool(
        name="echo",
        description="Echoes back the input",
        input_schema=INPUT,
        output_schema=None,
        handler=echo,
        timeout=DEFAULT_TIMEOUT_S,
    )
    gateway = Gateway()
    gateway.replace_tools([tool])
    store = SQLiteStore(sys.argv[1])
    audit = AuditLog(store)
    try:
        serve_stdio(gateway, "bench", Serving(record=audit.record, lifespans=(audit.running,)))
    finally:
        gateway.close()
        store.close()


if __name__ == "__main__":
    main()
