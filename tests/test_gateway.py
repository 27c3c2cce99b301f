"""Gateway: every stage passing and failing for tools with different schema features."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway_tools import (
    CONVERT,
    CREATE_EVENT,
    SENTINEL,
    VALID_CONVERT,
    VALID_EVENT,
    answer_text,
    call_text,
    make_gateway,
    resolve_pointer,
)
from strictcall import (
    ErrorKind,
    ForbiddenOrMissing,
    Gateway,
    Limits,
    Tool,
    ToolContext,
    ToolFailure,
    errors,
)
from strictcall.core.listing import mcp_output_schema
from strictcall.core.schema import SchemaDefinitionError
from strictcall.core.tools import WouldWait, running_inline
from strictcall.errors import JSONValue

Args = dict[str, JSONValue]
Answer = dict[str, JSONValue]


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    with make_gateway() as gw:
        yield gw


def ask(gw: Gateway, name: JSONValue, arguments: JSONValue, identity: str = "u1") -> Answer:
    return gw.call(call_text(name, arguments), identity, "call-1")


def error_of(answer: Answer) -> dict[str, JSONValue]:
    assert answer["ok"] is False, answer
    error = answer["error"]
    assert isinstance(error, dict)
    return error


def assert_kind(answer: Answer, kind: ErrorKind) -> dict[str, JSONValue]:
    error = error_of(answer)
    assert error["code"] == kind.code
    assert error["stage"] == kind.stage.value
    assert error["retryable"] is kind.retryable
    return error


def assert_located(answer: Answer, pointer: str, reason: str, expected: JSONValue) -> None:
    error = assert_kind(answer, errors.INVALID_ARGUMENTS)
    assert error["stage"] == errors.Stage.SHAPE.value
    assert (error["pointer"], error["reason"], error.get("expected")) == (
        pointer,
        reason,
        expected,
    )


def with_member(base: Args, path: tuple[str, ...], value: JSONValue) -> Args:
    """A deep copy of `base` with the member at `path` set to `value`."""
    copy: Args = json.loads(json.dumps(base))
    node = copy
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return copy


def without_member(base: Args, path: tuple[str, ...]) -> Args:
    copy: Args = json.loads(json.dumps(base))
    node = copy
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return copy


def only_tool(tool: Tool) -> Gateway:
    return Gateway([tool])


def returning(value: JSONValue, output_schema: JSONValue = True, **options: Any) -> Tool:
    """A tool without arguments that returns `value`."""

    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        return value

    return Tool("give", "Return a value.", {"type": "object"}, output_schema, handler, **options)


def raising(exc: BaseException, **options: Any) -> Tool:
    """A tool without arguments whose handler raises `exc`."""

    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        raise exc

    return Tool("fail", "Fail.", {"type": "object"}, True, handler, **options)


# --- every stage passing ---------------------------------------------------------------------

VALID_CALLS = [
    pytest.param("create_event", VALID_EVENT, {"event_id": "ev-3", "attendees": 2}, id="event"),
    pytest.param(
        "create_event",
        {**VALID_EVENT, "notes": "optional member given"},
        {"event_id": "ev-3", "attendees": 2},
        id="event-with-optional",
    ),
    pytest.param("convert", VALID_CONVERT, 37.5, id="convert"),
    pytest.param(
        "convert",
        {**VALID_CONVERT, "amount": 999999.75, "quantity": 1, "step": -10, "round": False},
        999999.75 * 1.5,
        id="convert-at-bounds",
    ),
    pytest.param(
        "search",
        {"query": "q", "filter": {"kind": "date", "after": 5}, "limit": None},
        [{"id": "d1", "score": 0.5}, {"id": "d2", "score": 0}],
        id="search-oneof-anyof",
    ),
    pytest.param(
        "update_profile",
        {"name": "Ana", "age": 0, "home": {"city": "Lyon", "zip": "69001"}},
        {"updated": True},
        id="profile-allof-ref",
    ),
    pytest.param("update_profile", {"name": "Ana"}, {"updated": True}, id="profile-minimal"),
    pytest.param(
        "tag_bag",
        {"id": "t", "colour": "red", "nested": {"anything": [1]}, "labels": {"k": "v"}},
        ["colour", "id", "labels", "nested"],
        id="open-schema-keeps-extras",
    ),
    pytest.param("read_doc", {"doc_id": "d1"}, {"doc_id": "d1", "text": "first"}, id="owned"),
]


@pytest.mark.parametrize(("name", "arguments", "result"), VALID_CALLS)
def test_a_valid_call_climbs_every_stage_and_answers_the_result(
    gateway: Gateway, name: str, arguments: Args, result: JSONValue
) -> None:
    answer = ask(gateway, name, arguments)
    assert answer == {"ok": True, "call_id": "call-1", "result": result}


@pytest.mark.parametrize(("name", "arguments", "result"), VALID_CALLS)
def test_a_valid_call_answers_the_same_through_call_async(
    gateway: Gateway, name: str, arguments: Args, result: JSONValue
) -> None:
    answer = asyncio.run(gateway.call_async(call_text(name, arguments), "u1", "call-1"))
    assert answer == {"ok": True, "call_id": "call-1", "result": result}


def test_a_valid_call_as_bytes_answers_like_the_same_call_as_str(gateway: Gateway) -> None:
    text = call_text("create_event", VALID_EVENT)
    assert gateway.call(text.encode(), "u1", 7) == gateway.call(text, "u1", 7)


def test_call_text_answers_utf8_json_of_the_answer(gateway: Gateway) -> None:
    text = call_text("read_doc", {"doc_id": "d1"})
    assert json.loads(gateway.call_text(text, "u1", "c")) == gateway.call(text, "u1", "c")


def test_the_call_id_is_echoed_as_given(gateway: Gateway) -> None:
    for call_id in ("call-1", 0, 17, -3):
        answer = gateway.call(call_text("read_doc", {"doc_id": "d1"}), "u1", call_id)
        assert answer["call_id"] == call_id
        assert type(answer["call_id"]) is type(call_id)


@pytest.mark.parametrize(
    "call_id", [True, 1.0, None, "", ["c"]], ids=["bool", "float", "none", "empty", "list"]
)
def test_a_call_id_a_strict_caller_could_not_mint_is_a_programmer_error(
    gateway: Gateway, call_id: Any
) -> None:
    with pytest.raises((TypeError, ValueError)):
        gateway.call(call_text("read_doc", {"doc_id": "d1"}), "u1", call_id)


@pytest.mark.parametrize("identity", [None, 1, b"u1"], ids=["none", "int", "bytes"])
def test_an_identity_that_is_not_a_str_is_a_programmer_error(
    gateway: Gateway, identity: Any
) -> None:
    with pytest.raises(TypeError):
        gateway.call(call_text("read_doc", {"doc_id": "d1"}), identity, "c")


# --- 1. parse --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "line", "column"),
    [
        ('{"name": "convert",', 1, 20),
        ('{\n  "name": "convert",\n  "arguments": {,}\n}', 3, 17),
        ("", 1, 1),
    ],
    ids=["truncated", "third-line", "empty"],
)
def test_text_that_is_not_json_is_invalid_json_with_its_position(
    gateway: Gateway, raw: str, line: int, column: int
) -> None:
    error = assert_kind(gateway.call(raw, "u1", "c"), errors.INVALID_JSON)
    assert (error["line"], error["column"]) == (line, column)


@pytest.mark.parametrize(
    "raw",
    [
        '{"name": "convert", "name": "search", "arguments": {}}',
        '{"name": "convert", "arguments": {"amount": NaN}}',
        "[" * 65 + "]" * 65,
        b'{"name": "\xff"}',
    ],
    ids=["duplicate-member", "nan", "too-deep", "invalid-utf8"],
)
def test_text_that_is_not_strict_json_is_invalid_json(gateway: Gateway, raw: str | bytes) -> None:
    assert_kind(gateway.call(raw, "u1", "c"), errors.INVALID_JSON)


def test_text_longer_than_the_configured_limit_is_request_too_large() -> None:
    text = call_text("read_doc", {"doc_id": "d1"})
    with Gateway(make_gateway().tools, limits=Limits(max_size=len(text) - 1)) as small:
        error = assert_kind(small.call(text, "u1", "c"), errors.REQUEST_TOO_LARGE)
        assert error["limit"] == len(text) - 1
    with Gateway(make_gateway().tools, limits=Limits(max_size=len(text))) as exact:
        assert exact.call(text, "u1", "c")["ok"] is True


def test_a_call_deeper_than_the_configured_depth_is_invalid_json() -> None:
    text = call_text("tag_bag", {"id": "t", "x": [[1]]})
    with Gateway(make_gateway().tools, limits=Limits(max_depth=3)) as shallow:
        error = assert_kind(shallow.call(text, "u1", "c"), errors.INVALID_JSON)
        assert error["limit"] == 3
    with Gateway(make_gateway().tools, limits=Limits(max_depth=4)) as deep:
        assert deep.call(text, "u1", "c")["ok"] is True


@given(st.text(max_size=40) | st.binary(max_size=40))
def test_any_text_gets_a_structured_answer_and_never_an_exception(raw: str | bytes) -> None:
    with make_gateway() as gw:
        answer = gw.call(raw, "u1", "c")
    assert answer["ok"] is False
    error = error_of(answer)
    assert (error["code"], error["stage"], error["retryable"]) in {
        (kind.code, kind.stage.value, kind.retryable) for kind in errors.CATALOGUE
    }


# --- 2. route --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        {"name": "delete_everything", "arguments": {}},
        {"name": "Convert", "arguments": VALID_CONVERT},
        {"name": 1, "arguments": {}},
        {"name": None, "arguments": {}},
        {"arguments": VALID_CONVERT},
        ["convert", VALID_CONVERT],
        "convert",
        None,
    ],
    ids=["unknown", "wrong-case", "int-name", "null-name", "no-name", "array", "string", "null"],
)
def test_a_call_not_naming_a_registered_tool_is_unknown_tool_listing_the_names(
    gateway: Gateway, call: JSONValue
) -> None:
    error = assert_kind(gateway.call(json.dumps(call), "u1", "c"), errors.UNKNOWN_TOOL)
    assert error["available"] == sorted(tool.name for tool in gateway.tools)


def test_route_errors_carry_no_pointer(gateway: Gateway) -> None:
    error = error_of(ask(gateway, "nope", {}))
    assert set(error) == {"code", "stage", "retryable", "available"}


# --- 3. shape --------------------------------------------------------------------------------

SHAPE_ERRORS = [
    pytest.param(
        "create_event",
        {**VALID_EVENT, "admin": True},
        "/arguments/admin",
        "unexpected_member",
        ["attendees", "notes", "priority", "room", "title", "when"],
        id="unexpected-member",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("when", "minute"), 5),
        "/arguments/when/minute",
        "unexpected_member",
        ["day", "hour"],
        id="unexpected-nested-member",
    ),
    pytest.param(
        "create_event",
        without_member(VALID_EVENT, ("room",)),
        "/arguments",
        "missing_member",
        "room",
        id="missing-member",
    ),
    pytest.param(
        "create_event",
        without_member(VALID_EVENT, ("when", "hour")),
        "/arguments/when",
        "missing_member",
        "hour",
        id="missing-nested-member",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("when", "day"), "3"),
        "/arguments/when/day",
        "type",
        "integer",
        id="type-string-for-integer",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("title",), ""),
        "/arguments/title",
        "min_length",
        1,
        id="min-length",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("title",), "x" * 41),
        "/arguments/title",
        "max_length",
        40,
        id="max-length",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("room",), "b-204"),
        "/arguments/room",
        "pattern",
        "^[A-Z]-[0-9]{3}$",
        id="pattern",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("priority",), "urgent"),
        "/arguments/priority",
        "enum",
        ["low", "normal", "high"],
        id="enum",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("when", "day"), 0),
        "/arguments/when/day",
        "minimum",
        1,
        id="minimum",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("when", "day"), 32),
        "/arguments/when/day",
        "maximum",
        31,
        id="maximum",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("when", "hour"), 24),
        "/arguments/when/hour",
        "exclusive_maximum",
        24,
        id="exclusive-maximum",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("attendees",), []),
        "/arguments/attendees",
        "min_items",
        1,
        id="min-items",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("attendees",), ["a", "b", "c", "d", "e"]),
        "/arguments/attendees",
        "max_items",
        4,
        id="max-items",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("attendees",), ["ana", "ana"]),
        "/arguments/attendees",
        "unique_items",
        None,
        id="unique-items",
    ),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("attendees",), ["ana", ""]),
        "/arguments/attendees/1",
        "min_length",
        1,
        id="array-item",
    ),
    pytest.param(
        "convert",
        {**VALID_CONVERT, "amount": 0},
        "/arguments/amount",
        "exclusive_minimum",
        0,
        id="exclusive-minimum",
    ),
    pytest.param(
        "convert",
        {**VALID_CONVERT, "amount": 0.3},
        "/arguments/amount",
        "multiple_of",
        0.25,
        id="multiple-of-number",
    ),
    pytest.param(
        "convert",
        {**VALID_CONVERT, "step": 7},
        "/arguments/step",
        "multiple_of",
        5,
        id="multiple-of-integer",
    ),
    pytest.param(
        "convert",
        {**VALID_CONVERT, "currency": "USD"},
        "/arguments/currency",
        "const",
        "EUR",
        id="const",
    ),
    pytest.param(
        "search",
        {"query": "q", "filter": {"kind": "tag"}},
        "/arguments/filter",
        "one_of",
        None,
        id="one-of",
    ),
    pytest.param(
        "search",
        {"query": "q", "limit": 0},
        "/arguments/limit",
        "any_of",
        None,
        id="any-of",
    ),
    pytest.param(
        "update_profile",
        {"name": "Ana", "admin": True},
        "/arguments/admin",
        "unexpected_member",
        ["age", "home", "name"],
        id="allof-unknown-member",
    ),
    pytest.param(
        "update_profile",
        {"age": 3},
        "/arguments",
        "missing_member",
        "name",
        id="allof-missing-member-of-ref-part",
    ),
    pytest.param(
        "update_profile",
        {"name": "Ana", "home": {"city": "Lyon", "street": "x"}},
        "/arguments/home/street",
        "unexpected_member",
        ["city", "zip"],
        id="ref-unknown-member",
    ),
    pytest.param(
        "update_profile",
        {"name": "Ana", "home": {"city": "Lyon", "zip": "6900"}},
        "/arguments/home/zip",
        "pattern",
        "^[0-9]{5}$",
        id="ref-pattern",
    ),
    pytest.param(
        "tag_bag",
        {"id": "t", "labels": {"k": 1}},
        "/arguments/labels/k",
        "type",
        "string",
        id="declared-extras-schema",
    ),
]


@pytest.mark.parametrize(("name", "arguments", "pointer", "reason", "expected"), SHAPE_ERRORS)
def test_arguments_breaking_the_schema_are_refused_at_shape_with_pointer_reason_expected(
    gateway: Gateway, name: str, arguments: Args, pointer: str, reason: str, expected: JSONValue
) -> None:
    assert_located(ask(gateway, name, arguments), pointer, reason, expected)


def test_a_shape_error_without_an_expected_value_says_none(gateway: Gateway) -> None:
    error = error_of(ask(gateway, "create_event", with_member(VALID_EVENT, ("attendees",), [])))
    assert set(error) == {"code", "stage", "retryable", "pointer", "reason", "expected"}
    error = error_of(
        ask(gateway, "create_event", with_member(VALID_EVENT, ("attendees",), ["a", "a"]))
    )
    assert set(error) == {"code", "stage", "retryable", "pointer", "reason"}


@pytest.mark.parametrize(
    "value",
    [True, False, "1", 1.0, 3.0, 1.5, None, [3], {"n": 3}],
    ids=["true", "false", "string", "1.0", "3.0", "1.5", "null", "array", "object"],
)
def test_anything_but_an_integer_written_as_one_is_refused_for_an_integer(
    gateway: Gateway, value: JSONValue
) -> None:
    arguments = with_member(VALID_EVENT, ("when", "day"), value)
    assert_located(
        ask(gateway, "create_event", arguments), "/arguments/when/day", "type", "integer"
    )


@pytest.mark.parametrize(
    "value", [True, False, "12.5", None], ids=["true", "false", "string", "null"]
)
def test_a_boolean_or_string_is_never_a_number(gateway: Gateway, value: JSONValue) -> None:
    arguments = {**VALID_CONVERT, "amount": value}
    assert_located(ask(gateway, "convert", arguments), "/arguments/amount", "type", "number")


@pytest.mark.parametrize("amount", [12, 12.0, 0.25, 999999.75], ids=["int", "12.0", "low", "high"])
def test_a_number_member_accepts_integers_and_floats_within_bounds(
    gateway: Gateway, amount: JSONValue
) -> None:
    assert ask(gateway, "convert", {**VALID_CONVERT, "amount": amount})["ok"] is True


@pytest.mark.parametrize("limit", [1.0, True, "5"], ids=["1.0", "true", "string"])
def test_strict_integers_hold_inside_anyof_alternatives(gateway: Gateway, limit: JSONValue) -> None:
    answer = ask(gateway, "search", {"query": "q", "limit": limit})
    assert error_of(answer)["pointer"] == "/arguments/limit"


@pytest.mark.parametrize(
    ("name", "arguments", "pointer"),
    [
        ("create_event", {**VALID_EVENT, "extra": 1}, "/arguments/extra"),
        ("create_event", with_member(VALID_EVENT, ("when", "tz"), "UTC"), "/arguments/when/tz"),
        ("search", {"query": "q", "filter": {"kind": "tag", "tag": "t", "x": 1}}, None),
        ("update_profile", {"name": "a", "home": {"city": "c", "x": 1}}, "/arguments/home/x"),
        ("convert", {**VALID_CONVERT, "currency_code": "EUR"}, "/arguments/currency_code"),
    ],
    ids=["top", "nested", "inside-oneof", "through-ref", "near-miss-name"],
)
def test_unknown_members_are_refused_at_every_depth(
    gateway: Gateway, name: str, arguments: Args, pointer: str | None
) -> None:
    error = assert_kind(ask(gateway, name, arguments), errors.INVALID_ARGUMENTS)
    if pointer is not None:
        assert (error["pointer"], error["reason"]) == (pointer, "unexpected_member")
    else:  # the only alternative the member could belong to refuses it
        assert (error["pointer"], error["reason"]) == ("/arguments/filter", "one_of")


def test_a_schema_that_opens_itself_keeps_accepting_unknown_members(gateway: Gateway) -> None:
    arguments = {"id": "t", "extra": {"deep": {"deeper": [None]}}, "labels": {"a": "b", "c": "d"}}
    assert ask(gateway, "tag_bag", arguments)["ok"] is True


def test_a_member_name_needing_escapes_is_pointed_at_with_rfc6901_escapes(
    gateway: Gateway,
) -> None:
    answer = ask(gateway, "convert", {**VALID_CONVERT, "a/b~c": 1})
    assert error_of(answer)["pointer"] == "/arguments/a~1b~0c"


@pytest.mark.parametrize(
    ("envelope", "pointer"),
    [
        ({"name": "convert", "arguments": VALID_CONVERT, "extra": 1}, "/extra"),
        ({"name": "convert", "arguments": VALID_CONVERT, "identity": "admin"}, "/identity"),
        ({"name": "convert", "arguments": VALID_CONVERT, "": None}, "/"),
    ],
    ids=["extra", "identity", "empty-name"],
)
def test_unknown_envelope_members_are_refused_at_shape(
    gateway: Gateway, envelope: Args, pointer: str
) -> None:
    answer = gateway.call(json.dumps(envelope), "u1", "c")
    assert_located(answer, pointer, "unexpected_member", ["arguments", "name"])


def test_a_call_without_arguments_has_empty_arguments(gateway: Gateway) -> None:
    answer = gateway.call('{"name": "convert"}', "u1", "c")
    assert_located(answer, "/arguments", "missing_member", "amount")


def test_null_arguments_are_not_absent_arguments(gateway: Gateway) -> None:
    answer = gateway.call('{"name": "convert", "arguments": null}', "u1", "c")
    assert_located(answer, "/arguments", "type", "object")


@pytest.mark.parametrize(
    "arguments",
    [None, [], "{}", 1, True, [VALID_CONVERT]],
    ids=["null", "array", "string", "int", "bool", "array-of-object"],
)
def test_arguments_that_are_not_an_object_are_refused_at_shape(
    gateway: Gateway, arguments: JSONValue
) -> None:
    assert_located(ask(gateway, "convert", arguments), "/arguments", "type", "object")


def test_the_shape_stage_runs_before_the_handler(gateway: Gateway) -> None:
    ran: list[Args] = []

    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        ran.append(args)
        return None

    spy = Tool(
        "spy", "", {"type": "object", "properties": {"n": {"type": "integer"}}}, True, handler
    )
    with only_tool(spy) as gw:
        assert ask(gw, "spy", {"n": True})["ok"] is False
        assert ask(gw, "spy", {"n": 1, "x": 2})["ok"] is False
        assert ran == []
        assert ask(gw, "spy", {"n": 1})["ok"] is True
        assert ran == [{"n": 1}]


# --- 3b. located errors never echo the model's values -----------------------------------------

ECHO_PROBES = [
    pytest.param("create_event", with_member(VALID_EVENT, ("room",), SENTINEL), id="pattern"),
    pytest.param("create_event", with_member(VALID_EVENT, ("priority",), SENTINEL), id="enum"),
    pytest.param(
        "create_event", with_member(VALID_EVENT, ("title",), SENTINEL * 3), id="max-length"
    ),
    pytest.param("create_event", with_member(VALID_EVENT, ("when", "day"), SENTINEL), id="type"),
    pytest.param(
        "create_event",
        with_member(VALID_EVENT, ("attendees",), [SENTINEL, SENTINEL]),
        id="unique-items",
    ),
    pytest.param("create_event", {**VALID_EVENT, "admin": SENTINEL}, id="unexpected-member-value"),
    pytest.param(
        "create_event",
        {**without_member(VALID_EVENT, ("room",)), "title": SENTINEL},
        id="missing-member-beside-sentinel",
    ),
    pytest.param("convert", {**VALID_CONVERT, "currency": SENTINEL}, id="const"),
    pytest.param("search", {"query": "q", "filter": {"kind": SENTINEL}}, id="one-of"),
    pytest.param("search", {"query": "q", "limit": SENTINEL}, id="any-of"),
    pytest.param(
        "update_profile", {"name": "a", "home": {"city": "c", "zip": SENTINEL}}, id="ref-pattern"
    ),
    pytest.param("tag_bag", {"id": "t", "labels": {"k": [SENTINEL]}}, id="extras-schema"),
    pytest.param("convert", [SENTINEL], id="arguments-not-object"),
    pytest.param("nope", {"x": SENTINEL}, id="route"),
]


@pytest.mark.parametrize(("name", "arguments"), ECHO_PROBES)
def test_a_refused_call_never_echoes_the_values_it_sent(
    gateway: Gateway, name: str, arguments: JSONValue
) -> None:
    answer = ask(gateway, name, arguments)
    assert answer["ok"] is False
    assert SENTINEL not in answer_text(answer)


def test_a_refused_envelope_never_echoes_its_values(gateway: Gateway) -> None:
    text = json.dumps({"name": "convert", "arguments": VALID_CONVERT, "x": SENTINEL})
    answer = gateway.call(text, "u1", "c")
    assert answer["ok"] is False
    assert SENTINEL not in answer_text(answer)


def test_invalid_json_never_echoes_the_text(gateway: Gateway) -> None:
    answer = gateway.call('{"name": "convert", "arguments": {"x": "' + SENTINEL + '"', "u1", "c")
    assert_kind(answer, errors.INVALID_JSON)
    assert SENTINEL not in answer_text(answer)


# --- identity --------------------------------------------------------------------------------


@pytest.mark.parametrize("member", ["identity", "user", "caller"])
def test_an_identity_in_the_arguments_is_refused_unless_declared(
    gateway: Gateway, member: str
) -> None:
    answer = ask(gateway, "read_doc", {"doc_id": "d2", member: "u2"}, identity="u1")
    assert_located(answer, f"/arguments/{member}", "unexpected_member", ["doc_id"])


def test_a_declared_identity_argument_never_becomes_the_callers_identity(
    gateway: Gateway,
) -> None:
    answer = ask(gateway, "whoami", {"identity": "admin"}, identity="u1")
    assert answer["result"] == {"ctx_identity": "u1", "claimed": "admin"}


def test_the_identity_comes_only_from_the_caller_of_call(gateway: Gateway) -> None:
    text = call_text("whoami", {})
    for identity in ("u1", "u2", ""):
        assert gateway.call(text, identity, "c")["result"] == {
            "ctx_identity": identity,
            "claimed": None,
        }


def test_authorization_sees_the_callers_identity_not_the_arguments() -> None:
    seen: list[ToolContext] = []

    def authorize(ctx: ToolContext, args: Args) -> bool:
        seen.append(ctx)
        return ctx.identity == "owner"

    tool = Tool(
        "act",
        "",
        {"type": "object", "properties": {"identity": {"type": "string"}}},
        True,
        lambda ctx, args: ctx.identity,
        authorize=authorize,
    )
    with only_tool(tool) as gw:
        assert_kind(
            ask(gw, "act", {"identity": "owner"}, identity="u1"), errors.FORBIDDEN_OR_MISSING
        )
        assert ask(gw, "act", {"identity": "u1"}, identity="owner")["result"] == "owner"
    assert [ctx.identity for ctx in seen] == ["u1", "owner"]
    assert seen[0] == ToolContext("u1", "call-1", "act")


# --- 4. resource -----------------------------------------------------------------------------


def test_a_caller_reading_someone_elses_document_is_forbidden_or_missing(
    gateway: Gateway,
) -> None:
    answer = ask(gateway, "read_doc", {"doc_id": "d2"}, identity="u1")
    assert_kind(answer, errors.FORBIDDEN_OR_MISSING)


def test_a_denial_and_a_missing_resource_answer_identically(gateway: Gateway) -> None:
    denied = ask(gateway, "read_doc", {"doc_id": "d2"}, identity="u1")
    unknown = ask(gateway, "read_doc", {"doc_id": "d9"}, identity="u1")
    vanished = ask(gateway, "read_doc", {"doc_id": "d-vanished"}, identity="u1")
    assert denied == unknown == vanished
    assert_kind(vanished, errors.FORBIDDEN_OR_MISSING)
    assert set(error_of(vanished)) == {"code", "stage", "retryable"}
    sizes = {
        len(gateway.call_text(call_text("read_doc", {"doc_id": d}), "u1", "c"))
        for d in ("d2", "d9", "d-vanished")
    }
    assert len(sizes) == 1


def test_forbidden_or_missing_raised_by_the_handler_answers_exactly_like_a_denial() -> None:
    def deny(ctx: ToolContext, args: Args) -> bool:
        return False

    def vanish(ctx: ToolContext, args: Args) -> JSONValue:
        raise ForbiddenOrMissing("SECRET-doc-d7-belongs-to-u2")

    denied = Tool("doc", "", {"type": "object"}, True, lambda ctx, args: 1, authorize=deny)
    missing = Tool("doc", "", {"type": "object"}, True, vanish)
    with only_tool(denied) as gw_denied, only_tool(missing) as gw_missing:
        a = gw_denied.call_text(call_text("doc", {}), "u1", "c")
        b = gw_missing.call_text(call_text("doc", {}), "u1", "c")
    assert a == b
    assert len(a) == len(b)
    assert b"SECRET" not in b
    assert json.loads(a)["error"] == errors.FORBIDDEN_OR_MISSING.as_error()


@pytest.mark.parametrize(
    "verdict", [False, None, 1, "yes", [True]], ids=["false", "none", "one", "str", "list"]
)
def test_an_authorizer_allows_only_by_returning_exactly_true(verdict: Any) -> None:
    tool = Tool(
        "t", "", {"type": "object"}, True, lambda c, a: "ran", authorize=lambda c, a: verdict
    )
    with only_tool(tool) as gw:
        assert_kind(ask(gw, "t", {}), errors.FORBIDDEN_OR_MISSING)


def test_an_authorizer_returning_true_lets_the_call_run() -> None:
    tool = Tool("t", "", {"type": "object"}, True, lambda c, a: "ran", authorize=lambda c, a: True)
    with only_tool(tool) as gw:
        assert ask(gw, "t", {})["result"] == "ran"


@pytest.mark.parametrize(
    "exc",
    [KeyError("SECRET-KEY"), ForbiddenOrMissing("SECRET-FOM"), RuntimeError("SECRET-RT")],
    ids=["key-error", "forbidden-or-missing", "runtime-error"],
)
def test_an_authorizer_that_raises_denies_like_a_missing_resource(exc: Exception) -> None:
    def authorize(ctx: ToolContext, args: Args) -> bool:
        raise exc

    ran: list[int] = []
    tool = Tool("t", "", {"type": "object"}, True, lambda c, a: ran.append(1), authorize=authorize)
    with only_tool(tool) as gw:
        answer = ask(gw, "t", {})
    assert answer["error"] == errors.FORBIDDEN_OR_MISSING.as_error()
    assert "SECRET" not in answer_text(answer)
    assert ran == []


def test_a_raising_authorizer_is_logged_for_the_operator_without_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def authorize(ctx: ToolContext, args: Args) -> bool:
        raise LookupError(SENTINEL)

    tool = Tool("t", "", {"type": "object"}, True, lambda c, a: 1, authorize=authorize)
    with caplog.at_level(logging.ERROR, logger="strictcall"), only_tool(tool) as gw:
        ask(gw, "t", {})
    assert "LookupError" in caplog.text
    assert SENTINEL not in caplog.text


# --- 5. execute ------------------------------------------------------------------------------


def test_a_declared_failure_keeps_its_code_retryable_and_retry_after() -> None:
    tool = raising(ToolFailure(errors.BUSY, retry_after_ms=250), failures=(errors.BUSY,))
    with only_tool(tool) as gw:
        answer = ask(gw, "fail", {})
    assert answer["error"] == {**errors.BUSY.as_error(), "retry_after_ms": 250}
    assert answer["error"]["retryable"] is True


def test_a_declared_failure_without_retry_after_has_no_such_member() -> None:
    tool = raising(ToolFailure(errors.BUSY), failures=(errors.BUSY,))
    with only_tool(tool) as gw:
        assert ask(gw, "fail", {})["error"] == errors.BUSY.as_error()


def test_a_tool_may_declare_its_own_failure_kind() -> None:
    quota = ErrorKind("quota_exceeded", errors.Stage.EXECUTE, False, "Stop calling today.")
    tool = raising(ToolFailure(quota), failures=(quota,))
    with only_tool(tool) as gw:
        assert ask(gw, "fail", {})["error"] == quota.as_error()


def test_an_undeclared_tool_failure_is_internal_error() -> None:
    tool = raising(ToolFailure(errors.BUSY, retry_after_ms=9))
    with only_tool(tool) as gw:
        answer = ask(gw, "fail", {})
    assert answer["error"] == errors.INTERNAL_ERROR.as_error()


SECRET_EXCEPTIONS = [
    pytest.param(ValueError(f"bad value {SENTINEL}"), id="value-error"),
    pytest.param(KeyError(SENTINEL), id="key-error"),
    pytest.param(ZeroDivisionError(SENTINEL), id="zero-division"),
    pytest.param(TimeoutError(SENTINEL), id="own-timeout-error"),
    pytest.param(PermissionError(SENTINEL), id="permission-error"),
    pytest.param(ToolFailure(errors.TIMEOUT), id="undeclared-timeout-kind"),
]


@pytest.mark.parametrize("exc", SECRET_EXCEPTIONS)
def test_any_other_exception_is_internal_error_with_nothing_of_the_exception(
    exc: Exception,
) -> None:
    with only_tool(raising(exc)) as gw:
        answer = ask(gw, "fail", {})
        text = gw.call_text(call_text("fail", {}), "u1", "c").decode()
    assert answer["error"] == errors.INTERNAL_ERROR.as_error()
    for shown in (answer_text(answer), text):
        assert SENTINEL not in shown
        assert type(exc).__name__ not in shown
        assert "Traceback" not in shown


@pytest.mark.parametrize("exc", SECRET_EXCEPTIONS)
def test_any_other_exception_is_internal_error_through_call_async_too(exc: Exception) -> None:
    with only_tool(raising(exc)) as gw:
        answer = asyncio.run(gw.call_async(call_text("fail", {}), "u1", "c"))
    assert answer["error"] == errors.INTERNAL_ERROR.as_error()
    assert SENTINEL not in answer_text(answer)


def test_an_async_handler_that_raises_is_internal_error() -> None:
    async def handler(ctx: ToolContext, args: Args) -> JSONValue:
        raise ValueError(SENTINEL)

    tool = Tool("fail", "", {"type": "object"}, True, handler)
    with only_tool(tool) as gw:
        for answer in (
            ask(gw, "fail", {}),
            asyncio.run(gw.call_async(call_text("fail", {}), "u1", "c")),
        ):
            assert answer["error"] == errors.INTERNAL_ERROR.as_error()
            assert SENTINEL not in answer_text(answer)


def test_an_internal_error_goes_to_the_operators_log_by_type_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        caplog.at_level(logging.ERROR, logger="strictcall"),
        only_tool(raising(ZeroDivisionError(SENTINEL))) as gw,
    ):
        gw.call(call_text("fail", {}), "u1", "call-42")
    assert "ZeroDivisionError" in caplog.text
    assert "call-42" in caplog.text
    assert SENTINEL not in caplog.text


def test_a_sync_handler_passing_its_time_limit_times_out_retryable() -> None:
    release = threading.Event()

    def slow(ctx: ToolContext, args: Args) -> JSONValue:
        release.wait(1)
        return "late"

    tool = Tool("slow", "", {"type": "object"}, True, slow, timeout=0.05)
    with only_tool(tool) as gw:
        try:
            answer = ask(gw, "slow", {})
        finally:
            release.set()
    assert answer["error"] == errors.TIMEOUT.as_error()
    assert answer["error"]["retryable"] is True


def test_a_sync_handler_passing_its_time_limit_times_out_through_call_async() -> None:
    release = threading.Event()

    def slow(ctx: ToolContext, args: Args) -> JSONValue:
        release.wait(1)
        return "late"

    async def run(gw: Gateway) -> Answer:
        try:
            return await gw.call_async(call_text("slow", {}), "u1", "c")
        finally:
            release.set()

    tool = Tool("slow", "", {"type": "object"}, True, slow, timeout=0.05)
    with only_tool(tool) as gw:
        answer = asyncio.run(run(gw))
    assert answer["error"] == errors.TIMEOUT.as_error()


def test_an_async_handler_passing_its_time_limit_times_out_via_call_and_call_async() -> None:
    async def slow(ctx: ToolContext, args: Args) -> JSONValue:
        await asyncio.sleep(1)
        return "late"

    tool = Tool("slow", "", {"type": "object"}, True, slow, timeout=0.05)
    with only_tool(tool) as gw:
        assert ask(gw, "slow", {})["error"] == errors.TIMEOUT.as_error()
        answer = asyncio.run(gw.call_async(call_text("slow", {}), "u1", "c"))
        assert answer["error"] == errors.TIMEOUT.as_error()


def test_a_handler_within_its_time_limit_answers_its_result() -> None:
    async def quick_async(ctx: ToolContext, args: Args) -> JSONValue:
        return "async"

    sync = Tool("sync", "", {"type": "object"}, True, lambda c, a: "sync", timeout=5)
    asynchronous = Tool("async", "", {"type": "object"}, True, quick_async, timeout=5)
    with Gateway([sync, asynchronous]) as gw:
        assert ask(gw, "sync", {})["result"] == "sync"
        assert ask(gw, "async", {})["result"] == "async"
        for name in ("sync", "async"):
            answer = asyncio.run(gw.call_async(call_text(name, {}), "u1", "c"))
            assert answer["result"] == name


def test_a_timeout_error_raised_by_the_handler_itself_is_not_a_timeout() -> None:
    async def own_async(ctx: ToolContext, args: Args) -> JSONValue:
        raise TimeoutError("upstream")

    def own_sync(ctx: ToolContext, args: Args) -> JSONValue:
        raise TimeoutError("upstream")

    tools = [
        Tool("sync_limited", "", {"type": "object"}, True, own_sync, timeout=5),
        Tool("async_limited", "", {"type": "object"}, True, own_async, timeout=5),
        Tool("sync_free", "", {"type": "object"}, True, own_sync),
        Tool("async_free", "", {"type": "object"}, True, own_async),
    ]
    with Gateway(tools) as gw:
        for tool in tools:
            assert ask(gw, tool.name, {})["error"] == errors.INTERNAL_ERROR.as_error()
            answer = asyncio.run(gw.call_async(call_text(tool.name, {}), "u1", "c"))
            assert answer["error"] == errors.INTERNAL_ERROR.as_error()


def test_an_async_tool_called_synchronously_inside_a_running_loop_is_a_programmer_error() -> None:
    async def handler(ctx: ToolContext, args: Args) -> JSONValue:
        return 1

    async def misuse(gw: Gateway) -> None:
        with pytest.raises(RuntimeError):
            gw.call(call_text("a", {}), "u1", "c")

    with only_tool(Tool("a", "", {"type": "object"}, True, handler)) as gw:
        asyncio.run(misuse(gw))


def test_a_sync_tool_may_be_called_synchronously_inside_a_running_loop() -> None:
    async def use(gw: Gateway) -> Answer:
        return gw.call(call_text("s", {}), "u1", "c")

    with only_tool(Tool("s", "", {"type": "object"}, True, lambda c, a: 5)) as gw:
        assert asyncio.run(use(gw))["result"] == 5


# --- 6. output -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer"}, f"{SENTINEL}"),
        ({"type": "integer"}, 1.0),
        ({"type": "integer"}, True),
        ({"type": "string", "maxLength": 3}, SENTINEL),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {"a": "x", "b": SENTINEL}),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {},
        ),
        ({"type": "array", "items": {"type": "string"}}, ["ok", 3]),
        ({"type": "null"}, 0),
        ({"type": "boolean"}, 0),
        ({"enum": ["a", "b"]}, SENTINEL),
        (False, None),
    ],
    ids=[
        "string-for-integer",
        "float-for-integer",
        "bool-for-integer",
        "too-long",
        "unexpected-member",
        "missing-member",
        "bad-item",
        "zero-for-null",
        "zero-for-boolean",
        "enum",
        "false-schema",
    ],
)
def test_a_result_breaking_its_output_schema_is_withheld(schema: JSONValue, value: Any) -> None:
    with only_tool(returning(value, schema)) as gw:
        answer = ask(gw, "give", {})
        text = gw.call_text(call_text("give", {}), "u1", "c").decode()
    assert answer["error"] == errors.INVALID_TOOL_RESULT.as_error()
    assert set(answer) == {"ok", "call_id", "error"}
    assert SENTINEL not in answer_text(answer)
    assert SENTINEL not in text


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {"a": "x", "b": 2}),
        ({"type": "object"}, {"b": {"c": [1]}}),
        ({"type": "integer"}, 1.0),
    ],
    ids=["member-left-open", "bare-object", "float-for-integer"],
)
def test_an_output_schema_enforced_as_declared_admits_what_json_schema_admits(
    schema: JSONValue, value: Any
) -> None:
    """An upstream's tool (`output_as_declared`): JSON Schema 2020-12 alone decides, so what
    strictcall's own rules would refuse passes unchanged, and the schema is listed as written."""
    with only_tool(returning(value, schema)) as strict:
        assert ask(strict, "give", {})["error"] == errors.INVALID_TOOL_RESULT.as_error()
    with only_tool(returning(value, schema, output_as_declared=True)) as gw:
        assert ask(gw, "give", {})["result"] == value
        assert gw.list_tools()[0]["outputSchema"] == mcp_output_schema(schema)


