"""Fuzz inputs for the notes tools: valid calls first, then mutations of them.

Every input comes from a `random.Random`, so a seed replays a run exactly. Families:

- valid    a well-formed call of a notes tool; arguments drawn from the tool's input schema and
           from pools of note ids (the caller's own, another owner's, missing ones).
- schema   arguments that break the tool's input schema in one place, derived from the schema:
           a required member dropped, an unexpected one added, a value of another JSON type,
           a string at or one past its length bounds, arguments that are not an object.
- envelope the call around the arguments broken: tool name misspelt or of another type, extra
           members (an "identity" or "owner" among them), arguments missing.
- grammar  any of the above written as JSON and then broken: members deleted or duplicated,
           values replaced by other types, nesting around the depth limit, NaN and Infinity,
           lone surrogate escapes, invalid UTF-8, truncation, huge numbers, raw control
           characters, comments, trailing data, single quotes, a BOM.
- bytes    random bytes, or random runs of JSON's own characters.

Strings are written by a writer of our own that escapes characters at random (\\uXXXX, surrogate
pairs, short escapes), so the escape paths of the intake are taken too.

Note ids of another owner only ever go where a note id goes (never into a note's text), so an
answer that holds one while the input did not is a leak.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

JSON = Any

NOTE_TOOLS: Final = ("read_note", "list_notes", "count_notes", "create_note", "delete_note")


@dataclass(frozen=True)
class Raw:
    """A token written as is: NaN, 1e999, an invalid byte, a lone surrogate escape."""

    text: bytes


@dataclass(frozen=True)
class Obj:
    """An object written member by member, so that a name may repeat."""

    pairs: tuple[tuple[str, Any], ...]


@dataclass
class Pools:
    """Where note ids come from: the caller's own notes, another owner's, and missing ones."""

    own_ids: list[str]
    victim_ids: list[str]
    missing_ids: list[str]


@dataclass(frozen=True)
class Input:
    """One fuzz input: its family, its bytes, and the tool it was built for (if any)."""

    family: str
    data: bytes
    tool: str | None = None


# --- values ------------------------------------------------------------------------------------

_TEXTS: Final = (
    "",
    "a",
    "buy milk",
    "退款窗口为 7 天。",
    "emoji 😀 and astral 𝄞",
    'quote " backslash \\ slash /',
    "colon: a:b::c",
    '{"nested":"json:text"}',
    "tab\tnewline\ncarriage\r",
    "\u0000nul inside",
    "\u2028\u2029 line separators",
    "\ufeffbom",
    "\U0010ffff max code point",
    "combining e\u0301",
    "right-to-left \u202e override",
)

_WEIRD_STRINGS: Final = (
    "",
    " ",
    "\t",
    "\u3000",
    "n",
    "N1",
    "../../etc/passwd",
    "' OR '1'='1",
    "%s%n",
    "\u0000",
    "null",
    "true",
    "0",
    "read_note",
    "__proto__",
    "constructor",
    "😀",
    "\U000e0001",
    "a" * 65,
)

EXTRA_NAMES: Final = (
    "admin",
    "owner",
    "identity",
    "user",
    "id",
    "note_id",
    "text",
    "__proto__",
    "",
    " ",
    "Note_id",
    "note_id ",
    "arguments",
    "name",
    "a:b",
    'q"uote',
    "😀",
)

TOOL_NAME_VARIANTS: Final = (
    "Read_Note",
    "read_note ",
    " read_note",
    "read-note",
    "readnote",
    "read_n\u043ete",  # a Cyrillic o
    "read_note\u0000",
    "tools/call",
    "",
    "drop_tables",
    "READ_NOTE",
)

RAW_NUMBERS: Final = (
    b"NaN",
    b"-NaN",
    b"Infinity",
    b"-Infinity",
    b"1e999",
    b"-1e999",
    b"1E400",
    b"2e308",
    b"1.7976931348623157e308",
    b"5e-324",
    b"1e-400",
    b"-0",
    b"-0.0",
    b"0e0",
    b"1" * 309,
    b"-" + b"9" * 309,
    b"1" * 310,
    b"1" * 5000,
    b"18446744073709551616",
    b"-9223372036854775809",
    b"9223372036854775807",
    b"100000000000000000000000000000",
    b"0x10",
    b"+1",
    b"01",
    b".5",
    b"1.",
    b"1e",
    b"1_000",
)

RAW_TOKENS: Final = (
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"undefined",
    b"None",
    b"True",
    b"nul",
    b"tru",
    b"'single'",
    b'"\\ud800"',
    b'"\\udc00\\ud800"',
    b'"\\ud800x"',
    b'"\\uD83D\\uDE00"',
    b'"\\u0000"',
    b'"\\x41"',
    b'"\\u12"',
    b'"\\a"',
    b'"raw\x00nul"',
    b'"raw\x1fctl"',
    b'"raw\ttab"',
    b'"raw\nnewline"',
    b'"\xff"',
    b'"\xc0\x80"',
    b'"\xed\xa0\x80"',
    b'"\xf4\x90\x80\x80"',
    b'"\xe2\x82"',
    b'"\x80"',
    b"[]",
    b"{}",
    b"[1,]",
    b"{,}",
)

TEXT_INSERTS: Final = (
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e999",
    b"\\ud800",
    b"\\udfff",
    b"\\u",
    b"\\",
    b"\x00",
    b"\x01",
    b"\x1f",
    b"\x7f",
    b"\xff",
    b"\xfe",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xe2\x82",
    b"//c\n",
    b"/*c*/",
    b"'",
    b",",
    b":",
    b"}",
    b"]",
    b"[",
    b"{",
    b'"',
    b"\xef\xbb\xbf",
    b"\t",
    b"\r",
    b"\x0c",
    b"\xc2\xa0",
    b"\xe2\x80\xa8",
    b"true",
    b"null",
    b"0",
    b'"x":1',
)


def note_text(rng: random.Random) -> str:
    """A note's text: short and plain mostly; sometimes at the length limit (10,000 code
    points) or one past it."""
    roll = rng.random()
    if roll < 0.7:
        return rng.choice(_TEXTS)
    if roll < 0.9:
        return "".join(rng.choice(_TEXTS) for _ in range(rng.randint(1, 6)))
    if roll < 0.95:
        return random_string(rng)
    unit = rng.choice(("x", "é", "😀", "秘"))
    return unit * rng.choice((9_999, 10_000, 10_001))


def random_string(rng: random.Random) -> str:
    """A short string of mixed characters (never a note id from the pools)."""
    pick = rng.random()
    if pick < 0.3:
        return rng.choice(_WEIRD_STRINGS)
    alphabet = 'abcxyz019 :"\\/{}[],\t\n\u0000\u001f\u007f\u00e9\u2028\u4e2d\U0001f600\ufffe\uffff'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


def random_json(rng: random.Random, depth: int = 0) -> JSON:
    """A random JSON value, small and shallow."""
    kinds = ["null", "bool", "int", "float", "str"]
    if depth < 3:
        kinds += ["list", "dict"]
    kind = rng.choice(kinds)
    if kind == "null":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice((0, 1, -1, 7, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 2**64, 10**30))
    if kind == "float":
        return rng.choice((0.0, -0.0, 1.0, 1.5, -2.25, 1e300, 5e-324, 0.1))
    if kind == "str":
        return random_string(rng)
    if kind == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {random_string(rng): random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}


_WRONG_BY_TYPE: Final[Mapping[str, tuple[Any, ...]]] = {
    "null": (None,),
    "boolean": (True, False),
    "integer": (0, 1, -1, 2**63, 10**30),
    "number": (1.5, 1.0, -0.0, 1e300),
    "string": ("x", ""),
    "array": ([], ["x"]),
    "object": ({}, {"a": 1}),
}


def _types_of(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        types = {declared}
    elif isinstance(declared, list):
        types = set(declared)
    else:
        return set(_WRONG_BY_TYPE)
    if "number" in types:
        types.add("integer")
    return types


def wrong_type(rng: random.Random, schema: Mapping[str, Any]) -> JSON:
    """A value of a JSON type the schema does not allow (1.0 for "integer" included)."""
    allowed = _types_of(schema)
    choices = [
        value for kind, values in _WRONG_BY_TYPE.items() if kind not in allowed for value in values
    ]
    if "integer" in allowed and "number" not in allowed:
        choices.append(1.0)
    return rng.choice(choices) if choices else None


# --- schema-derived arguments ------------------------------------------------------------------


@dataclass
class Generator:
    """Builds fuzz inputs for tools with the given input schemas."""

    rng: random.Random
    schemas: Mapping[str, Mapping[str, Any]]
    pools: Pools
    rpc_ids: Callable[[], str | int] = field(default=lambda: 0)

    def note_id(self) -> str:
        """A note id: the caller's own, another owner's, a missing one, or an odd string."""
        roll = self.rng.random()
        pools = self.pools
        if roll < 0.3 and pools.own_ids:
            return self.rng.choice(pools.own_ids)
        if roll < 0.6 and pools.victim_ids:
            return self.rng.choice(pools.victim_ids)
        if roll < 0.85 and pools.missing_ids:
            return self.rng.choice(pools.missing_ids)
        return random_string(self.rng)

    def string_for(self, name: str, schema: Mapping[str, Any]) -> str:
        """A string for the property `name` within its length bounds."""
        if name == "note_id":
            return self.note_id()
        text = note_text(self.rng)
        limit = schema.get("maxLength")
        if isinstance(limit, int) and len(text) > limit:
            text = text[:limit]
        floor = schema.get("minLength")
        if isinstance(floor, int) and len(text) < floor:
            text = text + "x" * (floor - len(text))
        return text

    def valid_value(self, name: str, schema: Mapping[str, Any]) -> JSON:
        """A value that satisfies `schema` (for the schemas the notes tools use)."""
        kind = schema.get("type")
        if kind == "string":
            return self.string_for(name, schema)
        if kind == "integer":
            low = schema.get("minimum", -100)
            return self.rng.randint(int(low), int(low) + 100)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "object":
            return self.valid_arguments(schema)
        if kind == "array":
            return []
        return None

    def valid_arguments(self, schema: Mapping[str, Any]) -> dict[str, JSON]:
        """Arguments that satisfy an object schema: every required member, some optional."""
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        arguments = {}
        for name, sub in properties.items():
            if name in required or self.rng.random() < 0.5:
                arguments[name] = self.valid_value(name, sub)
        return arguments

    def broken_arguments(self, schema: Mapping[str, Any]) -> tuple[JSON, str]:
        """Arguments that break `schema` in one place, and which way."""
        rng = self.rng
        arguments: dict[str, JSON] = self.valid_arguments(schema)
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = [name for name in schema.get("required", ()) if name in arguments]
        ways = ["unexpected", "not_object", "unexpected_owner"]
        if required:
            ways.append("missing")
        if properties:
            ways += ["type", "type", "deep"]
        if any("maxLength" in sub or "minLength" in sub for sub in properties.values()):
            ways += ["length", "length"]
        way = rng.choice(ways)
        if way == "missing":
            del arguments[rng.choice(required)]
        elif way == "unexpected":
            arguments[rng.choice(EXTRA_NAMES)] = random_json(rng)
        elif way == "unexpected_owner":
            arguments[rng.choice(("owner", "identity", "user"))] = rng.choice(
                ("victim", "u2", "fuzzer", "*")
            )
        elif way == "not_object":
            return rng.choice((None, [], [arguments], "{}", 0, 1.5, True, "")), way
        elif way == "type":
            name = rng.choice(list(properties))
            arguments[name] = wrong_type(rng, properties[name])
        elif way == "deep":
            name = rng.choice(list(properties))
            value: JSON = self.valid_value(name, properties[name])
            for _ in range(rng.choice((10, 63, 64, 65, 130))):
                value = [value] if rng.random() < 0.5 else {"a": value}
            arguments[name] = value
        else:  # length: at or one past a bound, counted in code points
            bounded = [
                n for n, sub in properties.items() if "maxLength" in sub or "minLength" in sub
            ]
            name = rng.choice(bounded)
            sub = properties[name]
            unit = rng.choice(("x", "é", "😀"))
            lengths = []
            if "maxLength" in sub:
                lengths += [sub["maxLength"], sub["maxLength"] + 1]
            if "minLength" in sub:
                lengths += [sub["minLength"], max(sub["minLength"] - 1, 0)]
            arguments[name] = unit * rng.choice(lengths)
        return arguments, way

    # --- calls ---------------------------------------------------------------------------------

    def call(self) -> tuple[str, str | None, JSON]:
        """A call object before it is written: (family, tool, call)."""
        rng = self.rng
        tool = rng.choice(sorted(self.schemas))
        schema = self.schemas[tool]
        roll = rng.random()
        if roll < 0.45:
            return "valid", tool, {"name": tool, "arguments": self.valid_arguments(schema)}
        if roll < 0.8:
            arguments, _ = self.broken_arguments(schema)
            return "schema", tool, {"name": tool, "arguments": arguments}
        call: dict[str, JSON] = {"name": tool, "arguments": self.valid_arguments(schema)}
        way = rng.randrange(6)
        if way == 0:
            call["name"] = rng.choice(TOOL_NAME_VARIANTS)
        elif way == 1:
            call["name"] = random_json(rng)
        elif way == 2:
            call[rng.choice(("identity", "owner", "call_id", "id", "admin", "Name"))] = "victim"
        elif way == 3:
            del call["arguments"]
        elif way == 4:
            del call["name"]
        else:
            return "envelope", tool, rng.choice(([call], "read_note", None, 7, [], {}))
        return "envelope", tool, call

    def gateway_input(self) -> Input:
        """One input for a gateway (a call's text)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.04:
            return Input("bytes", random_bytes(rng))
        family, tool, call = self.call()
        if roll < 0.55:
            return Input(family, write(rng, call), tool)
        return Input("grammar", mutate(rng, call), tool)

    # --- JSON-RPC ------------------------------------------------------------------------------

    def rpc_message(self) -> tuple[str, str | None, JSON]:
        """A JSON-RPC message around a call: (family, tool, message)."""
        rng = self.rng
        family, tool, call = self.call()
        message: dict[str, JSON] = {
            "jsonrpc": "2.0",
            "id": self.rpc_ids(),
            "method": "tools/call",
            "params": call,
        }
        roll = rng.random()
        if roll < 0.75:
            return family, tool, message
        way = rng.randrange(10)
        if way == 0:
            del message["id"]  # a notification
        elif way == 1:
            message["id"] = rng.choice(
                (None, True, 1.5, 1.0, -0.0, [], {}, "", 10**30, -(2**63) - 1, 2**64, "x" * 300)
            )
        elif way == 2:
            message["jsonrpc"] = rng.choice(("1.0", 2.0, 2, None, "2.0 ", ""))
        elif way == 3:
            del message["jsonrpc"]
        elif way == 4:
            message["method"] = rng.choice(
                ("tools/list", "tools/list", "ping", "TOOLS/CALL", "tools/call ", "nope", 5, None)
            )
        elif way == 5:
            message["params"] = rng.choice(([call], None, "x", 0))
        elif way == 6:
            del message["params"]
        elif way == 7:
            message[rng.choice(("result", "error", "extra", "identity", "Id"))] = random_json(rng)
        elif way == 8:
            message = {"jsonrpc": "2.0", "id": self.rpc_ids(), "method": "tools/list"}
        else:
            message = {"jsonrpc": "2.0", "method": "tools/call", "params": call}
        return "rpc", tool, message

    def rpc_input(self, *, batches: bool = True) -> Input:
        """One JSON-RPC body: a message or (when `batches`) a batch, written and maybe broken."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.04:
            return Input("bytes", random_bytes(rng))
        if batches and roll < 0.16:
            size = rng.choice((0, 1, 2, 3, 5, 8))
            items = [self.rpc_message()[2] for _ in range(size)]
            if size and rng.random() < 0.2:
                items[rng.randrange(size)] = random_json(rng)
            if rng.random() < 0.3:
                return Input("grammar", mutate(rng, items))
            return Input("batch", write(rng, items))
        family, tool, message = self.rpc_message()
        if roll < 0.6:
            return Input(family, write(rng, message), tool)
        return Input("grammar", mutate(rng, message), tool)


def random_bytes(rng: random.Random) -> bytes:
    """Random bytes, or a random run of JSON's own characters."""
    size = rng.choice((0, 1, 2, 8, 64, 512))
    if rng.random() < 0.5:
        return rng.randbytes(size)
    alphabet = b'{}[]":,0123456789.eE+- \t\ntruefalsn\\u'
    return bytes(rng.choice(alphabet) for _ in range(size))


# --- writing ----------------------------------------------------------------------------------

_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def write_string(rng: random.Random, text: str, escape_rate: float) -> bytes:
    """A JSON string with characters escaped at random (as \\uXXXX, surrogate pairs for astral
    ones); a lone surrogate in `text` is written as its escape."""
    parts = ['"']
    for char in text:
        code = ord(char)
        if char in _SHORT_ESCAPES:
            parts.append(_SHORT_ESCAPES[char] if rng.random() >= escape_rate else f"\\u{code:04x}")
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF or rng.random() < escape_rate:
            if code > 0xFFFF:
                high = 0xD800 + ((code - 0x10000) >> 10)
                low = 0xDC00 + ((code - 0x10000) & 0x3FF)
                parts.append(f"\\u{high:04x}\\u{low:04X}")
            else:
                parts.append(f"\\u{code:04x}" if rng.random() < 0.5 else f"\\u{code:04X}")
        else:
            parts.append(char)
    parts.append('"')
    return "".join(parts).encode("utf-8")


def write(rng: random.Random, node: JSON, *, escape_rate: float | None = None) -> bytes:
    """`node` as JSON text (`Raw` tokens as they are, `Obj` members as listed)."""
    rate = escape_rate if escape_rate is not None else rng.choice((0.0, 0.0, 0.05, 0.5))
    out: list[bytes] = []
    _write_into(rng, node, rate, out)
    return b"".join(out)


def _write_into(rng: random.Random, node: JSON, rate: float, out: list[bytes]) -> None:
    # Iterative: a mutated call may nest thousands deep.
    stack: list[Any] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, bytes):
            out.append(item)
        elif isinstance(item, Raw):
            out.append(item.text)
        elif item is None:
            out.append(b"null")
        elif item is True:
            out.append(b"true")
        elif item is False:
            out.append(b"false")
        elif isinstance(item, int):
            out.append(str(item).encode("ascii"))
        elif isinstance(item, float):
            out.append(json.dumps(item).encode("ascii"))
        elif isinstance(item, str):
            out.append(write_string(rng, item, rate))
        elif isinstance(item, list):
            work: list[Any] = [b"["]
            for index, element in enumerate(item):
                if index:
                    work.append(b",")
                work.append(element)
            work.append(b"]")
            stack.extend(reversed(work))
        else:
            pairs = item.pairs if isinstance(item, Obj) else tuple(item.items())
            work = [b"{"]
            for index, (key, value) in enumerate(pairs):
                if index:
                    work.append(b",")
                work += [write_string(rng, key, rate), b":", value]
            work.append(b"}")
            stack.extend(reversed(work))


