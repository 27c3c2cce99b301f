"""Strict intake of untrusted JSON text.

`parse_document` accepts exactly the JSON texts of RFC 8259 and refuses, with a `JSONTextError`,
everything a lenient parser lets through:

- text longer than `max_size` (decided from its length alone, before any parsing);
- anything that is not JSON: NaN, Infinity, comments, single quotes, trailing data, raw control
  characters in strings, invalid UTF-8, lone surrogate escapes such as "\\ud800";
- a duplicate member name in any object (which value wins is parser-dependent);
- nesting of arrays and objects deeper than `max_depth` (64 by default), decided without
  relying on RecursionError;
- numbers beyond the range of a double (about 1.8e308): integers are kept exact up to that
  range (309 digits) and refused beyond, so Python's int digit limit is never reached.

A str or bytes subclass is read as the plain str or bytes it holds.

No library does all of that alone (shared research: jsonrpc-and-parsing). orjson does the syntax,
UTF-8, surrogates and NaN, and refuses nesting beyond 1024. The rest is decided by counting, so
that the common call pays no walk over its value:

- depth: a text with no more '{' and '[' than the limit cannot nest deeper; only a text with
  more is walked (bounded by orjson's 1024);
- duplicates: every member is written with exactly one ':' outside strings, and a text without
  backslashes writes each string exactly as orjson writes it back. So the ':' in the text equal
  the ':' in orjson's own rendering of the value unless a repeated name was dropped, which
  removes its ':' and everything in its member;
- numbers: a float is always written with a digit followed by '.', 'e' or 'E', which tells
  whether the value may hold one.

When the text has escapes (a ':' may hide in one) or a run of 19 digits (orjson rounds integers
beyond 64 bits to floats), it is parsed again by the stdlib, exactly, with a hook that sees every
member.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, Final, NamedTuple, NoReturn

import orjson

from strictcall.errors import JSONValue, StrictcallError

MAX_SIZE: Final = 1 << 20
"""Default limit on the length of a call's text: 1 MiB (bytes for bytes, characters for str)."""

MAX_DEPTH: Final = 64
"""Default limit on nested arrays and objects: `[[1]]` has depth 2."""

# orjson reads an integer outside [-2**63, 2**64) as a float. Every integer of 18 digits or fewer
# is inside; -9223372036854775809 has 19 digits and is not, so a run of 19 digits calls for the
# exact parse.
# A digit followed by '.', 'e' or 'E' (a float may be there), or by 18 more digits (an integer
# orjson may have rounded): one scan, and the two are told apart only when it finds something.
# A number's digit is never the first character of a string: a digit just after '"' is text
# (JSON-RPC's "2.0", a version, a date), not a float.
_STR_NEEDLES: Final[tuple[Any, ...]] = (
    ":",
    "\\",
    "{",
    "[",
    re.compile(r"[0-9](?:[.eE]|[0-9]{18})"),
    re.compile(r'(?<!")[0-9][.eE]'),
    re.compile(r"[0-9]{19}"),
)
_BYTES_NEEDLES: Final[tuple[Any, ...]] = (
    b":",
    b"\\",
    b"{",
    b"[",
    # the same three, searched in the text with every digit written 0 (`_DIGITS_AS_ZERO`): a
    # pattern that begins with a literal is searched for that byte at C speed, where one that
    # begins with a class or a look-behind is tried at every position (10 ms a MiB, 6 us on a
    # 150-byte call, against 0.3 ms and 2 us); the look-behind after the 0 asks the same
    re.compile(rb"0(?:[.eE]|0{18})"),
    re.compile(rb'0(?<!"0)[.eE]'),
    None,  # `_LONG_DIGITS`, found with `find`
)

_DIGITS_AS_ZERO: Final = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGITS: Final = b"0" * 19
"""19 digits in a row, once every digit is written 0: a faster search than the pattern's
(a third of its time on a 300-byte message), for bytes."""


# A NamedTuple's own constructor is a Python function; tuple.__new__ builds the same in C.
_DocumentMaker = Callable[[type["Document"], tuple[JSONValue, bool]], "Document"]
_new_document: Final[_DocumentMaker] = tuple.__new__


class TextFault(StrEnum):
    """Why a text was refused."""

    TOO_LARGE = "too_large"
    NOT_TEXT = "not_text"
    SYNTAX = "syntax"
    INVALID_UTF8 = "invalid_utf8"
    LONE_SURROGATE = "lone_surrogate"
    DUPLICATE_MEMBER = "duplicate_member"
    TOO_DEEP = "too_deep"
    NUMBER_OUT_OF_RANGE = "number_out_of_range"