def _cyclic() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def _nested(depth: int) -> JSONValue:
    value: JSONValue = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        (1, 2),
        {1, 2},
        frozenset(),
        float("nan"),
        float("inf"),
        -float("inf"),
        {1: "a"},
        {("a",): 1},
        {"a": {2: "b"}},
        [1, (2,)],
        b"bytes",
        object(),
        {"nested": [float("nan")]},
        _cyclic(),
        _nested(20000),
    ],
    ids=[
        "tuple",
        "set",
        "frozenset",
        "nan",
        "inf",
        "-inf",
        "int-key",
        "tuple-key",
        "nested-int-key",
        "nested-tuple",
        "bytes",
        "object",
        "nested-nan",
        "cyclic",
        "very-deep",
    ],
)
def test_a_result_that_is_not_json_is_withheld_even_with_an_open_output_schema(
    value: Any,
) -> None:
    with only_tool(returning(value, True)) as gw:
        assert ask(gw, "give", {})["error"] == errors.INVALID_TOOL_RESULT.as_error()
        answer = asyncio.run(gw.call_async(call_text("give", {}), "u1", "c"))
        assert answer["error"] == errors.INVALID_TOOL_RESULT.as_error()


def test_a_result_nested_up_to_the_limit_comes_back() -> None:
    from strictcall.core.jsontext import MAX_RESULT_DEPTH

    deep = _nested(MAX_RESULT_DEPTH)
    with only_tool(returning(deep, True)) as gw:
        assert ask(gw, "give", {})["result"] == deep
        assert json.loads(gw.call_text(call_text("give", {}), "u1", "c"))["result"] == deep
    with only_tool(returning(_nested(MAX_RESULT_DEPTH + 1), True)) as gw:
        assert ask(gw, "give", {})["error"] == errors.INVALID_TOOL_RESULT.as_error()


