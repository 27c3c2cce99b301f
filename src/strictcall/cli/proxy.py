"""`strictcall proxy`: its flags (checked together), and strictcall in front of one MCP server,
over stdio or HTTP."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal, TextIO

from strictcall.cli.arguments import (
    EXIT_USAGE,
    _db_path,
    _port,
    _utf8_text,
    gateway_files,
)
from strictcall.cli.edge import _add_edge_arguments, _edge_flags_given, _edge_of
from strictcall.cli.identity import (
    OAuthChoice,
    add_oauth_arguments,
    add_upstream_oauth_arguments,
    oauth_given,
    upstream_credentials_of,
)
from strictcall.cli.policy import _policy_of, _reload_on_hangup
from strictcall.cli.retention import add_audit_arguments, audit_retention_of
from strictcall.cli.serving import serve_stdio_or_http
from strictcall.cli.store import EXIT_FAILED, _open_store
from strictcall.server.edge import EdgeLimits

if TYPE_CHECKING:
    from strictcall.audit.log import AuditRetention
    from strictcall.server.edge import OriginPolicy
    from strictcall.server.router import RpcApp
    from strictcall.services.proxy.credentials import ClientCredentials
    from strictcall.services.proxy.instances import PerIdentity


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
    withhold_errors: bool = False,
    redact: str = "secrets",
    timeout: float,
    out: TextIO,
    err: TextIO,
    edge: EdgeLimits | None = None,
    allow_origins: Sequence[str] = (),
    oauth: OAuthChoice | None = None,
    max_result_bytes: int | None = None,
    env_pass: Sequence[str] = (),
    sandbox: str | None = None,
    audit_retention: AuditRetention | None = None,
    per_identity: PerIdentity | None = None,
    upstream_env: Mapping[str, str] | None = None,
    probe: bool = True,
) -> int:
    """Serve one upstream MCP server's tools through the gateway: MCP on stdio as `identity`
    (when given), else HTTP on `port` with the store's tokens, behind the same edge as
    `strictcall serve` (`allow_origins`, and `edge`'s deadlines, connection cap and calls in
    flight per identity). A stdio upstream gets the variables `env_pass` names of the gateway's
    environment (no other) and runs in `sandbox` (None: the strongest the machine has).
    With `per_identity` (HTTP), each caller identity gets an upstream of its own.
    `upstream_env` is set in a stdio upstream's environment (its credentials: never printed; a
    value written "~/..." is in the upstream's own home, a per-identity instance's own).
    With `probe` off, no session of the proxy's own learns which tools the upstream lists only to
    a client offering sampling, elicitation or roots: each is listed to every caller.
    Standard output carries MCP alone in stdio mode; everything else goes to `err`."""
    from dataclasses import replace

    from strictcall.core.redact import Redaction
    from strictcall.server.proxy import Proxy, upstream_failure  # the MCP SDK loads only here
    from strictcall.services.proxy import PolicyError, UpstreamFailed, UpstreamSpec, load_allow_list
    from strictcall.services.proxy.config import missing_program
    from strictcall.services.proxy.spawn import Spawn
    from strictcall.services.proxy.stdio import MAX_RESULT_BYTES

    try:
        spec = (
            UpstreamSpec.of_url(upstream_url, headers, credentials)
            if upstream_url is not None
            else UpstreamSpec.of_command(upstream or "")
        )
        hidden = gateway_files(db, allow, policy)
        spawn = Spawn(env_pass=tuple(env_pass), sandbox=sandbox, hidden=hidden)
        spec = replace(spec, spawn=spawn, env=dict(upstream_env or {}))
        allowed = None if allow is None else load_allow_list(allow)
    except (ValueError, PolicyError) as exc:
        err.write(f"strictcall proxy: {exc}\n")
        return EXIT_FAILED
    missing = None if not spec.command else missing_program(spec.command[0])
    if missing is not None:  # exit 2, as a federation's config naming it would
        err.write(f"strictcall proxy: --upstream-cmd: {missing}\n")
        return EXIT_USAGE
    holder = _policy_of(policy, "strictcall proxy", err)
    if holder is False:
        return EXIT_FAILED
    store = _open_store(db, err)
    if store is None:
        if holder is not None:
            holder.close()
        return EXIT_FAILED
    from strictcall.server.logs import stamped_lines

    log = stamped_lines(err)  # the running proxy's log: stamped lines
    proxy = Proxy(
        spec,
        errlog=log,
        allowed=allowed,
        policy=holder,
        pass_errors=pass_errors,
        withhold_errors=withhold_errors,
        redaction=Redaction(results=redact == "secrets"),
        timeout=timeout,
        max_result_bytes=MAX_RESULT_BYTES if max_result_bytes is None else max_result_bytes,
        per_identity=per_identity,
    )
    proxy.upstream.probes_asks = probe
    restore = None
    if holder is not None and policy is not None:
        restore = _reload_on_hangup(holder, policy, log)

    def serve_stdio() -> None:
        from strictcall.server.logs import configure_logging
        from strictcall.server.proxy import serve_proxy_stdio

        configure_logging()  # strictcall's logged lines stamped as these are
        assert identity is not None
        serve_proxy_stdio(proxy, identity, store=store, audit_retention=audit_retention)

    def app_of(origins: OriginPolicy, open_to_operators: bool) -> RpcApp:
        from strictcall.server.proxy import proxy_app

        settings = None if oauth is None else oauth.settings
        return proxy_app(
            proxy,
            store,
            origins=origins,
            edge=edge,
            oauth=settings,
            open_to_operators=open_to_operators,
            audit_retention=audit_retention,
        )

    try:
        return serve_stdio_or_http(
            "strictcall proxy",
            db=db,
            identity=identity,
            host=host,
            port=port,
            upstreams=f"upstream: {spec.describe()}",
            stdio_detail="",
            serve_stdio=serve_stdio,
            app_of=app_of,
            failed=lambda: proxy.failed,
            failures=(UpstreamFailed, BaseExceptionGroup),
            failure_of=upstream_failure,
            out=out,
            err=err,
            edge=edge,
            allow_origins=allow_origins,
        )
    finally:
        if restore is not None:
            restore()
        if holder is not None:
            holder.close()
        proxy.gateway.close()
        store.close()


def add_proxy_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], db_help: str
) -> None:
    """`proxy`'s flags and help, as the command line lists them."""
    proxy = commands.add_parser(
        "proxy", help="serve an MCP server's tools through strictcall (stdio or HTTP)"
    )
    upstream = proxy.add_mutually_exclusive_group(required=True)
    upstream.add_argument(
        "--upstream-cmd", type=_utf8_text, help='the MCP server to run, e.g. "node server.js"'
    )
    upstream.add_argument("--upstream-url", type=_utf8_text, help="a streamable HTTP MCP server")
    proxy.add_argument(
        "--upstream-header",
        action="append",
        default=[],
        type=_utf8_text,
        metavar='"NAME: VALUE"',
        help="with --upstream-url: a header sent with every request (repeatable)",
    )
    add_upstream_oauth_arguments(proxy)
    proxy.add_argument(
        "--env-pass",
        action="append",
        default=[],
        type=_utf8_text,
        metavar="NAME",
        help="with --upstream-cmd: pass this variable of strictcall's environment to the"
        " upstream (repeatable; it gets no other but PATH, LANG and a HOME of its own)",
    )
    proxy.add_argument(
        "--upstream-env",
        action="append",
        default=[],
        type=_utf8_text,
        metavar="NAME=VALUE",
        help="with --upstream-cmd: set this variable in the upstream's environment, a"
        " credential never printed (repeatable; a VALUE of ~/... is in the upstream's own home)",
    )
    proxy.add_argument(
        "--sandbox",
        choices=("bwrap", "container", "none"),
        help="with --upstream-cmd: the upstream's sandbox (default: bwrap where it runs;"
        " container: in the container engine, docker)",
    )
    proxy.add_argument(
        "--stdio", action="store_true", help="serve MCP on stdin/stdout as --identity"
    )
    proxy.add_argument(
        "--identity", type=_utf8_text, help="with --stdio: the caller every call runs as"
    )
    proxy.add_argument("--host", default="127.0.0.1", help="HTTP: default 127.0.0.1")
    proxy.add_argument("--port", type=_port, help="HTTP: 0-65535, default 8765; 0 picks a free one")
    proxy.add_argument("--db", type=_db_path, help=db_help + "; tokens and the audit log")
    allowing = proxy.add_mutually_exclusive_group()
    allowing.add_argument(
        "--allow", type=_utf8_text, metavar="FILE", help="allow-list: identity -> tool names"
    )
    allowing.add_argument(
        "--policy",
        type=_utf8_text,
        metavar="FILE",
        help="a policy file, as for serve (read again on SIGHUP)",
    )
    proxy.add_argument(
        "--pass-errors",
        action="append",
        default=[],
        type=_utf8_text,
        metavar="TOOL",
        help="pass this tool's error results even with --withhold-errors (repeatable)",
    )
    proxy.add_argument(
        "--withhold-errors",
        action="store_true",
        help="answer the upstream's error results as a bare tool_error (default: passed, redacted)",
    )
    proxy.add_argument(
        "--redact",
        choices=("secrets", "off"),
        default="secrets",
        help="redact secrets in the upstream's results (default) or not (its errors: always)",
    )
    proxy.add_argument(
        "--timeout", type=float, default=60.0, help="seconds a call may take (default 60)"
    )
    proxy.add_argument(
        "--max-result-bytes",
        type=int,
        default=8 * 1024 * 1024,
        metavar="N",
        help="the longest answer one call may get from the upstream (default 8 MiB)",
    )
    proxy.add_argument(
        "--instances",
        choices=("shared", "per-identity"),
        default="shared",
        help="HTTP: one upstream for every caller (shared, the default) or one per caller"
        " identity (per-identity), so that a stateful server's memory is never shared",
    )
    proxy.add_argument(
        "--max-instances",
        type=int,
        metavar="N",
        help="with --instances per-identity: at most N at once (default 50; past it a new"
        " caller is answered at_capacity)",
    )
    proxy.add_argument(
        "--instance-idle",
        type=float,
        metavar="SECONDS",
        help="with --instances per-identity: how long one may go unused before it is stopped"
        " (default 300)",
    )
    proxy.add_argument(
        "--no-probe",
        action="store_true",
        help="start no session of the proxy's own to learn which tools the upstream lists only"
        " to a client offering sampling, elicitation or roots (each is then listed to every"
        " caller; with a probe, one more process of --upstream-cmd at each start)",
    )
    _add_edge_arguments(proxy)
    add_audit_arguments(proxy)
    add_oauth_arguments(proxy)


