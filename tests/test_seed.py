"""strictcall.handle answers exactly as seed 002's handle does, stage by stage, and reads its text
strictly: what is not strict JSON is invalid_json at stage parse, and nothing makes it raise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seed_reference import handle as seed_handle
from strictcall import errors, handle
from strictcall.core.jsontext import MAX_SIZE
from strictcall.errors import ErrorKind
from strictcall.services.demo import NOTES, READ_NOTE_INPUT, demo_lines

HERE = Path(__file__).parent
VECTORS = json.loads((HERE / "vectors" / "read_note.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = VECTORS["cases"]

DEMO_LINES = [
    '{"case": "valid", "ok": true, "call_id": "call-1", "result": {"note_id": "n1", "text": "退款窗口为 7 天。"}}',  # noqa: E501
    '{"case": "invalid_json", "ok": false, "call_id": "call-1", "error": {"code": "invalid_json", "stage": "parse", "retryable": false}}',  # noqa: E501
    '{"case": "extra_field", "ok": false, "call_id": "call-1", "error": {"code": "invalid_arguments", "stage": "shape", "retryable": false}}',  # noqa: E501
    '{"case": "wrong_owner", "ok": false, "call_id": "call-1", "error": {"code": "forbidden_or_missing", "stage": "resource", "retryable": false}}',  # noqa: E501
]
"""Seed 002's demo output, copied from the seed document."""

VALID = '{"name":"read_note","arguments":{"note_id":"n1"}}'

PYTHON_WHITESPACE = [chr(c) for c in range(0x110000) if chr(c).isspace()]


def exact(answer: Any) -> str:
    """The answer as JSON text, member order included: the seed's demo prints it this way."""
    return json.dumps(answer, ensure_ascii=False)


def refused(kind: ErrorKind, call_id: str = "call-1") -> dict[str, Any]:
    return {
        "ok": False,
        "call_id": call_id,
        "error": {"code": kind.code, "stage": kind.stage.value, "retryable": kind.retryable},
    }


def succeeded(note_id: str, owner: str, call_id: str = "call-1") -> dict[str, Any]:
    return {
        "ok": True,
        "call_id": call_id,
        "result": {"note_id": note_id, "text": NOTES[owner][note_id]},
    }


def assert_same_as_seed(
    raw: str, identity: str, call_id: str = "call-1", result_override: Any = None
) -> dict[str, Any]:
    expected = seed_handle(raw, identity, call_id, result_override)
    for text in (raw, raw.encode("utf-8")):
        answer = handle(text, identity, call_id, result_override)
        assert exact(answer) == exact(expected)
    return expected


# --- conformance vectors -----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_read_note_vector_gets_its_answer(case: dict[str, Any]) -> None:
    call_id = case.get("call_id", "call-1")
    for raw in (case["raw"], case["raw"].encode("utf-8")):
        answer = handle(raw, case["identity"], call_id)
        assert exact(answer) == exact(case["answer"])


@pytest.mark.parametrize(
    "case",
    [case for case in CASES if not case.get("strict_only")],
    ids=[case["id"] for case in CASES if not case.get("strict_only")],
)
def test_read_note_vector_answer_is_the_seeds_answer(case: dict[str, Any]) -> None:
    answer = assert_same_as_seed(case["raw"], case["identity"], case.get("call_id", "call-1"))
    assert exact(answer) == exact(case["answer"])


# --- the demo ----------------------------------------------------------------------------------


def test_demo_lines_are_the_seeds_four_lines_byte_for_byte() -> None:
    assert demo_lines() == DEMO_LINES
    assert "\n".join(demo_lines()).encode("utf-8") == "\n".join(DEMO_LINES).encode("utf-8")