@pytest.mark.parametrize("schema", [True, {"type": "string"}], ids=["open", "string"])
def test_a_result_with_a_lone_surrogate_is_withheld_when_written(schema: JSONValue) -> None:
    with only_tool(returning("\ud800", schema)) as gw:
        text = gw.call_text(call_text("give", {}), "u1", "c")
        assert json.loads(text)["error"] == errors.INVALID_TOOL_RESULT.as_error()


def test_an_integer_beyond_64_bits_comes_back_exactly_as_text() -> None:
    big = 2**70 + 1
    with only_tool(returning(big, {"type": "integer"})) as gw:
        text = gw.call_text(call_text("give", {}), "u1", "c")
    assert json.loads(text)["result"] == big


def test_a_result_consistency_check_that_fails_or_raises_withholds_the_result() -> None:
    def refuse(args: Args, result: JSONValue) -> bool:
        return False

    def crash(args: Args, result: JSONValue) -> bool:
        raise KeyError(SENTINEL)

    def truthy(args: Args, result: JSONValue) -> Any:
        return 1

    for check in (refuse, crash, truthy):
        with only_tool(returning(SENTINEL, True, result_matches=check)) as gw:
            answer = ask(gw, "give", {})
        assert answer["error"] == errors.INVALID_TOOL_RESULT.as_error()
        assert SENTINEL not in answer_text(answer)
    with only_tool(returning("fine", True, result_matches=lambda a, r: True)) as gw:
        assert ask(gw, "give", {})["result"] == "fine"


