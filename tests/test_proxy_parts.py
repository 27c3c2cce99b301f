"""The proxy's parts in process, with the real SDK types: what a proxied tool's result is,
the gateway's per-identity route and listing, a tool set replaced while serving, the
allow-list file and the upstream's spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from strictcall import Gateway, Tool, ToolContext, ToolFailure
from strictcall.core.redact import Redaction
from strictcall.errors import (
    INVALID_TOOL_RESULT,
    TOOL_ERROR,
    UNKNOWN_TOOL,
    UPSTREAM_UNAVAILABLE,
    JSONValue,
)
from strictcall.services.proxy import (
    UPSTREAM_TEXT,
    PolicyError,
    UpstreamSpec,
    allow_list,
    content_of,
    load_allow_list,
)
from strictcall.transports.mcp import describe_tools

OBJECT_OUTPUT: dict[str, JSONValue] = {"type": "object", "additionalProperties": True}


def gateway_of(result: types.CallToolResult, *, structured: bool, withheld: bool) -> Gateway:
    """A gateway with one tool whose handler answers as a proxied tool would for `result`."""

    def handler(ctx: ToolContext, arguments: dict[str, JSONValue]) -> JSONValue:
        if result.is_error and withheld:
            raise ToolFailure(TOOL_ERROR)
        return content_of(result)

    tool = Tool(
        "t",
        "",
        {"type": "object"},
        OBJECT_OUTPUT if structured else None,
        handler,
        failures=(TOOL_ERROR, UPSTREAM_UNAVAILABLE),
        redact=Redaction(),
        source="up",
    )
    return Gateway([tool])


def answer(
    result: types.CallToolResult, *, structured: bool = False, withheld: bool = False
) -> Any:
    gateway = gateway_of(result, structured=structured, withheld=withheld)
    return gateway.call('{"name":"t","arguments":{}}', "u1", "c1")


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_one_text_block_is_the_result_as_a_string_even_an_empty_one() -> None:
    for value in ("Echo: hi", ""):
        assert answer(types.CallToolResult(content=[text(value)]))["result"] == value


def test_text_blocks_alone_are_their_texts_one_per_line() -> None:
    got = answer(types.CallToolResult(content=[text("a"), text("b")]))["result"]
    assert got == "a\nb"


def test_other_content_is_the_list_of_blocks_as_mcp_writes_them_even_none() -> None:
    image = types.ImageContent(type="image", data="aGk=", mime_type="image/png")
    got = answer(types.CallToolResult(content=[text("a"), image]))["result"]
    assert got == [
        {"type": "text", "text": "a"},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
    ]
    assert answer(types.CallToolResult(content=[]))["result"] == []


@pytest.mark.parametrize("value", [{"count": 0}, {}])
def test_structured_content_is_the_result_falsy_values_included(value: JSONValue) -> None:
    result = types.CallToolResult(content=[], structured_content=value)
    got = answer(result, structured=True)
    assert got["ok"] is True
    assert got["result"] == value


@pytest.mark.parametrize("sent", [None, "absent"])
def test_a_success_without_the_structured_content_its_schema_promises_is_withheld(
    sent: str | None,
) -> None:
    result = types.CallToolResult(content=[text("{}")])
    if sent is None:
        result = types.CallToolResult(content=[text("{}")], structured_content=None)
    got = answer(result, structured=True)
    assert got["error"] == {"code": "invalid_tool_result", "stage": "output", "retryable": False}
    assert INVALID_TOOL_RESULT.code == got["error"]["code"]


def test_an_error_result_passes_its_text_redacted_unless_withheld() -> None:
    failed = types.CallToolResult(
        content=[text("token ghp_" + "a1B2" * 9), text("l2")], is_error=True
    )
    passed = answer(failed)["error"]
    assert passed == {
        **TOOL_ERROR.as_error(),
        "upstream": "up",
        UPSTREAM_TEXT: "token [redacted:github-token]\nl2",
    }
    withheld = answer(failed, withheld=True)["error"]
    assert withheld == TOOL_ERROR.as_error()
    assert "a1B2" not in json.dumps(withheld)


# --- the gateway, per identity -----------------------------------------------------------------


def _tool(name: str) -> Tool:
    return Tool(name, "", {"type": "object"}, True, lambda ctx, args: name)


def test_a_tool_the_caller_may_not_call_is_routed_like_one_that_does_not_exist() -> None:
    lists = {"u1": frozenset({"a"}), "u2": frozenset({"a", "b"})}
    gateway = Gateway([_tool("a"), _tool("b"), _tool("c")], allowed=lambda who: lists.get(who))
    refused = gateway.call('{"name":"b"}', "u1", "c1")["error"]
    assert refused == gateway.call('{"name":"zz"}', "u1", "c2")["error"]
    assert (refused["code"], refused["available"]) == (UNKNOWN_TOOL.code, ["a"])
    assert gateway.call('{"name":"b"}', "u2", "c3")["result"] == "b"
    assert gateway.call('{"name":"c"}', "u3", "c4")["result"] == "c"  # None: every tool
    assert [t["name"] for t in gateway.list_tools(identity="u2")] == ["a", "b"]
    assert [t.name for t in describe_tools(gateway, "u1")] == ["a"]


def test_replacing_the_tools_reports_the_ones_not_served_and_serves_the_rest() -> None:
    gateway = Gateway([_tool("old")])
    generation = gateway.generation
    bad = Tool("bad", "", {"type": "strin"}, True, lambda ctx, args: None)
    refused = gateway.replace_tools([_tool("a"), bad, _tool("b"), _tool("b")])
    assert set(refused) == {"bad", "b"}
    assert all(isinstance(reason, str) and reason for reason in refused.values())
    assert [t.name for t in gateway.tools] == ["a"]
    assert gateway.generation > generation
    assert gateway.call('{"name":"old"}', "u1", "c1")["error"]["available"] == ["a"]


# --- the allow-list and the spec ---------------------------------------------------------------


def test_the_allow_list_reads_json_and_toml_with_a_fallback_for_everyone(tmp_path: Path) -> None:
    as_json = tmp_path / "allow.json"
    as_json.write_text('{"u1": ["echo", "add"], "*": ["echo"]}', encoding="utf-8")
    as_toml = tmp_path / "allow.toml"
    as_toml.write_text('u1 = ["echo", "add"]\n"*" = ["echo"]\n', encoding="utf-8")
    for path in (as_json, as_toml):
        allowed = load_allow_list(str(path))
        assert allowed("u1") == {"echo", "add"}
        assert allowed("someone") == {"echo"}
    assert allow_list({"u1": []})("u2") == frozenset()


@pytest.mark.parametrize("data", [[], {"u1": "echo"}, {"u1": [1]}, {"u1": None}])
def test_a_malformed_allow_list_is_refused(data: object) -> None:
    with pytest.raises(PolicyError):
        allow_list(data)


def test_an_unreadable_allow_list_is_refused_without_its_text(tmp_path: Path) -> None:
    with pytest.raises(PolicyError):
        load_allow_list(str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{secret", encoding="utf-8")
    with pytest.raises(PolicyError) as caught:
        load_allow_list(str(broken))
    assert "secret" not in str(caught.value)


def test_an_upstream_spec_splits_a_command_and_reads_headers() -> None:
    assert UpstreamSpec.of_command("node 'my server.js' --x").command == (
        "node",
        "my server.js",
        "--x",
    )
    spec = UpstreamSpec.of_url("https://h/mcp", ["Authorization: Bearer t:1", "X-A:b"])
    assert spec.headers == {"Authorization": "Bearer t:1", "X-A": "b"}
    assert spec.describe() == "https://h/mcp"
    for bad in ("", "  ", "'unclosed"):
        with pytest.raises(ValueError):
            UpstreamSpec.of_command(bad)
    with pytest.raises(ValueError):
        UpstreamSpec.of_url("ftp://h", [])
    with pytest.raises(ValueError):
        UpstreamSpec.of_url("http://h", ["no colon"])
