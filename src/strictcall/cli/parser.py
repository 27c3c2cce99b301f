"""The `strictcall` command line.

    strictcall demo                                  four example answers, one JSON line each
    strictcall call --identity ID [--call-id ID] RAW handle() one call; RAW "-" reads stdin
    strictcall call --identity ID [--call-id ID] --db PATH|URL RAW   any notes tool, full gateway
    strictcall serve [--host H] [--port P] [--db PATH|URL] [--workers N] [--demo]
    strictcall serve --mcp-stdio --identity ID [--db PATH|URL]
    strictcall proxy (--upstream-cmd CMD | --upstream-url URL [--upstream-header H]...)
                     [--stdio --identity ID | --host H --port N] [--db PATH|URL] [--allow FILE]
                     [--withhold-errors [--pass-errors TOOL]...] [--redact MODE] [--timeout S]
    strictcall federate --config FILE [--stdio --identity ID | --host H --port N] [--db PATH|URL]
                        [--allow FILE]
    strictcall tools diff [--db PATH|URL]            pinned tools changed upstream, and how
    strictcall tools approve NAME --digest D [--db PATH|URL]   serve the change `tools diff` showed
    strictcall tokens create --identity ID [--db PATH|URL]
    strictcall tokens list [--db PATH|URL]
    strictcall tokens revoke (TOKEN_ID | --identity ID) [--db PATH|URL]
    strictcall notes add --owner ID --text TEXT [--db PATH|URL]
    strictcall notes list --owner ID [--db PATH|URL]
    strictcall audit [--limit N] [--db PATH|URL]
    strictcall check OLD NEW [OLD NEW ...] [--contract reply] [--write-tests FILE] [--json]
    strictcall lint PATH... [--format text|json|sarif|github] [--fix] [--explore] [--run]
    strictcall lint --diff BASE [PATH...]
    strictcall audit [--limit N] [--follow] [--identity ID] [--tool NAME] [--since 15m]
                     [--errors] [--json] [--db PATH|URL]
    strictcall tokens create --operator --identity NAME [--db PATH|URL]
    strictcall stats [--since 1h] [--json] [--db PATH|URL]

Output is UTF-8 whatever the locale. `call` exits 0 when the answer's ok is true, 1 when it is
false, 2 for a usage error or unreadable standard input; no input produces a traceback.

The tree of commands is built here, in the order `--help` lists them; a command group whose
flags were moved beside its body adds its own (`strictcall.cli.serve`, `strictcall.cli.proxy`),
and the flags' types are `strictcall.cli.arguments`'.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from typing import BinaryIO, Final, TextIO

from strictcall._starting import loaded
from strictcall.cli.arguments import (
    _NOT_A_STORE,
    _Commands,
    _db_path,
    _limit,
    _name,
    _port,
    _utf8_text,
    _Version,
    store_of,
)
from strictcall.cli.arguments import EXIT_OK as EXIT_OK
from strictcall.cli.arguments import EXIT_REFUSED as EXIT_REFUSED
from strictcall.cli.arguments import EXIT_USAGE as EXIT_USAGE
from strictcall.cli.edge import _add_edge_arguments, _edge_flags_given, _edge_of
from strictcall.cli.identity import add_oauth_flags, oauth_of
from strictcall.cli.proxy import add_proxy_parser, run_proxy_args
from strictcall.cli.retention import add_audit_arguments, audit_retention_of
from strictcall.cli.serve import add_serve_parser, serve_misuse
from strictcall.core.ids import mint_call_id
from strictcall.core.jsontext import MAX_SIZE
from strictcall.core.terminal import json_shown
from strictcall.errors import MissingExtra
from strictcall.services.demo import demo_lines, handle


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
        " (without it: handle() on the in-memory demo notes)",
    )
    call.add_argument("raw", metavar="RAW", help='the call as JSON text, or "-" for stdin')

    add_serve_parser(commands, db_help)
    add_proxy_parser(commands, db_help)

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
    add_audit_arguments(federate)
    add_oauth_flags(
        federate.add_argument_group(
            "identity provider (HTTP; the config's [oauth] table, as for serve --config)"
        )
    )

    pinned = commands.add_parser(
        "tools", help="a federation's pinned tools: diff (what changed), approve NAME"
    ).add_subparsers(dest="action", required=True, metavar="ACTION", action=_Commands)
    diff = pinned.add_parser("diff", help="the pinned tools changed upstream, as a diff each")
    diff.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when a change waits for approval (0 when none), as git diff --exit-code",
    )
    diff.add_argument("--db", type=_db_path, help=db_help)
    approve = pinned.add_parser("approve", help="serve a pinned tool's changed definition")
    approve.add_argument("name", type=_utf8_text, metavar="NAME", help="as `tools diff` shows")
    approve.add_argument(
        "--digest",
        type=_utf8_text,
        required=True,
        metavar="D",
        help="the digest `tools diff` showed for the change reviewed (no other is approved)",
    )
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
        "--explore", action="store_true", help="add the guesses: falsy values nothing shows legal"
    )
    lint.add_argument(
        "--confidence", choices=["high", "medium", "low"], help="old spelling: low is --explore"
    )
    lint.add_argument(
        "--run",
        action="store_true",
        help="run check on each finding's function; keep what it shows",
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
    loaded()  # a Ctrl-C from here on is each command's to answer
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
        misuse = serve_misuse(args)
        if misuse is not None:
            err.write(f"strictcall serve: {misuse}\n")
            return EXIT_USAGE
    if args.command == "serve" and args.mcp_stdio:
        return commands.run_serve_mcp_stdio(
            db,
            args.identity,
            err=err,
            policy=args.policy,
            audit_retention=audit_retention_of(args),
        )
    oauth = None
    if args.command in ("serve", "proxy", "federate") and not (
        args.command in ("proxy", "federate") and args.stdio
    ):
        try:
            oauth = oauth_of(args, FEDERATION_TABLES if args.command == "federate" else frozenset())
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
            audit_retention=audit_retention_of(args),
        )
    if args.command == "tokens" and args.action == "create" and args.operator:
        return commands.run_operator_token(db, args.identity, out=out, err=err)
    if args.command == "stats":
        return commands.run_stats(db, args.since, as_json=args.json, out=out, err=err)
    if args.command == "proxy":
        return run_proxy_args(args, db, oauth, out=out, err=err)
    if args.command == "federate":
        if args.stdio != (args.identity is not None) or (args.stdio and args.port is not None):
            err.write("strictcall federate: --stdio takes --identity ID (and no --port)\n")
            return EXIT_USAGE
        edge_given = _edge_flags_given(args) or _oauth_flag_given(args)
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
            oauth=oauth,
            audit_retention=audit_retention_of(args),
            out=out,
            err=err,
        )
    if args.command == "tools":
        from strictcall.cli import federation

        if args.action == "diff":
            return federation.run_tools_diff(db, out=out, err=err, exit_code=args.exit_code)
        return federation.run_tools_approve(db, args.name, args.digest, out=out, err=err)
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
            explore=args.explore,
            confidence=args.confidence,
            diff=args.diff,
            run=args.run,
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


def _write_lines(out: BinaryIO, lines: list[str]) -> None:
    out.write("".join(line + "\n" for line in lines).encode("utf-8"))
    out.flush()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


FEDERATION_TABLES: Final = frozenset({"federation", "upstreams"})
"""The tables of a federation's config besides [oauth] (its own reader checks them)."""


def _oauth_flag_given(args: argparse.Namespace) -> str | None:
    """The first `--oauth-*` flag given (`federate`'s: its `--config` is the federation's)."""
    for flag, value in (
        ("--oauth-issuer", args.oauth_issuer),
        ("--oauth-resource", args.oauth_resource),
    ):
        if value is not None:
            return flag
    return None
