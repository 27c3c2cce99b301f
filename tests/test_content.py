"""A tool result that is MCP content: a library user's own tool returns `Content`, stage output
checks each block, and the MCP wires (strictcall's own lines and the SDK's models, on both wire
versions) write the blocks as they are, in order; /rpc and `Gateway.call` get its one value.
Hostile blocks are withheld, never written half-read."""

from __future__ import annotations

import base64
from typing import Any

import anyio
import orjson
import pytest
from mcp_types.methods import serialize_server_result, validate_server_result

from strictcall import (
    Content,
    Gateway,
    Tool,
    ToolContext,
    audio_block,
    image_block,
    resource_block,
    resource_link_block,
    text_block,
    tool,
)
from strictcall.core.content import MAX_BLOCKS, blocks_known
from strictcall.core.jsontext import MAX_RESULT_DEPTH
from strictcall.core.redact import Redaction
from strictcall.errors import INVALID_TOOL_RESULT, RESULT_TOO_LARGE, TOOL_ERROR, JSONValue
from strictcall.transports.jsonrpc import MAX_REPLY_BYTES
from strictcall.transports.mcp import McpTools

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
VERSIONS = [HANDSHAKE, MODERN]
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "content-test", "version": "1"},
}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
TOKEN = "ghp_" + "a1B2" * 9
OPEN: dict[str, JSONValue] = {"type": "object", "additionalProperties": True}

ALL_KINDS: tuple[dict[str, JSONValue], ...] = (
    text_block('Echo: "hi"\nline two'),
    image_block(PNG, "image/png"),
    audio_block(b"RIFF....WAVE", "audio/wav"),
    resource_link_block("file:///srv/notes/a.md", "a.md", mime_type="text/markdown"),
    resource_block("file:///srv/notes/b.md", text="# b", mime_type="text/markdown"),
    resource_block("file:///srv/b.bin", blob=b"\x00\x01"),
)


def gateway_answering(content: Any, *, output_schema: Any = None, redact: bool = False) -> Gateway:
    """A gateway whose one tool `t` answers `content`."""
    return Gateway(
        [
            Tool(
                "t",
                "",
                {"type": "object"},
                output_schema,
                lambda ctx, args: content,
                redact=Redaction() if redact else None,
            )
        ]
    )


def line_result(gateway: Gateway, version: str) -> dict[str, Any]:
    """The tools/call result strictcall's own MCP path writes for wire `version`."""
    tools = McpTools(gateway, lambda ctx: "u1", lambda: "s")
    params: dict[str, JSONValue] = {"name": "t", "arguments": {}}
    if version == MODERN:
        params["_meta"] = ENVELOPE
    line = anyio.run(tools.answer_call_line, params, 1, "u1", version)
    message = orjson.loads(line)
    result: dict[str, Any] = message["result"]
    validate_server_result("tools/call", version, result)
    assert serialize_server_result("tools/call", version, result) == result
    return result


def sdk_result(gateway: Gateway, version: str) -> dict[str, Any]:
    """The tools/call result the SDK's server path builds, dumped for wire `version`."""
    tools = McpTools(gateway, lambda ctx: "u1", lambda: "s")
    params: dict[str, JSONValue] = {"name": "t", "arguments": {}}
    if version == MODERN:
        params["_meta"] = ENVELOPE
    result = anyio.run(tools.answer_call, params, 1, "u1")
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return serialize_server_result("tools/call", HANDSHAKE, dumped)


def blocks_of(result: dict[str, Any]) -> list[Any]:
    blocks: list[Any] = result["content"]
    return blocks


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True
    error: dict[str, Any] = orjson.loads(result["content"][0]["text"])
    return error