class JSONTextError(StrictcallError, ValueError):
    """The text is not strict JSON; `fault` says why and `line`/`column` where, when known:
    the first offending character, lines counted from 1 at each "\\n", columns from 1 in
    characters (an invalid UTF-8 byte is at the column after the characters before it)."""

    def __init__(self, fault: TextFault, line: int | None = None, column: int | None = None):
        super().__init__(fault.value)
        self.fault = fault
        self.line = line
        self.column = column


class Document(NamedTuple):
    """A parsed JSON text and whether any number in it may be a float."""

    value: JSONValue
    has_float: bool


def loads_strict(
    raw: str | bytes, *, max_size: int = MAX_SIZE, max_depth: int = MAX_DEPTH
) -> JSONValue:
    """Parse strict JSON text into a Python value.

    Raises:
        JSONTextError: the text is not strict JSON, or is too large or too deep.
    """
    return parse_document(raw, max_size=max_size, max_depth=max_depth).value


def parse_document(
    raw: str | bytes,
    *,
    max_size: int = MAX_SIZE,
    max_depth: int = MAX_DEPTH,
    numbers: bool = True,
    floats: bool = True,
) -> Document:
    """Parse strict JSON text into a `Document`.

    `numbers=False` skips the search for floats and long integers, for a caller to whom no
    number can matter (every schema its values meet refuses numbers everywhere): `has_float` is
    then False, and an integer beyond 64 bits is read as orjson reads it, as a float. Everything
    else is checked the same. `floats=False` skips only the search for floats, for a caller
    that never reads `has_float` (then False) but wants long integers read exactly.

    Raises:
        JSONTextError: the text is not strict JSON, or is too large or too deep.
    """
    kind = type(raw)
    if kind is not str and kind is not bytes:
        if not isinstance(raw, str | bytes):
            raise JSONTextError(TextFault.NOT_TEXT)
        if len(raw) > max_size:
            raise JSONTextError(TextFault.TOO_LARGE)
        # orjson reads the exact types only
        raw = str.__str__(raw) if isinstance(raw, str) else bytes.__bytes__(raw)
        kind = type(raw)
    elif len(raw) > max_size:
        raise JSONTextError(TextFault.TOO_LARGE)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _refusal(raw, exc, max_depth) from None
    text: Any = raw  # str or bytes: the needles below are of the same type
    colon, backslash, brace, bracket, numeric, floatish, long_digits = (
        _STR_NEEDLES if kind is str else _BYTES_NEEDLES
    )
    # each level takes two characters, so a short text cannot nest too deep
    if len(text) > 2 * max_depth and text.count(brace) + text.count(bracket) > max_depth:
        _check_depth(value, max_depth, raw)
    has_float = long_number = False
    if not numbers:
        pass
    elif kind is bytes:
        zeros = text.translate(_DIGITS_AS_ZERO)
        if not floats:
            long_number = zeros.find(_LONG_DIGITS) >= 0  # not `in`: see below
        elif numeric.search(zeros) is not None:
            has_float = floatish.search(zeros) is not None
            long_number = zeros.find(_LONG_DIGITS) >= 0
    elif not floats:
        long_number = long_digits.search(text) is not None
    elif numeric.search(text) is not None:
        has_float = floatish.search(text) is not None
        long_number = long_digits.search(text) is not None
    # bytes' `in` first tries its operand as an int and raises (and clears) a TypeError, some
    # 1,900 instructions a test; `find` reads a bytes operand as one at once
    if long_number or (text.find(backslash) >= 0 if kind is bytes else backslash in text):
        return _new_document(Document, (_parse_exactly(raw, max_depth), has_float))
    if text.count(colon) != orjson.dumps(value).count(b":"):
        raise JSONTextError(TextFault.DUPLICATE_MEMBER)
    return _new_document(Document, (value, has_float))


