"""The `strictcall` command line.

    strictcall demo                                  four example answers, one JSON line each
    strictcall call --identity ID [--call-id ID] RAW handle() one call; RAW "-" reads stdin
    strictcall call --identity ID [--call-id ID] --db PATH|URL RAW   any notes tool, full gateway
    strictcall serve [--host H] [--port P] [--db PATH|URL] [--workers N] [--demo]
    strictcall serve --mcp-stdio --identity ID [--db PATH|URL]
    strictcall proxy (--upstream-cmd CMD | --upstream-url URL [--upstream-header H]...)
                     [--stdio --identity ID | --host H --port N] [--db PATH|URL] [--allow FILE]
                     [--pass-errors TOOL]... [--timeout S]
    strictcall federate --config FILE [--stdio --identity ID | --host H --port N] [--db PATH|URL]
                        [--allow FILE]
    strictcall tools diff [--db PATH|URL]            pinned tools changed upstream, and how
    strictcall tools approve NAME [--db PATH|URL]    serve a pinned tool's changed definition
    strictcall tokens create --identity ID [--db PATH|URL]
    strictcall tokens list [--db PATH|URL]
    strictcall tokens revoke (TOKEN_ID | --identity ID) [--db PATH|URL]
    strictcall notes add --owner ID --text TEXT [--db PATH|URL]
    strictcall notes list --owner ID [--db PATH|URL]
    strictcall audit [--limit N] [--db PATH|URL]
    strictcall check OLD NEW [OLD NEW ...] [--contract reply] [--write-tests FILE] [--json]
    strictcall lint PATH... [--format text|json|sarif|github] [--fix] [--confidence LEVEL]
    strictcall lint --diff BASE [PATH...]
    strictcall audit [--limit N] [--follow] [--identity ID] [--tool NAME] [--since 15m]
                     [--errors] [--json] [--db PATH|URL]
    strictcall tokens create --operator --identity NAME [--db PATH|URL]
    strictcall stats [--since 1h] [--json] [--db PATH|URL]

Output is UTF-8 whatever the locale. `call` exits 0 when the answer's ok is true, 1 when it is
false, 2 for a usage error or unreadable standard input; no input produces a traceback.

Past 600 lines: the argparse tree of every command and its help texts is here; the cut planned
is a module per command group beside its commands (see `strictcall.cli.commands`).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO, Final, TextIO

from strictcall.cli.identity import (
    add_oauth_arguments,
    add_upstream_oauth_arguments,
    oauth_given,
    oauth_of,
    upstream_credentials_of,
)
from strictcall.core.ids import mint_call_id
from strictcall.core.jsontext import MAX_SIZE
from strictcall.core.terminal import json_shown
from strictcall.errors import MissingExtra
from strictcall.server.edge import (
    DEFAULT_BODY_GRACE_S,
    DEFAULT_BODY_MIN_RATE,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_IN_FLIGHT,
    EdgeLimits,
)
from strictcall.services.demo import demo_lines, handle

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
MAX_PORT = 65535


def _utf8_text(value: str) -> str:
    """An argparse type: text that can be written back as UTF-8 (no undecodable bytes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("not valid UTF-8") from None
    return value


def _positive_float(value: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not (0 < number < float("inf")):
        raise argparse.ArgumentTypeError(f"must be above 0: {value!r}")
    return number


def _positive_int(value: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value!r}")
    return number


def _name(value: str) -> str:
    """An argparse type: an identity or owner, which names someone only when not empty."""
    if not _utf8_text(value):
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def _db_path(value: str) -> str:
    """An argparse type: the store's file or URL; an empty one names no store."""
    if not _utf8_text(value):
        raise argparse.ArgumentTypeError(
            "must not be empty (leave --db out for $STRICTCALL_DB, else ./strictcall.sqlite3)"
        )
    db = store_of(value)
    if db is None:
        raise argparse.ArgumentTypeError(_NOT_A_STORE)
    return db


_NOT_A_STORE: Final = (
    "names no store strictcall knows: give a SQLite file path, sqlite:///PATH"
    " (SQLAlchemy's form) or a postgresql:// URL"
)


def store_of(value: str) -> str | None:
    """What a --db value names: a postgresql:// URL or a SQLite path as given; SQLAlchemy's
    `sqlite:///relative/path` and `sqlite:////absolute/path` as that path; None for any other
    URL (another scheme, or a sqlite: URL naming no file)."""
    if value.startswith("sqlite:"):
        path = value.removeprefix("sqlite:///")
        if path == value or path in ("", ":memory:") or "?" in path:
            return None
        return path
    scheme, colon_slashes, _ = value.partition("://")
    if colon_slashes and scheme.isidentifier() and scheme not in ("postgresql", "postgres"):
        return None
    return value


def _port(value: str) -> int:
    """An argparse type: a TCP port, 0-65535 (0: the system picks a free one)."""
    try:
        port = int(value, 10)
    except ValueError:
        port = -1
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a port: give 0-{MAX_PORT} (0 picks a free one)"
        )
    return port


def _limit(value: str) -> int:
    """An argparse type: a count of rows, 0 or more."""
    try:
        limit = int(value, 10)
    except ValueError:
        limit = -1
    if limit < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a count: give 0 or more")
    return limit


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommands whose help page starts with what their line in the list says, and that
    remember their parser, so that a misspelt flag is answered with that command's usage."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if "help" in kwargs:
            kwargs.setdefault("description", kwargs["help"])
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        parser.set_defaults(command_parser=parser)
        return parser


class _Version(argparse.Action):
    """--version: the installed package's version, read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from strictcall import __version__

        sys.stdout.write(f"strictcall {__version__}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="strictcall",
        description="A strict tool-call boundary for LLM agents: every tool call is checked in"
        " named stages (parse, route, shape, resource, execute, output) and answered with the"
        " value or a structured error that says where it failed.",
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", action=_Commands
    )
    commands.add_parser(
        "demo",
        help="print four example answers of the read_note tool, one JSON line each: a valid call,"
        " text that is not JSON, an argument the tool does not take, another user's note",
    )
    db_help = (
        "a SQLite file path or a postgresql:// URL"
        " (default: $STRICTCALL_DB, else ./strictcall.sqlite3)"
    )
    call = commands.add_parser(
        "call",
        help="answer one tool call given as JSON text: the example read_note tool on two in-memory"
        " notes (u1 owns n1, u2 owns n2), or with --db any notes tool on that store",
    )
    call.add_argument("--identity", required=True, type=_name, help="who makes the call (e.g. u1)")
    call.add_argument(
        "--call-id",
        type=_utf8_text,
        help='echoed in the answer (default "call-1"; with --db a fresh one, since writes are'
        " idempotent per call id)",
    )
    call.add_argument(
        "--db",
        type=_db_path,
        help="run the call on this notes store through the full gateway, with every detail"
        " (without it: the seed's handle() on its in-memory demo notes)",
    )
    call.add_argument("raw", metavar="RAW", help='the call as JSON text, or "-" for stdin')

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
    add_oauth_arguments(serve)

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
        help="pass this tool's error text to the caller as upstream_text (repeatable)",
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
    _add_edge_arguments(proxy)
    add_oauth_arguments(proxy)

    federate = commands.add_parser(
        "federate", help="serve many MCP servers' tools through one strictcall (stdio or HTTP)"
    )
    federate.add_argument(
        "--config", required=True, type=_utf8_text, metavar="FILE", help="the upstreams (TOML)"
    )
    federate.add_argument(
        "--stdio", action="store_true", help="serve MCP on stdin/stdout as --identity"
    )
    federate.add_argument(
        "--identity", type=_utf8_text, help="with --stdio: the caller every call runs as"
    )
    federate.add_argument("--host", default="127.0.0.1", help="HTTP: default 127.0.0.1")
    federate.add_argument(
        "--port", type=_port, help="HTTP: 0-65535, default 8765; 0 picks a free one"
    )
    federate.add_argument(
        "--db", type=_db_path, help=db_help + "; tokens, the audit log and the tool pins"
    )
    federate_allowing = federate.add_mutually_exclusive_group()
    federate_allowing.add_argument(
        "--allow", type=_utf8_text, metavar="FILE", help="allow-list: identity -> served names"
    )
    federate_allowing.add_argument(
        "--policy",
        type=_utf8_text,
        metavar="FILE",
        help="a policy file, as for serve, by served names (read again on SIGHUP)",
    )
    _add_edge_arguments(federate)

    pinned = commands.add_parser(
        "tools", help="a federation's pinned tools: diff (what changed), approve NAME"
    ).add_subparsers(dest="action", required=True, metavar="ACTION", action=_Commands)
    diff = pinned.add_parser("diff", help="the pinned tools changed upstream, as a diff each")
    diff.add_argument("--db", type=_db_path, help=db_help)
    approve = pinned.add_parser("approve", help="serve a pinned tool's changed definition")
    approve.add_argument("name", type=_utf8_text, metavar="NAME", help="as `tools diff` shows")
    approve.add_argument("--db", type=_db_path, help=db_help)

    policy = commands.add_parser(
        "policy", help="the policy file: check it before serving or reloading it"
    ).add_subparsers(dest="action", required=True, metavar="ACTION", action=_Commands)
    policy_check = policy.add_parser(
        "check", help="check a policy file: ok, or one line with the line number and reason"
    )
    policy_check.add_argument("file", type=_utf8_text, metavar="FILE")

    tokens = commands.add_parser(
        "tokens", help="the API tokens callers send: create, list, revoke"
    ).add_subparsers(dest="action", required=True, metavar="ACTION", action=_Commands)
    create = tokens.add_parser("create", help="create a token; printed alone on the last line")
    create.add_argument(
        "--identity",
        required=True,
        type=_name,
        help="whose token: every call made with it runs as this identity",
    )
    create.add_argument("--db", type=_db_path, help=db_help)
    listed = tokens.add_parser(
        "list", help="list the stored tokens: id, identity, role, created (never the token)"
    )
    listed.add_argument("--db", type=_db_path, help=db_help)
    revoke = tokens.add_parser(
        "revoke",
        help="revoke a token by its id (from `tokens list`), or every token of --identity; servers"
        " refuse it within the token cache's time ($STRICTCALL_TOKEN_CACHE_S, default 5 s)",
    )
    which = revoke.add_mutually_exclusive_group(required=True)
    which.add_argument("token_id", nargs="?", metavar="TOKEN_ID", help="as `tokens list` shows")
    which.add_argument("--identity", type=_name, help="revoke every token of this identity")
    revoke.add_argument("--db", type=_db_path, help=db_help)

    notes = commands.add_parser(
        "notes", help="add and list notes, as the operator (no token needed)"
    ).add_subparsers(dest="action", required=True, metavar="ACTION", action=_Commands)
    add = notes.add_parser("add", help="add a note; its id is printed")
    add.add_argument("--owner", required=True, type=_name, help="whose note (e.g. u1)")
    add.add_argument("--text", required=True, type=_utf8_text, help="the note's text")
    add.add_argument("--db", type=_db_path, help=db_help)
    listing = notes.add_parser("list", help="list an owner's notes, oldest first")
    listing.add_argument("--owner", required=True, type=_name, help="whose notes (e.g. u1)")
    listing.add_argument("--db", type=_db_path, help=db_help)

    audit = commands.add_parser("audit", help="recent calls and counts by stage and code")
    audit.add_argument(
        "--limit", type=_limit, default=20, help="how many recent calls, 0 or more (default 20)"
    )
    audit.add_argument("--db", type=_db_path, help=db_help)

    # Review agent code by counterexample (strictcall.review): check and lint.
    check = commands.add_parser("check", help="search for inputs on which two functions differ")
    check.add_argument(
        "specs", nargs="+", metavar="OLD NEW", help="module:function or path.py:function"
    )
    check.add_argument("--contract", choices=["reply"], help="check NEW against a contract")
    check.add_argument("--write-tests", metavar="FILE", help="write the counterexamples as pytest")
    check.add_argument("--json", action="store_true", help="print the counterexamples as JSON")
    check.add_argument("--max-examples", type=int, default=2000, help="inputs to generate")
    check.add_argument("--timeout", type=float, default=1.0, help="seconds allowed per call")
    lint = commands.add_parser("lint", help="find truthiness used where presence may be meant")
    lint.add_argument("paths", nargs="*", metavar="PATH", help="Python files or directories")
    lint.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text")
    lint.add_argument("--fix", action="store_true", help="apply the fixes that are certain")
    lint.add_argument(
        "--confidence", choices=["high", "medium", "low"], default="medium", help="least shown"
    )
    lint.add_argument(
        "--diff", metavar="BASE", help="only presence tests a change made truth tests"
    )
    # for operators (issue 16): an operator's token, the audit as it comes, the breakdown
    create.add_argument(
        "--operator",
        action="store_true",
        help="an operator's token (the page, /metrics) for --identity NAME; it calls no tool",
    )
    audit.add_argument(
        "--follow", action="store_true", help="then print new calls as they come (Ctrl-C stops)"
    )
    # issue 29: the operator's questions (who, which tool, since when, refusals only)
    audit.add_argument("--identity", type=_name, help="only this caller's calls")
    audit.add_argument("--tool", type=_name, help="only calls naming this tool")
    audit.add_argument("--since", help="only the last 90s, 15m, 1h, 7d, ...")
    audit.add_argument("--errors", action="store_true", help="only failed calls")
    audit.add_argument("--json", action="store_true", help="one JSON object a line, calls only")
    stats = commands.add_parser("stats", help="calls and failures by stage, code and tool")
    stats.add_argument("--since", default="1h", help="the window: 90s, 15m, 1h, 7d (default 1h)")
    stats.add_argument("--json", action="store_true", help="one JSON document")
    stats.add_argument("--db", type=_db_path, help=db_help)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> int:
    """Run the command line; returns the exit status."""
    try:
        args, unknown = build_parser().parse_known_args(argv)
        if unknown:  # the command's own usage, not the top level's
            args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse has printed its usage message
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    # Started with a standard stream closed, Python sets it to None: read it as empty, and
    # answer with the exit status alone when there is nowhere to write.
    out = stdout if stdout is not None else _buffer_of(sys.stdout)
    if out is None and (
        (args.command == "serve" and not args.mcp_stdio)
        or (args.command in ("proxy", "federate") and not args.stdio)
    ):
        # A server started with stdout closed still serves (its log setup needs a stream too).
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        out = _buffer_of(sys.stdout)
    if out is None:
        return EXIT_REFUSED
    if args.command in ("check", "lint"):
        text = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        try:
            return _review(args, text)
        finally:
            text.detach()  # the caller's stream stays open
    try:
        if args.command == "demo":
            _write_lines(out, demo_lines())
            return EXIT_OK
        if args.command == "call":
            return _call(args, stdin if stdin is not None else _buffer_of(sys.stdin), out)
        if args.command == "policy":
            from strictcall.cli import commands

            text = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
            try:
                return commands.run_policy_check(args.file, out=text, err=sys.stderr)
            finally:
                text.detach()
        return _operate(args, io.TextIOWrapper(out, encoding="utf-8", write_through=True))
    except MissingExtra as exc:  # one line naming the extra, never an ImportError traceback
        print(f"strictcall {args.command}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except (BrokenPipeError, ConnectionResetError):
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130


def _buffer_of(stream: TextIO | None) -> BinaryIO | None:
    return None if stream is None else stream.buffer


def _call(args: argparse.Namespace, stdin: BinaryIO | None, out: BinaryIO) -> int:
    raw: str | bytes = args.raw
    if raw == "-":
        try:
            # one byte more than the limit is enough to refuse it
            raw = b"" if stdin is None else stdin.read(MAX_SIZE + 1)
        except OSError as exc:
            print(f"strictcall call: cannot read standard input: {exc.strerror}", file=sys.stderr)
            return EXIT_USAGE
    if args.db is None:
        answer = handle(raw, args.identity, "call-1" if args.call_id is None else args.call_id)
    else:
        from strictcall.cli import commands

        call_id = mint_call_id("cli") if args.call_id is None else args.call_id
        done = commands.run_call(args.db, raw, args.identity, call_id, err=sys.stderr)
        if done is None:
            return EXIT_REFUSED
        answer = done
    # a result holds what a model wrote (a note's text): JSON, no character a terminal acts on
    _write_lines(out, [json_shown(answer)])
    return EXIT_OK if answer["ok"] is True else EXIT_REFUSED


def _operate(args: argparse.Namespace, out: TextIO) -> int:
    from strictcall.cli import commands

    err = sys.stderr
    db = args.db if args.db is not None else _db_from_environment(err)
    if db is None:
        return EXIT_USAGE
    if args.command == "serve":
        misuse = _serve_misuse(args)
        if misuse is not None:
            err.write(f"strictcall serve: {misuse}\n")
            return EXIT_USAGE
    if args.command == "serve" and args.mcp_stdio:
        return commands.run_serve_mcp_stdio(db, args.identity, err=err, policy=args.policy)
    oauth = None
    if args.command in ("serve", "proxy") and not (args.command == "proxy" and args.stdio):
        try:
            oauth = oauth_of(args)
        except ValueError as exc:
            err.write(f"strictcall {args.command}: {exc}\n")
            return EXIT_USAGE
    if args.command == "serve":
        edge = _edge_of(args)
        return commands.run_serve(
            db,
            args.host,
            args.port,
            demo=args.demo,
            out=out,
            err=err,
            edge=edge,
            allow_origins=args.allow_origin,
            workers=args.workers,
            oauth=oauth,
            policy=args.policy,
        )
    if args.command == "tokens" and args.action == "create" and args.operator:
        return commands.run_operator_token(db, args.identity, out=out, err=err)
    if args.command == "stats":
        return commands.run_stats(db, args.since, as_json=args.json, out=out, err=err)
    if args.command == "proxy":
        if args.stdio != (args.identity is not None) or (args.stdio and args.port is not None):
            err.write("strictcall proxy: --stdio takes --identity ID (and no --port)\n")
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
        edge_given = _edge_flags_given(args) or oauth_given(args)
        if args.stdio and edge_given is not None:
            err.write(f"strictcall proxy: {edge_given} is for HTTP; leave it out with --stdio\n")
            return EXIT_USAGE
        return commands.run_proxy(
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
            timeout=args.timeout,
            max_result_bytes=args.max_result_bytes,
            edge=_edge_of(args),
            allow_origins=args.allow_origin,
            oauth=oauth,
            out=out,
            err=err,
        )
    if args.command == "federate":
        if args.stdio != (args.identity is not None) or (args.stdio and args.port is not None):
            err.write("strictcall federate: --stdio takes --identity ID (and no --port)\n")
            return EXIT_USAGE
        edge_given = _edge_flags_given(args)
        if args.stdio and edge_given is not None:
            err.write(f"strictcall federate: {edge_given} is for HTTP; leave it out with --stdio\n")
            return EXIT_USAGE
        from strictcall.cli import federation

        return federation.run_federate(
            args.config,
            db=db,
            identity=args.identity,
            host=args.host,
            port=args.port,
            allow=args.allow,
            policy=args.policy,
            edge=_edge_of(args),
            allow_origins=args.allow_origin,
            out=out,
            err=err,
        )
    if args.command == "tools":
        from strictcall.cli import federation

        if args.action == "diff":
            return federation.run_tools_diff(db, out=out, err=err)
        return federation.run_tools_approve(db, args.name, out=out, err=err)
    if args.command == "tokens" and args.action == "list":
        return commands.run_tokens_list(db, out=out, err=err)
    if args.command == "tokens" and args.action == "revoke":
        return commands.run_tokens_revoke(db, args.token_id, args.identity, out=out, err=err)
    if args.command == "tokens":
        return commands.run_tokens_create(db, args.identity, out=out, err=err)
    if args.command == "notes" and args.action == "add":
        return commands.run_notes_add(db, args.owner, args.text, out=out, err=err)
    if args.command == "notes":
        return commands.run_notes_list(db, args.owner, out=out, err=err)
    return commands.run_audit_asked(  # audit
        db,
        args.limit,
        identity=args.identity,
        tool=args.tool,
        since=args.since,
        errors=args.errors,
        as_json=args.json,
        follow=args.follow,
        out=out,
        err=err,
    )


def _review(args: argparse.Namespace, out: TextIO) -> int:
    from strictcall.review import commands

    try:
        if args.command == "check":
            return commands.run_check(
                args.specs,
                contract=args.contract,
                write_tests=args.write_tests,
                as_json=args.json,
                max_examples=args.max_examples,
                timeout=args.timeout,
                out=out,
                err=sys.stderr,
            )
        return commands.run_lint(
            args.paths,
            output=args.format,
            fix=args.fix,
            confidence=args.confidence,
            diff=args.diff,
            out=out,
            err=sys.stderr,
        )
    except (BrokenPipeError, ConnectionResetError):
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130


def _db_from_environment(err: TextIO) -> str | None:
    """$STRICTCALL_DB, else the default file; None (and a message) when it is set but empty."""
    from strictcall.storage import DEFAULT_DB_PATH, default_db

    db = default_db()
    if db is None:
        err.write(
            "strictcall: STRICTCALL_DB is set but empty; give it a file path,"
            f" or unset it for ./{DEFAULT_DB_PATH}\n"
        )
        return None
    named = store_of(db)
    if named is None:
        err.write(f"strictcall: STRICTCALL_DB {_NOT_A_STORE}\n")
    return named


def _add_edge_arguments(parser: argparse.ArgumentParser) -> None:
    """The HTTP edge's flags, the same for `serve` and `proxy`."""
    edge = parser.add_argument_group("the edge (HTTP)")
    edge.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin that may call, e.g. https://app.example (repeatable; loopback "
        "origins are allowed when bound to a loopback address)",
    )
    edge.add_argument(
        "--header-timeout",
        type=_positive_float,
        default=DEFAULT_HEADER_TIMEOUT_S,
        metavar="S",
        help=f"seconds for a request's headers (default {DEFAULT_HEADER_TIMEOUT_S:g})",
    )
    edge.add_argument(
        "--body-grace",
        type=_positive_float,
        default=DEFAULT_BODY_GRACE_S,
        metavar="S",
        help=f"seconds a body may take before the minimum rate applies "
        f"(default {DEFAULT_BODY_GRACE_S:g})",
    )
    edge.add_argument(
        "--body-min-rate",
        type=_positive_int,
        default=DEFAULT_BODY_MIN_RATE,
        metavar="BYTES",
        help=f"bytes a second a body must keep up after its grace "
        f"(default {DEFAULT_BODY_MIN_RATE})",
    )
    edge.add_argument(
        "--max-connections",
        type=_positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"connections open at once (default {DEFAULT_MAX_CONNECTIONS})",
    )
    edge.add_argument(
        "--max-in-flight",
        type=_positive_int,
        default=DEFAULT_MAX_IN_FLIGHT,
        metavar="N",
        help=f"one identity's calls answered at once; more are refused busy "
        f"(default {DEFAULT_MAX_IN_FLIGHT})",
    )


