"""`strictcall serve`: its flags, and the notes tools served over HTTP (with `--demo`, its notes
and tokens) or as MCP on stdio."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, TextIO, cast

from strictcall.cli.arguments import (
    _db_path,
    _name,
    _port,
    _positive_int,
    _utf8_text,
)
from strictcall.cli.edge import _add_edge_arguments, _edge_flags_given
from strictcall.cli.identity import (
    OAuthChoice,
    add_oauth_arguments,
    oauth_given,
)
from strictcall.cli.policy import _policy_of, _reload_on_hangup, warn_unserved_rules
from strictcall.cli.retention import add_audit_arguments
from strictcall.cli.store import EXIT_FAILED, EXIT_OK, _open_store
from strictcall.server.edge import EdgeLimits
from strictcall.services.demo import NOTES as SEED_NOTES

if TYPE_CHECKING:
    from strictcall.audit.log import AuditRetention
    from strictcall.core.policy import PolicyHolder
from strictcall.storage import Store, StoreUnavailable, shown_db, unavailable_because

DEMO_OWNERS: Final = ("u1", "u2")


def run_serve(
    db: str,
    host: str,
    port: int,
    *,
    demo: bool,
    out: TextIO,
    err: TextIO,
    edge: EdgeLimits | None = None,
    allow_origins: Sequence[str] = (),
    workers: int = 1,
    oauth: OAuthChoice | None = None,
    policy: str | None = None,
    audit_retention: AuditRetention | None = None,
) -> int:
    """Serve the notes tools over HTTP until stopped. Browser origins in `allow_origins` may
    call, and loopback ones when bound to a loopback address; `edge` bounds slow requests,
    connections and calls in flight per identity. With `workers` above 1, from that many
    processes on one port, each with its own store (this one opens it first, to migrate it and
    refuse what cannot serve). `oauth`: the identity provider's tokens too (`--config`, the
    `--oauth-*` flags). `audit_retention`: how much of the audit log is kept (None: all)."""
    from strictcall.server.app import build_app, serve, serve_workers  # the server stack loads here
    from strictcall.server.edge import OriginPolicy, is_loopback_host
    from strictcall.server.listen import ListenError

    origins = OriginPolicy(frozenset(allow_origins), loopback=is_loopback_host(host))
    holder = _policy_of(policy, "strictcall", err)
    if holder is False:
        return EXIT_FAILED
    if workers > 1 and holder is not None and _counted_in_memory(holder):
        err.write(
            f"strictcall: the policy's quotas and rates are counted in memory, by each process:"
            f" with --workers {workers} each worker would admit the whole limit ({workers} times"
            f' it in all). Name a shared state in the policy ([quotas] shared = "redis://HOST:'
            f'6379/0") or serve with one worker.\n'
        )
        return EXIT_FAILED
    store = _open_store(db, err)
    if store is None:
        return EXIT_FAILED
    restore = None
    try:
        if holder is not None and policy is not None:
            _warn_unserved(holder, store, policy, err)
        if demo:
            _prepare_demo(store)

        def ready(bound_host: str, bound_port: int) -> None:
            base = f"http://{bound_host}:{bound_port}"
            out.write(
                f"strictcall listening on {base} (store: {shown_db(db)}; operator page {base}/,"
                f" metrics {base}/metrics); Ctrl-C stops it\n"
            )
            if demo:  # minted once listening: a server that fails to start mints none
                try:
                    _print_demo(out, base, _demo_tokens(store), store)
                except StoreUnavailable as exc:  # it serves on; the operator makes tokens
                    why = unavailable_because(db, exc)
                    err.write(f"strictcall: the demo tokens were not made: {why}\n")
            else:
                out.write(f"callers need a token: make one with {_token_hint(db)}\n")
            out.flush()

        def stopping() -> None:
            out.write("strictcall: stopping (finishing the requests in flight)\n")
            out.flush()

        open_to_operators = is_loopback_host(host)
        try:
            if workers > 1:
                serve_workers(
                    db,
                    host,
                    port,
                    workers,
                    ready,
                    edge=edge,
                    allow_origins=allow_origins,
                    loopback=origins.loopback,
                    open_to_operators=open_to_operators,
                    oauth_config=None if oauth is None else oauth.sources,
                    policy=policy,
                    audit_retention=audit_retention,
                )
            else:
                app = build_app(
                    store,
                    origins=origins,
                    edge=edge,
                    open_to_operators=open_to_operators,
                    oauth=None if oauth is None else oauth.settings,
                    policy=holder,
                    audit_retention=audit_retention,
                )
                if holder is not None and policy is not None:
                    restore = _reload_on_hangup(holder, policy, err)
                serve(app, host, port, ready, edge=edge, on_stopping=stopping)
        except ListenError as exc:
            err.write(f"strictcall: {exc}\n")
            return EXIT_FAILED
    finally:
        if restore is not None:
            restore()
        if holder is not None:
            holder.close()
        store.close()
    out.write("strictcall: stopped\n")
    out.flush()
    return EXIT_OK


def run_serve_mcp_stdio(
    db: str,
    identity: str,
    *,
    err: TextIO,
    policy: str | None = None,
    audit_retention: AuditRetention | None = None,
) -> int:
    """Serve the notes tools as MCP on stdin and stdout, as `identity`, until stdin ends.

    Standard output carries MCP alone; the one line about the store goes to `err`.
    """
    from strictcall.audit.log import KEEP_ALL, AuditLog
    from strictcall.ops.tracing import TracedStore, traced_stdio
    from strictcall.ops.tracing import available as tracing_available
    from strictcall.server.logs import configure_logging
    from strictcall.services.notes import notes_gateway
    from strictcall.storage import Store
    from strictcall.transports.mcp import Serving, serve_stdio  # the MCP SDK loads only here
    from strictcall.transports.mcp.stdio import exit_interrupted

    configure_logging()  # log lines on stderr stamped with their time, as the HTTP server's
    holder = _policy_of(policy, "strictcall", err)
    if holder is False:
        return EXIT_FAILED
    store = _open_store(db, err)
    if store is None:
        return EXIT_FAILED
    interrupted = False
    restore = None
    try:
        if holder is not None and policy is not None:
            _warn_unserved(holder, store, policy, err)
        err.write(f"strictcall: MCP on stdio for {identity} (store: {shown_db(db)})\n")
        err.flush()
        if holder is not None and policy is not None:
            restore = _reload_on_hangup(holder, policy, err)
        # the notes' store work timed for the calls' spans (with the OpenTelemetry API)
        notes = cast(Store, TracedStore(store)) if tracing_available() else store
        with notes_gateway(notes, policy=holder) as gateway:
            # audited in batches written off the event loop, as the HTTP server audits: a
            # commit per call would cost more than the call, and wait on the notes' writes
            kept = audit_retention if audit_retention is not None else KEEP_ALL
            audit = AuditLog(store, retention=kept)
            record, per_call = traced_stdio(gateway, audit.record)
            policy_serving = () if holder is None else (holder.serving,)
            lifespans = (*policy_serving, audit.running)
            serving = Serving(record=record, call_context=per_call, lifespans=lifespans)
            serve_stdio(gateway, identity, serving)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if restore is not None:
            restore()
        if holder is not None:
            holder.close()
        store.close()
    if interrupted:
        exit_interrupted()  # 130, without waiting on threads still in a read or a write
    return EXIT_OK


def _warn_unserved(holder: PolicyHolder, store: Store, policy: str, err: TextIO) -> None:
    """Warn of each rule of the policy that grants none of the notes tools."""
    from strictcall.services.notes import notes_tools

    served = [tool.name for tool in notes_tools(store)]
    warn_unserved_rules(holder, served, policy, "strictcall", err)


def _prepare_demo(store: Store) -> None:
    """Give u1 and u2 the seed's notes, if they have none yet."""
    for owner in DEMO_OWNERS:
        if store.count_notes(owner) == 0:
            for text in SEED_NOTES[owner].values():
                store.add_note(owner, text)


