"""tools: what a tool declares, and the decorator that derives its schemas from type hints."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any, Literal, NotRequired

import pytest
from typing_extensions import TypedDict

from gateway_tools import call_text
from strictcall import ErrorKind, Gateway, Tool, ToolContext, ToolFailure, errors, tool
from strictcall.errors import JSONValue

Answer = dict[str, JSONValue]


def noop(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    return None


# --- Tool ------------------------------------------------------------------------------------


def test_a_tool_holds_what_it_declares() -> None:
    declared = Tool("t", "Does t.", {"type": "object"}, {"type": "null"}, noop, timeout=2.5)
    assert (declared.name, declared.description, declared.timeout) == ("t", "Does t.", 2.5)
    assert declared.failures == ()
    assert declared.authorize is None and declared.result_matches is None


@pytest.mark.parametrize("name", ["", None, 3], ids=["empty", "none", "int"])
def test_a_tool_needs_a_non_empty_str_name(name: Any) -> None:
    with pytest.raises(ValueError):
        Tool(name, "", {"type": "object"}, True, noop)


@pytest.mark.parametrize("timeout", [0, -1, 0.0], ids=["zero", "negative", "zero-float"])
def test_a_tool_timeout_is_a_positive_number_of_seconds(timeout: float) -> None:
    with pytest.raises(ValueError):
        Tool("t", "", {"type": "object"}, True, noop, timeout=timeout)


@pytest.mark.parametrize(
    "kind",
    [errors.FORBIDDEN_OR_MISSING, errors.INVALID_ARGUMENTS, errors.INVALID_TOOL_RESULT],
    ids=["resource", "shape", "output"],
)
def test_a_tool_declares_failures_of_stage_execute_only(kind: ErrorKind) -> None:
    with pytest.raises(ValueError):
        Tool("t", "", {"type": "object"}, True, noop, failures=(kind,))


def test_a_tool_may_declare_execute_failures() -> None:
    declared = Tool("t", "", {"type": "object"}, True, noop, failures=(errors.BUSY, errors.TIMEOUT))
    assert declared.failures == (errors.BUSY, errors.TIMEOUT)


def test_a_tool_failure_carries_its_kind_and_retry_after() -> None:
    failure = ToolFailure(errors.BUSY, retry_after_ms=30)
    assert (failure.kind, failure.retry_after_ms, str(failure)) == (errors.BUSY, 30, "busy")
    assert ToolFailure(errors.BUSY).retry_after_ms is None


def test_a_tool_context_is_frozen() -> None:
    ctx = ToolContext("u1", "c", "t")
    with pytest.raises(AttributeError):
        ctx.identity = "admin"  # type: ignore[misc]


# --- the tool decorator: schemas from type hints ---------------------------------------------


class Point(TypedDict):
    x: int
    y: int


class Book(TypedDict):
    title: str
    pages: int
    tags: NotRequired[list[str]]


@tool()
def everything(
    ctx: ToolContext,
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    nothing: None,
    numbers: list[int],
    labels: dict[str, str],
    mode: Literal["fast", "slow"],
    book: Book,
    limit: int | None = None,
    suffix: str = "!",
) -> dict[str, Any]:
    """Echo what it was given, and who asked."""
    return {"identity": ctx.identity, "text": text + suffix, "limit": limit}


def property_schema(derived: Tool, name: str) -> JSONValue:
    return derived.input_schema["properties"][name]


@pytest.mark.parametrize(
    ("name", "schema"),
    [
        ("text", {"type": "string"}),
        ("count", {"type": "integer"}),
        ("ratio", {"type": "number"}),
        ("flag", {"type": "boolean"}),
        ("nothing", {"type": "null"}),
        ("numbers", {"type": "array", "items": {"type": "integer"}}),
        ("labels", {"type": "object", "additionalProperties": {"type": "string"}}),
        ("mode", {"type": "string", "enum": ["fast", "slow"]}),
        ("limit", {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        ("suffix", {"type": "string"}),
    ],
    ids=["str", "int", "float", "bool", "none", "list", "dict", "literal", "optional", "default"],
)
def test_the_decorator_derives_each_parameters_schema_from_its_hint(
    name: str, schema: JSONValue
) -> None:
    assert property_schema(everything, name) == schema


def test_the_decorator_requires_parameters_without_defaults_only() -> None:
    assert sorted(everything.input_schema["required"]) == sorted(
        ["text", "count", "ratio", "flag", "nothing", "numbers", "labels", "mode", "book"]
    )
    assert everything.input_schema["type"] == "object"


def test_the_context_parameter_is_not_an_argument() -> None:
    assert "ctx" not in everything.input_schema["properties"]


def test_a_typed_dict_parameter_keeps_its_members_including_one_named_title() -> None:
    book = everything.input_schema["$defs"]["Book"]
    assert book["properties"] == {
        "title": {"type": "string"},
        "pages": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    }
    assert book["required"] == ["title", "pages"]


def test_the_derived_schemas_carry_no_generated_titles() -> None:
    def titles(schema: JSONValue) -> int:
        if isinstance(schema, list):
            return sum(titles(v) for v in schema)
        if not isinstance(schema, dict):
            return 0
        found = 0
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                found += sum(titles(sub) for sub in value.values())
            else:
                found += (key == "title") + titles(value)
        return found

    assert titles(everything.input_schema) == 0
    assert titles(everything.output_schema) == 0


def test_the_decorator_derives_the_output_schema_from_the_return_hint() -> None:
    assert everything.output_schema == {"type": "object", "additionalProperties": True}

    @tool()
    def shelf() -> list[Book]:
        return []

    assert shelf.output_schema == {
        "type": "array",
        "items": {"$ref": "#/$defs/Book"},
        "$defs": {"Book": everything.input_schema["$defs"]["Book"]},
    }


def test_the_decorator_takes_name_and_description_from_the_function_or_its_arguments() -> None:
    assert (everything.name, everything.description) == (
        "everything",
        "Echo what it was given, and who asked.",
    )

    def undocumented(a: int) -> int:
        return a

    assert tool()(undocumented).description == ""
    renamed = tool(name="sum_up", description="Sums.")(undocumented)
    assert (renamed.name, renamed.description) == ("sum_up", "Sums.")


def test_the_decorator_passes_authorize_failures_and_timeout_through() -> None:
    def allow(ctx: ToolContext, args: dict[str, JSONValue]) -> bool:
        return True

    @tool(authorize=allow, failures=(errors.BUSY,), timeout=3)
    def guarded(a: int) -> int:
        return a

    assert (guarded.authorize, guarded.failures, guarded.timeout) == (allow, (errors.BUSY,), 3)


def test_a_parameter_without_a_hint_is_refused() -> None:
    def unhinted(a, b: int) -> int:  # type: ignore[no-untyped-def]
        return b

    with pytest.raises(TypeError):
        tool()(unhinted)


def test_a_function_without_a_return_hint_is_refused() -> None:
    def unreturned(a: int):  # type: ignore[no-untyped-def]
        return a

    with pytest.raises(TypeError):
        tool()(unreturned)


@pytest.mark.parametrize("kind", ["args", "kwargs", "positional"])
def test_parameters_that_are_not_plain_named_ones_are_refused(kind: str) -> None:
    def star(*a: int) -> int:
        return 0

    def double_star(**a: int) -> int:
        return 0

    def positional(a: int, /) -> int:
        return a

    funcs: dict[str, Callable[..., int]] = {
        "args": star,
        "kwargs": double_star,
        "positional": positional,
    }
    func = funcs[kind]
    with pytest.raises(TypeError):
        tool()(func)


# --- the derived schemas are enforced strictly -------------------------------------------------

VALID_EVERYTHING: dict[str, Any] = {
    "text": "hi",
    "count": 2,
    "ratio": 0.5,
    "flag": False,
    "nothing": None,
    "numbers": [1, 2],
    "labels": {"a": "b"},
    "mode": "fast",
    "book": {"title": "Dune", "pages": 412},
}


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    with Gateway([everything]) as gw:
        yield gw


def ask(gw: Gateway, arguments: JSONValue, identity: str = "u1") -> Answer:
    return gw.call(call_text("everything", arguments), identity, "c")


def test_a_valid_call_to_a_decorated_tool_runs_with_defaults_for_omitted_members(
    gateway: Gateway,
) -> None:
    answer = ask(gateway, VALID_EVERYTHING)
    assert answer["result"] == {"identity": "u1", "text": "hi!", "limit": None}


def test_optional_members_of_a_decorated_tool_may_be_given(gateway: Gateway) -> None:
    answer = ask(gateway, {**VALID_EVERYTHING, "limit": 5, "suffix": "?"})
    assert answer["result"] == {"identity": "u1", "text": "hi?", "limit": 5}


@pytest.mark.parametrize(
    ("change", "pointer", "reason"),
    [
        ({"count": True}, "/arguments/count", "type"),
        ({"count": "2"}, "/arguments/count", "type"),
        ({"count": 2.0}, "/arguments/count", "type"),
        ({"ratio": True}, "/arguments/ratio", "type"),
        ({"flag": 0}, "/arguments/flag", "type"),
        ({"nothing": 0}, "/arguments/nothing", "type"),
        ({"numbers": [1, 1.0]}, "/arguments/numbers/1", "type"),
        ({"labels": {"a": 1}}, "/arguments/labels/a", "type"),
        ({"mode": "medium"}, "/arguments/mode", "enum"),
        ({"limit": 1.0}, "/arguments/limit", "any_of"),
        ({"extra": 1}, "/arguments/extra", "unexpected_member"),
        ({"ctx": {"identity": "admin"}}, "/arguments/ctx", "unexpected_member"),
        (
            {"book": {"title": "T", "pages": 1, "isbn": "x"}},
            "/arguments/book/isbn",
            "unexpected_member",
        ),
        ({"book": {"title": "T"}}, "/arguments/book", "missing_member"),
        ({"book": {"title": "T", "pages": True}}, "/arguments/book/pages", "type"),
    ],
    ids=[
        "true-for-int",
        "str-for-int",
        "float-for-int",
        "true-for-float",
        "zero-for-bool",
        "zero-for-none",
        "float-in-int-list",
        "int-in-str-dict",
        "literal",
        "float-for-optional-int",
        "extra-member",
        "context-as-argument",
        "typed-dict-extra-member",
        "typed-dict-missing-member",
        "typed-dict-true-for-int",
    ],
)
def test_a_decorated_tools_derived_schema_is_enforced_strictly(
    gateway: Gateway, change: dict[str, JSONValue], pointer: str, reason: str
) -> None:
    error = ask(gateway, {**VALID_EVERYTHING, **change})["error"]
    assert error["code"] == errors.INVALID_ARGUMENTS.code
    assert error["stage"] == errors.Stage.SHAPE.value
    assert (error["pointer"], error["reason"]) == (pointer, reason)


@pytest.mark.parametrize("member", sorted(set(VALID_EVERYTHING)))
def test_every_required_member_of_a_decorated_tool_must_be_given(
    gateway: Gateway, member: str
) -> None:
    arguments = {k: v for k, v in VALID_EVERYTHING.items() if k != member}
    error = ask(gateway, arguments)["error"]
    assert (error["pointer"], error["reason"], error["expected"]) == (
        "/arguments",
        "missing_member",
        member,
    )


def test_a_float_parameter_accepts_integers_and_floats(gateway: Gateway) -> None:
    for ratio in (1, 1.0, -2.5):
        assert ask(gateway, {**VALID_EVERYTHING, "ratio": ratio})["ok"] is True


def test_a_decorated_tool_returning_against_its_hint_is_withheld() -> None:
    @tool()
    def liar(a: int) -> int:
        return "not an int"  # type: ignore[return-value]

    with Gateway([liar]) as gw:
        error = gw.call(call_text("liar", {"a": 1}), "u1", "c")["error"]
    assert error == errors.INVALID_TOOL_RESULT.as_error()


def test_a_decorated_tool_returning_a_typed_dict_is_checked_strictly() -> None:
    @tool()
    def fetch(extra: bool) -> Point:
        point: dict[str, Any] = {"x": 1, "y": 2}
        if extra:
            point["z"] = 3
        return point  # type: ignore[return-value]

    with Gateway([fetch]) as gw:
        assert gw.call(call_text("fetch", {"extra": False}), "u1", "c")["result"] == {
            "x": 1,
            "y": 2,
        }
        error = gw.call(call_text("fetch", {"extra": True}), "u1", "c")["error"]
    assert error == errors.INVALID_TOOL_RESULT.as_error()


def test_a_decorated_async_function_is_awaited() -> None:
    @tool()
    async def later(ctx: ToolContext, n: int) -> list[int]:
        await asyncio.sleep(0)
        return [n, len(ctx.identity)]

    with Gateway([later]) as gw:
        assert gw.call(call_text("later", {"n": 4}), "u12", "c")["result"] == [4, 3]
        answer = asyncio.run(gw.call_async(call_text("later", {"n": 4}), "u1", "c"))
        assert answer["result"] == [4, 2]


def test_a_decorated_function_without_context_gets_only_its_arguments() -> None:
    @tool()
    def add(a: int, b: int = 10) -> int:
        return a + b

    assert set(add.input_schema["properties"]) == {"a", "b"}
    with Gateway([add]) as gw:
        assert gw.call(call_text("add", {"a": 1}), "u1", "c")["result"] == 11
        assert gw.call(call_text("add", {"a": 1, "b": 2}), "u1", "c")["result"] == 3


def test_a_decorated_function_stays_callable_through_its_handler() -> None:
    answer = everything.handler(ToolContext("u9", "c", "everything"), dict(VALID_EVERYTHING))
    assert answer == {"identity": "u9", "text": "hi!", "limit": None}


def test_the_decorated_tools_listing_keeps_a_member_named_title() -> None:
    with Gateway([everything]) as gw:
        listed = gw.list_tools("mcp")[0]
    assert "title" in json.dumps(listed["inputSchema"]["$defs"]["Book"]["properties"])
    assert listed["inputSchema"]["$defs"]["Book"]["properties"]["title"] == {"type": "string"}