# orjson's messages for the refusals that are not plain syntax, by their start. Its position for
# a lone surrogate escape is the escape's backslash, as wanted; for invalid UTF-8 (reported for
# bytes as "str is not valid UTF-8", at column 1) and too deep nesting it is found again here.
_NOT_UTF8: Final = "str is not valid UTF-8"
_ORJSON_FAULTS: Final = (
    ("depth limit exceeded", TextFault.TOO_DEEP),
    ("number is infinity", TextFault.NUMBER_OUT_OF_RANGE),
    ("no low surrogate", TextFault.LONE_SURROGATE),
    ("invalid high surrogate", TextFault.LONE_SURROGATE),
    ("invalid low surrogate", TextFault.LONE_SURROGATE),
)
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _refusal(raw: str | bytes, exc: orjson.JSONDecodeError, max_depth: int) -> JSONTextError:
    """The refusal for a text orjson refused, at its first offending character (only this,
    the error path, pays for finding it)."""
    if exc.msg.startswith(_NOT_UTF8):
        if isinstance(raw, str):
            found = _SURROGATE.search(raw)
            if found is not None:
                return _located(TextFault.LONE_SURROGATE, raw, found.start())
        else:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                return _located(TextFault.INVALID_UTF8, raw, bad.start)
    for prefix, fault in _ORJSON_FAULTS:
        if exc.msg.startswith(prefix):
            if fault is TextFault.TOO_DEEP:
                return _too_deep(raw, max_depth)
            return JSONTextError(fault, exc.lineno, exc.colno)
    return JSONTextError(TextFault.SYNTAX, exc.lineno, exc.colno)


def _located(fault: TextFault, raw: str | bytes, offset: int) -> JSONTextError:
    """`fault` at `offset` (characters in a str, bytes in bytes), as a line and a column."""
    if isinstance(raw, str):
        start = raw.rfind("\n", 0, offset) + 1
        return JSONTextError(fault, raw.count("\n", 0, start) + 1, offset - start + 1)
    start = raw.rfind(b"\n", 0, offset) + 1
    before = raw[start:offset].decode("utf-8", errors="replace")  # valid up to `offset`
    return JSONTextError(fault, raw.count(b"\n", 0, start) + 1, len(before) + 1)


# A string (skipped whole, so that brackets inside it never count) or a bracket.
_STR_TOKENS: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_BYTES_TOKENS: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_OPENING: Final = frozenset({"[", "{", b"[", b"{"})


def _too_deep(raw: str | bytes, max_depth: int) -> JSONTextError:
    """TOO_DEEP at the bracket that opens level `max_depth` + 1."""
    tokens = _STR_TOKENS if isinstance(raw, str) else _BYTES_TOKENS
    depth = 0
    for token in tokens.finditer(raw):  # type: ignore[arg-type]
        at = token.start()
        first = raw[at : at + 1]
        if first in _OPENING:
            depth += 1
            if depth > max_depth:
                return _located(TextFault.TOO_DEEP, raw, at)
        elif first != '"' and first != b'"':
            depth -= 1
    return JSONTextError(TextFault.TOO_DEEP)  # not reached for a text that nests too deep


