"""The allow-list: which tools each identity may see and call, read from a small file.

    {"u1": ["echo", "add"], "*": ["echo"]}          JSON (or the same as TOML:
                                                    u1 = ["echo", "add"] / "*" = ["echo"])

An identity named in the file gets its own list; any other gets the "*" list, or nothing when
there is none. A tool not allowed is answered at route exactly like one that does not exist.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Final

from strictcall.errors import StrictcallError

EVERYONE: Final = "*"


class PolicyError(StrictcallError, ValueError):
    """The allow-list file cannot be read or is not shaped as documented."""


def load_allow_list(path: str) -> Callable[[str], frozenset[str]]:
    """The allow-list in the JSON or TOML file at `path` (TOML when it ends in .toml).

    Raises:
        PolicyError: the file cannot be read, is not JSON/TOML, or is not an object of lists
            of tool names.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read the allow-list {path}: {type(exc).__name__}") from None
    try:
        data: object = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    except ValueError:
        raise PolicyError(f"the allow-list {path} is not valid JSON or TOML") from None
    return allow_list(data)


def allow_list(data: object) -> Callable[[str], frozenset[str]]:
    """The allow-list of an already parsed document.

    Raises:
        PolicyError: `data` is not an object whose values are lists of tool names.
    """
    if not isinstance(data, dict):
        raise PolicyError("the allow-list is an object: identity -> list of tool names")
    lists: dict[str, frozenset[str]] = {}
    for identity, names in data.items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PolicyError(f"the allow-list's entry for {identity!r} is a list of tool names")
        lists[identity] = frozenset(names)
    fallback = lists.get(EVERYONE, frozenset())

    def allowed(identity: str) -> frozenset[str]:
        return lists.get(identity, fallback)

    return allowed
