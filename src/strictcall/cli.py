"""The `strictcall` command line.

    strictcall demo                                  seed 002's demo, byte for byte
    strictcall call --identity ID [--call-id ID] RAW handle() one call; RAW "-" reads stdin

Output is UTF-8 whatever the locale. `call` exits 0 when the answer's ok is true, 1 when it is
false, 2 for a usage error or unreadable standard input; no input produces a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import BinaryIO, TextIO

from strictcall.jsontext import MAX_SIZE
from strictcall.seed import demo_lines, handle

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def _utf8_text(value: str) -> str:
    """An argparse type: text that can be written back as UTF-8 (no undecodable bytes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("not valid UTF-8") from None
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="strictcall", description="A strict tool-call boundary for LLM agents."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("demo", help="print seed 002's demo, byte for byte")
    call = commands.add_parser("call", help="check one read_note call and print the answer")
    call.add_argument("--identity", required=True, type=_utf8_text, help="the caller")
    call.add_argument("--call-id", default="call-1", type=_utf8_text, help="echoed in the answer")
    call.add_argument("raw", metavar="RAW", help='the call as JSON text, or "-" for stdin')
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> int:
    """Run the command line; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed its usage message
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    # Started with a standard stream closed, Python sets it to None: read it as empty, and
    # answer with the exit status alone when there is nowhere to write.
    out = stdout if stdout is not None else _buffer_of(sys.stdout)
    if out is None:
        return EXIT_REFUSED
    try:
        if args.command == "demo":
            _write_lines(out, demo_lines())
            return EXIT_OK
        return _call(args, stdin if stdin is not None else _buffer_of(sys.stdin), out)
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
    answer = handle(raw, args.identity, args.call_id)
    _write_lines(out, [json.dumps(answer, ensure_ascii=False)])
    return EXIT_OK if answer["ok"] is True else EXIT_REFUSED


def _write_lines(out: BinaryIO, lines: list[str]) -> None:
    out.write("".join(line + "\n" for line in lines).encode("utf-8"))
    out.flush()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
