"""`strictcall federate` (many MCP servers behind one strictcall) and `strictcall tools`
(its pinned tools: diff, approve)."""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, TextIO

from strictcall.cli.arguments import EXIT_USAGE, gateway_files
from strictcall.cli.commands import (
    EXIT_FAILED,
    EXIT_OK,
    _open_store,
    _policy_of,
    _reload_on_hangup,
)
from strictcall.cli.serving import serve_stdio_or_http
from strictcall.core.terminal import one_line
from strictcall.server.edge import EdgeLimits
from strictcall.storage import StoreUnavailable

EXIT_CHANGES_WAIT: Final = 1
"""`tools diff --exit-code`'s status when a change waits for approval."""

if TYPE_CHECKING:
    from strictcall.audit.log import AuditRetention
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
    audit_retention: AuditRetention | None = None,
) -> int:
    """Serve the upstreams of the config file at `config_path` through one gateway: MCP on
    stdio as `identity` (when given), else HTTP on `port`, as `strictcall proxy` serves one;
    over HTTP with `oauth`, the identity provider's tokens too (the config's `[oauth]` table
    and the `--oauth-*` flags), never passed on to an upstream."""
    from strictcall.services.proxy import PolicyError, load_allow_list
    from strictcall.services.proxy.config import ConfigError, hiding, load_config
    from strictcall.services.proxy.federation import Federation, FederationFailed

    try:
        config = hiding(load_config(config_path), gateway_files(db, config_path, policy, allow))
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
    from strictcall.server.logs import stamped_lines

    log = stamped_lines(err)  # the running federation's log: stamped lines
    federation = Federation(config, errlog=log, pins=store, allowed=allowed, policy=holder)
    restore = None
    if holder is not None and policy is not None:
        restore = _reload_on_hangup(holder, policy, log)
    names = ", ".join(upstream.name for upstream in config.upstreams)

    def serve_stdio() -> None:
        from strictcall.server.federation import serve_federation_stdio
        from strictcall.server.logs import configure_logging

        configure_logging()  # strictcall's logged lines stamped as these are
        assert identity is not None
        serve_federation_stdio(federation, identity, store=store, audit_retention=audit_retention)

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
            audit_retention=audit_retention,
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
    """Print each pinned tool (resource, template, prompt) whose upstream changed it, or that
    appeared mid-run: the upstream it comes from, a unified diff of its pinned and its changed
    definition (control characters escaped: an upstream chose the text), and the command that
    approves exactly that change (its digest). With `exit_code`, exit 1 when a change waits (for
    a script or a CI step)."""
    from strictcall.services.proxy.pins import digest_of, shown_key, upstream_of

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
        what = "appeared" if not pin.pinned else "changed"
        upstream = upstream_of(pin.seen) or "?"
        was = upstream_of(pin.pinned)
        moved = f" (pinned as upstream {was}'s)" if was is not None and was != upstream else ""
        digest = digest_of(pin.seen)
        out.write(f"{shown_key(pin.name)} {what} upstream {upstream}{moved}, digest {digest}:\n")
        lines = difflib.unified_diff(
            _shown(pin.pinned), _shown(pin.seen), "pinned", "changed", lineterm="", n=2
        )
        out.write("".join(f"  {line}\n" for line in lines))
        out.write(
            f"  approve: strictcall tools approve {shlex.quote(pin.name)} --digest {digest}\n"
        )
    return EXIT_CHANGES_WAIT if exit_code else EXIT_OK


def run_tools_approve(db: str, name: str, digest: str, *, out: TextIO, err: TextIO) -> int:
    """Pin the changed definition of the one served as `name`, if it is the one whose digest
    `tools diff` showed (`digest`): a running federation serves it within a second. Exits 1
    when no change of it waits, or the one waiting is another."""
    from strictcall.services.proxy.pins import digest_of, shown_key

    shown = one_line(shown_key(name))
    store = _open_store(db, err)
    if store is None:
        return EXIT_FAILED
    try:
        waiting = next((p.seen for p in store.tool_pins() if p.name == name), None)
        approved = (
            waiting is not None
            and digest_of(waiting) == digest
            and store.approve_tool(name, waiting)
        )
    except StoreUnavailable as exc:
        err.write(f"strictcall tools: cannot approve ({exc})\n")
        return EXIT_FAILED
    finally:
        store.close()
    if waiting is None:
        err.write(f"strictcall tools: no change of {shown} waits for approval\n")
        return EXIT_FAILED
    if not approved:
        err.write(
            f"strictcall tools: the change of {shown} waiting now is not the one with digest"
            f" {one_line(digest[:64])}: nothing approved; review it again (strictcall tools"
            " diff)\n"
        )
        return EXIT_FAILED
    out.write(f"approved {shown}: served as changed from now on\n")
    return EXIT_OK


def _shown(definition: str) -> list[str]:
    """A definition as lines to compare: indented JSON, every non-ASCII and control character
    escaped (none for one that appeared mid-run: nothing was approved)."""
    if not definition:
        return []
    return json.dumps(json.loads(definition), indent=2, sort_keys=True).splitlines()