# --- mutating ---------------------------------------------------------------------------------


def mutate(rng: random.Random, node: JSON) -> bytes:
    """`node` mutated as a tree, written, and then (often) mutated as text."""
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        node = mutate_tree(rng, node)
    data = write(rng, node)
    if rng.random() < 0.6:
        for _ in range(rng.choice((1, 1, 2, 3))):
            data = mutate_text(rng, data)
    return data


def _containers(node: JSON, path: tuple[int | str, ...] = ()) -> list[tuple[int | str, ...]]:
    found: list[tuple[int | str, ...]] = []
    stack = [(node, path, 0)]
    while stack and len(found) < 200:
        current, where, depth = stack.pop()
        if depth > 20:
            continue
        if isinstance(current, list):
            found.append(where)
            stack.extend((item, (*where, i), depth + 1) for i, item in enumerate(current))
        elif isinstance(current, dict | Obj):
            found.append(where)
            pairs = current.pairs if isinstance(current, Obj) else tuple(current.items())
            stack.extend((value, (*where, i), depth + 1) for i, (_, value) in enumerate(pairs))
    return found


def _get(node: JSON, path: Sequence[int | str]) -> JSON:
    for step in path:
        if isinstance(node, list):
            node = node[int(step)]
        else:
            pairs = node.pairs if isinstance(node, Obj) else tuple(node.items())
            node = pairs[int(step)][1]
    return node