def test_seed_reference_prints_the_documented_demo() -> None:
    """The oracle these tests compare with is the seed: it prints the document's four lines."""
    printed = subprocess.run(
        [sys.executable, "-X", "utf8", str(HERE / "seed_reference.py")],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert printed.stdout == "".join(line + "\n" for line in DEMO_LINES).encode("utf-8")


# --- each stage passes and fails ---------------------------------------------------------------


def test_valid_call_climbs_every_stage() -> None:
    assert handle(VALID, "u1") == succeeded("n1", "u1")
    assert handle(VALID.replace("n1", "n2"), "u2", "c-2") == succeeded("n2", "u2", "c-2")


def test_parse_stage_refuses_broken_text() -> None:
    assert handle('{"name":', "u1") == refused(errors.INVALID_JSON)


def test_parse_stage_accepts_text_of_exactly_one_mebibyte() -> None:
    raw = VALID + " " * (MAX_SIZE - len(VALID))
    assert len(raw) == MAX_SIZE
    assert handle(raw, "u1") == succeeded("n1", "u1")
    assert handle(raw.encode(), "u1") == succeeded("n1", "u1")


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_parse_stage_refuses_text_over_one_mebibyte_as_request_too_large(as_bytes: bool) -> None:
    raw = VALID + " " * (MAX_SIZE - len(VALID) + 1)
    answer = handle(raw.encode() if as_bytes else raw, "u1", "big")
    assert answer == refused(errors.REQUEST_TOO_LARGE, "big")
    garbage = "x" * (2 * MAX_SIZE)
    assert handle(garbage, "u1") == refused(errors.REQUEST_TOO_LARGE)


ROUTE_FAILURES = ["[]", '"x"', "0", "null", '{"name":5}', "{}", '{"arguments":{"note_id":"n1"}}']


@pytest.mark.parametrize("raw", ROUTE_FAILURES, ids=ROUTE_FAILURES)
def test_route_stage_refuses_anything_but_an_object_naming_read_note(raw: str) -> None:
    assert handle(raw, "u1") == refused(errors.UNKNOWN_TOOL)
    assert_same_as_seed(raw, "u1")


SHAPE_FAILURES = {
    "extra-argument": '{"note_id":"n1","admin":true}',
    "no-note-id": "{}",
    "note-id-number": '{"note_id":1}',
    "note-id-blank": '{"note_id":" \\t"}',
    "arguments-list": '["n1"]',
}


@pytest.mark.parametrize("arguments", SHAPE_FAILURES.values(), ids=SHAPE_FAILURES.keys())
def test_shape_stage_refuses_arguments_other_than_one_nonblank_note_id(arguments: str) -> None:
    raw = '{"name":"read_note","arguments":' + arguments + "}"
    assert handle(raw, "u1") == refused(errors.INVALID_ARGUMENTS)
    assert_same_as_seed(raw, "u1")


@pytest.mark.parametrize(
    ("note_id", "identity"),
    [("n1", "u2"), ("n2", "u1"), ("n1", "u3"), ("n1", ""), ("n3", "u1"), (" n1", "u1")],
    ids=["wrong-owner", "other-note", "unknown-user", "no-identity", "no-such-note", "padded"],
)
def test_resource_stage_refuses_a_note_the_caller_does_not_own(note_id: str, identity: str) -> None:
    raw = json.dumps({"name": "read_note", "arguments": {"note_id": note_id}})
    assert handle(raw, identity) == refused(errors.FORBIDDEN_OR_MISSING)
    assert_same_as_seed(raw, identity)


BAD_RESULTS: dict[str, Any] = {
    "empty": {},
    "other-note": {"note_id": "n2", "text": "x"},
    "text-number": {"note_id": "n1", "text": 7},
    "text-null": {"note_id": "n1", "text": None},
    "note-id-number": {"note_id": 1, "text": "x"},
    "missing-text": {"note_id": "n1"},
    "extra-member": {"note_id": "n1", "text": "x", "admin": True},
    "false": False,
    "zero": 0,
    "empty-string": "",
    "empty-list": [],
    "list-of-result": [{"note_id": "n1", "text": "x"}],
}


@pytest.mark.parametrize("result", BAD_RESULTS.values(), ids=BAD_RESULTS.keys())
def test_output_stage_withholds_a_result_that_breaks_the_contract(result: Any) -> None:
    assert handle(VALID, "u1", "c", result) == refused(errors.INVALID_TOOL_RESULT, "c")
    assert_same_as_seed(VALID, "u1", "c", result)


def test_output_stage_passes_a_valid_override_as_the_same_object() -> None:
    result = {"text": "改写的正文", "note_id": "n1"}
    answer = handle(VALID, "u1", "c", result)
    assert answer == {"ok": True, "call_id": "c", "result": result}
    assert answer["result"] is result
    assert_same_as_seed(VALID, "u1", "c", result)


def test_override_is_not_consulted_before_the_resource_stage_passes() -> None:
    assert handle(VALID, "u2", "c", {}) == refused(errors.FORBIDDEN_OR_MISSING, "c")
    assert handle('{"name":', "u1", "c", False) == refused(errors.INVALID_JSON, "c")  # type: ignore[arg-type]


def test_first_failing_stage_wins() -> None:
    assert handle('{"name":"x","arguments":5}', "nobody", "c", {}) == refused(
        errors.UNKNOWN_TOOL, "c"
    )
    assert handle('{"name":"read_note","arguments":5}', "nobody", "c", {}) == refused(
        errors.INVALID_ARGUMENTS, "c"
    )


# --- note_id: non-blank exactly as str.strip() says --------------------------------------------


def test_not_blank_pattern_agrees_with_str_strip_on_every_code_point() -> None:
    validator = jsonschema_rs.Draft202012Validator(READ_NOTE_INPUT)
    disagree = [
        hex(code)
        for code in range(0x110000)
        if not 0xD800 <= code <= 0xDFFF
        and validator.is_valid({"note_id": chr(code)}) != bool(chr(code).strip())
    ]
    assert disagree == []


def test_python_whitespace_is_the_expected_set() -> None:
    # If a Python release changes str.isspace, the pattern in seed.py must follow it.
    assert len(PYTHON_WHITESPACE) == 29
    assert "\ufeff" not in PYTHON_WHITESPACE
    assert "\x1c" in PYTHON_WHITESPACE


@pytest.mark.parametrize("space", PYTHON_WHITESPACE, ids=[hex(ord(c)) for c in PYTHON_WHITESPACE])
def test_note_id_of_python_whitespace_only_is_invalid_arguments(space: str) -> None:
    for note_id in (space, space * 3, space + " \t"):
        raw = json.dumps({"name": "read_note", "arguments": {"note_id": note_id}})
        assert handle(raw, "u1") == refused(errors.INVALID_ARGUMENTS)
        assert_same_as_seed(raw, "u1")
    padded = json.dumps({"name": "read_note", "arguments": {"note_id": space + "n1"}})
    assert handle(padded, "u1") == refused(errors.FORBIDDEN_OR_MISSING)


# --- strict intake through handle --------------------------------------------------------------

STRICT_REFUSALS = {
    "nan": VALID[:-1] + ',"x":NaN}',
    "infinity": VALID[:-1] + ',"x":Infinity}',
    "duplicate-note-id": '{"name":"read_note","arguments":{"note_id":"n2","note_id":"n1"}}',
    "duplicate-name": '{"name":"x","name":"read_note","arguments":{"note_id":"n1"}}',
    "escaped-duplicate": '{"name":"read_note","arguments":{"note_id":"n1","\\u006eote_id":"n1"}}',
    "depth-65": VALID[:-1] + ',"x":' + "[" * 64 + "]" * 64 + "}",
    "depth-100000": "[" * 100_000 + "]" * 100_000,
    "unclosed-depth-100000": '{"a":' * 100_000,
    "int-5000-digits": VALID[:-1] + ',"x":' + "9" * 5000 + "}",
    "note-id-5000-digits": '{"name":"read_note","arguments":{"note_id":' + "9" * 5000 + "}}",
    "lone-surrogate": VALID[:-1] + ',"x":"\\ud800"}',
    "comment": VALID + "//",
    "bom": "\ufeff" + VALID,
}


@pytest.mark.parametrize("raw", STRICT_REFUSALS.values(), ids=STRICT_REFUSALS.keys())
def test_text_that_is_not_strict_json_is_invalid_json_at_parse(raw: str) -> None:
    for text in (raw, raw.encode("utf-8")):
        assert handle(text, "u1", "mine") == refused(errors.INVALID_JSON, "mine")


INVALID_UTF8 = {
    "ff-in-note-id": VALID.encode().replace(b"n1", b"n\xff"),
    "lone-continuation": b"\x80",
    "overlong": VALID.encode().replace(b"n1", b"\xc0\xaf"),
    "encoded-surrogate": VALID.encode().replace(b"n1", b"\xed\xa0\x80"),
    "latin1": VALID.encode().replace(b"n1", "né".encode("latin-1")),
    "utf16": VALID.encode("utf-16"),
    "utf8-bom": b"\xef\xbb\xbf" + VALID.encode(),
}


@pytest.mark.parametrize("raw", INVALID_UTF8.values(), ids=INVALID_UTF8.keys())
def test_bytes_that_are_not_utf8_json_are_invalid_json_at_parse(raw: bytes) -> None:
    assert handle(raw, "u1", "mine") == refused(errors.INVALID_JSON, "mine")


def test_bytes_input_is_read_as_utf8() -> None:
    assert handle(VALID.encode(), "u1") == succeeded("n1", "u1")
    raw = '{"name":"read_note","arguments":{"note_id":"n1"},"备注":"退款"}'.encode()
    assert handle(raw, "u1") == succeeded("n1", "u1")


def test_str_subclass_input_is_read_as_the_text_it_holds() -> None:
    class Text(str):
        pass

    assert handle(Text(VALID), "u1") == succeeded("n1", "u1")
    assert_same_as_seed(Text(VALID), "u1")


NOT_TEXT: list[Any] = [None, 0, [], {"name": "read_note"}, bytearray(b"[]")]


@pytest.mark.parametrize("raw", NOT_TEXT, ids=[type(r).__name__ for r in NOT_TEXT])
def test_input_that_is_not_str_or_bytes_is_invalid_json(raw: Any) -> None:
    assert handle(raw, "u1", "mine") == refused(errors.INVALID_JSON, "mine")


# --- properties --------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**300), max_value=10**300)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
blank = st.text(alphabet=st.sampled_from(PYTHON_WHITESPACE), max_size=4)
note_ids = st.sampled_from(["n1", "n2", "n3", "N1", " n1", "n1 ", "", "\ufeff"]) | blank | st.text()
arguments = (
    st.fixed_dictionaries({"note_id": note_ids | json_scalars})
    | st.fixed_dictionaries({"note_id": note_ids}, optional={"admin": json_values})
    | st.dictionaries(st.sampled_from(["note_id", "noteid", "id", ""]), note_ids, max_size=2)
    | json_values
)
tool_names = (
    st.sampled_from(["read_note", "read_note", "READ_NOTE", "read_notes", ""]) | json_scalars
)
calls = st.builds(
    lambda extra, call: {**extra, **call},
    st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    st.fixed_dictionaries({}, optional={"name": tool_names, "arguments": arguments}),
) | st.fixed_dictionaries({"name": st.just("read_note"), "arguments": arguments})
overrides = (
    st.none()
    | st.fixed_dictionaries(
        {
            "note_id": st.sampled_from(["n1", "n2"]) | st.text(max_size=3) | json_scalars,
            "text": st.text() | json_scalars,
        },
        optional={"extra": json_values},
    )
    | json_values
)
identities = st.sampled_from(["u1", "u2", "u3", ""])


@settings(max_examples=400, deadline=None)
@given(
    call=calls | json_values,
    identity=identities,
    call_id=st.sampled_from(["call-1", "c"]) | st.text(),
    result_override=overrides,
    ensure_ascii=st.booleans(),
)
def test_any_strict_json_call_gets_the_seeds_answer(
    call: Any, identity: str, call_id: str, result_override: Any, ensure_ascii: bool
) -> None:
    raw = json.dumps(call, ensure_ascii=ensure_ascii)
    answer = assert_same_as_seed(raw, identity, call_id, result_override)
    assert set(answer) == (
        {"ok", "call_id", "result"} if answer["ok"] else {"ok", "call_id", "error"}
    )


CATALOGUE_ERRORS = [kind.as_error() for kind in errors.CATALOGUE]


def assert_structured(answer: Any, call_id: str) -> None:
    assert type(answer) is dict
    assert type(answer["ok"]) is bool
    assert answer["call_id"] == call_id
    if answer["ok"]:
        assert list(answer) == ["ok", "call_id", "result"]
    else:
        assert list(answer) == ["ok", "call_id", "error"]
        assert list(answer["error"]) == ["code", "stage", "retryable"]
        assert answer["error"] in CATALOGUE_ERRORS
        assert answer["error"]["retryable"] is False


@settings(max_examples=300, deadline=None)
@given(raw=st.text(st.characters(exclude_categories=())), identity=identities, call_id=st.text())
def test_any_str_gets_a_structured_answer(raw: str, identity: str, call_id: str) -> None:
    assert_structured(handle(raw, identity, call_id), call_id)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(), identity=identities, call_id=st.text())
def test_any_bytes_get_a_structured_answer(raw: bytes, identity: str, call_id: str) -> None:
    assert_structured(handle(raw, identity, call_id), call_id)


@settings(max_examples=300, deadline=None)
@given(raw=st.text('{}[]":,0123456789.eE-aflnrstu\\ _1noteidamr'), identity=identities)
def test_any_json_like_str_gets_a_structured_answer(raw: str, identity: str) -> None:
    assert_structured(handle(raw, identity, "x"), "x")