def _demo_tokens(store: Store) -> dict[str, str]:
    """A fresh token for u1 and for u2, their earlier ones revoked: every `serve --demo` shows
    the two tokens that work, and the store never holds more than those two."""
    tokens: dict[str, str] = {}
    for owner in DEMO_OWNERS:
        store.revoke_tokens(identity=owner)
        tokens[owner] = store.create_token(owner)
    return tokens


def _token_hint(db: str) -> str:
    """The command that makes a token for the store at `db`, as it may be printed: a URL's
    password is shown as ***."""
    shown = shown_db(db)
    hint = f"`strictcall tokens create --identity NAME --db {shlex.quote(shown)}`"
    return hint if shown == db else hint + " (with the password where *** stands)"


def _print_demo(out: TextIO, base: str, tokens: dict[str, str], store: Store) -> None:
    for owner, token in tokens.items():
        out.write(f"token for {owner}: {token}\n")
    u1_note = store.list_notes("u1")[0].note_id
    read = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        f'"params":{{"name":"read_note","arguments":{{"note_id":"{u1_note}"}}}}}}'
    )
    for owner in DEMO_OWNERS:
        auth = shlex.quote("Authorization: Bearer " + tokens[owner])
        # u2 reads u1's note: the refusal a newcomer should see once, labelled as intended
        label = owner if owner == "u1" else f"{owner}, refused on purpose, not {owner}'s note"
        out.write(
            f"try ({label}): curl -s {base}/rpc -H {auth}"
            f" -H 'Content-Type: application/json' -d {shlex.quote(read)}\n"
        )


