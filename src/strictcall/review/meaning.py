"""What a comment or docstring says a falsy value means, for `strictcall lint` ("0 = no
limit", "0.0 keeps every match", "set to 0 to disable")."""

from __future__ import annotations

import re
from typing import Final

_ZERO_MEANS: Final = re.compile(
    r"(?<![\w.])(?:0(?:\.0)?|zero)(?![\w.])\s*(?:\)\s*)?"
    r"(?:=|:|means|keeps|disables|turns|for|is|gives|to disable|accepts|allows|returns|selects"
    r"|makes|stands|->|—|-|to\s+[\d-])",
    re.IGNORECASE,
)
_SET_TO_ZERO: Final = re.compile(
    r"\b(?:set|use|pass|give)s?\s+(?:it\s+|this\s+)?(?:to\s+)?(?:0(?:\.0)?|zero)(?![\w.])",
    re.IGNORECASE,
)
_FALSE_MEANS: Final = re.compile(
    r"(?<![\w.])false(?![\w.])\s*(?:=|:|means|disables|turns|keeps|gives|->)", re.IGNORECASE
)


def documented(text: str) -> frozenset[str]:
    """The falsy values a comment or docstring gives a meaning ("0 = no limit", "0.0 keeps
    every match", "set to 0 to disable", "False means ...")."""
    found: set[str] = set()
    if _ZERO_MEANS.search(text) or _SET_TO_ZERO.search(text):
        found.add("0")
    if _FALSE_MEANS.search(text):
        found.add("false")
    return frozenset(found)