# --- counterexamples: every allowed value comes back unchanged -------------------------------

FALSY_OBJECT_SCHEMA = {
    "type": "object",
    "properties": {
        name: {"type": kind}
        for name, kind in [
            ("zero", "integer"),
            ("zero_float", "number"),
            ("no", "boolean"),
            ("empty", "string"),
            ("none", "array"),
            ("nothing", "object"),
            ("null", "null"),
        ]
    },
    "required": ["zero", "zero_float", "no", "empty", "none", "nothing", "null"],
}
FALSY_OBJECT = {
    "zero": 0,
    "zero_float": 0.0,
    "no": False,
    "empty": "",
    "none": [],
    "nothing": {},
    "null": None,
}

ALLOWED_VALUES = [
    pytest.param({"type": "integer"}, 0, id="0"),
    pytest.param({"type": "integer", "minimum": 0, "maximum": 0}, 0, id="0-at-bounds"),
    pytest.param({"type": "number"}, 0.0, id="0.0"),
    pytest.param({"type": "number"}, 0, id="0-as-number-stays-int"),
    pytest.param({"type": "number"}, -0.0, id="-0.0"),
    pytest.param({"type": "boolean"}, False, id="false"),
    pytest.param({"type": "string"}, "", id="empty-string"),
    pytest.param({"type": "array"}, [], id="empty-array"),
    pytest.param({"type": "object"}, {}, id="empty-object"),
    pytest.param({"type": "null"}, None, id="null"),
    pytest.param({"const": 0}, 0, id="const-0"),
    pytest.param({"const": False}, False, id="const-false"),
    pytest.param({"enum": [None, False, 0, ""]}, None, id="enum-null"),
    pytest.param({"enum": [None, False, 0, ""]}, False, id="enum-false"),
    pytest.param({"enum": [None, False, 0, ""]}, 0, id="enum-0"),
    pytest.param({"enum": [None, False, 0, ""]}, "", id="enum-empty"),
    pytest.param({"anyOf": [{"type": "null"}, {"type": "integer"}]}, None, id="optional-null"),
    pytest.param({"type": ["integer", "null"]}, 0, id="nullable-0"),
    pytest.param(FALSY_OBJECT_SCHEMA, FALSY_OBJECT, id="object-of-falsy-members"),
    pytest.param(
        {"type": "array", "items": {}}, [0, 0.0, False, "", [], {}, None], id="array-of-falsy"
    ),
    pytest.param(
        {"type": "array", "items": FALSY_OBJECT_SCHEMA}, [FALSY_OBJECT], id="nested-falsy"
    ),
    pytest.param(True, [[[]], {"": {"": None}}], id="open-schema-nested-empties"),
    pytest.param(True, 0, id="open-schema-0"),
    pytest.param(True, None, id="open-schema-null"),
    pytest.param({"type": "integer"}, 2**63, id="beyond-int64"),
    pytest.param({"type": "number"}, 1e308, id="large-float"),
    pytest.param({"type": "string"}, "退款 \u2028 \x00", id="unicode-and-nul"),
]