def _replace(node: JSON, path: Sequence[int | str], new: JSON) -> JSON:
    if not path:
        return new
    step, rest = int(path[0]), path[1:]
    if isinstance(node, list):
        copy = list(node)
        copy[step] = _replace(copy[step], rest, new)
        return copy
    pairs = list(node.pairs if isinstance(node, Obj) else node.items())
    key, value = pairs[step]
    pairs[step] = (key, _replace(value, rest, new))
    return Obj(tuple(pairs))


def mutate_tree(rng: random.Random, node: JSON) -> JSON:
    """One structural mutation at a random container: delete, duplicate, retype, rename, or
    nest."""
    paths = _containers(node)
    if not paths:
        return _mutated_value(rng, node)
    path = rng.choice(paths)
    target = _get(node, path)
    if isinstance(target, list):
        items = list(target)
        way = rng.randrange(4)
        if way == 0 and items:
            del items[rng.randrange(len(items))]
        elif way == 1 and items:
            items.append(items[rng.randrange(len(items))])
        elif way == 2 and items:
            index = rng.randrange(len(items))
            items[index] = _mutated_value(rng, items[index])
        else:
            items.insert(rng.randint(0, len(items)), random_json(rng))
        return _replace(node, path, items)
    pairs = list(target.pairs if isinstance(target, Obj) else target.items())
    way = rng.randrange(6)
    if way == 0 and pairs:  # delete a member
        del pairs[rng.randrange(len(pairs))]
    elif way == 1 and pairs:  # duplicate a member, same or other value
        key, value = pairs[rng.randrange(len(pairs))]
        pairs.insert(
            rng.randint(0, len(pairs)), (key, value if rng.random() < 0.5 else random_json(rng))
        )
    elif way == 2 and pairs:  # change a value's type or token
        index = rng.randrange(len(pairs))
        key, value = pairs[index]
        pairs[index] = (key, _mutated_value(rng, value))
    elif way == 3 and pairs:  # rename a member
        index = rng.randrange(len(pairs))
        key, value = pairs[index]
        pairs[index] = (
            rng.choice((key.upper(), key + " ", "", key + "\u0000", rng.choice(EXTRA_NAMES))),
            value,
        )
    elif way == 4:  # add a member
        pairs.insert(rng.randint(0, len(pairs)), (rng.choice(EXTRA_NAMES), random_json(rng)))
    else:  # nest the whole container around the depth limit
        nested: JSON = Obj(tuple(pairs))
        for _ in range(rng.choice((62, 63, 64, 65, 66, 200, 1100))):
            nested = [nested] if rng.random() < 0.7 else {"a": nested}
        return _replace(node, path, nested)
    return _replace(node, path, Obj(tuple(pairs)))


