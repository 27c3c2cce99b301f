"""The operator's commands behind the command line: serve (HTTP or MCP on stdio), tokens,
notes, audit, stats.

Each takes its streams as arguments and returns an exit status; only the command line parses.

Past 600 lines: every command's body is here, one function each (serve, proxy, federate,
tokens, notes, audit, stats, tools, policy); the cut planned is a module per command group
(cli/serve.py, cli/tokens.py, ...), left for a session in which no other change is rewriting
the commands at the same time.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO, TypeVar, cast

from strictcall.cli.identity import OAuthChoice
from strictcall.core.terminal import json_shown, shown
from strictcall.errors import FORBIDDEN_OR_MISSING, ErrorKind, MissingExtra, PolicyFileError
from strictcall.server.edge import EdgeLimits
from strictcall.services.demo import NOTES as SEED_NOTES
from strictcall.storage import (
    TOKEN_ID_LENGTH,
    AuditRecord,
    Store,
    StoreUnavailable,
    TokenInfo,
    hash_token,
    open_store,
    shown_db,
    token_cache_s,
    unavailable_because,
)

if TYPE_CHECKING:
    from strictcall.core.policy import PolicyHolder
    from strictcall.ops.audit_query import AuditQuery
    from strictcall.services.proxy.credentials import ClientCredentials

T = TypeVar("T")

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
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
) -> int:
    """Serve the notes tools over HTTP until stopped. Browser origins in `allow_origins` may
    call, and loopback ones when bound to a loopback address; `edge` bounds slow requests,
    connections and calls in flight per identity. With `workers` above 1, from that many
    processes on one port, each with its own store (this one opens it first, to migrate it and
    refuse what cannot serve). `oauth`: the identity provider's tokens too (`--config`, the
    `--oauth-*` flags)."""
    from strictcall.server.app import build_app, serve, serve_workers  # the server stack loads here
    from strictcall.server.edge import OriginPolicy, is_loopback_host
    from strictcall.server.listen import ListenError

    origins = OriginPolicy(frozenset(allow_origins), loopback=is_loopback_host(host))
    holder = _policy_of(policy, "strictcall", err)
    if holder is False:
        return EXIT_FAILED
    store = _open_store(db, err)
    if store is None:
        return EXIT_FAILED
    restore = None
    try:
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
                )
            else:
                app = build_app(
                    store,
                    origins=origins,
                    edge=edge,
                    open_to_operators=open_to_operators,
                    oauth=None if oauth is None else oauth.settings,
                    policy=holder,
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


def _policy_of(path: str | None, command: str, err: TextIO) -> PolicyHolder | Literal[False] | None:
    """The policy in the file at `path` in force (None without one), or False after one line
    on `err` saying why it cannot be (its line and reason)."""
    if path is None:
        return None
    from strictcall.services.policy_file import load_holder

    try:
        return load_holder(path)
    except PolicyFileError as exc:
        err.write(f"{command}: policy {path}: {exc}\n")
        return False


def _reload_on_hangup(holder: PolicyHolder, path: str, err: TextIO) -> Callable[[], None] | None:
    """Reload the policy on SIGHUP, where this process can be told so (POSIX, main thread)."""
    import signal
    import threading

    if not hasattr(signal, "SIGHUP") or threading.current_thread() is not threading.main_thread():
        return None
    from strictcall.services.policy_file import reload_on_sighup

    return reload_on_sighup(holder, path, err)


def run_policy_check(path: str, *, out: TextIO, err: TextIO) -> int:
    """Check the policy file at `path`: one line saying what it holds, or one line with the
    line number and the reason it is not valid (exit 1)."""
    from strictcall.services.policy_file import read_policy

    try:
        policy = read_policy(path)
    except PolicyFileError as exc:
        err.write(f"{path}: {exc}\n")
        return EXIT_FAILED
    shared = "" if policy.shared is None else ", quotas shared"
    out.write(f"{path}: ok: {len(policy.rules)} rules, {len(policy.quotas)} quotas{shared}\n")
    return EXIT_OK


def run_serve_mcp_stdio(db: str, identity: str, *, err: TextIO, policy: str | None = None) -> int:
    """Serve the notes tools as MCP on stdin and stdout, as `identity`, until stdin ends.

    Standard output carries MCP alone; the one line about the store goes to `err`.
    """
    from strictcall.audit.log import AuditLog
    from strictcall.ops.tracing import TracedStore, traced_stdio
    from strictcall.ops.tracing import available as tracing_available
    from strictcall.server.logs import configure_logging
    from strictcall.services.notes import notes_gateway
    from strictcall.storage import Store
    from strictcall.transports.mcp import serve_stdio  # the MCP SDK loads only here
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
        err.write(f"strictcall: MCP on stdio for {identity} (store: {shown_db(db)})\n")
        err.flush()
        if holder is not None and policy is not None:
            restore = _reload_on_hangup(holder, policy, err)
        # the notes' store work timed for the calls' spans (with the OpenTelemetry API)
        notes = cast(Store, TracedStore(store)) if tracing_available() else store
        with notes_gateway(notes, policy=holder) as gateway:
            # audited in batches written off the event loop, as the HTTP server audits: a
            # commit per call would cost more than the call, and wait on the notes' writes
            audit = AuditLog(store)
            serving = [] if holder is None else [holder.serving]
            lifespans = [*serving, audit.running]
            record, per_call = traced_stdio(gateway, audit.record)
            serve_stdio(
                gateway, identity, record=record, lifespans=lifespans, call_context=per_call
            )
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


# --- proxy: strictcall in front of an MCP server ----------------------------------------------


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


def run_call(db: str, raw: str | bytes, identity: str, call_id: str, *, err: TextIO) -> Answer:
    """One call to any notes tool on the store at `db`, through the full gateway (every check,
    every detail of the catalogue), audited as the server audits it (the same record, made by
    `strictcall.core.record.record_of` from the gateway's outcome); None (and a message) when
    the store cannot be opened."""
    from strictcall.core.record import record_of
    from strictcall.services.notes import notes_gateway

    store = _open_store(db, err)
    if store is None:
        return None
    try:
        with notes_gateway(store) as gateway:
            outcome = gateway.settle_text(raw, identity, call_id)
        try:
            store.record_call(record_of(outcome, identity))
        except StoreUnavailable as exc:
            err.write(f"strictcall: the call was not audited: {unavailable_because(db, exc)}\n")
        return outcome.answer
    finally:
        store.close()


Answer = dict[str, Any] | None


def _open_store(db: str, err: TextIO) -> Store | None:
    """The store at `db` for a server, or None (and a message) when it cannot be opened."""
    try:
        return open_store(db)
    except MissingExtra as exc:
        err.write(f"strictcall: cannot open the store at {shown_db(db)}: {exc}\n")
        return None
    except StoreUnavailable as exc:
        why = unavailable_because(db, exc)
        err.write(f"strictcall: cannot open the store at {shown_db(db)}: {why}\n")
        return None


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


def _with_store(db: str, err: TextIO, action: Callable[[Store], T]) -> T | None:
    """`action` on the store at `db`, closed after; None (and a message) when it is unavailable."""
    store = _open_store(db, err)
    if store is None:
        return None
    try:
        with closing(store):
            return action(store)
    except StoreUnavailable as exc:
        why = unavailable_because(db, exc)
        err.write(f"strictcall: cannot use the store at {shown_db(db)}: {why}\n")
        return None


def run_tokens_create(db: str, identity: str, *, out: TextIO, err: TextIO) -> int:
    """Create an API token; the token is printed alone on the last line."""
    token = _with_store(db, err, lambda store: store.create_token(identity))
    if token is None:
        return EXIT_FAILED
    token_id = hash_token(token)[:TOKEN_ID_LENGTH]
    whose = shown(identity)
    out.write(f"token for {whose} (id {token_id}; shown once, stored only as a hash):\n{token}\n")
    return EXIT_OK


def run_tokens_list(db: str, *, out: TextIO, err: TextIO) -> int:
    """List the stored tokens (id, identity, role, created; never a token), audited."""

    def listed(store: Store) -> list[TokenInfo]:
        tokens = store.list_tokens()
        _audit_command(store, "tokens list", None, None)
        return tokens

    tokens = _with_store(db, err, listed)
    if tokens is None:  # [] is a store without tokens, not a failure
        return EXIT_FAILED
    if not tokens:
        err.write(f"strictcall: no tokens in {shown_db(db)}\n")
        return EXIT_OK
    out.write(f"{'id':{TOKEN_ID_LENGTH}}  {'role':8}  {'created':20}  identity\n")
    for t in tokens:
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t.created_at))
        out.write(f"{t.token_id}  {t.role:8}  {created:20}  {shown(t.identity)}\n")
    return EXIT_OK


def run_tokens_revoke(
    db: str, token_id: str | None, identity: str | None, *, out: TextIO, err: TextIO
) -> int:
    """Revoke the token `token_id`, or every token of `identity`, audited; exit 1 when none
    matched. Servers sharing the store refuse them within the token cache's time."""

    if token_id is not None and token_id.startswith("sc_"):  # the token itself: its id
        token_id = hash_token(token_id)[:TOKEN_ID_LENGTH]

    def revoked(store: Store) -> list[TokenInfo]:
        gone = store.revoke_tokens(token_id, identity)
        whose = identity if identity is not None else (gone[0].identity if gone else None)
        _audit_command(store, "tokens revoke", whose, None if gone else FORBIDDEN_OR_MISSING)
        return gone

    gone = _with_store(db, err, revoked)
    if gone is None:
        return EXIT_FAILED
    if not gone:
        # the id given is not repeated: it may be a token mistyped
        what = (
            "that id (as tokens list shows)"
            if identity is None
            else f"the identity {shown(identity)}"
        )
        err.write(f"strictcall tokens revoke: no token has {what} in {shown_db(db)}\n")
        return EXIT_FAILED
    within = token_cache_s()
    for t in gone:
        out.write(f"revoked {t.token_id} ({t.role} token of {shown(t.identity)})\n")
    them = "it" if len(gone) == 1 else "them"
    out.write(f"servers using {shown_db(db)} refuse {them} within {within:g} s\n")
    return EXIT_OK


def _audit_command(
    store: Store, command: str, identity: str | None, refused: ErrorKind | None
) -> None:
    """An operator's command on tokens, kept in the audit log like a call: `command` as the
    tool, `identity` whose tokens, `refused` when it matched nothing."""
    from strictcall.core.record import command_record

    error = None if refused is None else {"code": refused.code, "stage": refused.stage}
    store.record_call(command_record(command, identity, error))


def run_notes_add(db: str, owner: str, text: str, *, out: TextIO, err: TextIO) -> int:
    """Add a note; its id is printed."""
    note = _with_store(db, err, lambda store: store.add_note(owner, text))
    if note is None:
        return EXIT_FAILED
    out.write(note.note_id + "\n")
    return EXIT_OK


def run_notes_list(db: str, owner: str, *, out: TextIO, err: TextIO) -> int:
    """List an owner's notes, oldest first: id, a tab, the text (as JSON, one line)."""
    notes = _with_store(db, err, lambda store: store.list_notes(owner))
    if notes is None:  # [] is an owner without notes, not a failure
        return EXIT_FAILED
    if not notes:
        err.write(f"strictcall: {owner} has no notes in {shown_db(db)}\n")
    for note in notes:
        out.write(f"{shown(note.note_id)}\t{json_shown(note.text)}\n")  # a model wrote it
    return EXIT_OK


def run_audit(
    db: str,
    limit: int,
    *,
    out: TextIO,
    err: TextIO,
    query: AuditQuery | None = None,
    as_json: bool = False,
) -> int:
    """Print the newest calls that match `query` (all by default) and their counts by
    outcome, stage and code; with `as_json`, the calls alone, one JSON object a line."""
    from strictcall.ops.audit_query import AuditQuery, audit_json, audit_line, find_calls

    asked = query if query is not None else AuditQuery()

    def read(
        store: Store,
    ) -> tuple[list[AuditRecord], list[tuple[str, str | None, str | None, int]]]:
        if asked.filters:
            return find_calls(store, asked, limit)
        return store.recent_calls(limit), store.call_counts()

    found = _with_store(db, err, read)
    if found is None:
        return EXIT_FAILED
    recent, counts = found
    if as_json:
        for r in recent:
            out.write(audit_json(r))
        return EXIT_OK
    out.write(f"recent calls (newest first, at most {limit}):\n")
    for r in recent:
        out.write(audit_line(r))
    out.write("counts by outcome, stage and code:\n")
    for outcome, stage, code, n in counts:
        out.write(f"  {n:>8}  {outcome:5}  {shown(stage):8}  {shown(code)}\n")
    return EXIT_OK


def run_audit_asked(
    db: str,
    limit: int,
    *,
    identity: str | None,
    tool: str | None,
    since: str | None,
    errors: bool,
    as_json: bool,
    follow: bool,
    out: TextIO,
    err: TextIO,
) -> int:
    """`strictcall audit`: the records an operator asked for (issue 29: who, which tool, since
    when, failures only), printed or (`follow`) followed; 2 for a `since` it cannot read."""
    from strictcall.ops.audit_query import AuditQuery
    from strictcall.ops.stats import parse_span

    moment = None
    if since is not None:
        try:
            moment = time.time() - parse_span(since)
        except ValueError as exc:
            err.write(f"strictcall audit: --since: {exc}\n")
            return 2
    query = AuditQuery(identity, tool, moment, errors)
    run = run_audit_follow if follow else run_audit
    return run(db, limit, out=out, err=err, query=query, as_json=as_json)


# --- for operators (issue 16): operator tokens, the audit as it comes, the breakdown ----------

FOLLOW_POLL_S: Final = 0.25
FOLLOW_BATCH: Final = 1000


def run_operator_token(db: str, name: str, *, out: TextIO, err: TextIO) -> int:
    """Create an operator's token (the page, /metrics); printed alone on the last line."""
    token = _with_store(db, err, lambda store: store.create_operator_token(name))
    if token is None:
        return EXIT_FAILED
    out.write(f"operator token for {shown(name)} (shown once, stored only as a hash):\n{token}\n")
    return EXIT_OK


def run_audit_follow(
    db: str,
    limit: int,
    *,
    out: TextIO,
    err: TextIO,
    query: AuditQuery | None = None,
    as_json: bool = False,
) -> int:
    """Print the last `limit` calls, oldest first, then each new one as it is recorded, until
    Ctrl-C (exit 0) or the store fails (exit 1); only those that match `query`, as lines of
    columns or (`as_json`) one JSON object a line."""
    from strictcall.ops.audit_query import AuditQuery, audit_json, audit_line, find_calls

    asked = query if query is not None else AuditQuery()
    write = audit_json if as_json else audit_line
    try:
        store = open_store(db)
    except StoreUnavailable:
        err.write(f"strictcall: the store at {shown_db(db)} is unavailable\n")
        return EXIT_FAILED
    try:
        newest, _ = store.calls_after(None, 0)
        cursor = newest
        if asked.filters:  # the last `limit` that match, however far back
            for r in reversed(find_calls(store, asked, limit)[0]):
                out.write(write(r))
        else:  # the cursor counts records: start `limit` before the newest
            cursor = max(newest - limit, 0)
        while True:
            cursor, records = store.calls_after(cursor, FOLLOW_BATCH)
            for r in records:
                if asked.matches(r):
                    out.write(write(r))
            out.flush()
            if len(records) < FOLLOW_BATCH:
                time.sleep(FOLLOW_POLL_S)
    except KeyboardInterrupt:
        return EXIT_OK
    except StoreUnavailable:
        err.write(f"strictcall: the store at {shown_db(db)} became unavailable\n")
        return EXIT_FAILED
    finally:
        store.close()


def run_stats(db: str, since: str, *, as_json: bool, out: TextIO, err: TextIO) -> int:
    """Print the breakdown the operator page shows, over the last `since` (e.g. 1h)."""
    import json

    from strictcall.ops.audit_query import audit_line
    from strictcall.ops.stats import breakdown, parse_span

    try:
        span = parse_span(since)
    except ValueError as exc:
        err.write(f"strictcall stats: --since {since!r}: {exc}\n")
        return 2
    stats = _with_store(db, err, lambda store: breakdown(store, span))
    if stats is None or not stats.store_ok:
        if stats is not None:
            err.write(f"strictcall: the store at {shown_db(db)} is unavailable\n")
        return EXIT_FAILED
    if as_json:
        out.write(json.dumps(stats.as_json(), ensure_ascii=True) + "\n")  # no raw control text
        return EXIT_OK
    rate = f"{100 * stats.failed / stats.calls:.1f} %" if stats.calls else "-"
    out.write(f"calls in the last {since}: {stats.calls}, failed {stats.failed} ({rate})\n")
    out.write("failures by stage and code:\n")
    for stage, code, n in stats.by_stage_code:
        out.write(f"  {n:>8}  {shown(stage):8}  {shown(code)}\n")
    out.write("calls by tool (calls, failed):\n")
    for tool, n, failed in stats.by_tool:
        out.write(f"  {n:>8}  {failed:>8}  {shown(tool)}\n")
    out.write("top failing (tool, code, reason, pointer):\n")
    for row in stats.top_failures:
        out.write(
            f"  {row.calls:>8}  {shown(row.tool):12}  {shown(row.code):22}"
            f"  {shown(row.reason):18}  {shown(row.pointer)}\n"
        )
    out.write("most recent refusals (newest first):\n")
    for r in stats.recent_refusals:
        out.write(audit_line(r))
    return EXIT_OK
