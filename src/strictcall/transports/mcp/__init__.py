"""MCP in front of the gateway, on the official SDK (PyPI `mcp` 2.x).

    strictcall serve --mcp-stdio --identity ID   stdio (`strictcall.transports.mcp.stdio`); the
    identity is
                                                 the operator's flag
    strictcall serve                             streamable HTTP at /mcp
    (`strictcall.transports.mcp.http`);
                                                 the identity comes from the bearer token

The SDK's low-level `Server` does the framing, the handshake, both protocol eras and the
sessions; the gateway decides everything about a call. `adapter` turns the gateway into MCP's
tools/list and tools/call, `intake` reads every message strictly before the SDK sees it, and
`stdio` and `http` are the two transports; both take the server's options as one value
(`Serving`, `strictcall.transports.serving`). Importing this package loads the MCP SDK
(`strictcall[mcp]`).
"""

from __future__ import annotations

from strictcall.errors import MissingExtra

try:
    import mcp as _sdk  # noqa: F401
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("mcp", "mcp") from None

from strictcall.core.listing import RESULT_MEMBER, WRAP_MARKER, result_is_wrapped, wrap_schema
from strictcall.transports.mcp.adapter import (
    MCP_PARAMS,
    McpTools,
    describe_tools,
    error_result,
    protocol_version,
    result_message,
    tool_result,
)
from strictcall.transports.mcp.http import McpHttpApp, identity_in_scope
from strictcall.transports.mcp.intake import DirectCall, Refused, read_message, refuse_too_large
from strictcall.transports.mcp.stdio import DRAIN_S, Answers, StdioIntake, serve_stdio, take_lines
from strictcall.transports.serving import DEFAULT_SERVING, Serving

__all__ = [
    "DEFAULT_SERVING",
    "DRAIN_S",
    "MCP_PARAMS",
    "RESULT_MEMBER",
    "WRAP_MARKER",
    "Answers",
    "DirectCall",
    "McpHttpApp",
    "McpTools",
    "Refused",
    "Serving",
    "StdioIntake",
    "describe_tools",
    "error_result",
    "identity_in_scope",
    "protocol_version",
    "read_message",
    "refuse_too_large",
    "result_is_wrapped",
    "result_message",
    "serve_stdio",
    "take_lines",
    "tool_result",
    "wrap_schema",
]