# --- passing unchanged -------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_every_kind_of_block_is_written_as_it_is_in_order(version: str) -> None:
    gateway = gateway_answering(Content(ALL_KINDS))
    for result in (line_result(gateway, version), sdk_result(gateway, version)):
        assert blocks_of(result) == list(ALL_KINDS)
        assert "structuredContent" not in result
        assert result.get("isError") in (None, False)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_text_block_stays_its_text_never_json_quoted(version: str) -> None:
    gateway = gateway_answering(Content.of_text('Echo: "hi"'))
    assert blocks_of(line_result(gateway, version)) == [{"type": "text", "text": 'Echo: "hi"'}]


def test_annotations_and_meta_pass_and_members_no_version_defines_are_dropped() -> None:
    block = {
        "type": "text",
        "text": "a",
        "annotations": {"audience": ["user"], "priority": 0.5, "lastModified": "2026-01-01"},
        "_meta": {"k": 1},
        "sneaky": "x",
    }
    gateway = gateway_answering(Content((block,), meta={"trace": "t1"}))
    result = line_result(gateway, HANDSHAKE)
    assert blocks_of(result) == [{k: v for k, v in block.items() if k != "sneaky"}]
    assert result["_meta"] == {"trace": "t1"}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_structured_value_is_checked_against_the_output_schema(version: str) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    good = gateway_answering(Content.of_text("3"), output_schema=schema)
    assert error_of(line_result(good, version))["code"] == INVALID_TOOL_RESULT.code
    ok = gateway_answering(Content((text_block("3"),), {"n": 3}), output_schema=schema)
    result = line_result(ok, version)
    assert result["structuredContent"] == {"n": 3}
    assert blocks_of(result) == [text_block("3")]
    bad = gateway_answering(Content((text_block("x"),), {"n": "x"}), output_schema=schema)
    assert error_of(line_result(bad, version))["code"] == INVALID_TOOL_RESULT.code


def test_json_valued_tools_answer_as_before_beside_content_tools() -> None:
    gateway = gateway_answering({"n": 1}, output_schema=OPEN)
    result = line_result(gateway, HANDSHAKE)
    assert result == {
        "content": [{"type": "text", "text": '{"n":1}'}],
        "isError": False,
        "structuredContent": {"n": 1},
    }


def test_a_tool_without_an_output_schema_is_listed_without_one_and_answers_no_structure() -> None:
    @tool()
    def snap(name: str) -> Content:
        """A picture."""
        return Content((text_block(name), image_block(PNG, "image/png")))

    gateway = Gateway([snap])
    assert "outputSchema" not in gateway.list_tools("mcp")[0]
    tools = McpTools(gateway, lambda ctx: "u1", lambda: "s")
    assert tools.listing("u1")[0].output_schema is None
    plain = gateway_answering([1, 2])
    assert line_result(plain, HANDSHAKE) == {
        "content": [{"type": "text", "text": "[1,2]"}],
        "isError": False,
    }


# --- the mapping for callers without blocks ---------------------------------------------------


def test_gateway_call_and_rpc_get_one_json_value() -> None:
    call = '{"name":"t","arguments":{}}'
    texts = gateway_answering(Content((text_block("a"), text_block("b"))))
    assert texts.call(call, "u1", "c1")["result"] == "a\nb"
    mixed = gateway_answering(Content(ALL_KINDS[:2]))
    assert mixed.call(call, "u1", "c1")["result"] == list(ALL_KINDS[:2])
    structured = gateway_answering(Content((text_block("{}"),), {"n": 1}), output_schema=OPEN)
    assert structured.call(call, "u1", "c1")["result"] == {"n": 1}
    assert orjson.loads(structured.call_text(call, "u1", "c1"))["result"] == {"n": 1}
    assert anyio.run(structured.call_async, call, "u1", "c1")["result"] == {"n": 1}


def test_an_error_result_is_tool_error_with_its_text_and_its_blocks_on_mcp() -> None:
    failed = Content((text_block("Invalid timezone"),), is_error=True)
    gateway = gateway_answering(failed)
    answer = gateway.call('{"name":"t","arguments":{}}', "u1", "c1")
    assert answer == {
        "ok": False,
        "call_id": "c1",
        "error": {**TOOL_ERROR.as_error(), "upstream_text": "Invalid timezone"},
    }
    for version in VERSIONS:
        result = line_result(gateway, version)
        assert result["isError"] is True
        assert blocks_of(result) == [text_block("Invalid timezone")]
        assert "structuredContent" not in result