def run_proxy_args(
    args: argparse.Namespace, db: str, oauth: OAuthChoice | None, *, out: TextIO, err: TextIO
) -> int:
    """`strictcall proxy` as the command line parsed it: its flags checked together (2 and one
    line for a misuse), then `run_proxy`."""
    if args.stdio != (args.identity is not None) or (args.stdio and args.port is not None):
        err.write("strictcall proxy: --stdio takes --identity ID (and no --port)\n")
        return EXIT_USAGE
    only_for_commands = args.env_pass or args.upstream_env or args.sandbox is not None
    if (only_for_commands or args.instances != "shared") and args.upstream_cmd is None:
        err.write(
            "strictcall proxy: --env-pass, --upstream-env, --sandbox and --instances go with"
            " --upstream-cmd\n"
        )
        return EXIT_USAGE
    upstream_env = _upstream_env_of(args.upstream_env, err)
    if upstream_env is None:
        return EXIT_USAGE
    if args.upstream_header and args.upstream_url is None:
        err.write("strictcall proxy: --upstream-header goes with --upstream-url\n")
        return EXIT_USAGE
    try:
        credentials = upstream_credentials_of(args)
    except ValueError as exc:
        err.write(f"strictcall proxy: {exc}\n")
        return EXIT_USAGE
    if not args.timeout > 0:
        err.write("strictcall proxy: --timeout is a positive number of seconds\n")
        return EXIT_USAGE
    if args.max_result_bytes < 1:
        err.write("strictcall proxy: --max-result-bytes is a positive number of bytes\n")
        return EXIT_USAGE
    per_identity = _per_identity_of(args, err)
    if per_identity is False:
        return EXIT_USAGE
    edge_given = _edge_flags_given(args) or oauth_given(args)
    if args.stdio and edge_given is not None:
        err.write(f"strictcall proxy: {edge_given} is for HTTP; leave it out with --stdio\n")
        return EXIT_USAGE
    return run_proxy(
        args.upstream_cmd,
        args.upstream_url,
        args.upstream_header,
        credentials=credentials,
        db=db,
        identity=args.identity,
        host=args.host,
        port=args.port,
        allow=args.allow,
        policy=args.policy,
        pass_errors=args.pass_errors,
        withhold_errors=args.withhold_errors,
        redact=args.redact,
        timeout=args.timeout,
        max_result_bytes=args.max_result_bytes,
        env_pass=args.env_pass,
        sandbox=args.sandbox,
        edge=_edge_of(args),
        allow_origins=args.allow_origin,
        oauth=oauth,
        audit_retention=audit_retention_of(args),
        probe=not args.no_probe,
        per_identity=per_identity,
        upstream_env=upstream_env,
        out=out,
        err=err,
    )


ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
"""A variable `--upstream-env` may set."""


