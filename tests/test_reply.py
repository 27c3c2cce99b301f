"""interpret_tool_reply: seed 000's contract to the letter, then one test per rule of issue 2."""

# The seed's regression code below runs verbatim, untyped helpers included; everything else in
# this file is fully annotated.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

import copy
import json
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strictcall import interpret_tool_reply

VECTORS = json.loads((Path(__file__).parent / "vectors" / "reply.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = VECTORS["cases"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=25,
)
"""Any value a JSON text can hold."""


def envelope_of(expected_id: str | int = "call-7", **fields: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": expected_id, **fields}


def dumped(value: Any) -> str:
    """JSON text that tells False from 0 and 1.0 from 1, unlike ==."""
    return json.dumps(value, sort_keys=True)


# --- seed 000, verbatim ------------------------------------------------------------------------


def test_seed_000_regression_code_passes_verbatim() -> None:
    """The seed's own test block, copied exactly (indented into this function)."""
    # fmt: off
    import copy
    import json


    def envelope(**fields):
        return {"jsonrpc": "2.0", "id": "call-7", **fields}


    # JSON 字符串比较避免 Python 将 False 与 0 视为相等。
    def assert_json_equal(actual, expected):
        assert json.dumps(actual, sort_keys=True) == json.dumps(expected, sort_keys=True)


    values = [3, 0, False, "", [], {}, None, {"items": [0, False, None]}]
    for value in values:
        source = envelope(result=value)
        before = copy.deepcopy(source)
        assert_json_equal(
            interpret_tool_reply(source, "call-7"),
            {"status": "ok", "value": value},
        )
        assert_json_equal(source, before)

    error = {"code": -32001, "message": "Retry later", "data": {"after": 0}}
    assert_json_equal(
        interpret_tool_reply(envelope(error=error), "call-7"),
        {"status": "error", "error": error},
    )

    invalid = [
        [],
        envelope(),
        envelope(result=0, error=error),
        {"jsonrpc": "1.0", "id": "call-7", "result": 3},
        {"jsonrpc": "2.0", "id": "call-8", "result": 3},
        {"jsonrpc": "2.0", "result": 3},
        envelope(error=None),
        envelope(error={"code": True, "message": "Oops"}),
        envelope(error={"code": 1}),
        envelope(error={"code": 1.0, "message": "Oops"}),
        envelope(error={"code": 1, "message": None}),
    ]
    for source in invalid:
        assert interpret_tool_reply(source, "call-7") == {"status": "invalid"}

    # 两种局部修补都应被反例区分出来。
    assert bool(envelope(result=0).get("result")) is False
    assert (envelope(result=None).get("result") is not None) is False
    assert "result" in envelope(result=None)
    # fmt: on


# --- conformance vectors -----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_reply_vector_gets_its_status(case: dict[str, Any]) -> None:
    reply = case["reply"]
    before = copy.deepcopy(reply)
    answer = interpret_tool_reply(reply, case["expected_id"])
    if case["status"] == "ok":
        assert answer == {"status": "ok", "value": reply["result"]}
        assert answer["value"] is reply["result"]
    elif case["status"] == "error":
        assert answer == {"status": "error", "error": reply["error"]}
        assert answer["error"] is reply["error"]
    else:
        assert answer == {"status": "invalid"}
    assert dumped(reply) == dumped(before)


# --- presence, never truth ---------------------------------------------------------------------

FALSY_RESULTS = [0, 0.0, -0.0, False, "", [], {}, None, {"items": [0, False, None, "", [], {}]}]


@pytest.mark.parametrize("value", FALSY_RESULTS, ids=[repr(v) for v in FALSY_RESULTS])
def test_reply_with_falsy_result_is_ok_with_that_exact_value(value: Any) -> None:
    reply = envelope_of(result=value)
    answer = interpret_tool_reply(reply, "call-7")
    assert list(answer) == ["status", "value"]
    assert answer["status"] == "ok"
    assert answer["value"] is value
    assert dumped(answer["value"]) == dumped(value)


def test_reply_with_null_result_is_ok_not_missing() -> None:
    assert interpret_tool_reply(envelope_of(result=None), "call-7") == {
        "status": "ok",
        "value": None,
    }


# --- exactly one of result and error -----------------------------------------------------------

VALID_ERROR = {"code": -32001, "message": "Retry later"}


@pytest.mark.parametrize(
    "fields",
    [
        {"result": 0, "error": VALID_ERROR},
        {"result": None, "error": VALID_ERROR},
        {"result": None, "error": None},
        {"result": 3, "error": {"code": True, "message": "bad error"}},
    ],
    ids=["zero-and-error", "null-and-error", "both-null", "result-and-bad-error"],
)
def test_reply_with_both_result_and_error_is_invalid(fields: dict[str, Any]) -> None:
    assert interpret_tool_reply(envelope_of(**fields), "call-7") == {"status": "invalid"}


def test_reply_with_neither_result_nor_error_is_invalid() -> None:
    assert interpret_tool_reply(envelope_of(), "call-7") == {"status": "invalid"}


# --- jsonrpc is exactly "2.0" ------------------------------------------------------------------

NOT_2_0: list[Any] = ["1.0", 2.0, 2, "2", "2.00", " 2.0", None, True, ["2.0"]]


@pytest.mark.parametrize("version", NOT_2_0, ids=[repr(v) for v in NOT_2_0])
def test_reply_whose_jsonrpc_is_not_exactly_2_0_is_invalid(version: Any) -> None:
    reply = {"jsonrpc": version, "id": "call-7", "result": 3}
    assert interpret_tool_reply(reply, "call-7") == {"status": "invalid"}


def test_reply_without_jsonrpc_is_invalid() -> None:
    assert interpret_tool_reply({"id": "call-7", "result": 3}, "call-7") == {"status": "invalid"}


# --- a well-formed error -----------------------------------------------------------------------

BAD_CODES: list[Any] = [True, False, 1.0, 0.0, "1", None, [1], {"n": 1}]


@pytest.mark.parametrize("code", BAD_CODES, ids=[repr(c) for c in BAD_CODES])
def test_error_whose_code_is_not_exactly_an_int_is_invalid(code: Any) -> None:
    reply = envelope_of(error={"code": code, "message": "Oops"})
    assert interpret_tool_reply(reply, "call-7") == {"status": "invalid"}


BAD_MESSAGES: list[Any] = [None, 42, 0, False, ["Oops"], {"text": "Oops"}, b"Oops"]


@pytest.mark.parametrize("message", BAD_MESSAGES, ids=[repr(m) for m in BAD_MESSAGES])
def test_error_whose_message_is_not_a_str_is_invalid(message: Any) -> None:
    reply = envelope_of(error={"code": 1, "message": message})
    assert interpret_tool_reply(reply, "call-7") == {"status": "invalid"}


@pytest.mark.parametrize(
    "error",
    [{"code": 1}, {"message": "Oops"}, {}],
    ids=["no-message", "no-code", "empty"],
)
def test_error_missing_code_or_message_is_invalid(error: dict[str, Any]) -> None:
    assert interpret_tool_reply(envelope_of(error=error), "call-7") == {"status": "invalid"}


NOT_OBJECTS: list[Any] = [None, 0, False, "", "Oops", [], [1, "Oops"]]


@pytest.mark.parametrize("error", NOT_OBJECTS, ids=[repr(e) for e in NOT_OBJECTS])
def test_error_that_is_not_an_object_is_invalid(error: Any) -> None:
    assert interpret_tool_reply(envelope_of(error=error), "call-7") == {"status": "invalid"}


def test_error_with_code_zero_and_empty_message_is_a_valid_error() -> None:
    error = {"code": 0, "message": ""}
    answer = interpret_tool_reply(envelope_of(error=error), "call-7")
    assert answer == {"status": "error", "error": {"code": 0, "message": ""}}
    assert answer["error"] is error


def test_error_is_returned_with_its_data_untouched() -> None:
    error = {"code": -32001, "message": "Retry later", "data": {"after": 0, "why": None}}
    answer = interpret_tool_reply(envelope_of(error=error), "call-7")
    assert answer == {"status": "error", "error": error}
    assert answer["error"] is error


# --- the reply is never modified ---------------------------------------------------------------

UNTOUCHED = [
    envelope_of(result={"items": [0, False, None], "nested": {"deep": [[], {}]}}),
    envelope_of(error={"code": 1, "message": "m", "data": [1, {"x": None}]}),
    envelope_of(error={"code": True, "message": "m"}),
    envelope_of(result=0, error=VALID_ERROR),
    {"jsonrpc": "1.0", "id": "call-7", "result": [1]},
    envelope_of(expected_id="call-8", result={"a": []}),
]


@pytest.mark.parametrize(
    "reply",
    UNTOUCHED,
    ids=["ok", "error", "bad-error", "both", "old-version", "other-id"],
)
def test_reply_is_never_modified(reply: dict[str, Any]) -> None:
    before = copy.deepcopy(reply)
    interpret_tool_reply(reply, "call-7")
    assert dumped(reply) == dumped(before)
    assert reply == before


def test_answer_is_a_fresh_dict_each_time() -> None:
    reply = envelope_of(result=[])
    first = interpret_tool_reply(reply, "call-7")
    second = interpret_tool_reply(reply, "call-7")
    assert first is not second
    assert first is not reply


# --- ids ---------------------------------------------------------------------------------------


def test_int_expected_id_matches_the_same_int() -> None:
    assert interpret_tool_reply(envelope_of(expected_id=7, result=0), 7) == {
        "status": "ok",
        "value": 0,
    }


OTHER_THAN_7: list[Any] = [7.0, True, "7", 8, None, [7]]


@pytest.mark.parametrize("received", OTHER_THAN_7, ids=[repr(r) for r in OTHER_THAN_7])
def test_int_expected_id_never_matches_another_type_or_value(received: Any) -> None:
    reply = envelope_of(expected_id=received, result=3)
    assert interpret_tool_reply(reply, 7) == {"status": "invalid"}


def test_true_reply_id_never_matches_expected_1() -> None:
    assert interpret_tool_reply(envelope_of(expected_id=True, result=3), 1) == {"status": "invalid"}


def test_str_expected_id_never_matches_the_int_it_spells() -> None:
    assert interpret_tool_reply(envelope_of(expected_id=7, result=3), "7") == {"status": "invalid"}


class CallIds(StrEnum):
    SEVEN = "call-7"


class NumericIds(IntEnum):
    SEVEN = 7


def test_str_subclass_expected_id_matches_its_string_as_in_the_seed() -> None:
    answer = interpret_tool_reply(envelope_of(result=0), CallIds.SEVEN)
    assert answer == {"status": "ok", "value": 0}


def test_int_subclass_expected_id_matches_its_int() -> None:
    answer = interpret_tool_reply(envelope_of(expected_id=7, result=0), NumericIds.SEVEN)
    assert answer == {"status": "ok", "value": 0}


BAD_EXPECTED_IDS: list[Any] = [True, False, 7.0, None, ["call-7"], "", b"call-7", {"id": 7}]


@pytest.mark.parametrize("expected_id", BAD_EXPECTED_IDS, ids=[repr(e) for e in BAD_EXPECTED_IDS])
def test_expected_id_that_is_not_a_nonempty_str_or_an_int_is_the_callers_bug(
    expected_id: Any,
) -> None:
    reply = {"jsonrpc": "2.0", "id": expected_id, "result": 3}
    with pytest.raises((TypeError, ValueError)):
        interpret_tool_reply(reply, expected_id)


def test_bad_expected_id_is_refused_even_for_a_reply_that_is_not_a_dict() -> None:
    with pytest.raises((TypeError, ValueError)):
        interpret_tool_reply([], True)


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(value=json_values, expected_id=st.text(min_size=1) | st.integers())
def test_any_json_value_as_result_is_ok_and_unchanged(value: Any, expected_id: str | int) -> None:
    reply = {"jsonrpc": "2.0", "id": expected_id, "result": value}
    before = dumped(reply)
    answer = interpret_tool_reply(reply, expected_id)
    assert answer["status"] == "ok"
    assert answer["value"] is value
    assert dumped(answer["value"]) == dumped(value)
    assert dumped(reply) == before


@settings(max_examples=200, deadline=None)
@given(reply=json_values)
def test_any_json_value_as_reply_gets_one_of_the_three_answers(reply: Any) -> None:
    before = dumped(reply)
    answer = interpret_tool_reply(reply, "call-7")
    assert answer["status"] in {"ok", "error", "invalid"}
    assert dumped(reply) == before