def _same_json(a: JSONValue, b: JSONValue) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) and type(a) is type(b)


@pytest.mark.parametrize(("schema", "value"), ALLOWED_VALUES)
def test_every_value_the_output_schema_allows_comes_back_unchanged(
    schema: JSONValue, value: JSONValue
) -> None:
    with only_tool(returning(value, schema)) as gw:
        answers = [
            ask(gw, "give", {}),
            asyncio.run(gw.call_async(call_text("give", {}), "u1", "call-1")),
            json.loads(gw.call_text(call_text("give", {}), "u1", "call-1")),
        ]
    for answer in answers:
        assert answer["ok"] is True
        assert set(answer) == {"ok", "call_id", "result"}
        assert _same_json(answer["result"], value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_json_value_comes_back_unchanged_under_an_open_output_schema(
    value: JSONValue,
) -> None:
    with only_tool(returning(value, True)) as gw:
        answer = ask(gw, "give", {})
        text = gw.call_text(call_text("give", {}), "u1", "call-1")
    assert answer["ok"] is True
    assert _same_json(answer["result"], value)
    assert json.loads(text) == json.loads(json.dumps(answer))


# --- registration ----------------------------------------------------------------------------


def test_registering_two_tools_with_one_name_is_refused() -> None:
    with Gateway([CONVERT]) as gw, pytest.raises(ValueError):
        gw.register(CONVERT)


def test_a_tool_with_an_invalid_schema_is_refused_at_registration() -> None:
    bad = Tool("bad", "", {"type": "no-such-type"}, True, lambda c, a: None)
    with pytest.raises(SchemaDefinitionError):
        Gateway([bad])
    bad_output = Tool("bad", "", {"type": "object"}, {"minimum": "zero"}, lambda c, a: None)
    with pytest.raises(SchemaDefinitionError):
        Gateway([bad_output])


def test_tools_lists_the_registered_tools_in_order() -> None:
    with Gateway([CREATE_EVENT, CONVERT]) as gw:
        assert gw.tools == (CREATE_EVENT, CONVERT)


def test_a_gateway_registering_a_tool_later_routes_to_it() -> None:
    with Gateway() as gw:
        assert_kind(ask(gw, "convert", VALID_CONVERT), errors.UNKNOWN_TOOL)
        gw.register(CONVERT)
        assert ask(gw, "convert", VALID_CONVERT)["ok"] is True


def test_a_closed_gateway_still_answers_timed_tools() -> None:
    tool = Tool("t", "", {"type": "object"}, True, lambda c, a: "ok", timeout=5)
    gw = only_tool(tool)
    assert ask(gw, "t", {})["result"] == "ok"
    gw.close()
    gw.close()
    assert ask(gw, "t", {})["result"] == "ok"
    gw.close()


# --- property: arguments generated from the input schemas ------------------------------------

ORDER_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[a-z]{2}-[0-9]{2}$"},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                    "gift": {"type": "boolean"},
                },
                "required": ["sku", "qty"],
            },
            "minItems": 1,
            "maxItems": 3,
        },
        "shipping": {
            "type": "object",
            "properties": {
                "address": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "minLength": 1, "maxLength": 20},
                        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                    },
                    "required": ["city", "zip"],
                },
                "speed": {"enum": ["slow", "fast"]},
            },
            "required": ["address"],
        },
        "note": {"type": "null"},
    },
    "required": ["lines", "shipping"],
}
ORDER = Tool("order", "Place an order.", ORDER_INPUT, True, lambda ctx, args: "placed")

