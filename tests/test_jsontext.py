"""Strict intake: loads_strict accepts exactly RFC 8259 JSON text and refuses the rest with a
JSONTextError whose `fault` says why."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strictcall.core.jsontext import (
    MAX_DEPTH,
    MAX_SIZE,
    SCAN_DEPTH,
    SCAN_MOST_BYTES,
    JSONTextError,
    TextFault,
    array_longer_than,
    loads_strict,
    parse_document,
)

VECTORS = json.loads((Path(__file__).parent / "vectors" / "jsontext.json").read_text("utf-8"))
ACCEPT: list[dict[str, Any]] = VECTORS["accept"]
REFUSE: list[dict[str, Any]] = VECTORS["refuse"]


def dumped(value: Any) -> str:
    """JSON text that tells False from 0, 1.0 from 1 and -0.0 from 0.0, unlike ==."""
    return json.dumps(value, sort_keys=True)


def fault_of(raw: Any, **limits: int) -> TextFault:
    with pytest.raises(JSONTextError) as caught:
        loads_strict(raw, **limits)
    return caught.value.fault


def nested(depth: int, *, kind: str = "array") -> str:
    """A text of `depth` nested arrays (or objects) around 0."""
    if kind == "array":
        return "[" * depth + "0" + "]" * depth
    return '{"a":' * depth + "0" + "}" * depth


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**308), max_value=10**308)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=25,
)
"""Any value a JSON text can hold, integers within the range of a double."""


# --- conformance vectors -----------------------------------------------------------------------


@pytest.mark.parametrize("case", ACCEPT, ids=[case["id"] for case in ACCEPT])
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_valid_json_text_gives_its_exact_value(case: dict[str, Any], as_bytes: bool) -> None:
    raw: str | bytes = case["text"].encode("utf-8") if as_bytes else case["text"]
    value = loads_strict(raw)
    assert dumped(value) == dumped(case["value"])


@pytest.mark.parametrize("case", REFUSE, ids=[case["id"] for case in REFUSE])
def test_text_that_is_not_strict_json_is_refused_with_its_fault(case: dict[str, Any]) -> None:
    if "hex" in case:
        raws: list[str | bytes] = [bytes.fromhex(case["hex"])]
    else:
        raws = [case["text"], case["text"].encode("utf-8")]
    for raw in raws:
        assert fault_of(raw) == TextFault(case["fault"])


# --- numbers -----------------------------------------------------------------------------------

BIG_INTS = [2**64, -(2**64), 2**63, -(2**63) - 1, 10**100, -(10**100), 10**308, 17 * 10**307]


@pytest.mark.parametrize("number", BIG_INTS, ids=[f"{n:.3e}" for n in BIG_INTS])
def test_big_integers_stay_exact_ints(number: int) -> None:
    found = [
        loads_strict(str(number)),
        loads_strict(f"[{number}]")[0],
        loads_strict(f"[1.5,{number}]")[1],  # a float in the text takes another path
        loads_strict(f'{{"\\t":{number}}}')["\t"],  # so does an escape
        loads_strict(str(number).encode()),
    ]
    assert [type(value) for value in found] == [int] * 5
    assert found == [number] * 5


@pytest.mark.parametrize("number", BIG_INTS, ids=[f"{n:.3e}" for n in BIG_INTS])
def test_big_integers_stay_exact_ints_without_the_float_search(number: int) -> None:
    for raw in (f'{{"v":"2.0","n":[{number}]}}', f'{{"v":"2.0","n":[{number}]}}'.encode()):
        value: Any = parse_document(raw, floats=False).value
        assert value == {"v": "2.0", "n": [number]}
        assert parse_document(raw, floats=False).has_float is False
        assert type(value["n"][0]) is int


def test_without_the_float_search_18_digits_and_a_float_are_read_as_orjson_reads_them() -> None:
    for raw in ('[123456789012345678, 1.5, "9999999999999999999x"]', b"[123456789012345678,1.5]"):
        document = parse_document(raw, floats=False)
        value: Any = document.value
        assert document.has_float is False
        assert value[:2] == [123456789012345678, 1.5]


def test_negative_zero_int_is_zero_and_negative_zero_float_keeps_its_sign() -> None:
    assert loads_strict("-0") == 0
    assert type(loads_strict("-0")) is int
    value = loads_strict("-0.0")
    assert type(value) is float
    assert math.copysign(1.0, value) == -1.0


def test_a_number_with_a_fraction_or_exponent_is_a_float() -> None:
    assert [type(v) for v in loads_strict("[1.0, 1e2, 1E-2, 10]")] == [float, float, float, int]


@pytest.mark.parametrize("digits", [310, 400, 4300, 4301, 5000, 100_000])
def test_integer_too_long_for_a_double_is_refused_as_out_of_range(digits: int) -> None:
    for text in ("7" * digits, f"[-{'7' * digits}]", f'{{"\\n":{"7" * digits}}}'):
        assert fault_of(text) is TextFault.NUMBER_OUT_OF_RANGE
        assert fault_of(text.encode()) is TextFault.NUMBER_OUT_OF_RANGE


# --- depth -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["array", "object"])
def test_nesting_64_deep_is_accepted(kind: str) -> None:
    assert MAX_DEPTH == 64
    value = loads_strict(nested(64, kind=kind))
    depth = 0
    while isinstance(value, list | dict):
        value = value[0] if isinstance(value, list) else value["a"]
        depth += 1
    assert (depth, value) == (64, 0)


@pytest.mark.parametrize("kind", ["array", "object"])
def test_nesting_65_deep_is_too_deep(kind: str) -> None:
    assert fault_of(nested(65, kind=kind)) is TextFault.TOO_DEEP


def test_nesting_mixed_arrays_and_objects_counts_both() -> None:
    assert fault_of('{"a":[' * 32 + '{"b":0}' + "]}" * 32) is TextFault.TOO_DEEP
    assert loads_strict('{"a":[' * 31 + '{"b":[0]}' + "]}" * 31) is not None


def test_max_depth_is_configurable() -> None:
    assert loads_strict("[[[0]]]", max_depth=3) == [[[0]]]
    assert fault_of("[[[[0]]]]", max_depth=3) is TextFault.TOO_DEEP
    assert fault_of('[{"a":[0]}]', max_depth=2) is TextFault.TOO_DEEP


def test_depth_limit_holds_in_text_that_is_parsed_twice() -> None:
    # A backslash sends the text through the exact (stdlib) parse too; depth is checked first.
    assert loads_strict("[" * 64 + '"\\n"' + "]" * 64) is not None
    assert fault_of("[" * 65 + '"\\n"' + "]" * 65) is TextFault.TOO_DEEP


@pytest.mark.parametrize("depth", [1_000, 1_025, 100_000])
@pytest.mark.parametrize("kind", ["array", "object"])
def test_very_deep_nesting_is_too_deep_without_recursion_error(depth: int, kind: str) -> None:
    text = nested(depth, kind=kind)
    assert fault_of(text) is TextFault.TOO_DEEP
    assert fault_of(text.encode()) is TextFault.TOO_DEEP
    assert fault_of(text[: len(text) // 2]) in {TextFault.TOO_DEEP, TextFault.SYNTAX}


# --- duplicates --------------------------------------------------------------------------------


def test_duplicate_hidden_behind_escapes_in_a_deep_object_is_found() -> None:
    text = '{"a":' * 60 + '{"k\\u003a":1,"k:":2}' + "}" * 60
    assert fault_of(text) is TextFault.DUPLICATE_MEMBER


def test_many_members_with_colons_and_no_duplicate_are_accepted() -> None:
    members = {f"k:{i}": f"v:{i}:{i}" for i in range(1000)}
    assert loads_strict(json.dumps(members)) == members
    assert loads_strict(json.dumps(members, separators=(",", ":"))) == members


# --- size --------------------------------------------------------------------------------------


def test_default_size_limit_is_one_mebibyte() -> None:
    assert MAX_SIZE == 1 << 20
    text = "[" + " " * (MAX_SIZE - 3) + "0]"
    assert len(text) == MAX_SIZE
    assert loads_strict(text) == [0]
    assert loads_strict(text.encode()) == [0]
    assert fault_of(text + " ") is TextFault.TOO_LARGE
    assert fault_of(text.encode() + b" ") is TextFault.TOO_LARGE


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_max_size_is_configurable(as_bytes: bool) -> None:
    raw: str | bytes = b"[1]" if as_bytes else "[1]"
    assert loads_strict(raw, max_size=3) == [1]
    assert fault_of(raw, max_size=2) is TextFault.TOO_LARGE
    assert fault_of(raw, max_size=0) is TextFault.TOO_LARGE


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_oversize_text_is_refused_before_parsing(as_bytes: bool) -> None:
    garbage = "NaN{'" * (MAX_SIZE // 4) + "\u0000"
    raw: str | bytes = garbage.encode() if as_bytes else garbage
    assert len(raw) > MAX_SIZE
    assert fault_of(raw) is TextFault.TOO_LARGE
    assert fault_of("[" * 100_000, max_size=1000) is TextFault.TOO_LARGE


def test_size_of_str_counts_characters_and_of_bytes_counts_bytes() -> None:
    text = '"' + "\u00e9" * 8 + '"'
    assert len(text) == 10
    assert len(text.encode()) == 18
    assert loads_strict(text, max_size=10) == "\u00e9" * 8
    assert fault_of(text.encode(), max_size=10) is TextFault.TOO_LARGE


# --- what counts as text -----------------------------------------------------------------------

NOT_TEXT: list[Any] = [None, 0, 1.5, True, [], {}, ["[1]"], bytearray(b"[1]"), memoryview(b"[1]")]


@pytest.mark.parametrize("raw", NOT_TEXT, ids=[type(r).__name__ for r in NOT_TEXT])
def test_input_that_is_neither_str_nor_bytes_is_not_text(raw: Any) -> None:
    assert fault_of(raw) is TextFault.NOT_TEXT


def test_not_text_is_decided_before_size() -> None:
    assert fault_of([0] * 100, max_size=1) is TextFault.NOT_TEXT


class Text(str):
    pass


class Raw(bytes):
    pass


def test_str_and_bytes_subclasses_are_read_as_the_text_they_hold() -> None:
    assert loads_strict(Text('{"a":[1,"\\n"]}')) == {"a": [1, "\n"]}
    assert loads_strict(Raw(b'{"a":[1]}')) == {"a": [1]}
    assert fault_of(Text('{"a":1,"a":2}')) is TextFault.DUPLICATE_MEMBER
    assert fault_of(Text("[1]"), max_size=2) is TextFault.TOO_LARGE
    assert fault_of(Raw(b"[1]"), max_size=2) is TextFault.TOO_LARGE


def test_raw_lone_surrogate_in_a_str_is_refused() -> None:
    assert fault_of('"\ud800"') is TextFault.LONE_SURROGATE
    assert fault_of('["a\udfff"]') is TextFault.LONE_SURROGATE


# --- the error itself --------------------------------------------------------------------------


def test_syntax_error_on_line_2_reports_line_2_and_a_column() -> None:
    with pytest.raises(JSONTextError) as caught:
        loads_strict('{"a": 1,\n "b": tru}')
    error = caught.value
    assert error.fault is TextFault.SYNTAX
    assert error.line == 2
    assert error.column is not None
    assert 1 <= error.column <= len(' "b": tru}') + 1


def test_json_text_error_is_a_value_error_carrying_its_fault() -> None:
    error = JSONTextError(TextFault.TOO_DEEP)
    assert isinstance(error, ValueError)
    assert error.fault is TextFault.TOO_DEEP
    assert (error.line, error.column) == (None, None)


def test_parse_document_never_misses_a_float() -> None:
    assert parse_document('{"a":[1,2]}').has_float is False
    assert parse_document('{"a":[1,2.0]}').has_float is True
    assert parse_document('{"a":[1,2E3]}').has_float is True
    assert parse_document("18446744073709551616").has_float is False
    assert parse_document('["\\n", 1e2]').has_float is True
    assert parse_document('"no digits. e E"').has_float is False
    # a string that opens with a digit and a point is no number: JSON-RPC's own "2.0" says
    # nothing of the params (every message said it had a float, the slower check ran for all)
    assert parse_document('"1.5"').has_float is False
    envelope = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"n":3}}}'
    assert parse_document(envelope).has_float is False
    assert parse_document(envelope.encode()).has_float is False
    assert parse_document(envelope.replace('"n":3', '"n":3.0')).has_float is True
    # conservative: text that only looks like a float may say so (the exact validator then runs)
    assert parse_document('"11.5"').has_float is True


@given(json_values)
def test_a_value_with_a_float_is_always_flagged(value: Any) -> None:
    if "float" in _types_in(value):
        assert parse_document(json.dumps(value)).has_float is True


@given(json_values)
def test_bytes_say_what_the_same_text_as_str_says(value: Any) -> None:
    # bytes are searched with their digits written 0 and str with the patterns themselves: the
    # str reading is the reference, float flag and exact long integers alike
    text = json.dumps(value)
    for spaced in (text, f'["2.0", "1e5", {text}, "x0.5"]'):
        as_str, as_bytes = parse_document(spaced), parse_document(spaced.encode())
        assert as_bytes.has_float is as_str.has_float
        assert as_bytes.value == as_str.value
        assert parse_document(spaced.encode(), floats=False) == parse_document(spaced, floats=False)


@pytest.mark.parametrize(
    "text",
    [
        '"2.0"',
        "2.0",
        '["a2.5"]',
        '"x"0',
        "[1e5]",
        '["1e5"]',
        "[12345678901234567890]",
        '["12345678901234567890"]',
        "[1234567890123456789]",
        "[123456789012345678]",
        "[0.5]",
    ],
)
def test_bytes_and_str_agree_on_each_digit_pattern(text: str) -> None:
    try:
        expected = parse_document(text)
    except JSONTextError:
        with pytest.raises(JSONTextError):
            parse_document(text.encode())
        return
    assert parse_document(text.encode()) == expected


def _types_in(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {"dict"}.union(*(_types_in(v) for v in value.values()))
    if isinstance(value, list):
        return {"list"}.union(*(_types_in(v) for v in value))
    return {type(value).__name__}


# --- properties --------------------------------------------------------------------------------


def value_or_text_error(raw: str | bytes) -> None:
    try:
        loads_strict(raw)
    except JSONTextError as error:
        assert isinstance(error.fault, TextFault)


@settings(max_examples=300, deadline=None)
@given(raw=st.text(st.characters(exclude_categories=())))
def test_any_str_gives_a_value_or_a_json_text_error(raw: str) -> None:
    value_or_text_error(raw)


@settings(max_examples=300, deadline=None)
@given(raw=st.text('{}[]":,0123456789.eE+-aflnrstu\\ \n\t/\u00e9\ud800'))
def test_any_json_like_str_gives_a_value_or_a_json_text_error(raw: str) -> None:
    value_or_text_error(raw)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary())
def test_any_bytes_give_a_value_or_a_json_text_error(raw: bytes) -> None:
    value_or_text_error(raw)


@settings(max_examples=200, deadline=None)
@given(
    value=json_values,
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
    as_bytes=st.booleans(),
)
def test_any_json_value_round_trips_unchanged(
    value: Any, ensure_ascii: bool, indent: int | None, as_bytes: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)
    raw: str | bytes = text.encode("utf-8") if as_bytes else text
    assert dumped(loads_strict(raw)) == dumped(value)


# A JSON text written member by member, so that an object can repeat a name.
Tree = tuple[str, Any]

names = st.sampled_from(["a", "b", "a:", ":", ":a:", 'a"', "a\\", "\u00e9", "\U0001f600", ""])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet='ab:"\\\u00e9\n', max_size=4)
)
trees: st.SearchStrategy[Tree] = st.recursive(
    scalars.map(lambda value: ("scalar", value)),
    lambda children: (
        st.lists(children, max_size=4).map(lambda items: ("array", items))
        | st.lists(st.tuples(names, children), max_size=4).map(lambda pairs: ("object", pairs))
    ),
    max_leaves=20,
)


def written(tree: Tree, ensure_ascii: bool) -> str:
    kind, body = tree
    if kind == "scalar":
        return json.dumps(body, ensure_ascii=ensure_ascii)
    if kind == "array":
        return "[" + ",".join(written(item, ensure_ascii) for item in body) + "]"
    members = (
        json.dumps(name, ensure_ascii=ensure_ascii) + ":" + written(item, ensure_ascii)
        for name, item in body
    )
    return "{" + ",".join(members) + "}"


class Repeated(Exception):
    pass


def no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({name for name, _ in pairs}) != len(pairs):
        raise Repeated
    return dict(pairs)


@settings(max_examples=300, deadline=None)
@given(tree=trees, ensure_ascii=st.booleans())
def test_duplicate_names_are_found_exactly_when_an_object_repeats_one(
    tree: Tree, ensure_ascii: bool
) -> None:
    text = written(tree, ensure_ascii)
    try:
        expected = json.loads(text, object_pairs_hook=no_repeats)
    except Repeated:
        assert fault_of(text) is TextFault.DUPLICATE_MEMBER
        assert fault_of(text.encode()) is TextFault.DUPLICATE_MEMBER
        return
    assert dumped(loads_strict(text)) == dumped(expected)
    assert dumped(loads_strict(text.encode())) == dumped(expected)


def test_deep_text_under_a_large_max_depth_never_raises_recursion_error() -> None:
    # orjson allows 1024 levels; the exact re-parse (escapes) may hit Python's recursion limit
    # first, and that too is a refusal, never an exception of another kind.
    for depth in (900, 1000, 1024):
        text = "[" * depth + '"\\n"' + "]" * depth
        try:
            value = loads_strict(text, max_depth=2000)
        except JSONTextError as error:
            assert error.fault is TextFault.TOO_DEEP
        else:
            for _ in range(depth):
                value = value[0]
            assert value == "\n"


@pytest.mark.parametrize(
    ("text", "longer"),
    [
        (b"[1,2]", True),
        (b" \n[ 1 , 2 ]", True),
        (b"[1,2", True),  # the rest is never read: a parse would refuse it
        (b"[1,2,", True),
        (b"[1]", False),
        (b"[1,]", False),  # an empty element: the parser's to refuse
        (b"[,1,2]", False),
        (b"[1,,2]", False),
        (b'["a,b"]', False),  # commas, brackets and escaped quotes in strings are text
        (b'["a\\",[" ]', False),
        (b'["a\\"],[", 2]', True),
        (b'["a\\"]", 2]', True),
        (b"[[1,2,3]]", False),  # the inner commas are not the batch's
        (b'[{"a":[1,{"b":",]"}]}, 3]', True),
        (b'{"a": 1, "b": 2}', False),
        (b'["unterminated, 2]', False),
    ],
)
def test_an_array_longer_than_one_element_is_told_unparsed(text: bytes, longer: bool) -> None:
    assert array_longer_than(text, 1) is longer
    assert array_longer_than(bytearray(text), 1) is longer


def test_an_array_is_longer_than_the_limit_at_one_element_past_it() -> None:
    at = b"[" + b",".join([b'{"id": 1}'] * 100) + b"]"
    past = b"[" + b",".join([b'{"id": 1}'] * 101) + b"]"
    assert not array_longer_than(at, 100)
    assert array_longer_than(past, 100)
    assert array_longer_than(past[:-1] + b", tru", 100)  # told before the broken end


def test_the_scan_leaves_to_the_parser_what_it_cannot_tell_within_its_bounds() -> None:
    deep = b"[" * SCAN_DEPTH + b"]" * SCAN_DEPTH
    assert array_longer_than(b"[" + deep + b",1]", 1)
    assert not array_longer_than(b"[[" + deep + b"],1]", 1)  # nested past SCAN_DEPTH
    within = b'["' + b"a" * (SCAN_MOST_BYTES - 8) + b'",1,2]'
    assert len(within) == SCAN_MOST_BYTES
    assert array_longer_than(within, 2)
    assert not array_longer_than(b'["aa' + within[2:], 2)  # its third element past the bytes


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    return 0


@given(st.lists(json_values, max_size=8), st.integers(min_value=1, max_value=6), st.booleans())
@settings(max_examples=300)
def test_the_scan_tells_an_array_longer_than_the_limit_as_its_parse_would(
    elements: list[Any], most: int, spaced: bool
) -> None:
    separators = (" , ", " : ") if spaced else (",", ":")
    text = json.dumps(elements, separators=separators, ensure_ascii=False).encode()
    longer = array_longer_than(text, most)
    assert not longer or len(elements) > most  # never a refusal of an array within it
    if len(elements) > most and all(depth_of(e) < SCAN_DEPTH for e in elements):
        assert longer  # and, within its bounds, never a miss