def _nested(depth: int) -> dict[str, JSONValue]:
    """An object nested `depth` deep ({"a": {"a": ... {}}})."""
    value: dict[str, JSONValue] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


# --- hostile blocks ----------------------------------------------------------------------------

HOSTILE: list[tuple[str, Any]] = [
    ("bad base64", {"type": "image", "data": "not base64!", "mimeType": "image/png"}),
    ("base64 unpadded", {"type": "image", "data": "aGk", "mimeType": "image/png"}),
    ("base64 with spaces", {"type": "audio", "data": "aG k=", "mimeType": "audio/wav"}),
    ("base64 beyond ASCII", {"type": "image", "data": "aGké", "mimeType": "image/png"}),
    ("no mimeType", {"type": "image", "data": "aGk="}),
    ("mimeType not a type", {"type": "image", "data": "aGk=", "mimeType": "png"}),
    ("unknown type", {"type": "video", "data": "aGk=", "mimeType": "video/mp4"}),
    ("sampling's type", {"type": "tool_use", "id": "1", "name": "x", "input": {}}),
    ("no type", {"text": "a"}),
    ("text not a str", {"type": "text", "text": 5}),
    ("not an object", "just a string"),
    ("link without scheme", {"type": "resource_link", "uri": "notes/a.md", "name": "a"}),
    ("link with a space", {"type": "resource_link", "uri": "file:///a b", "name": "a"}),
    ("link with a newline", {"type": "resource_link", "uri": "file:///a\nb", "name": "a"}),
    ("link without name", {"type": "resource_link", "uri": "file:///a"}),
    ("resource both", {"type": "resource", "resource": {"uri": "a:b", "text": "", "blob": ""}}),
    ("resource neither", {"type": "resource", "resource": {"uri": "a:b"}}),
    ("resource bad blob", {"type": "resource", "resource": {"uri": "a:b", "blob": "@@@@"}}),
    ("annotations' audience", {"type": "text", "text": "a", "annotations": {"audience": ["x"]}}),
    ("annotations' priority", {"type": "text", "text": "a", "annotations": {"priority": 2}}),
    ("_meta not an object", {"type": "text", "text": "a", "_meta": []}),
    ("lone surrogate", {"type": "text", "text": "\ud800"}),
    ("annotations not JSON", {"type": "text", "text": "a", "annotations": {"x": float("nan")}}),
    ("_meta not JSON", {"type": "text", "text": "a", "_meta": {"x": {1, 2}}}),
    ("_meta too deep", {"type": "text", "text": "a", "_meta": _nested(MAX_RESULT_DEPTH - 1)}),
    (
        "icons not JSON",
        {"type": "resource_link", "uri": "a:b", "name": "a", "icons": [{"src": "a:b", "s": b""}]},
    ),
    (
        "resource _meta not JSON",
        {"type": "resource", "resource": {"uri": "a:b", "text": "", "_meta": {"x": float("inf")}}},
    ),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("case", "block"), HOSTILE, ids=[case for case, _ in HOSTILE])
def test_a_hostile_block_withholds_the_whole_result(case: str, block: Any, version: str) -> None:
    gateway = gateway_answering(Content((text_block("fine"), block)))
    answer = gateway.call('{"name":"t","arguments":{}}', "u1", "c1")
    if case == "lone surrogate":  # well-formed as a block; unwritable as JSON
        assert answer["ok"] is True
    else:
        assert answer["error"]["code"] == INVALID_TOOL_RESULT.code
    result = line_result(gateway, version)
    assert error_of(result)["code"] == INVALID_TOOL_RESULT.code
    assert "fine" not in orjson.dumps(result).decode()


