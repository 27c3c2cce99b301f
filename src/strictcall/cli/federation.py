"""`strictcall federate` (many MCP servers behind one strictcall) and `strictcall tools`
(its pinned tools: diff, approve)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, TextIO

from strictcall.cli.arguments import EXIT_USAGE
from strictcall.cli.commands import (
    EXIT_FAILED,
    EXIT_OK,
    _open_store,
    _policy_of,
    _reload_on_hangup,
)
from strictcall.cli.serving import serve_stdio_or_http
from strictcall.server.edge import EdgeLimits
from strictcall.storage import StoreUnavailable

EXIT_CHANGES_WAIT: Final = 1
"""`tools diff --exit-code`'s status when a change waits for approval."""

if TYPE_CHECKING:
    from strictcall.cli.identity import OAuthChoice
    from strictcall.server.edge import OriginPolicy
    from strictcall.server.router import RpcApp


def run_federate(
    config_path: str,
    *,
    db: str,
    identity: str | None,
    host: str,
    port: int | None,
    allow: str | None,
    out: TextIO,
    policy: str | None = None,
    err: TextIO,
    edge: EdgeLimits | None = None,
    allow_origins: Sequence[str] = (),
    oauth: OAuthChoice | None = None,
) -> int:
    """Serve the upstreams of the config file at `config_path` through one gateway: MCP on
    stdio as `identity` (when given), else HTTP on `port`, as `strictcall proxy` serves one;
    over HTTP with `oauth`, the identity provider's tokens too (the config's `[oauth]` table
    and the `--oauth-*` flags), never passed on to an upstream."""
    from strictcall.services.proxy import PolicyError, load_allow_list
    from strictcall.services.proxy.config import ConfigError, load_config
    from strictcall.services.proxy.federation import Federation, FederationFailed

    try:
        config = load_config(config_path)
    except ConfigError as exc:  # exit 2, as every other fault of the config file
        err.write(f"strictcall federate: {exc}\n")
        return EXIT_USAGE
    try:
        allowed = None if allow is None else load_allow_list(allow)
    except PolicyError as exc:
        err.write(f"strictcall federate: {exc}\n")
        return EXIT_FAILED
    holder = _policy_of(policy, "strictcall federate", err)
    if holder is False:
        return EXIT_FAILED
    store = _open_store(db, err)
    if store is None:
        if holder is not None:
            holder.close()
        return EXIT_FAILED
    federation = Federation(config, errlog=err, pins=store, allowed=allowed, policy=holder)
    restore = None
    if holder is not None and policy is not None:
        restore = _reload_on_hangup(holder, policy, err)
    names = ", ".join(upstream.name for upstream in config.upstreams)

    def serve_stdio() -> None:
        from strictcall.server.federation import serve_federation_stdio

        assert identity is not None
        serve_federation_stdio(federation, identity, store=store)

    def app_of(origins: OriginPolicy, open_to_operators: bool) -> RpcApp:
        from strictcall.server.federation import federation_app

        settings = None if oauth is None else oauth.settings
        return federation_app(
            federation,
            store,
            origins=origins,
            edge=edge,
            oauth=settings,
            open_to_operators=open_to_operators,
        )

    try:
        return serve_stdio_or_http(
            "strictcall federate",
            db=db,
            identity=identity,
            host=host,
            port=port,
            upstreams=f"upstreams: {names}",
            stdio_detail=f"; upstreams: {names}",
            serve_stdio=serve_stdio,
            app_of=app_of,
            failed=lambda: federation.failed,
            failures=(FederationFailed, BaseExceptionGroup),
            failure_of=lambda exc: federation.failed,
            out=out,
            err=err,
            edge=edge,
            allow_origins=allow_origins,
        )
    finally:
        if restore is not None:
            restore()
        if holder is not None:  # the shared quota state's connections, as run_proxy does
            holder.close()
        federation.gateway.close()
        store.close()


def run_tools_diff(db: str, *, out: TextIO, err: TextIO, exit_code: bool = False) -> int:
    """Print each pinned tool whose upstream changed it, with a unified diff of its pinned and
    its changed definition (control characters escaped: an upstream chose the text). With
    `exit_code`, exit 1 when a change waits (for a script or a CI step)."""
    store = _open_store(db, err)
    if store is None:
        return EXIT_FAILED
    try:
        pins = store.tool_pins()
    except StoreUnavailable as exc:
        err.write(f"strictcall tools: cannot read the pins ({exc})\n")
        return EXIT_FAILED
    finally:
        store.close()
    waiting = [pin for pin in pins if pin.seen is not None]
    if not waiting:
        out.write(f"no pinned tool changed ({len(pins)} pinned)\n")
        return EXIT_OK
    for pin in waiting:
        assert pin.seen is not None
        out.write(f"tool {json.dumps(pin.name)} changed upstream:\n")
        lines = difflib.unified_diff(
            _shown(pin.pinned), _shown(pin.seen), "pinned", "changed", lineterm="", n=2
        )
        out.write("".join(f"  {line}\n" for line in lines))
        out.write(f"  approve: strictcall tools approve {pin.name}\n")
    return EXIT_CHANGES_WAIT if exit_code else EXIT_OK


def run_tools_approve(db: str, name: str, *, out: TextIO, err: TextIO) -> int:
    """Pin the changed definition of the tool served as `name`: a running federation serves it
    within a second. Exits 1 when no change of that tool waits."""
    store = _open_store(db, err)
    if store is None:
        return EXIT_FAILED
    try:
        approved = store.approve_tool(name)
    except StoreUnavailable as exc:
        err.write(f"strictcall tools: cannot approve ({exc})\n")
        return EXIT_FAILED
    finally:
        store.close()
    if not approved:
        err.write(f"strictcall tools: no change of {json.dumps(name)} waits for approval\n")
        return EXIT_FAILED
    out.write(f"approved {json.dumps(name)}: served as changed from now on\n")
    return EXIT_OK


def _shown(definition: str) -> list[str]:
    """A definition as lines to compare: indented JSON, every non-ASCII and control character
    escaped."""
    return json.dumps(json.loads(definition), indent=2, sort_keys=True).splitlines()