GENERATED_TOOLS = {
    "create_event": CREATE_EVENT.input_schema,
    "convert": CONVERT.input_schema,
    "order": ORDER_INPUT,
}
"""Tools whose input schemas the generator below understands."""

_BOUND_REASONS = {
    "minimum": "minimum",
    "maximum": "maximum",
    "exclusiveMinimum": "exclusive_minimum",
    "exclusiveMaximum": "exclusive_maximum",
    "multipleOf": "multiple_of",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_items",
    "maxItems": "max_items",
    "uniqueItems": "unique_items",
}


def valid_values(schema: JSONValue) -> st.SearchStrategy[JSONValue]:
    """Values satisfying `schema` (the subset of JSON Schema the test schemas use)."""
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "object":
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        return st.fixed_dictionaries(
            {name: valid_values(properties[name]) for name in required},
            optional={
                name: valid_values(sub) for name, sub in properties.items() if name not in required
            },
        )
    if kind == "array":
        unique = schema.get("uniqueItems", False)
        return st.lists(
            valid_values(schema.get("items", {"type": "null"})),
            min_size=schema.get("minItems", 0),
            max_size=schema.get("maxItems", 4),
            unique_by=(lambda v: json.dumps(v, sort_keys=True)) if unique else None,
        )
    if kind == "string":
        if "pattern" in schema:
            pattern = schema["pattern"].removeprefix("^").removesuffix("$")
            return st.from_regex(pattern, fullmatch=True)
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 12))
    if kind in ("integer", "number"):
        step = schema.get("multipleOf", 1)
        low = schema.get("minimum", schema.get("exclusiveMinimum", -(10**6)))
        high = schema.get("maximum", schema.get("exclusiveMaximum", 10**6))
        first = -int(-low // step) if "exclusiveMinimum" not in schema else int(low // step) + 1
        last = int(high // step) if "exclusiveMaximum" not in schema else -int(-high // step) - 1
        multiples = st.integers(first, last)
        if kind == "integer":
            return multiples.map(lambda k: k * step)
        return multiples.map(lambda k: k * step) | multiples.map(lambda k: float(k * step))
    if kind == "boolean":
        return st.booleans()
    assert kind == "null"
    return st.none()


_WRONG_TYPES: dict[str, list[JSONValue]] = {
    "object": [[], "{}", None, 0],
    "array": [{}, "[]", None, 0],
    "string": [1, True, None, [], {}],
    "integer": ["1", True, False, None, 1.5, 2.0, [], {}],
    "number": ["1", True, None, [], {}],
    "boolean": [0, 1, "true", None],
    "null": [0, False, "", [], {}],
}


def _out_of_bounds(schema: JSONValue, value: JSONValue) -> list[tuple[JSONValue, str]]:
    """Values breaking exactly one of `schema`'s bounds, with the reason each should get."""
    found: list[tuple[JSONValue, str]] = []
    if "minimum" in schema:
        found.append((schema["minimum"] - schema.get("multipleOf", 1), "minimum"))
    if "maximum" in schema:
        found.append((schema["maximum"] + schema.get("multipleOf", 1), "maximum"))
    if "exclusiveMinimum" in schema:
        found.append((schema["exclusiveMinimum"], "exclusiveMinimum"))
    if "exclusiveMaximum" in schema:
        found.append((schema["exclusiveMaximum"], "exclusiveMaximum"))
    if "multipleOf" in schema and schema["type"] == "integer" and schema["multipleOf"] > 1:
        found.append((schema["multipleOf"] + 1, "multipleOf"))
    if "multipleOf" in schema and schema["type"] == "number":
        found.append((schema["multipleOf"] * 1.5, "multipleOf"))
    if schema.get("minLength", 0) > 0 and "pattern" not in schema:
        found.append(("", "minLength"))
    if "maxLength" in schema and "pattern" not in schema:
        found.append(("x" * (schema["maxLength"] + 1), "maxLength"))
    if schema.get("minItems", 0) > 0:
        found.append(([], "minItems"))
    if "maxItems" in schema and isinstance(value, list) and value:
        found.append(([value[0]] * (schema["maxItems"] + 1), "maxItems"))
    if schema.get("uniqueItems") and isinstance(value, list) and value:
        found.append(([value[0], value[0]], "uniqueItems"))
    return [(bad, _BOUND_REASONS[keyword]) for bad, keyword in found]


Path = tuple[str | int, ...]
Mutation = tuple[str, Path, JSONValue, str, JSONValue]
"""(what, where, new value or member name, expected reason, expected pointer's path)."""


def mutations(schema: JSONValue, value: JSONValue, path: Path = ()) -> list[Mutation]:
    """Every single change that makes `value` break `schema` at a known place."""
    found: list[Mutation] = []
    if "const" in schema or "enum" in schema:
        reason = "const" if "const" in schema else "enum"
        found.append(("set", path, "not-one-of-them", reason, path))
        return found
    kind = schema["type"]
    for wrong in _WRONG_TYPES[kind]:
        found.append(("set", path, wrong, "type", path))
    for bad, reason in _out_of_bounds(schema, value):
        found.append(("set", path, bad, reason, path))
    if kind == "object":
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            found.append(("drop", (*path, name), None, "missing_member", path))
        found.append(("add", path, None, "unexpected_member", path))
        for name, member in value.items():
            found.extend(mutations(properties[name], member, (*path, name)))
    elif kind == "array":
        for index, item in enumerate(value):
            found.extend(mutations(schema["items"], item, (*path, index)))
    return found


def apply(value: JSONValue, mutation: Mutation, new_name: str) -> tuple[JSONValue, Path]:
    """A mutated deep copy of `value`, and the path the refusal should point at."""
    what, path, new, _, pointer_path = mutation
    root: JSONValue = {"v": json.loads(json.dumps(value))}
    target: Path = ("v", *path)
    parent = root
    for step in target[:-1]:
        parent = parent[step]
    if what == "set":
        parent[target[-1]] = new
    elif what == "drop":
        del parent[target[-1]]
    else:  # add an unknown member to the object at `path`
        parent[target[-1]][new_name] = 0
        pointer_path = (*pointer_path, new_name)
    return root["v"], pointer_path


def _pointer_to(path: Path) -> str:
    return "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in path)


@given(st.data())
def test_generated_valid_arguments_are_accepted(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(GENERATED_TOOLS)), label="tool")
    arguments = data.draw(valid_values(GENERATED_TOOLS[name]), label="arguments")
    with make_gateway(ORDER) as gw:
        answer = ask(gw, name, arguments)
    assert answer["ok"] is True, answer


@given(st.data())
def test_generated_invalid_arguments_are_refused_at_shape_pointing_at_a_real_place(
    data: st.DataObject,
) -> None:
    name = data.draw(st.sampled_from(sorted(GENERATED_TOOLS)), label="tool")
    schema = GENERATED_TOOLS[name]
    arguments = data.draw(valid_values(schema), label="valid arguments")
    mutation = data.draw(st.sampled_from(mutations(schema, arguments)), label="mutation")
    new_name = data.draw(
        st.text(min_size=1, max_size=6).filter(lambda s: f'"{s}"' not in json.dumps(schema)),
        label="unknown member",  # any name the schema does not declare anywhere
    )
    bad, pointer_path = apply(arguments, mutation, new_name)
    with make_gateway(ORDER) as gw:
        answer = ask(gw, name, bad)
    error = assert_kind(answer, errors.INVALID_ARGUMENTS)
    assert error["stage"] == errors.Stage.SHAPE.value
    pointer = error["pointer"]
    assert isinstance(pointer, str)
    resolve_pointer({"name": name, "arguments": bad}, pointer)  # names a real place
    assert pointer == "/arguments" + _pointer_to(pointer_path)
    assert error["reason"] == mutation[3]


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("create_event", with_member(VALID_EVENT, ("priority",), "urgent")),
        ("create_event", {**VALID_EVENT, "admin": 1}),
        ("create_event", without_member(VALID_EVENT, ("room",))),
        ("convert", {**VALID_CONVERT, "currency": "USD"}),
        ("nope", {}),
    ],
    ids=["enum", "unexpected-member", "missing-member", "const", "route"],
)
def test_changing_an_answer_never_changes_the_next_answer(
    gateway: Gateway, name: str, arguments: Args
) -> None:
    first = ask(gateway, name, arguments)
    pristine = json.loads(json.dumps(first))
    for value in error_of(first).values():
        if isinstance(value, list):
            value.clear()
    assert ask(gateway, name, arguments) == pristine