def _edge_of(args: argparse.Namespace) -> EdgeLimits:
    """The edge limits the flags ask for."""
    return EdgeLimits(
        header_timeout_s=args.header_timeout,
        body_grace_s=args.body_grace,
        body_min_rate=args.body_min_rate,
        max_connections=args.max_connections,
        max_in_flight=args.max_in_flight,
    )


def _edge_flags_given(args: argparse.Namespace) -> str | None:
    """The first HTTP edge flag given a value other than its default, or None."""
    if args.allow_origin:
        return "--allow-origin"
    asked, defaults = _edge_of(args), EdgeLimits()
    for flag, field in (
        ("--header-timeout", "header_timeout_s"),
        ("--body-grace", "body_grace_s"),
        ("--body-min-rate", "body_min_rate"),
        ("--max-connections", "max_connections"),
        ("--max-in-flight", "max_in_flight"),
    ):
        if getattr(asked, field) != getattr(defaults, field):
            return flag
    return None


def _serve_misuse(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags given to serve, in the user's terms; None when nothing."""
    if args.mcp_stdio and args.identity is None:
        return "--mcp-stdio needs --identity ID: the caller every call runs as"
    if args.mcp_stdio and args.demo:
        return "--demo is for the HTTP server; leave it out with --mcp-stdio"
    if args.mcp_stdio and args.workers != 1:
        return "--workers is for the HTTP server; leave it out with --mcp-stdio"
    given = oauth_given(args)
    if args.mcp_stdio and given is not None:
        return f"{given} is for the HTTP server; leave it out with --mcp-stdio"
    if not args.mcp_stdio and args.identity is not None:
        return (
            "--identity was given without --mcp-stdio; over HTTP each caller's token says who"
            " it is, so leave --identity out (or add --mcp-stdio to serve MCP on stdio)"
        )
    return None


def _write_lines(out: BinaryIO, lines: list[str]) -> None:
    out.write("".join(line + "\n" for line in lines).encode("utf-8"))
    out.flush()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