def _upstream_env_of(given: Sequence[str], err: TextIO) -> dict[str, str] | None:
    """Each `--upstream-env NAME=VALUE`, or None after one line naming the first one wrong (by
    its place: the value may be a secret, never printed)."""
    env: dict[str, str] = {}
    for place, pair in enumerate(given, start=1):
        name, equals, value = pair.partition("=")
        if not equals or ENV_NAME.fullmatch(name) is None:
            err.write(
                f"strictcall proxy: --upstream-env number {place} is not NAME=VALUE (NAME:"
                " letters, digits and _, not starting with a digit)\n"
            )
            return None
        env[name] = value
    return env


def _per_identity_of(args: argparse.Namespace, err: TextIO) -> PerIdentity | Literal[False] | None:
    """`--instances` and its two settings as one value (None: shared), or False after one
    line saying what is wrong with them."""
    from strictcall.services.proxy.instances import (
        DEFAULT_IDLE_S,
        DEFAULT_MAX_INSTANCES,
        PerIdentity,
    )

    if args.instances != "per-identity":
        if args.max_instances is not None or args.instance_idle is not None:
            err.write(
                "strictcall proxy: --max-instances and --instance-idle go with"
                " --instances per-identity\n"
            )
            return False
        return None
    if args.stdio:
        err.write(
            "strictcall proxy: --instances per-identity is for HTTP (a --stdio proxy serves"
            " one identity)\n"
        )
        return False
    most = DEFAULT_MAX_INSTANCES if args.max_instances is None else args.max_instances
    idle = DEFAULT_IDLE_S if args.instance_idle is None else args.instance_idle
    if most < 1:
        err.write("strictcall proxy: --max-instances is a positive number of instances\n")
        return False
    if not (0 < idle < math.inf):
        err.write("strictcall proxy: --instance-idle is a positive number of seconds\n")
        return False
    return PerIdentity(max_instances=most, idle_s=idle)
