"""The policy file read from its text (TOML, or JSON of the same shape), strictly: an unknown
key, a wrong type, a rate of 0, a name given twice are each refused with the line they are on
and the reason (`PolicyFileError`), never read as "no limit" or "everyone".

    [quotas]                              # optional: quotas shared by several servers
    shared = "redis://127.0.0.1:6379/0"

    [[rule]]                              # grants tools; the first rule that matches decides
    name = "support"
    who = ["group:support", "alice"]      # names, "group:G", "scope:S", or "*"
    tools = ["read_note", "github__*"]    # names, prefixes ending in "*", or "*"
    timeout = 5.0                         # seconds, tighter than the tool's own
    max_arguments_bytes = 4096
    max_result_bytes = 65536
    rate = "60/minute"                    # per (identity, tool); burst defaults to the count
    burst = 10
    on_shared_down = "open"               # or "closed"
    server_requests = ["elicitation"]     # what the tools' servers may ask the caller during a
                                          # call: "sampling", "elicitation", "roots" (default all)

    [[quota]]                             # limits how often, across the tools it names
    name = "per-caller"
    per = "identity"                      # or "global"
    rate = "600/minute"
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
import tomllib
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from strictcall.core.policy.model import (
    CLAIM_PREFIXES,
    DEFAULT_DENY,
    EVERYONE,
    SERVER_REQUESTS,
    Policy,
    Quota,
    Rate,
    Rule,
    ToolLimits,
)
from strictcall.errors import PolicyFileError

PERIODS: Final[Mapping[str, float]] = {
    "second": 1.0,
    "minute": 60.0,
    "hour": 3600.0,
    "day": 86400.0,
}
_JSON_OBJECT: Final[Callable[..., tuple[Any, int]]] = getattr(json.decoder, "JSONObject")  # noqa: B009
_PY_SCANNER: Final[Callable[[json.JSONDecoder], object]] = getattr(json.scanner, "py_make_scanner")  # noqa: B009
_RATE: Final = re.compile(r"([0-9]{1,9})/(second|minute|hour|day)")
_TOP: Final = frozenset({"rule", "quota", "quotas"})
_RULE_KEYS: Final = frozenset(
    {
        "name",
        "who",
        "tools",
        "timeout",
        "max_arguments_bytes",
        "max_result_bytes",
        "rate",
        "burst",
        "on_shared_down",
        "server_requests",
    }
)
_QUOTA_KEYS: Final = frozenset({"name", "per", "who", "tools", "rate", "burst", "on_shared_down"})
_SHARED_KEYS: Final = frozenset({"shared", "key_prefix"})
_SCHEMES: Final = ("redis://", "rediss://", "unix://")

Locate = Callable[[tuple[str | int, ...]], int]
"""The line of a path in the document (the section, its index, a key), 0 when unknown."""


def parse_policy(text: str, *, format: Literal["toml", "json"] = "toml") -> Policy:
    """The policy written in `text`.

    Raises:
        PolicyFileError: the text is not valid TOML/JSON, or not a valid policy (with the line
            and the reason).
    """
    if format == "json":
        data, locate = _read_json(text)
    else:
        data, locate = _read_toml(text)
    return _Reader(locate).policy(data)


def _read_toml(text: str) -> tuple[object, Locate]:
    try:
        data: object = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = int(found.group(1)) if found else text.count("\n") + 1  # "at end of document"
        reason = re.sub(r"\s*\((at line \d+, column \d+|at end of document)\)", "", str(exc))
        raise PolicyFileError(line, f"not TOML: {reason or 'syntax'}") from None
    lines = text.splitlines()

    def locate(path: tuple[str | int, ...]) -> int:
        if not path:
            return 0
        section = path[0]
        header = re.compile(
            rf"\s*\[\[\s*{section}\s*\]\]"
            if section in ("rule", "quota")
            else rf"\s*\[\s*{section}\s*\]"
        )
        index = path[1] if len(path) > 1 and type(path[1]) is int else 0
        keys = [p for p in path[1:] if type(p) is str]
        seen = -1
        for number, line in enumerate(lines, 1):
            if header.match(line):
                seen += 1
                if seen == index:
                    return _key_line(lines, number, keys[0] if keys else None)
        return _key_line(lines, 0, str(section))

    return data, locate


def _key_line(lines: list[str], header: int, key: str | None) -> int:
    """The line of `key` in the table whose header is on line `header`, else the header's."""
    if key is None:
        return header
    pattern = re.compile(rf"\s*\"?{re.escape(key)}\"?\s*=")
    for number in range(header + 1, len(lines) + 1):
        line = lines[number - 1]
        if line.lstrip().startswith("["):
            break
        if pattern.match(line):
            return number
    return header


class _Duplicate(ValueError):
    pass