def add_serve_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], db_help: str
) -> None:
    """`serve`'s flags and help, as the command line lists them."""
    serve = commands.add_parser(
        "serve", help="serve the notes tools over HTTP (JSON-RPC 2.0 at /rpc, MCP at /mcp)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
    serve.add_argument(
        "--port", type=_port, default=8765, help="0-65535, default 8765; 0 picks a free one"
    )
    serve.add_argument("--db", type=_db_path, help=db_help)
    serve.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="serve from N processes on one port (default 1)",
    )
    serve.add_argument(
        "--demo",
        action="store_true",
        help="give u1 and u2 demo notes and, once listening, fresh tokens (replacing their"
        " earlier ones), printed with two curl lines to try",
    )
    serve.add_argument(
        "--mcp-stdio",
        action="store_true",
        help="serve MCP on stdin/stdout instead of HTTP, as --identity (for MCP hosts)",
    )
    serve.add_argument(
        "--identity", type=_name, help="with --mcp-stdio: the caller every call runs as"
    )
    serve.add_argument(
        "--policy",
        type=_utf8_text,
        metavar="FILE",
        help="who may list and call which tools, and how often (TOML, or JSON for .json);"
        " read again on SIGHUP",
    )
    _add_edge_arguments(serve)
    add_audit_arguments(serve)
    add_oauth_arguments(serve)


def serve_misuse(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags given to serve, in the user's terms; None when nothing."""
    if args.mcp_stdio and args.identity is None:
        return "--mcp-stdio needs --identity ID: the caller every call runs as"
    if args.mcp_stdio and args.demo:
        return "--demo is for the HTTP server; leave it out with --mcp-stdio"
    if args.mcp_stdio and args.workers != 1:
        return "--workers is for the HTTP server; leave it out with --mcp-stdio"
    given = _edge_flags_given(args) or oauth_given(args)
    if args.mcp_stdio and given is not None:
        return f"{given} is for the HTTP server; leave it out with --mcp-stdio"
    if not args.mcp_stdio and args.identity is not None:
        return (
            "--identity was given without --mcp-stdio; over HTTP each caller's token says who"
            " it is, so leave --identity out (or add --mcp-stdio to serve MCP on stdio)"
        )
    return None


def _counted_in_memory(holder: PolicyHolder) -> bool:
    """Whether the policy has quotas or rule rates and no shared state to count them in."""
    policy = holder.current
    limited = bool(policy.quotas) or any(rule.rate is not None for rule in policy.rules)
    return limited and policy.shared is None