def test_the_most_blocks_pass_and_one_more_is_withheld() -> None:
    call = '{"name":"t","arguments":{}}'
    most = gateway_answering(Content((text_block("a"),) * MAX_BLOCKS, {"n": 1}))
    assert most.call(call, "u1", "c1")["ok"] is True
    over = gateway_answering(Content((text_block("a"),) * (MAX_BLOCKS + 1), {"n": 1}))
    assert over.call(call, "u1", "c1")["error"]["code"] == INVALID_TOOL_RESULT.code


def test_a_result_longer_than_the_reply_limit_is_withheld_as_too_large() -> None:
    big = base64.b64encode(b"\0" * (MAX_REPLY_BYTES * 3 // 4 + 8)).decode()
    gateway = gateway_answering(Content(({"type": "image", "data": big, "mimeType": "image/png"},)))
    for version in VERSIONS:
        error = error_of(line_result(gateway, version))
        assert (error["code"], error["limit"]) == (RESULT_TOO_LARGE.code, MAX_REPLY_BYTES)
    fits = base64.b64encode(b"\0" * (MAX_REPLY_BYTES // 2)).decode()
    small = gateway_answering(Content(({"type": "image", "data": fits, "mimeType": "image/png"},)))
    assert blocks_of(line_result(small, HANDSHAKE))[0]["data"] == fits


def test_a_block_nested_to_the_depth_limit_passes() -> None:
    block = {"type": "text", "text": "a", "_meta": _nested(MAX_RESULT_DEPTH - 2)}
    gateway = gateway_answering(Content((block,)))
    for version in VERSIONS:
        assert blocks_of(line_result(gateway, version)) == [block]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_result_of_the_reply_limit_passes_though_its_line_is_longer(version: str) -> None:
    """The line holds the result's JSON and the envelope around it: a result of exactly
    `MAX_REPLY_BYTES` is written, one byte more is too large."""
    empty = len(orjson.dumps(Content((text_block(""),)).as_json()))
    exact = "a" * (MAX_REPLY_BYTES - empty)
    written = line_result(gateway_answering(Content((text_block(exact),))), version)
    assert blocks_of(written) == [text_block(exact)]
    over = line_result(gateway_answering(Content((text_block(exact + "a"),))), version)
    error = error_of(over)
    assert (error["code"], error["limit"]) == (RESULT_TOO_LARGE.code, MAX_REPLY_BYTES)


def test_a_result_withheld_at_its_blocks_has_nothing_redacted_or_counted() -> None:
    counted: list[tuple[str | None, str, int]] = []
    block = {"type": "text", "text": f"token {TOKEN}", "_meta": {"x": float("nan")}}
    gateway = Gateway(
        [
            Tool(
                "t",
                "",
                {"type": "object"},
                None,
                lambda ctx, args: Content((block,)),
                redact=Redaction(tally=lambda *told: counted.append(told)),
            )
        ]
    )
    answer = gateway.call('{"name":"t","arguments":{}}', "u1", "c1")
    assert answer["error"]["code"] == INVALID_TOOL_RESULT.code
    assert counted == []


def test_a_block_type_the_negotiated_version_lacks_is_refused() -> None:
    link = resource_link_block("file:///a", "a")
    assert blocks_known([link], "2025-06-18")
    assert not blocks_known([link], "2025-03-26")
    assert not blocks_known([audio_block(b"x", "audio/wav")], "2024-11-05")
    assert blocks_known([text_block("a")], "2024-11-05")


def test_a_handler_returning_content_gets_its_context_and_arguments() -> None:
    def handler(ctx: ToolContext, args: dict[str, JSONValue]) -> Content:
        return Content.of_text(f"{ctx.identity}:{args['x']}")

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    gateway = Gateway([Tool("t", "", schema, None, handler)])
    assert gateway.call('{"name":"t","arguments":{"x":1}}', "u1", "c")["result"] == "u1:1"


# --- redaction ---------------------------------------------------------------------------------


def test_secrets_are_redacted_in_text_resources_and_structure_not_in_media() -> None:
    data = base64.b64encode(TOKEN.encode()).decode()
    content = Content(
        (
            text_block(f"your token is {TOKEN}."),
            resource_block("file:///k", text="postgres://app:s3cretpw@db:5432/app"),
            {"type": "image", "data": data, "mimeType": "image/png"},
        ),
        {"token": TOKEN},
    )
    gateway = gateway_answering(content, output_schema=OPEN, redact=True)
    result = line_result(gateway, HANDSHAKE)
    written = orjson.dumps(result).decode()
    assert TOKEN not in written and "s3cretpw" not in written
    assert result["content"][0]["text"] == "your token is [redacted:github-token]."
    assert result["content"][1]["resource"]["text"] == (
        "postgres://app:[redacted:basic-auth-credentials]@db:5432/app"
    )
    assert result["content"][2]["data"] == data
    assert result["structuredContent"] == {"token": "[redacted:github-token]"}


def test_a_tool_without_redaction_passes_its_text_unchanged() -> None:
    gateway = gateway_answering(Content.of_text(TOKEN))
    assert gateway.call('{"name":"t","arguments":{}}', "u1", "c")["result"] == TOKEN


def test_a_secret_split_across_two_blocks_is_not_found() -> None:
    """Documented: each block is read alone (a host shows them apart)."""
    halves = (text_block(TOKEN[:20]), text_block(TOKEN[20:]))
    gateway = gateway_answering(Content(halves), redact=True)
    assert blocks_of(line_result(gateway, HANDSHAKE)) == list(halves)


# --- the providers' turns ----------------------------------------------------------------------


def test_providers_turns_get_text_as_it_is_and_anthropic_gets_image_blocks() -> None:
    from strictcall.transports.providers import (
        arun_anthropic_tool_uses,
        run_anthropic_tool_uses,
        run_openai_tool_calls,
        run_responses_function_calls,
    )

    texts = gateway_answering(Content((text_block('Echo: "hi"'),)))
    chat = [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]
    assert run_openai_tool_calls(texts, chat, "u1")[0]["content"] == 'Echo: "hi"'
    item = {"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"}
    assert run_responses_function_calls(texts, [item], "u1")[0]["output"] == 'Echo: "hi"'
    use = {"type": "tool_use", "id": "c1", "name": "t", "input": {}}
    assert run_anthropic_tool_uses(texts, [use], "u1")[0]["content"] == 'Echo: "hi"'

    picture = gateway_answering(Content(ALL_KINDS[:4]))
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}
    for results in (
        run_anthropic_tool_uses(picture, [use], "u1"),
        run_anthropic_tool_uses(picture, [use, {**use, "id": "c2"}], "u1")[:1],
        anyio.run(arun_anthropic_tool_uses, picture, [use], "u1"),
    ):
        assert results[0]["is_error"] is False
        assert results[0]["content"] == [
            {"type": "text", "text": ALL_KINDS[0]["text"]},
            {"type": "image", "source": source},
            {"type": "text", "text": orjson.dumps(ALL_KINDS[2]).decode()},
            {"type": "text", "text": orjson.dumps(ALL_KINDS[3]).decode()},
        ]
    written = run_openai_tool_calls(picture, chat, "u1")[0]["content"]
    assert orjson.loads(written) == list(ALL_KINDS[:4])


def test_the_docs_example_runs_and_lists_no_output_schema() -> None:
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "CONTENT.md").read_text(encoding="utf-8")
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    gateway = namespace["gateway"]
    assert "outputSchema" not in gateway.list_tools("mcp")[0]
    result = line_result_of(gateway, "snapshot", {"name": "sales"})
    assert [block["type"] for block in result["content"]] == ["text", "image"]


def line_result_of(gateway: Gateway, name: str, arguments: dict[str, JSONValue]) -> Any:
    tools = McpTools(gateway, lambda ctx: "u1", lambda: "s")
    line = anyio.run(tools.answer_call_line, {"name": name, "arguments": arguments}, 1, "u1")
    return orjson.loads(line)["result"]