def _mutated_value(rng: random.Random, value: JSON) -> JSON:
    roll = rng.random()
    if roll < 0.3:
        return Raw(rng.choice(RAW_NUMBERS))
    if roll < 0.55:
        return Raw(rng.choice(RAW_TOKENS))
    if roll < 0.8:
        return random_json(rng)
    if isinstance(value, str) and value:
        cut = rng.randrange(len(value))
        return (
            value[:cut]
            + rng.choice(("\ud800", "\udfff", "\u0000", "\u001f", "\\", '"'))
            + value[cut:]
        )
    return [value]


def mutate_text(rng: random.Random, data: bytes) -> bytes:
    """One mutation of the text as bytes: truncate, insert a token, flip or drop bytes,
    duplicate a range, add trailing data or a BOM, swap quotes."""
    size = len(data)
    way = rng.randrange(10)
    at = rng.randint(0, size)
    if way == 0:
        return data[: rng.randint(0, max(size - 1, 0))]
    if way in (1, 2):
        return data[:at] + rng.choice(TEXT_INSERTS) + data[at:]
    if way == 3 and size:
        index = rng.randrange(size)
        return data[:index] + bytes([data[index] ^ (1 << rng.randrange(8))]) + data[index + 1 :]
    if way == 4 and size:
        end = min(size, at + rng.randint(1, 8))
        return data[:at] + data[end:]
    if way == 5 and size:
        end = min(size, at + rng.randint(1, 32))
        return data[:end] + data[at:end] + data[end:]
    if way == 6:
        return data + rng.choice((b" {}", b"\n", b"\x00", b",", b" x", b"]", b"\n\n{}"))
    if way == 7:
        return b"\xef\xbb\xbf" + data
    if way == 8:
        return data.replace(b'"', b"'", rng.randint(1, 4))
    return data[:at] + rng.randbytes(rng.randint(1, 4)) + data[at:]