def test_an_enum_of_integers_refuses_a_float_with_fresh_options_each_time() -> None:
    enum_tool = Tool(
        "pick", "", {"type": "object", "properties": {"n": {"enum": [1, 2]}}}, True, lambda c, a: 1
    )
    with only_tool(enum_tool) as gw:
        first = ask(gw, "pick", {"n": 1.0})
        assert_located(first, "/arguments/n", "enum", [1, 2])
        error_of(first)["expected"].append(3)
        assert_located(ask(gw, "pick", {"n": 1.0}), "/arguments/n", "enum", [1, 2])


_any_arguments = st.dictionaries(
    st.sampled_from(["title", "when", "day", "amount", "query", "name", "id", "a/b", "~"])
    | st.text(max_size=4),
    json_values,
    max_size=5,
)


@given(
    st.sampled_from(["create_event", "convert", "search", "update_profile", "tag_bag", "whoami"]),
    _any_arguments | json_values,
)
def test_any_arguments_get_an_answer_and_a_shape_refusal_points_at_a_real_place(
    name: str, arguments: JSONValue
) -> None:
    with make_gateway() as gw:
        answer = ask(gw, name, arguments)
    if answer["ok"]:
        return
    error = error_of(answer)
    assert error["code"] == errors.INVALID_ARGUMENTS.code
    assert error["stage"] == errors.Stage.SHAPE.value
    resolve_pointer({"name": name, "arguments": arguments}, error["pointer"])


