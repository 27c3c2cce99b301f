"""listing: the registered tools in the formats agent hosts read, with the enforced schemas."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any, get_args

import jsonschema_rs
import pytest

from gateway_tools import (
    ALL_TOOLS,
    CREATE_EVENT,
    TAG_BAG,
    VALID_CONVERT,
    VALID_EVENT,
    call_text,
    make_gateway,
)
from strictcall import Gateway, Tool, tool
from strictcall.core.listing import (
    RESULT_MEMBER,
    ToolFormat,
    describe_tool,
    object_rooted,
    wrap_schema,
)
from strictcall.errors import JSONValue

FORMATS: tuple[ToolFormat, ...] = get_args(ToolFormat)
EXACT = "x-strictcall-exact-integer"


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    with make_gateway() as gw:
        yield gw


def listed_input(entry: dict[str, Any], format: ToolFormat) -> Any:
    if format == "mcp":
        return entry["inputSchema"]
    if format == "openai":
        return entry["function"]["parameters"]
    if format == "openai-responses":
        return entry["parameters"]
    return entry["input_schema"]


def test_every_format_is_listed() -> None:
    assert set(FORMATS) == {"mcp", "openai", "openai-responses", "anthropic"}


def test_an_mcp_listing_has_name_description_input_and_output_schemas(gateway: Gateway) -> None:
    entry = gateway.list_tools("mcp")[0]
    assert set(entry) == {"name", "description", "inputSchema", "outputSchema"}
    assert (entry["name"], entry["description"]) == (CREATE_EVENT.name, CREATE_EVENT.description)
    assert entry["outputSchema"]["required"] == ["event_id", "attendees"]


def test_the_default_listing_is_mcp(gateway: Gateway) -> None:
    assert gateway.list_tools() == gateway.list_tools("mcp")


def test_an_openai_listing_is_a_function_tool(gateway: Gateway) -> None:
    entry = gateway.list_tools("openai")[0]
    assert set(entry) == {"type", "function"}
    assert entry["type"] == "function"
    assert set(entry["function"]) == {"name", "description", "parameters", "strict"}
    assert entry["function"]["name"] == CREATE_EVENT.name


def test_an_openai_responses_listing_is_a_flat_function_tool(gateway: Gateway) -> None:
    entry = gateway.list_tools("openai-responses")[0]
    assert set(entry) == {"type", "name", "description", "parameters", "strict"}
    assert (entry["type"], entry["name"]) == ("function", CREATE_EVENT.name)


@tool()
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


CLOSED = Tool(
    "closed",
    "Every member required, every object closed.",
    {
        "type": "object",
        "properties": {
            "b": {"type": ["integer", "null"], "minimum": 0},
            "a": {"type": "string", "pattern": "^[a-z]+$"},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    {"type": "null"},
    lambda c, a: None,
)


@pytest.mark.parametrize("format", ["openai", "openai-responses"])
def test_openai_strict_is_true_only_for_a_schema_that_qualifies_as_it_stands(
    format: ToolFormat,
) -> None:
    with Gateway([add, CLOSED, *ALL_TOOLS]) as gw:
        entries = gw.list_tools(format)
        mcp = {entry["name"]: entry["inputSchema"] for entry in gw.list_tools("mcp")}
    flat = [entry["function"] if format == "openai" else entry for entry in entries]
    strict = {entry["name"]: entry["strict"] for entry in flat}
    assert strict["add"] is False  # b is optional: strict mode would make it required
    assert strict["closed"] is True
    assert strict[CREATE_EVENT.name] is False  # minLength, uniqueItems, optional members
    for entry in flat:
        if entry["strict"] is False:
            assert entry["parameters"] == mcp[entry["name"]]  # listed unchanged
    closed = next(entry for entry in flat if entry["name"] == "closed")
    assert closed["parameters"]["required"] == ["b", "a"]  # the properties' order, same set


def test_an_anthropic_listing_has_an_input_schema(gateway: Gateway) -> None:
    entry = gateway.list_tools("anthropic")[0]
    assert set(entry) == {"name", "description", "input_schema"}
    assert entry["description"] == CREATE_EVENT.description


@pytest.mark.parametrize("format", FORMATS)
def test_a_listing_names_every_tool_in_registration_order(
    gateway: Gateway, format: ToolFormat
) -> None:
    entries = gateway.list_tools(format)
    names = [e["function"]["name"] if format == "openai" else e["name"] for e in entries]
    assert names == [tool.name for tool in ALL_TOOLS]


@pytest.mark.parametrize("format", FORMATS)
def test_listed_schemas_say_additional_properties_false_where_the_gateway_enforces_it(
    gateway: Gateway, format: ToolFormat
) -> None:
    schema = listed_input(gateway.list_tools(format)[0], format)
    assert schema["additionalProperties"] is False
    assert schema["properties"]["when"]["additionalProperties"] is False
    assert "additionalProperties" not in CREATE_EVENT.input_schema  # added by strictness


@pytest.mark.parametrize("format", FORMATS)
def test_a_schema_that_opens_itself_is_listed_open(gateway: Gateway, format: ToolFormat) -> None:
    entries = gateway.list_tools(format)
    schema = listed_input(entries[ALL_TOOLS.index(TAG_BAG)], format)
    assert schema["additionalProperties"] is True
    assert schema["properties"]["labels"]["additionalProperties"] == {"type": "string"}


@pytest.mark.parametrize("format", FORMATS)
def test_listings_never_show_the_internal_exact_integer_keyword(
    gateway: Gateway, format: ToolFormat
) -> None:
    assert EXACT not in json.dumps(gateway.list_tools(format))


def test_the_listed_schema_is_the_one_the_gateway_enforces(gateway: Gateway) -> None:
    listed = {e["name"]: e["inputSchema"] for e in gateway.list_tools("mcp")}
    probes = [
        ("create_event", VALID_EVENT),
        ("create_event", {**VALID_EVENT, "admin": True}),
        ("create_event", {**VALID_EVENT, "when": {"day": 1, "hour": 2, "tz": "UTC"}}),
        ("convert", VALID_CONVERT),
        ("convert", {**VALID_CONVERT, "x": 1}),
        ("update_profile", {"name": "a", "age": 2}),
        ("update_profile", {"name": "a", "x": 2}),
        ("search", {"query": "q", "filter": {"kind": "tag", "tag": "t"}}),
        ("search", {"query": "q", "filter": {"kind": "tag", "tag": "t", "x": 1}}),
        ("tag_bag", {"id": "a", "free": 1}),
    ]
    for name, arguments in probes:
        by_listing = jsonschema_rs.validator_for(listed[name]).is_valid(arguments)
        by_gateway = gateway.call(call_text(name, arguments), "u1", "c")["ok"]
        assert by_listing is by_gateway, (name, arguments)


@pytest.mark.parametrize("format", FORMATS)
def test_a_listing_is_a_fresh_copy_each_time(gateway: Gateway, format: ToolFormat) -> None:
    first = gateway.list_tools(format)
    pristine = copy.deepcopy(first)
    schema = listed_input(first[0], format)
    schema["additionalProperties"] = True
    schema["properties"]["when"]["properties"].clear()
    schema["required"].clear()
    if format == "mcp":
        first[0]["outputSchema"].clear()
    first.clear()
    assert gateway.list_tools(format) == pristine
    answer = gateway.call(call_text("create_event", {**VALID_EVENT, "admin": True}), "u1", "c")
    assert answer["ok"] is False
    assert gateway.call(call_text("create_event", VALID_EVENT), "u1", "c")["ok"] is True


def test_listing_never_changes_the_declared_tool(gateway: Gateway) -> None:
    before = copy.deepcopy(CREATE_EVENT.input_schema)
    gateway.list_tools("openai")
    assert CREATE_EVENT.input_schema == before


def test_a_boolean_output_schema_is_listed_wrapped_for_mcp(gateway: Gateway) -> None:
    open_tool = Tool("open", "", {"type": "object"}, True, lambda c, a: None)
    with Gateway([open_tool]) as gw:
        assert gw.list_tools("mcp")[0]["outputSchema"] == wrap_schema(True)
        assert wrap_schema(True)["properties"] == {RESULT_MEMBER: True}


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError):
        describe_tool(CREATE_EVENT, {}, {}, "gemini")  # type: ignore[arg-type]


def test_describe_tool_copies_the_schemas_it_is_given() -> None:
    schema: dict[str, JSONValue] = {"type": "object", "properties": {}}
    entry = describe_tool(CREATE_EVENT, schema, schema, "mcp")
    assert entry["inputSchema"] == schema
    assert entry["inputSchema"] is not schema
    assert entry["outputSchema"] is not schema


@pytest.mark.parametrize("format", FORMATS)
def test_a_schema_without_a_root_type_is_listed_as_the_object_the_gateway_requires(
    format: ToolFormat,
) -> None:
    implicit = Tool(
        "implicit",
        "Its schema leaves the root's type implicit.",
        {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"type": "null"},
        lambda c, a: None,
    )
    with Gateway([implicit]) as gw:
        schema = listed_input(gw.list_tools(format)[0], format)
        assert schema["type"] == "object"
        assert gw.call('{"name":"implicit","arguments":[1]}', "u1", "c")["ok"] is False
        assert gw.call('{"name":"implicit","arguments":{"a":1}}', "u1", "c")["ok"] is True
    assert "type" not in implicit.input_schema


@pytest.mark.parametrize(
    ("declared", "listed"),
    [
        (True, {"type": "object"}),
        (False, False),
        ({"type": ["object", "null"], "properties": {}}, {"type": "object", "properties": {}}),
        ({"type": "object"}, {"type": "object"}),
        ({"type": "string"}, {"type": "string"}),  # a tool that takes nothing stays so
    ],
    ids=["true", "false", "nullable-object", "object", "string"],
)
def test_a_listed_input_schema_says_object_where_the_gateway_takes_only_objects(
    declared: JSONValue, listed: JSONValue
) -> None:
    assert object_rooted(declared) == listed
