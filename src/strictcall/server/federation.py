"""A federation (`strictcall federate --config FILE`): many upstreams' tools behind one gateway,
served over MCP stdio or HTTP exactly as a proxy is (`strictcall.server.proxy`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from strictcall.audit.log import KEEP_ALL, AuditLog, AuditRetention
from strictcall.services.proxy.federation import Federation

if TYPE_CHECKING:
    from strictcall.identity.settings import OAuthSettings
    from strictcall.server.edge import EdgeLimits, OriginPolicy
    from strictcall.server.router import RpcApp
    from strictcall.storage import Store


def serve_federation_stdio(
    federation: Federation,
    identity: str,
    *,
    store: Store,
    audit_retention: AuditRetention | None = None,
) -> None:
    """Serve the federation as MCP on stdin and stdout, as `identity`, until stdin ends; every
    call audited in `store`. The session is told `notifications/tools/list_changed` when an
    upstream's listing changes what is served.

    Raises:
        FederationFailed: the federation could not start.
    """
    from strictcall.ops.tracing import traced_stdio
    from strictcall.transports.mcp import serve_stdio  # the MCP SDK loads only for a server

    kept = audit_retention if audit_retention is not None else KEEP_ALL
    audit = AuditLog(store, retention=kept)
    policy = federation.gateway.policy
    record, per_call = traced_stdio(federation.gateway, audit.record)
    federation.audit_server_requests(audit.record)
    serving = federation.serving
    lifespans = (
        *(() if policy is None else (policy.serving,)),
        audit.running,
        *serving.lifespans,  # the upstreams' run inside the audit's: its last records last
    )
    serve_stdio(
        federation.gateway,
        identity,
        replace(serving, record=record, call_context=per_call, lifespans=lifespans),
    )


def federation_app(
    federation: Federation,
    store: Store,
    *,
    origins: OriginPolicy | None = None,
    edge: EdgeLimits | None = None,
    oauth: OAuthSettings | None = None,
    open_to_operators: bool = False,
    audit_retention: AuditRetention | None = None,
) -> RpcApp:
    """The ASGI app serving the federation: JSON-RPC at /rpc, MCP at /mcp (both wire
    versions, as `strictcall serve`), tokens from `store` (and the identity provider's, with
    `oauth`), the same edge and operator page as `serve` (open without a token when
    `open_to_operators`). A caller's token is never passed on: each upstream
    sees its own credentials from the config only."""
    from strictcall.server.app import build_gateway_app

    pins = federation.pins
    return build_gateway_app(
        federation.gateway,
        store,
        origins=origins,
        edge=edge,
        serving=federation.serving,
        tool_changes=None if pins is None else (lambda: pins.changes),
        redactions=lambda: federation.redactions.counts,
        budget_refusals=federation.budget_refusals,
        instances=federation.instance_counts if federation.has_instances else None,
        upstreams=federation.upstream_states,
        oauth=oauth,
        open_to_operators=open_to_operators,
        audit_retention=audit_retention,
        audit_to=federation.audit_server_requests,
    )
