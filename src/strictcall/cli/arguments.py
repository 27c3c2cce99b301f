"""The command line's argparse parts every command group uses: the types its flags are read
with (each refusing a bad value with one line) and the subcommand and --version actions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, Final

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


def gateway_files(db: str, *paths: str | None) -> tuple[str, ...]:
    """The gateway's own files a sandboxed upstream must never read: the store (a file, not a
    URL) and the config, policy and allow-list files given."""
    files = [] if "://" in db else [db]
    return (*files, *(path for path in paths if path is not None))
