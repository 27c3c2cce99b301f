"""Text a caller chose (a call id, a tool name, an identity), made safe to print on a
terminal: no control character reaches it (an ESC could clear the screen or move the cursor, a
newline forge an audit line), and no field runs longer than `SHOWN_MAX` characters."""

from __future__ import annotations

import unicodedata
from typing import Final

SHOWN_MAX: Final = 256
"""The most characters of one field printed; the rest is counted, not shown (call ids longer
than this are refused at intake, but a store written before the limit may hold them)."""

_UNSAFE_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def _escape(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if unicodedata.category(char) not in _UNSAFE_CATEGORIES:
        return char
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def shown(value: str | None) -> str:
    """`value` as printed: "-" for none (an empty str stays ""), every control, format or
    separator character (and the backslash) as a backslash escape, cut at `SHOWN_MAX`."""
    if value is None:
        return "-"
    cut = value[:SHOWN_MAX]
    text = cut if cut.isprintable() and "\\" not in cut else "".join(map(_escape, cut))
    if len(value) > SHOWN_MAX:
        text += f"...({len(value) - SHOWN_MAX} more)"
    return text