def _read_json(text: str) -> tuple[object, Locate]:
    starts: dict[int, int] = {}
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates)

    def parse_object(s_and_end: tuple[str, int], *args: Any, **kwargs: Any) -> tuple[Any, int]:
        start = s_and_end[1] - 1
        try:
            value, end = _JSON_OBJECT(s_and_end, *args, **kwargs)
        except _Duplicate as exc:
            raise PolicyFileError(_line_at(text, start), str(exc)) from None
        starts[id(value)] = start
        return value, end

    # the pure-Python scanner reads `parse_object` from its decoder (the C one does not)
    setattr(decoder, "parse_object", parse_object)  # noqa: B010
    setattr(decoder, "scan_once", _PY_SCANNER(decoder))  # noqa: B010
    try:
        data: object = decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise PolicyFileError(exc.lineno, f"not JSON: {exc.msg}") from None
    keep = data  # the objects' ids stay valid while the document lives

    def locate(path: tuple[str | int, ...]) -> int:
        node: object = keep
        start = 0
        last_key: str | None = None
        for part in path:
            if isinstance(node, dict) and type(part) is str and part in node:
                start = starts.get(id(node), start)
                last_key = part
                node = node[part]
            elif isinstance(node, list) and type(part) is int and part < len(node):
                node = node[part]
                last_key = None
                if isinstance(node, dict):
                    start = starts.get(id(node), start)
            else:
                last_key = part if type(part) is str else None
                break
        if isinstance(node, dict) and last_key is None:
            return _line_at(text, starts.get(id(node), start))
        if last_key is not None:
            found = text.find(json.dumps(last_key), start)
            if found >= 0:
                return _line_at(text, found)
        return _line_at(text, start)

    return data, locate


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(f"the key {json.dumps(key)} is given twice")
        out[key] = value
    return out


