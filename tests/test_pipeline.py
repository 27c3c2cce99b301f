"""pipeline: each rung on its own, returning what the next needs or a rejection."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from enum import IntEnum, StrEnum
from typing import Any

import pytest

from gateway_tools import CREATE_EVENT, READ_DOC, VALID_EVENT
from strictcall import ForbiddenOrMissing, Tool, ToolContext, ToolFailure, errors
from strictcall.core.execute import execute_call, execute_call_async
from strictcall.core.jsontext import MAX_RESULT_DEPTH, Document, json_kind
from strictcall.core.pipeline import (
    FORBIDDEN,
    INTERNAL,
    TIMED_OUT,
    WITHHELD,
    CompiledTool,
    Limits,
    authorize_call,
    check_arguments,
    check_envelope,
    check_result,
    fail,
    read_call,
    route_call,
    succeed,
)
from strictcall.errors import JSONValue, Rejection

Args = dict[str, JSONValue]
CTX = ToolContext("u1", "call-1", "t")


def compiled(handler: Any = None, **options: Any) -> CompiledTool:
    def default(ctx: ToolContext, args: Args) -> JSONValue:
        return {"args": args, "identity": ctx.identity}

    tool = Tool("t", "", {"type": "object"}, True, handler or default, **options)
    return CompiledTool.compile(tool)


# --- 1. parse --------------------------------------------------------------------------------


def test_read_call_parses_strict_json_into_a_document() -> None:
    document = read_call('{"a": [1, 2.5]}', Limits())
    assert document == Document({"a": [1, 2.5]}, True)
    assert read_call(b'{"a": 1}', Limits()) == Document({"a": 1}, False)


def test_read_call_refuses_text_over_the_size_limit_before_parsing() -> None:
    rejection = read_call("[" * 50, Limits(max_size=10))
    assert isinstance(rejection, Rejection)
    assert rejection.kind is errors.REQUEST_TOO_LARGE
    assert dict(rejection.details) == {"reason": "too_large", "limit": 10}


@pytest.mark.parametrize(
    ("raw", "details"),
    [
        ("{,}", {"reason": "syntax", "line": 1, "column": 2}),
        ('{\n"a":\n}', {"reason": "syntax", "line": 3, "column": 1}),
        ('{"a": 1, "a": 2}', {"reason": "duplicate_member"}),
        (
            "[[[[1]]]]",
            {"reason": "too_deep", "limit": 3, "arguments_limit": 2, "line": 1, "column": 4},
        ),
        (None, {"reason": "not_text"}),
        (12, {"reason": "not_text"}),
    ],
    ids=["syntax", "syntax-line-3", "duplicate", "too-deep", "none", "int"],
)
def test_read_call_refuses_what_is_not_strict_json_with_why_and_where(
    raw: Any, details: dict[str, JSONValue]
) -> None:
    rejection = read_call(raw, Limits(max_depth=3))
    assert isinstance(rejection, Rejection)
    assert rejection.kind is errors.INVALID_JSON
    assert dict(rejection.details) == details


# --- 2. route --------------------------------------------------------------------------------

TOOLS = {
    "create_event": CompiledTool.compile(CREATE_EVENT),
    "read_doc": CompiledTool.compile(READ_DOC),
}


def test_route_call_finds_the_named_tool() -> None:
    assert route_call({"name": "read_doc", "arguments": {}}, TOOLS) is TOOLS["read_doc"]


@pytest.mark.parametrize(
    "call",
    [{"name": "nope"}, {"name": ["read_doc"]}, {}, [], "read_doc", None],
    ids=["unknown", "list-name", "no-name", "array", "string", "null"],
)
def test_route_call_refuses_anything_else_listing_the_names(call: JSONValue) -> None:
    rejection = route_call(call, TOOLS)
    assert isinstance(rejection, Rejection)
    assert rejection.kind is errors.UNKNOWN_TOOL
    assert dict(rejection.details) == {"available": ["create_event", "read_doc"]}


# --- 3. shape --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [{"name": "t", "arguments": {}}, {"name": "t"}, {"arguments": {}, "name": "t"}],
    ids=["both", "name-only", "reordered"],
)
def test_check_envelope_passes_calls_with_only_name_and_arguments(call: Args) -> None:
    assert check_envelope(call) is None


def test_check_envelope_points_at_the_first_unknown_member() -> None:
    rejection = check_envelope({"name": "t", "x/y": 1, "arguments": {}, "z": 2})
    assert isinstance(rejection, Rejection)
    assert rejection.kind is errors.INVALID_ARGUMENTS
    assert dict(rejection.details) == {
        "pointer": "/x~1y",
        "reason": "unexpected_member",
        "expected": ["arguments", "name"],
    }


def test_check_arguments_passes_the_very_arguments_object_without_copying() -> None:
    arguments = dict(VALID_EVENT)
    call = {"name": "create_event", "arguments": arguments}
    assert check_arguments(call, TOOLS["create_event"], False) is arguments


def test_check_arguments_uses_the_exact_validator_when_the_text_had_floats() -> None:
    call = {"name": "create_event", "arguments": {**VALID_EVENT, "when": {"day": 1.0, "hour": 2}}}
    rejection = check_arguments(call, TOOLS["create_event"], True)
    assert isinstance(rejection, Rejection)
    assert dict(rejection.details) == {
        "pointer": "/arguments/when/day",
        "reason": "type",
        "expected": "integer",
    }


@pytest.mark.parametrize(
    ("call", "details"),
    [
        ({"name": "t"}, {"pointer": "/arguments", "reason": "missing_member", "expected": "title"}),
        (
            {"name": "t", "arguments": None},
            {"pointer": "/arguments", "reason": "type", "expected": "object"},
        ),
        (
            {"name": "t", "arguments": {**VALID_EVENT, "attendees": ["a", "a"]}},
            {"pointer": "/arguments/attendees", "reason": "unique_items"},
        ),
    ],
    ids=["missing", "not-object", "no-expected"],
)
def test_check_arguments_refuses_with_a_located_rejection(
    call: Args, details: dict[str, JSONValue]
) -> None:
    rejection = check_arguments(call, TOOLS["create_event"], False)
    assert isinstance(rejection, Rejection)
    assert rejection.kind is errors.INVALID_ARGUMENTS
    assert dict(rejection.details) == details


# --- 4. resource -----------------------------------------------------------------------------


def test_authorize_call_passes_a_tool_without_an_authorizer() -> None:
    assert authorize_call(compiled(), CTX, {}) is None


def test_authorize_call_passes_only_an_exact_true() -> None:
    assert authorize_call(compiled(authorize=lambda c, a: True), CTX, {}) is None
    assert authorize_call(compiled(authorize=lambda c, a: 1), CTX, {}) is FORBIDDEN
    assert authorize_call(compiled(authorize=lambda c, a: False), CTX, {}) is FORBIDDEN


@pytest.mark.parametrize(
    "exc", [ForbiddenOrMissing(), KeyError("d9"), TypeError()], ids=["fom", "key", "type"]
)
def test_authorize_call_denies_when_the_authorizer_raises(exc: Exception) -> None:
    def authorize(ctx: ToolContext, args: Args) -> bool:
        raise exc

    assert authorize_call(compiled(authorize=authorize), CTX, {}) is FORBIDDEN


def test_the_authorizer_receives_the_context_and_the_arguments() -> None:
    seen: list[tuple[ToolContext, Args]] = []

    def authorize(ctx: ToolContext, args: Args) -> bool:
        seen.append((ctx, args))
        return True

    arguments: Args = {"doc": "d1"}
    authorize_call(compiled(authorize=authorize), CTX, arguments)
    assert seen == [(CTX, arguments)]
    assert seen[0][1] is arguments


# --- 5. execute ------------------------------------------------------------------------------


def test_execute_call_runs_a_sync_handler_in_place_without_a_pool() -> None:
    threads: list[threading.Thread] = []

    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        threads.append(threading.current_thread())
        return args["n"]

    result = execute_call(compiled(handler, timeout=5), CTX, {"n": 3}, None)
    assert result == (3, None)
    assert threads == [threading.current_thread()]


def test_execute_call_runs_a_timed_sync_handler_on_the_pool() -> None:
    threads: list[threading.Thread] = []

    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        threads.append(threading.current_thread())
        return "done"

    with ThreadPoolExecutor(1) as pool:
        assert execute_call(compiled(handler, timeout=5), CTX, {}, pool) == ("done", None)
    assert threads[0] is not threading.current_thread()


def test_execute_call_times_out_a_slow_pooled_handler() -> None:
    release = threading.Event()

    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        release.wait(1)
        return "late"

    with ThreadPoolExecutor(1) as pool:
        try:
            assert execute_call(compiled(handler, timeout=0.05), CTX, {}, pool) == (
                None,
                TIMED_OUT,
            )
        finally:
            release.set()


def test_execute_call_runs_an_async_handler_in_a_private_loop() -> None:
    async def handler(ctx: ToolContext, args: Args) -> JSONValue:
        await asyncio.sleep(0)
        return ctx.identity

    assert execute_call(compiled(handler), CTX, {}, None) == ("u1", None)


@pytest.mark.parametrize(
    ("exc", "rejection"),
    [
        (ForbiddenOrMissing(), FORBIDDEN),
        (ToolFailure(errors.BUSY), Rejection(errors.BUSY)),
        (ToolFailure(errors.TIMEOUT), INTERNAL),
        (RuntimeError("x"), INTERNAL),
        (TimeoutError("x"), INTERNAL),
    ],
    ids=["forbidden-or-missing", "declared", "undeclared", "runtime", "own-timeout"],
)
def test_execute_call_turns_what_the_handler_raises_into_a_rejection(
    exc: Exception, rejection: Rejection
) -> None:
    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        raise exc

    tool = compiled(handler, failures=(errors.BUSY,))
    assert execute_call(tool, CTX, {}, None) == (None, rejection)
    assert asyncio.run(execute_call_async(tool, CTX, {})) == (None, rejection)


def test_a_declared_failure_with_retry_after_keeps_it_in_the_details() -> None:
    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        raise ToolFailure(errors.BUSY, retry_after_ms=1500)

    _, rejection = execute_call(compiled(handler, failures=(errors.BUSY,)), CTX, {}, None)
    assert rejection is not None
    assert rejection.as_error() == {**errors.BUSY.as_error(), "retry_after_ms": 1500}


def test_execute_call_async_calls_an_untimed_sync_handler_in_place() -> None:
    threads: list[threading.Thread] = []

    def handler(ctx: ToolContext, args: Args) -> JSONValue:
        threads.append(threading.current_thread())
        return 1

    assert asyncio.run(execute_call_async(compiled(handler), CTX, {})) == (1, None)
    assert threads == [threading.current_thread()]


def test_execute_call_async_times_out_an_async_handler() -> None:
    async def handler(ctx: ToolContext, args: Args) -> JSONValue:
        await asyncio.sleep(1)
        return "late"

    result = asyncio.run(execute_call_async(compiled(handler, timeout=0.02), CTX, {}))
    assert result == (None, TIMED_OUT)


# --- 6. output -------------------------------------------------------------------------------


def test_check_result_passes_a_result_matching_the_output_schema() -> None:
    tool = CompiledTool.compile(READ_DOC)
    assert check_result(tool, {"doc_id": "d1"}, {"doc_id": "d1", "text": "t"}, CTX) is None
    assert check_result(tool, {"doc_id": "d1"}, {"doc_id": "d1"}, CTX) is WITHHELD


def test_check_result_applies_the_tools_consistency_check_after_the_schema() -> None:
    calls: list[JSONValue] = []

    def same(args: Args, result: JSONValue) -> bool:
        calls.append(result)
        return bool(result == args["n"])

    tool = compiled(result_matches=same)
    assert check_result(tool, {"n": 1}, 1, CTX) is None
    assert check_result(tool, {"n": 1}, 2, CTX) is WITHHELD
    assert check_result(tool, {"n": 1}, (1,), CTX) is WITHHELD
    assert calls == [1, 2]  # a value that is not JSON never reaches the check


class Colour(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


class Mapping(dict[str, Any]):
    pass


class Items(list[Any]):
    pass


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, False),
        (True, False),
        (0, False),
        ("", False),
        (1.5, True),
        (0.0, True),
        ([], False),
        ({}, False),
        ({"a": [1, {"b": None}]}, False),
        ({"a": [1, {"b": 2.5}]}, True),
        (Colour.RED, False),
        (Level.HIGH, False),
        (Mapping(a=[Items([1.0])]), True),
        (OrderedDict(a=1), False),
        (float("nan"), None),
        (float("inf"), None),
        ([float("-inf")], None),
        ((1,), None),
        ({"a": (1,)}, None),
        ({1: "a"}, None),
        ([{None: 1}], None),
        ({1, 2}, None),
        (b"x", None),
        ([bytearray()], None),
        (object(), None),
    ],
    ids=[
        "null",
        "bool",
        "int",
        "str",
        "float",
        "zero-float",
        "empty-list",
        "empty-dict",
        "nested",
        "nested-float",
        "str-enum",
        "int-enum",
        "subclasses",
        "ordered-dict",
        "nan",
        "inf",
        "nested-inf",
        "tuple",
        "nested-tuple",
        "int-key",
        "nested-none-key",
        "set",
        "bytes",
        "nested-bytearray",
        "object",
    ],
)
def test_json_kind_tells_json_values_and_whether_they_hold_a_float(
    value: Any, kind: bool | None
) -> None:
    assert json_kind(value) is kind


def test_json_kind_refuses_values_nested_deeper_than_the_limit() -> None:
    value: JSONValue = 1
    for _ in range(MAX_RESULT_DEPTH):
        value = {"k": value} if isinstance(value, list) else [value]
    assert json_kind(value) is False
    assert json_kind([value]) is None
    assert json_kind([[1]], max_depth=2) is False
    assert json_kind([[[1]]], max_depth=2) is None
    assert json_kind({"a": {}}, max_depth=1) is None


def test_json_kind_ends_on_a_cyclic_value() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    assert json_kind(cycle) is None


# --- answers ---------------------------------------------------------------------------------


def test_succeed_answers_the_result_as_is() -> None:
    result: list[JSONValue] = []
    answer = succeed("c", result)
    assert answer == {"ok": True, "call_id": "c", "result": []}
    assert answer["result"] is result


def test_fail_answers_the_error_with_or_without_its_location() -> None:
    rejection = check_envelope({"name": "t", "x": 1})
    assert rejection is not None
    located = fail(5, rejection)
    assert located == {
        "ok": False,
        "call_id": 5,
        "error": {
            **errors.INVALID_ARGUMENTS.as_error(),
            "pointer": "/x",
            "reason": "unexpected_member",
            "expected": ["arguments", "name"],
        },
    }
    assert fail(5, rejection, located=False)["error"] == errors.INVALID_ARGUMENTS.as_error()


def test_an_answer_never_shares_state_with_the_shared_rejections() -> None:
    first = fail("c", FORBIDDEN)
    first["error"]["code"] = "tampered"
    assert fail("c", FORBIDDEN)["error"] == errors.FORBIDDEN_OR_MISSING.as_error()


def test_a_list_in_a_repeated_refusal_is_each_answers_own() -> None:
    """The refusal of an enum (a list expected) is built once and kept: an answer whose list
    a caller changes leaves the next answer as it was, and 1 and True stay apart."""
    from strictcall import Gateway

    def echo(ctx: ToolContext, arguments: dict[str, Any]) -> JSONValue:
        return None

    tool = Tool(
        name="pick",
        description="pick one",
        input_schema={
            "type": "object",
            "properties": {"level": {"enum": ["low", "high"]}, "n": {"enum": [1, 2]}},
            "additionalProperties": False,
        },
        output_schema={"type": "null"},
        handler=echo,
    )
    gateway = Gateway([tool])
    first = gateway.call('{"name": "pick", "arguments": {"level": "mid"}}', "u1", 1)
    assert first["ok"] is False
    error = first["error"]
    assert isinstance(error, dict) and error["code"] == errors.INVALID_ARGUMENTS.code
    assert error["expected"] == ["low", "high"]
    expected = error["expected"]
    assert isinstance(expected, list)
    expected.append("changed by the caller")
    again = gateway.call('{"name": "pick", "arguments": {"level": "mid"}}', "u1", 2)
    assert isinstance(again["error"], dict) and again["error"]["expected"] == ["low", "high"]
    numbers = gateway.call('{"name": "pick", "arguments": {"n": 3}}', "u1", 3)
    assert isinstance(numbers["error"], dict)
    assert [type(item) for item in numbers["error"]["expected"]] == [int, int]