def test_an_integer_too_large_for_any_machine_type_is_still_checked_against_its_bounds(
    gateway: Gateway,
) -> None:
    huge = 10**300
    arguments = with_member(VALID_EVENT, ("when", "day"), huge)
    assert_located(ask(gateway, "create_event", arguments), "/arguments/when/day", "maximum", 31)
    arguments = with_member(VALID_EVENT, ("when", "day"), -huge)
    assert_located(ask(gateway, "create_event", arguments), "/arguments/when/day", "minimum", 1)


# --- a gateway whose tools take no numbers does not look for them --------------------------------


def _words_tool(*, tags: bool = False) -> Tool:
    """A tool taking one string; with `tags`, also an array of anything (numbers too)."""
    properties: dict[str, JSONValue] = {"word": {"type": "string"}}
    if tags:
        properties["tags"] = {"type": "array", "items": {}}
    schema = {"type": "object", "properties": properties, "required": ["word"]}
    return Tool("words", "", schema, True, lambda ctx, args: args["word"])


def _count_tool() -> Tool:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return Tool("count", "", schema, True, lambda ctx, args: args.get("n"))


def _words_only() -> Gateway:
    return Gateway([_words_tool()])


def test_a_gateway_reads_numbers_when_some_tool_may_take_one() -> None:
    with _words_only() as words, Gateway([_words_tool(tags=True)]) as open_items:
        assert words.reads_numbers is False
        assert open_items.reads_numbers is True  # "items": {} takes anything, numbers too
        words.register(_count_tool())
        assert words.reads_numbers is True


_NUMBERS_IN_CALLS = [
    '{"name":"words","arguments":{"word":123456789012345678901234567890}}',
    '{"name":"words","arguments":{"word":-18446744073709551617}}',
    '{"name":"words","arguments":{"word":1.0}}',
    '{"name":"words","arguments":{"word":"x","more":99999999999999999999}}',
    '{"name":"words","arguments":{"word":"x"},"extra":1e5}',
    '{"name":"words","arguments":[1.5,2]}',
    '{"name":12345678901234567890,"arguments":{"word":"x"}}',
    '{"name":"words","arguments":{"word":1e400}}',
    '{"name":"words","arguments":{"word":"1.5e3"}}',
]


@pytest.mark.parametrize("raw", _NUMBERS_IN_CALLS)
def test_a_call_holding_numbers_gets_the_same_answer_whether_or_not_they_are_read(
    raw: str,
) -> None:
    with _words_only() as numberless, _words_only() as reading:
        reading.register(_count_tool())
        assert (numberless.reads_numbers, reading.reads_numbers) == (False, True)
        assert _listing_aside(numberless.call(raw, "u1", "c")) == _listing_aside(
            reading.call(raw, "u1", "c")
        )


def _listing_aside(answer: Answer) -> Answer:
    """The answer without an unknown tool's list of tools (the two gateways' lists differ)."""
    error = answer.get("error")
    if isinstance(error, dict) and error.get("code") == errors.UNKNOWN_TOOL.code:
        return {**answer, "error": {k: v for k, v in error.items() if k != "available"}}
    return answer


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=3))
def test_any_arguments_get_the_same_answer_whether_or_not_numbers_are_read(
    arguments: dict[str, JSONValue],
) -> None:
    raw = call_text("words", arguments)
    with _words_only() as numberless, _words_only() as reading:
        reading.register(_count_tool())
        assert numberless.call(raw, "u1", "c") == reading.call(raw, "u1", "c")


# --- a mistake made again gets the same answer, built once --------------------------------------


def _strings_tool() -> Tool:
    schema = {"type": "object", "additionalProperties": {"type": "string"}}
    return Tool("strings", "", schema, True, lambda ctx, args: len(args))


def test_a_mistake_made_again_gets_an_equal_answer_that_shares_nothing() -> None:
    with only_tool(_words_tool()) as gw:
        first = ask(gw, "words", {"word": 1})
        error_of(first)["pointer"] = "changed by the caller"
        error_of(first).clear()
        again = ask(gw, "words", {"word": 2})
        other = ask(gw, "words", {"word": None})
    assert error_of(again) == {
        **errors.INVALID_ARGUMENTS.as_error(),
        "pointer": "/arguments/word",
        "reason": "type",
        "expected": "string",
    }
    assert error_of(other) == error_of(again)


def test_mistakes_at_ever_new_places_are_answered_right_past_the_kept_refusals() -> None:
    from strictcall.core.pipeline import REFUSALS_KEPT

    with only_tool(_strings_tool()) as gw:
        for n in range(REFUSALS_KEPT + 20):
            error = error_of(ask(gw, "strings", {f"k{n}": n}))
            assert (error["code"], error["pointer"]) == (
                errors.INVALID_ARGUMENTS.code,
                f"/arguments/k{n}",
            )
        kept = gw._tools["strings"].refusals
        assert len(kept) == REFUSALS_KEPT


def test_a_refusal_expecting_a_list_is_kept_once_and_each_answer_has_its_own_list() -> None:
    with only_tool(_words_tool()) as gw:
        first = ask(gw, "words", {"word": "w", "extra": 1})
        error_of(first)["expected"].append("changed by the caller")
        again = ask(gw, "words", {"word": "w", "extra": 1})
        assert len(gw._tools["words"].refusals) == 1
    assert error_of(again)["expected"] == ["word"]
    assert error_of(again)["expected"] is not error_of(first)["expected"]


# --- inline_first: a timed tool tried on the caller's thread, then on a worker ------------------


class _Runs:
    """Where and how a handler ran: (thread id, running_inline()) per run."""

    def __init__(self, *, wait_inline: bool) -> None:
        self.wait_inline = wait_inline  # raise WouldWait when run inline
        self.runs: list[tuple[int, bool]] = []

    def handler(self, ctx: ToolContext, args: Args) -> JSONValue:
        inline = running_inline()
        self.runs.append((threading.get_ident(), inline))
        if inline and self.wait_inline:
            raise WouldWait
        return "done"


def _inline_first(runs: _Runs) -> Tool:
    return Tool("write", "", {"type": "object"}, True, runs.handler, timeout=5, inline_first=True)


def test_an_inline_first_tool_runs_on_the_callers_thread_when_it_need_not_wait() -> None:
    runs = _Runs(wait_inline=False)
    with only_tool(_inline_first(runs)) as gw:
        assert ask(gw, "write", {})["ok"] is True
        assert asyncio.run(gw.call_async(call_text("write", {}), "u1", "c"))["ok"] is True
    here = threading.get_ident()
    assert runs.runs == [(here, True), (here, True)]
    assert running_inline() is False  # only while the handler runs


def test_an_inline_first_tool_that_would_wait_runs_again_on_a_worker_thread() -> None:
    runs = _Runs(wait_inline=True)
    with only_tool(_inline_first(runs)) as gw:
        sync = ask(gw, "write", {})
        in_loop = asyncio.run(gw.call_async(call_text("write", {}), "u1", "c"))
    assert (sync["result"], in_loop["result"]) == ("done", "done")
    here = threading.get_ident()
    assert [inline for _, inline in runs.runs] == [True, False, True, False]
    assert runs.runs[0][0] == here and runs.runs[1][0] != here
    assert runs.runs[2][0] == here and runs.runs[3][0] != here


def test_would_wait_raised_where_waiting_is_allowed_is_an_internal_error() -> None:
    def always(ctx: ToolContext, args: Args) -> JSONValue:
        raise WouldWait

    timed = Tool("write", "", {"type": "object"}, True, always, timeout=5)
    with only_tool(timed) as gw:
        error = error_of(ask(gw, "write", {}))
    assert (error["code"], error["stage"]) == (
        errors.INTERNAL_ERROR.code,
        errors.INTERNAL_ERROR.stage.value,
    )


def test_a_declared_failure_raised_inline_is_answered_as_declared() -> None:
    def busy(ctx: ToolContext, args: Args) -> JSONValue:
        raise ToolFailure(errors.BUSY, retry_after_ms=5)

    tool = Tool(
        "write",
        "",
        {"type": "object"},
        True,
        busy,
        failures=(errors.BUSY,),
        timeout=5,
        inline_first=True,
    )
    with only_tool(tool) as gw:
        error = error_of(asyncio.run(gw.call_async(call_text("write", {}), "u1", "c")))
    assert (error["code"], error["retryable"]) == (errors.BUSY.code, errors.BUSY.retryable)


def test_inline_first_is_for_a_tool_with_a_timeout() -> None:
    with pytest.raises(ValueError):
        Tool("write", "", {"type": "object"}, True, lambda c, a: None, inline_first=True)
