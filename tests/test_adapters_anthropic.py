"""strictcall.transports.providers.anthropic: tool_use blocks in, tool_result blocks out, via the
gateway."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from anthropic.types import Message, TextBlock, ToolResultBlockParam, ToolUseBlock

from adapter_tools import MEETING, SECRET, Meeting, adapter_gateway, conforms, error_of, is_kind
from strictcall import errors
from strictcall.transports.providers import arun_anthropic_tool_uses, run_anthropic_tool_uses

RECORDED = Path(__file__).resolve().parent.parent / "examples" / "recorded"


def recorded(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    return value


def use(use_id: str, name: object, arguments: object) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": arguments}


def test_a_recorded_message_parsed_by_the_sdk_gets_one_tool_result_per_tool_use() -> None:
    message = Message.model_validate(recorded("anthropic_messages_1.json"))

    results = run_anthropic_tool_uses(adapter_gateway(), message, "u1")

    uses = [block.id for block in message.content if block.type == "tool_use"]
    assert [r["tool_use_id"] for r in results] == uses
    for result in results:
        assert conforms(ToolResultBlockParam, result)
        assert result["is_error"] is True  # these tools are not this gateway's
        assert is_kind(error_of(result["content"]), errors.UNKNOWN_TOOL)


def test_the_sdks_objects_and_plain_dicts_give_the_same_results() -> None:
    body = recorded("anthropic_messages_2.json")
    body["content"] = [{"type": "text", "text": "ok"}, use("t1", "add", {"a": 2, "b": -2})]
    parsed = Message.model_validate(body)

    from_sdk = run_anthropic_tool_uses(adapter_gateway(), parsed, "u1")

    assert from_sdk == run_anthropic_tool_uses(adapter_gateway(), body, "u1")
    assert from_sdk == run_anthropic_tool_uses(adapter_gateway(), body["content"], "u1")
    assert from_sdk == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "0", "is_error": False}
    ]


def test_the_sdks_objects_mappings_and_plain_dicts_give_the_same_results() -> None:
    blocks = [use("t1", "echo", {"value": 0}), use("t2", "add", {"a": "1"})]
    text = {"type": "text", "text": "Calling."}
    gateway = adapter_gateway()

    for content in (blocks, blocks[:1], blocks[1:], [text, *blocks[1:]], [text]):
        sdk_content = [
            TextBlock.model_validate(b) if b is text else ToolUseBlock.model_validate(b)
            for b in content
        ]
        proxies = [MappingProxyType(b) for b in content]
        expected = run_anthropic_tool_uses(gateway, content, "u1")
        assert run_anthropic_tool_uses(gateway, sdk_content, "u1") == expected
        assert run_anthropic_tool_uses(gateway, proxies, "u1") == expected


@pytest.mark.parametrize("value", [0, False, "", [], None, {}])
def test_a_falsy_result_is_written_as_the_json_value_it_is_and_is_no_error(value: object) -> None:
    (result,) = run_anthropic_tool_uses(
        adapter_gateway(), [use("t1", "echo", {"value": value})], "u1"
    )

    assert result["is_error"] is False
    assert result["content"] != ""
    assert json.loads(result["content"]) == value
    assert conforms(ToolResultBlockParam, result)


def test_a_refusal_is_an_error_result_with_the_located_structured_error() -> None:
    (result,) = run_anthropic_tool_uses(
        adapter_gateway(), [use("t1", "add", {"a": 1, "admin": "SENT-VALUE-7"})], "u1"
    )

    assert result["is_error"] is True
    error = error_of(result["content"])
    assert is_kind(error, errors.INVALID_ARGUMENTS)
    assert (error["pointer"], error["reason"]) == ("/arguments/admin", "unexpected_member")
    assert "SENT-VALUE-7" not in result["content"]


def test_a_tools_exception_text_never_reaches_the_model() -> None:
    (result,) = run_anthropic_tool_uses(adapter_gateway(), [use("t1", "explode", {})], "u1")

    assert result["is_error"] is True
    assert is_kind(error_of(result["content"]), errors.INTERNAL_ERROR)
    assert SECRET not in result["content"]


def test_the_tool_use_id_is_the_gateways_call_id() -> None:
    (result,) = run_anthropic_tool_uses(adapter_gateway(), [use("toolu_01", "whoami", {})], "u9")

    assert json.loads(result["content"]) == {"identity": "u9", "call_id": "toolu_01"}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (float("nan"), "syntax"),
        (float("inf"), "syntax"),
        ({1: "not a str key"}, "syntax"),
        (object(), "syntax"),
    ],
)
def test_an_input_json_cannot_hold_is_refused_at_parse(value: object, reason: str) -> None:
    (result,) = run_anthropic_tool_uses(adapter_gateway(), [use("t1", "free", {"x": value})], "u1")

    error = error_of(result["content"])
    assert is_kind(error, errors.INVALID_JSON)
    assert error["reason"] == reason


def test_an_input_nested_deeper_than_the_limit_is_refused_at_parse() -> None:
    gateway = adapter_gateway()
    deep: Any = {}
    for _ in range(gateway.limits.max_depth):
        deep = {"x": deep}

    (result,) = run_anthropic_tool_uses(gateway, [use("t1", "free", deep)], "u1")

    error = error_of(result["content"])
    assert is_kind(error, errors.INVALID_JSON)
    assert (error["reason"], error["limit"]) == ("too_deep", gateway.limits.max_depth)


def test_an_input_that_is_not_an_object_is_refused_at_shape() -> None:
    (result,) = run_anthropic_tool_uses(adapter_gateway(), [use("t1", "ping", [])], "u1")

    error = error_of(result["content"])
    assert is_kind(error, errors.INVALID_ARGUMENTS)
    assert error["pointer"] == "/arguments"


@pytest.mark.parametrize(
    ("block", "pointer", "reason"),
    [
        ({"type": "tool_use", "name": "add", "input": {}}, "/content/2", "missing_member"),
        ({"type": "tool_use", "id": "t1", "input": {}}, "/content/2", "missing_member"),
        ({"type": "tool_use", "id": "t1", "name": "add"}, "/content/2", "missing_member"),
        ({"type": "tool_use", "id": None, "name": "add", "input": {}}, "/content/2/id", "type"),
        (use("t1", None, {}), "/content/2/name", "type"),
        (use("t0", "add", {"a": 1}), "/content/2/id", "unique_items"),
    ],
)
def test_a_malformed_tool_use_gets_a_located_refusal_and_the_others_run(
    block: dict[str, Any], pointer: str, reason: str
) -> None:
    content = [
        {"type": "text", "text": "Let me add those."},
        use("t0", "add", {"a": 1}),
        block,
        use("t3", "add", {"a": 3}),
    ]

    results = run_anthropic_tool_uses(adapter_gateway(), {"content": content}, "u1")

    assert len(results) == 3
    assert [r["content"] for r in results[0::2]] == ["1", "3"]
    assert results[1]["is_error"] is True
    error = error_of(results[1]["content"])
    assert is_kind(error, errors.INVALID_REQUEST)
    assert (error["pointer"], error["reason"]) == (pointer, reason)


def test_the_async_form_runs_the_calls_concurrently_and_keeps_their_order() -> None:
    async def turn() -> list[dict[str, Any]]:
        MEETING["now"] = Meeting()
        content = [
            use("t1", "meet_b", {}),
            use("t2", "echo", {"value": None}),
            use("t3", "meet_a", {}),
        ]
        return await asyncio.wait_for(
            arun_anthropic_tool_uses(adapter_gateway(), content, "u1"), 10
        )

    results = asyncio.run(turn())

    assert [r["tool_use_id"] for r in results] == ["t1", "t2", "t3"]
    assert [r["content"] for r in results] == ['"b"', "null", '"a"']


def test_the_async_and_sync_forms_answer_every_kind_of_block_alike() -> None:
    content: list[Any] = [
        use("t0", "add", {"a": 1}),
        {"type": "tool_use", "name": "add", "input": {}},
        use("t0", "add", {}),
        use("t3", "add", {"a": float("nan")}),
        use("t4", "nope", {}),
        {"type": "text", "text": "and"},
        use("t5", "echo", {"value": 0}),
    ]

    answered = run_anthropic_tool_uses(adapter_gateway(), content, "u1")

    assert asyncio.run(arun_anthropic_tool_uses(adapter_gateway(), content, "u1")) == answered
    assert [r["is_error"] for r in answered] == [False, True, True, True, True, False]
