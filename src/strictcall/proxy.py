"""MCP servers behind strictcall, from their public path: one upstream (`Proxy`) or many
(`Federation`, from a config file read by `load_config`), served in-process as MCP on stdio
or as the ASGI app `strictcall proxy` and `strictcall federate` serve over HTTP.

Importing this module loads the MCP SDK (the `strictcall` package itself does not).
"""

from strictcall.server.federation import federation_app, serve_federation_stdio
from strictcall.server.proxy import Proxy, proxy_app, serve_proxy_stdio
from strictcall.services.proxy.config import (
    ConfigError,
    FederationConfig,
    UpstreamConfig,
    federation_config,
    load_config,
)
from strictcall.services.proxy.federation import Federation, FederationFailed
from strictcall.services.proxy.upstream import UpstreamFailed, UpstreamSpec

__all__ = [
    "ConfigError",
    "Federation",
    "FederationConfig",
    "FederationFailed",
    "Proxy",
    "UpstreamConfig",
    "UpstreamFailed",
    "UpstreamSpec",
    "federation_app",
    "federation_config",
    "load_config",
    "proxy_app",
    "serve_federation_stdio",
    "serve_proxy_stdio",
]