def _line_at(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


class _Reader:
    """Reads the parsed document into a `Policy`, refusing the first thing that is wrong."""

    def __init__(self, locate: Locate) -> None:
        self._locate = locate
        self._names: set[str] = set()

    def fail(self, path: tuple[str | int, ...], reason: str) -> PolicyFileError:
        return PolicyFileError(self._locate(path), reason)

    def policy(self, data: object) -> Policy:
        if not isinstance(data, dict):
            raise self.fail(
                (), "the policy is a table (an object) of [[rule]], [[quota]], [quotas]"
            )
        for key in data:
            if key not in _TOP:
                raise self.fail((key,), f"unknown section {json.dumps(key)} (rule, quota, quotas)")
        rules = tuple(self.rule(entry, i) for i, entry in enumerate(self.array(data, "rule")))
        quotas = tuple(self.quota(entry, i) for i, entry in enumerate(self.array(data, "quota")))
        shared, prefix = self.shared(data.get("quotas"))
        return Policy(rules, quotas, shared, prefix)

    def array(self, data: dict[str, Any], section: str) -> list[Any]:
        if section not in data:
            return []
        value = data[section]
        if not isinstance(value, list):
            raise self.fail((section,), f"{section} is an array of tables ([[{section}]])")
        for i, entry in enumerate(value):
            if not isinstance(entry, dict):
                raise self.fail((section, i), f"each {section} is a table")
        return value

    def keys(
        self, entry: dict[str, Any], path: tuple[str | int, ...], known: frozenset[str]
    ) -> None:
        for key in entry:
            if key not in known:
                raise self.fail((*path, key), f"unknown key {json.dumps(key)}")

    def name(self, entry: dict[str, Any], path: tuple[str | int, ...]) -> str:
        if "name" not in entry:
            raise self.fail(path, "a name is required (refusals and the audit name it)")
        name = entry["name"]
        if type(name) is not str or not name.strip() or name != name.strip():
            raise self.fail((*path, "name"), "name is a non-empty str without outer spaces")
        if name == DEFAULT_DENY:
            raise self.fail((*path, "name"), f"{DEFAULT_DENY} is the audit's name for no rule")
        if name in self._names:
            raise self.fail((*path, "name"), "this name is already given to another rule or quota")
        self._names.add(name)
        return name

    def strings(
        self, entry: dict[str, Any], path: tuple[str | int, ...], key: str, *, default: bool
    ) -> tuple[str, ...]:
        if key not in entry:
            if default:
                return (EVERYONE,)
            raise self.fail(path, f"{key} is required (a list; [] for nobody / no tool)")
        value = entry[key]
        where = (*path, key)
        if not isinstance(value, list) or not all(type(v) is str and v for v in value):
            raise self.fail(where, f"{key} is a list of non-empty str")
        for item in value:
            if key == "who" and item.startswith(CLAIM_PREFIXES) and item.endswith(":"):
                raise self.fail(where, "a claim names its group or scope: group:NAME, scope:NAME")
            if key == "tools" and "*" in item[:-1]:
                raise self.fail(where, 'a tool pattern has "*" only at its end')
        return tuple(value)

    def rate(self, entry: dict[str, Any], path: tuple[str | int, ...]) -> Rate | None:
        if "rate" not in entry:
            if "burst" in entry:
                raise self.fail((*path, "burst"), "burst needs a rate")
            return None
        text = entry["rate"]
        found = _RATE.fullmatch(text) if type(text) is str else None
        if found is None:
            raise self.fail((*path, "rate"), 'rate is "N/second", "N/minute", "N/hour" or "N/day"')
        count = int(found.group(1))
        if count < 1:
            raise self.fail((*path, "rate"), "a rate of 0 admits nothing: leave the tool out")
        burst = count
        if "burst" in entry:
            burst = entry["burst"]
            if type(burst) is not int or burst < 1:
                raise self.fail((*path, "burst"), "burst is an integer of at least 1")
        return Rate(count, PERIODS[found.group(2)], burst)

    def fail_closed(self, entry: dict[str, Any], path: tuple[str | int, ...]) -> bool:
        if "on_shared_down" not in entry:
            return False
        value = entry["on_shared_down"]
        if value not in ("open", "closed") or type(value) is not str:
            raise self.fail((*path, "on_shared_down"), 'on_shared_down is "open" or "closed"')
        return value == "closed"

    def size(self, entry: dict[str, Any], path: tuple[str | int, ...], key: str) -> int | None:
        if key not in entry:
            return None
        value = entry[key]
        if type(value) is not int or value < 1:
            raise self.fail((*path, key), f"{key} is an integer of at least 1")
        return value

    def rule(self, entry: dict[str, Any], index: int) -> Rule:
        path: tuple[str | int, ...] = ("rule", index)
        self.keys(entry, path, _RULE_KEYS)
        name = self.name(entry, path)
        who = self.strings(entry, path, "who", default=False)
        tools = self.strings(entry, path, "tools", default=False)
        timeout = None
        if "timeout" in entry:
            timeout = entry["timeout"]
            if type(timeout) not in (int, float) or not 0 < timeout <= 86400:
                raise self.fail((*path, "timeout"), "timeout is seconds, above 0, at most 86400")
            timeout = float(timeout)
        limits = ToolLimits(
            timeout,
            self.size(entry, path, "max_arguments_bytes"),
            self.size(entry, path, "max_result_bytes"),
        )
        rate = self.rate(entry, path)
        closed = self.fail_closed(entry, path)
        return Rule(name, who, tools, limits, rate, closed, self.server_requests(entry, path))

    def server_requests(
        self, entry: dict[str, Any], path: tuple[str | int, ...]
    ) -> frozenset[str] | None:
        if "server_requests" not in entry:
            return None
        value = entry["server_requests"]
        where = (*path, "server_requests")
        kinds = " ".join(json.dumps(kind) for kind in SERVER_REQUESTS)
        if not isinstance(value, list) or not all(
            type(kind) is str and kind in SERVER_REQUESTS for kind in value
        ):
            raise self.fail(where, f"server_requests is a list of {kinds} ([] for none)")
        if len(set(value)) != len(value):
            raise self.fail(where, "server_requests names a kind twice")
        return frozenset(value)

    def quota(self, entry: dict[str, Any], index: int) -> Quota:
        path: tuple[str | int, ...] = ("quota", index)
        self.keys(entry, path, _QUOTA_KEYS)
        name = self.name(entry, path)
        per = entry.get("per")
        if per not in ("identity", "global") or type(per) is not str:
            raise self.fail(
                (*path, "per") if "per" in entry else path, 'per is "identity" or "global"'
            )
        rate = self.rate(entry, path)
        if rate is None:
            raise self.fail(path, "a quota needs a rate")
        who = self.strings(entry, path, "who", default=True)
        tools = self.strings(entry, path, "tools", default=True)
        scope: Literal["identity", "global"] = "identity" if per == "identity" else "global"
        return Quota(name, scope, rate, who, tools, self.fail_closed(entry, path))

    def shared(self, section: object) -> tuple[str | None, str]:
        prefix = "strictcall:quota:"
        if section is None:
            return None, prefix
        if not isinstance(section, dict):
            raise self.fail(("quotas",), "[quotas] is a table")
        self.keys(section, ("quotas",), _SHARED_KEYS)
        url = section.get("shared")
        if url is not None and (type(url) is not str or not url.startswith(_SCHEMES)):
            raise self.fail(("quotas", "shared"), "shared is a redis://, rediss:// or unix:// URL")
        if "key_prefix" in section:
            prefix = section["key_prefix"]
            if type(prefix) is not str or prefix == "":
                raise self.fail(("quotas", "key_prefix"), "key_prefix is a non-empty str")
        return url, prefix
