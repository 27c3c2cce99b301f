"""The proxy's tool source (`strictcall proxy`, served by `strictcall.server.proxy`): strictcall in
front of any MCP server, or of many (`strictcall federate`), with no change to those servers.

    upstream   one MCP server through the official client (stdio or streamable HTTP), kept
               running: restarted with backoff when it exits or hangs, relisted on
               notifications/tools/list_changed
    stdio      a stdio upstream's process and pipes, strictcall's own, under the official
               ClientSession; its tools/calls take the pipe's own path
    tools      its tools/list as strictcall tools: strict input schemas, output schemas
               enforced at stage output, upstream failures in the catalogue's terms
    http       a streamable HTTP upstream's tools/calls, one POST each on the session's client
    policy     an allow-list of tools per identity
    config     a federation's TOML file: many upstreams, each with its credentials, timeout,
               restart backoff and prefix (`strictcall federate`, served by
               `strictcall.server.federation`)
    federation many upstreams behind one gateway, their tools prefixed and listed in order
    content    a federation's resources and prompts: listed, merged, routed, read through
    results    an upstream's tools/call answer read as the official session reads it
    pins       tool pinning: a tool's definition as first seen, a change held until approved

Importing this package loads the MCP SDK (`strictcall[mcp]`).
"""

from __future__ import annotations

from strictcall.errors import MissingExtra

try:
    import mcp as _sdk  # noqa: F401
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("mcp", "mcp") from None

from strictcall.services.proxy.policy import PolicyError, allow_list, load_allow_list
from strictcall.services.proxy.tools import UPSTREAM_TEXT, ToolOutput, content_of, proxied_tool
from strictcall.services.proxy.upstream import Upstream, UpstreamFailed, UpstreamSpec

__all__ = [
    "UPSTREAM_TEXT",
    "PolicyError",
    "ToolOutput",
    "Upstream",
    "UpstreamFailed",
    "UpstreamSpec",
    "allow_list",
    "content_of",
    "load_allow_list",
    "proxied_tool",
]
