"""`strictcall proxy`: strictcall in front of one MCP server, over stdio or HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from strictcall.cli.identity import OAuthChoice
from strictcall.cli.policy import _policy_of, _reload_on_hangup
from strictcall.cli.store import EXIT_FAILED, EXIT_OK, _open_store
from strictcall.server.edge import EdgeLimits
from strictcall.storage import shown_db

if TYPE_CHECKING:
    from strictcall.services.proxy.credentials import ClientCredentials


def run_proxy(
    upstream: str | None,
    upstream_url: str | None,
    headers: list[str],
    *,
    credentials: ClientCredentials | None = None,
    db: str,
    identity: str | None,
    host: str,
    port: int | None,
    allow: str | None,
    pass_errors: list[str],
    policy: str | None = None,
    timeout: float,
    out: TextIO,
    err: TextIO,
    edge: EdgeLimits | None = None,
    allow_origins: Sequence[str] = (),
    oauth: OAuthChoice | None = None,
    max_result_bytes: int | None = None,
) -> int:
    """Serve one upstream MCP server's tools through the gateway: MCP on stdio as `identity`
    (when given), else HTTP on `port` with the store's tokens, behind the same edge as
    `strictcall serve` (`allow_origins`, and `edge`'s deadlines, connection cap and calls in
    flight per identity). Standard output carries MCP alone in stdio mode; everything else
    goes to `err`."""
    from strictcall.server.listen import ListenError
    from strictcall.server.proxy import Proxy, upstream_failure  # the MCP SDK loads only here
    from strictcall.services.proxy import PolicyError, UpstreamFailed, UpstreamSpec, load_allow_list
    from strictcall.services.proxy.stdio import MAX_RESULT_BYTES

    try:
        spec = (
            UpstreamSpec.of_url(upstream_url, headers, credentials)
            if upstream_url is not None
            else UpstreamSpec.of_command(upstream or "")
        )
        allowed = None if allow is None else load_allow_list(allow)
    except (ValueError, PolicyError) as exc:
        err.write(f"strictcall proxy: {exc}\n")
        return EXIT_FAILED
    holder = _policy_of(policy, "strictcall proxy", err)
    if holder is False:
        return EXIT_FAILED
    store = _open_store(db, err)
    if store is None:
        return EXIT_FAILED
    proxy = Proxy(
        spec,
        errlog=err,
        allowed=allowed,
        policy=holder,
        pass_errors=pass_errors,
        timeout=timeout,
        max_result_bytes=MAX_RESULT_BYTES if max_result_bytes is None else max_result_bytes,
    )
    restore = None
    if holder is not None and policy is not None:
        restore = _reload_on_hangup(holder, policy, err)
    try:
        if identity is not None:
            from strictcall.server.proxy import serve_proxy_stdio

            err.write(f"strictcall proxy: MCP on stdio for {identity} (store: {shown_db(db)})\n")
            err.flush()
            serve_proxy_stdio(proxy, identity, store=store)
        else:
            from strictcall.server.app import DEFAULT_PORT, serve
            from strictcall.server.edge import OriginPolicy, is_loopback_host
            from strictcall.server.logs import quiet_after_failure
            from strictcall.server.proxy import proxy_app

            def ready(bound_host: str, bound_port: int) -> None:
                out.write(f"strictcall proxy listening on http://{bound_host}:{bound_port}")
                out.write(f" (store: {shown_db(db)}; upstream: {spec.describe()})\n")
                out.flush()

            origins = OriginPolicy(frozenset(allow_origins), loopback=is_loopback_host(host))
            settings = None if oauth is None else oauth.settings
            app = proxy_app(proxy, store, origins=origins, edge=edge, oauth=settings)
            with quiet_after_failure(lambda: proxy.failed is not None):
                serve(app, host, DEFAULT_PORT if port is None else port, ready, edge=edge)
    except ListenError as exc:
        err.write(f"strictcall proxy: {exc}\n")
        return EXIT_FAILED
    except SystemExit:  # the HTTP server's answer to a failed startup (exit 3)
        if proxy.failed is None:
            raise
        err.write(f"strictcall proxy: {proxy.failed}\n")
        return EXIT_FAILED
    except (UpstreamFailed, BaseExceptionGroup) as exc:
        failed = upstream_failure(exc)
        if failed is None:
            raise
        err.write(f"strictcall proxy: {failed}\n")
        return EXIT_FAILED
    finally:
        if restore is not None:
            restore()
        if holder is not None:
            holder.close()
        proxy.gateway.close()
        store.close()
    return EXIT_OK