def _check_depth(value: JSONValue, max_depth: int, raw: str | bytes | None = None) -> None:
    """Walk a value with many containers (orjson bounds it at 1024 levels) for its depth;
    `raw`, the text it was parsed from when there was one, locates a refusal.

    Raises:
        JSONTextError: nesting is deeper than `max_depth`.
    """
    stack: list[tuple[JSONValue, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind is not dict and kind is not list:
            continue
        if depth > max_depth:
            raise JSONTextError(TextFault.TOO_DEEP) if raw is None else _too_deep(raw, max_depth)
        for item in node.values() if kind is dict else node:
            stack.append((item, depth + 1))


def _refuse_constant(name: str) -> NoReturn:
    raise JSONTextError(TextFault.SYNTAX)


def _refuse_duplicates(pairs: list[tuple[str, JSONValue]]) -> dict[str, JSONValue]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise JSONTextError(TextFault.DUPLICATE_MEMBER)
    return obj


_DEEPEST_EXACT: Final = 900
"""Where the exact parse, which recurses, may give up (Python's recursion limit is 1000)."""

_EXACT_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant
)


def _parse_exactly(raw: str | bytes, max_depth: int) -> JSONValue:
    """Parse text orjson already accepted (so valid UTF-8, no surrogates, depth bounded) exactly.

    Raises:
        JSONTextError: a duplicate member name, or an integer beyond the exact range.
    """
    text = raw if isinstance(raw, str) else raw.decode("utf-8")
    try:
        value = _EXACT_DECODER.decode(text)
    except JSONTextError:
        raise
    except RecursionError:  # only with a max_depth near orjson's own limit of 1024
        raise _too_deep(raw, min(max_depth, _DEEPEST_EXACT)) from None
    except ValueError:  # the int digit limit
        raise JSONTextError(TextFault.NUMBER_OUT_OF_RANGE) from None
    return value


def dump_text(value: JSONValue) -> bytes | None:
    """A JSON value as compact UTF-8 JSON text, or None when it cannot be written so (a lone
    surrogate, a type JSON has not). Integers beyond 64 bits are written exactly (orjson stops
    there; the stdlib takes over on that path only). NaN must be refused before: see
    `pipeline.may_hold_float`."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        pass
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None


MAX_RESULT_DEPTH: Final = 128
"""Results nested deeper than this are withheld: the validator recurses (a deep enough value
would overflow the stack), and a cyclic value would never end."""


def json_kind(value: JSONValue, max_depth: int = MAX_RESULT_DEPTH) -> bool | None:
    """None if `value` is not a JSON value nested at most `max_depth` deep; else whether it
    holds a float."""
    # Exact types first (the common case), then subclasses, which JSON writers accept.
    kind = type(value)
    if kind is dict and _flat_object(value):
        return False
    stack: list[tuple[JSONValue, int]]
    if kind is dict or kind is list:
        stack = [(value, 1)]
    elif kind is str or kind is int or kind is bool or value is None:
        return False
    else:
        stack = [([value], 0)]
    has_float = False
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return None
        items: Iterable[JSONValue]
        if type(node) is list:
            items = node
        else:
            for key in node:
                if type(key) is not str and not isinstance(key, str):
                    return None
            items = node.values()
        for item in items:
            kind = type(item)
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if kind is dict or kind is list:
                stack.append((item, depth + 1))
            elif kind is float:
                if not math.isfinite(item):
                    return None
                has_float = True
            elif isinstance(item, str | int):
                continue
            elif isinstance(item, dict):
                stack.append((item, depth + 1))
            elif isinstance(item, list):
                stack.append((list(item), depth + 1))
            elif isinstance(item, float) and math.isfinite(item):
                has_float = True
            else:
                return None
    return has_float


def _flat_object(value: dict[JSONValue, JSONValue]) -> bool:
    """True for the most common result: one object of str keys and str, int, bool or null
    values (no float, nothing nested)."""
    for key, item in value.items():
        if type(key) is not str:
            return False
        kind = type(item)
        if kind is not str and kind is not int and kind is not bool and item is not None:
            return False
    return True


SCAN_MOST_BYTES: Final = 64 << 10
"""`array_longer_than` reads at most this many bytes of a text: past them the parser decides
(a long element costs a scan as much as a parse)."""
SCAN_DEPTH: Final = 8
"""`array_longer_than` follows an element's nesting this deep: past it the parser decides."""

_STRING: Final = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_INNER_RUN: Final = rb'[^"\[\]{}]*+(?:' + _STRING + rb'[^"\[\]{}]*+)*+'
_OUTER_RUN: Final = rb'[^"\[\]{},]*+(?:' + _STRING + rb'[^"\[\]{},]*+)*+'
_BEGINS: Final = rb"(?=[ \t\n\r]*+[^ \t\n\r,\]])"
"""An element begins here: something but a comma or the array's end follows the spaces."""


@functools.lru_cache(maxsize=8)
def _longer_array(most: int) -> re.Pattern[bytes]:
    """A pattern that matches the start of an array of more than `most` elements: `most` of
    them, each followed by a comma, then the start of one more. Runs are possessive and
    strings skipped whole, so the text is read once, in C, never tried again shorter."""
    inner = _INNER_RUN
    for _ in range(SCAN_DEPTH - 1):
        inner = _INNER_RUN + rb"(?:[\[{]" + inner + rb"[\]}]" + _INNER_RUN + rb")*+"
    element = _OUTER_RUN + rb"(?:[\[{]" + inner + rb"[\]}]" + _OUTER_RUN + rb")*+"
    counted = rb"(?:" + _BEGINS + element + rb",){" + str(most).encode() + rb"}"
    return re.compile(rb"(?>[ \t\n\r]*+\[" + counted + _BEGINS + rb")", re.DOTALL)


def array_longer_than(raw: bytes | bytearray, most: int) -> bool:
    """Whether `raw` is (or begins as) a JSON array of more than `most` elements, told by a
    scan that builds no value: strings skipped whole, nesting followed, stopping where the
    element past `most` begins, however long or malformed the rest. False when it cannot tell
    (not an array, an empty element, an unterminated string, an element nested deeper than
    `SCAN_DEPTH`, `SCAN_MOST_BYTES` read): the parser then decides."""
    if raw[:1] == b"{":
        return False  # one message, as nearly every body is: nothing to count
    stop = min(len(raw), SCAN_MOST_BYTES)
    if most < 1 or raw.count(b",", 0, stop) < most:
        return False  # too few commas for that many elements: most texts end here
    return _longer_array(most).match(raw, 0, stop) is not None
