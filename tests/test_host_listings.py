"""Each listing held against the host library that reads it: the OpenAI Agents SDK's strict-schema
function and the openai SDK's tool types, the anthropic SDK's ToolParam, and the MCP SDK's Tool
model and per-version result validation (2025-11-25 and 2026-07-28)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import orjson
import pytest
from agents.strict_schema import ensure_strict_json_schema
from anthropic.types import ToolParam
from mcp_types.methods import validate_server_result
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import TypeAdapter

from gateway_tools import ALL_TOOLS
from strictcall import Gateway, Tool, tool
from strictcall.services.notes import notes_tools
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.jsonrpc import RpcService

WIRE_VERSIONS = ("2025-11-25", "2026-07-28")


@tool()
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


CLOSED = Tool(
    "closed",
    "Every member required, every object closed, a reference and a nullable member.",
    {
        "type": "object",
        "$defs": {
            "point": {
                "type": "object",
                "properties": {"y": {"type": "number"}, "x": {"type": "number"}},
                "required": ["x", "y"],
                "additionalProperties": False,
            }
        },
        "properties": {
            "at": {"$ref": "#/$defs/point"},
            "label": {"type": ["string", "null"], "pattern": "^[a-z]*$"},
            "kind": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "required": ["tags", "kind", "label", "at"],
        "additionalProperties": False,
    },
    {"type": "integer"},
    lambda c, a: 0,
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    store = SQLiteStore(str(tmp_path_factory.mktemp("hosts") / "notes.sqlite3"))
    with Gateway([*notes_tools(store), *ALL_TOOLS, add, CLOSED]) as gw:
        yield gw
    store.close()


def function_of(entry: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = entry.get("function", entry)
    return function


@pytest.mark.parametrize("format", ["openai", "openai-responses"])
def test_the_agents_sdk_leaves_every_strict_openai_schema_as_it_is(
    gateway: Gateway, format: Any
) -> None:
    strict = [function_of(e) for e in gateway.list_tools(format) if function_of(e)["strict"]]
    assert {f["name"] for f in strict} >= {"closed", "list_notes", "count_notes"}
    for function in strict:
        parameters = function["parameters"]
        assert ensure_strict_json_schema(copy.deepcopy(parameters)) == parameters


@pytest.mark.parametrize("format", ["openai", "openai-responses"])
def test_the_agents_sdk_would_change_every_schema_listed_as_not_strict(
    gateway: Gateway, format: Any
) -> None:
    """Not strict is no false modesty where the Agents SDK can tell: its rewrite would change
    the schema, or it refuses it (OpenAI's own subset is narrower still, e.g. no minLength)."""
    loose = {f["name"]: f for f in map(function_of, gateway.list_tools(format)) if not f["strict"]}
    assert "add" in loose and "closed" not in loose
    for name in ("add", "whoami", "tag_bag", "update_profile"):
        parameters = loose[name]["parameters"]
        try:
            rewritten = ensure_strict_json_schema(copy.deepcopy(parameters))
        except Exception:  # the SDK refuses it outright: it cannot be strict
            continue
        assert rewritten != parameters, name


def test_chat_completions_tools_are_the_openai_sdk_s_function_tool_params(
    gateway: Gateway,
) -> None:
    adapter = TypeAdapter(ChatCompletionFunctionToolParam)
    for entry in gateway.list_tools("openai"):
        assert adapter.validate_python(entry) == entry


def test_responses_tools_are_the_openai_sdk_s_function_tool_params(gateway: Gateway) -> None:
    adapter = TypeAdapter(FunctionToolParam)
    for entry in gateway.list_tools("openai-responses"):
        assert adapter.validate_python(entry) == entry


def test_anthropic_tools_are_the_anthropic_sdk_s_tool_params(gateway: Gateway) -> None:
    adapter = TypeAdapter(ToolParam)
    for entry in gateway.list_tools("anthropic"):
        assert adapter.validate_python(entry) == entry


def tools_list_result(tools: list[dict[str, Any]], version: str) -> dict[str, Any]:
    """A tools/list result as a server answers it on `version` (2026-07-28 adds its envelope)."""
    if version == "2026-07-28":
        return {"tools": tools, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    return {"tools": tools}


@pytest.mark.parametrize("version", WIRE_VERSIONS)
def test_the_mcp_listing_is_valid_on_both_wire_versions(gateway: Gateway, version: str) -> None:
    listed = gateway.list_tools("mcp")
    for entry in listed:
        assert entry["outputSchema"]["type"] == "object"
        types.Tool.model_validate(entry, by_name=False)
    validate_server_result("tools/list", version, tools_list_result(listed, version))


@pytest.mark.parametrize("version", WIRE_VERSIONS)
def test_rpc_tools_list_is_valid_mcp_on_both_wire_versions(gateway: Gateway, version: str) -> None:
    records: list[AuditRecord] = []
    service = RpcService(gateway, records.append)

    async def ask() -> bytes | None:
        return await service.answer(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', "u1")

    body = anyio.run(ask)
    assert body is not None
    tools = orjson.loads(body)["result"]["tools"]
    assert tools == gateway.list_tools("mcp")
    validate_server_result("tools/list", version, tools_list_result(tools, version))


def test_the_wire_models_refuse_a_bare_non_object_output_schema() -> None:
    """The check above can fail: the 2025-11-25 model refuses what MCP listings used to give."""
    bare = {"name": "count", "inputSchema": {"type": "object"}, "outputSchema": {"type": "integer"}}
    with pytest.raises(ValueError):
        validate_server_result("tools/list", "2025-11-25", {"tools": [bare]})
