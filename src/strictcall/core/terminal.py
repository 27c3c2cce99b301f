"""Text a caller chose (a call id, a tool name, an identity), made safe to print on a
terminal: no control character reaches it (an ESC could clear the screen or move the cursor, a
newline forge an audit line), and no field runs longer than `SHOWN_MAX` characters."""

from __future__ import annotations

import json
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


def json_shown(value: object) -> str:
    """`value` as one line of JSON that keeps non-ASCII text readable but holds no character a
    terminal acts on: those JSON leaves raw (C1 controls, bidi and other format characters,
    line and paragraph separators) are written as \\u escapes, so it reads back the same."""
    text = json.dumps(value, ensure_ascii=False)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _json_escape(char) for char in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def one_line(text: str) -> str:
    """`text` (an upstream or a library may have chosen some of it) folded onto one line and
    `shown`: no control character reaches a terminal."""
    return shown(" ".join(text.split()))


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and its noun as a reader says them: "1 tool", "0 tools", "2 tools" (`plural`
    for a noun not made plural by an s)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
