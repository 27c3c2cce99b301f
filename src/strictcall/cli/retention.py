"""The audit log's retention flags (`serve`, `proxy`, `federate`): added to a command's
parser, read back as an `AuditRetention`."""

from __future__ import annotations

import argparse
import re
from typing import Final

from strictcall.audit.log import DEFAULT_RETENTION_S, AuditRetention

KEEP_ALL_WORD: Final = "none"
"""The value of either flag that lifts its bound (every row kept, as far as it goes)."""

_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
_AGE: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd]?)")


def _audit_age(value: str) -> float | None:
    """An argparse type: an age such as 30d, 12h, 90m, 3600s or 3600 (seconds), above zero;
    `none` keeps rows of any age."""
    if value == KEEP_ALL_WORD:
        return None
    match = _AGE.fullmatch(value)
    seconds = 0.0 if match is None else float(match[1]) * _UNITS[match[2] or "s"]
    if not seconds > 0:
        raise argparse.ArgumentTypeError(
            f"an age above zero such as 30d, 12h, 90m or 3600s, or {KEEP_ALL_WORD}"
        )
    return seconds


def _audit_rows(value: str) -> int | None:
    """An argparse type: a whole number of rows of at least 1, or `none` (no cap)."""
    if value == KEEP_ALL_WORD:
        return None
    if not value.isascii() or not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(
            f"a whole number of rows of at least 1, or {KEEP_ALL_WORD}"
        )
    return int(value)


def add_audit_arguments(parser: argparse.ArgumentParser) -> None:
    """The audit log's retention flags, the same for `serve`, `proxy` and `federate`."""
    audit = parser.add_argument_group("the audit log")
    audit.add_argument(
        "--audit-retention",
        type=_audit_age,
        default=DEFAULT_RETENTION_S,
        metavar="AGE",
        help=f"audit rows older than AGE (30d, 12h, 90m, 3600s) are removed while serving;"
        f" {KEEP_ALL_WORD} keeps them (default {DEFAULT_RETENTION_S / 86_400:g}d)",
    )
    audit.add_argument(
        "--audit-max-rows",
        type=_audit_rows,
        default=None,
        metavar="N",
        help=f"keep at most the N newest audit rows (default {KEEP_ALL_WORD}: no cap)",
    )


def audit_retention_of(args: argparse.Namespace) -> AuditRetention:
    """The retention the flags ask for."""
    return AuditRetention(args.audit_retention, args.audit_max_rows)
