"""Issue 31, item 10: the Anthropic adapter applies OpenAI's intake rules to `input`: a lone
surrogate is refused at parse before any tool runs (it once reached a write tool), and an input
longer than the size limit is request_too_large (a 2 M-character input once reached shape)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from anthropic.types import ToolUseBlock

from strictcall import Gateway, tool
from strictcall.core.pipeline import Limits
from strictcall.errors import INVALID_JSON, REQUEST_TOO_LARGE, Reason
from strictcall.transports.providers import (
    arun_anthropic_tool_uses,
    run_anthropic_tool_uses,
    run_openai_tool_calls,
)

LONE = "x\ud800y"


def writing_gateway(written: list[str], limits: Limits | None = None) -> Gateway:
    @tool()
    def write(text: str) -> int:
        """Write a text; how many were written."""
        written.append(text)
        return len(written)

    return Gateway([write], limits=limits)


def use(use_id: str, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": "write", "input": arguments}


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["is_error"] is True
    error: dict[str, Any] = json.loads(result["content"])
    return error


def openai_error(gateway: Gateway, arguments: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "write", "arguments": arguments}}
    (result,) = run_openai_tool_calls(gateway, {"tool_calls": [call]}, "u1")
    error: dict[str, Any] = json.loads(result["content"])
    return error


@pytest.mark.parametrize(
    "arguments",
    [{"text": LONE}, {LONE: "key"}, {"text": ["ok", {"deep": LONE}]}],
    ids=["value", "key", "nested"],
)
def test_a_lone_surrogate_in_input_is_refused_at_parse_and_reaches_no_tool(
    arguments: dict[str, Any],
) -> None:
    written: list[str] = []
    gateway = writing_gateway(written)
    (one,) = run_anthropic_tool_uses(gateway, [use("t1", arguments)], "u1")
    two = run_anthropic_tool_uses(gateway, [use("t2", {"text": "ok"}), use("t3", arguments)], "u1")
    awaited = asyncio.run(arun_anthropic_tool_uses(gateway, [use("t4", arguments)], "u1"))
    for result in (one, two[1], awaited[0]):
        error = error_of(result)
        assert (error["code"], error["stage"]) == (INVALID_JSON.code, INVALID_JSON.stage)
        assert error["reason"] == Reason.LONE_SURROGATE
    assert written == ["ok"]  # the well-formed call of the turn ran; no other did


def test_the_sdks_tool_use_block_with_a_lone_surrogate_is_refused_too() -> None:
    written: list[str] = []
    block = ToolUseBlock(type="tool_use", id="t1", name="write", input={"text": LONE})
    (result,) = run_anthropic_tool_uses(writing_gateway(written), [block], "u1")
    assert error_of(result)["reason"] == Reason.LONE_SURROGATE
    assert written == []


def test_both_adapters_refuse_a_lone_surrogate_alike() -> None:
    gateway = writing_gateway([])
    (anthropic,) = run_anthropic_tool_uses(gateway, [use("t1", {"text": LONE})], "u1")
    from_openai = openai_error(gateway, '{"text": "x\\ud800y"}')
    for error in (error_of(anthropic), from_openai):
        assert (error["code"], error["reason"]) == (INVALID_JSON.code, Reason.LONE_SURROGATE)


@pytest.mark.parametrize("max_size", [1024, Limits().max_size])
def test_an_input_longer_than_the_size_limit_is_request_too_large_as_on_openai(
    max_size: int,
) -> None:
    written: list[str] = []
    gateway = writing_gateway(written, Limits(max_size=max_size))
    big = {"text": "a" * (max_size + 1)}
    (result,) = run_anthropic_tool_uses(gateway, [use("t1", big)], "u1")
    awaited = asyncio.run(arun_anthropic_tool_uses(gateway, [use("t2", big)], "u1"))
    from_openai = openai_error(gateway, json.dumps(big))
    for error in (error_of(result), error_of(awaited[0]), from_openai):
        assert (error["code"], error["stage"]) == (REQUEST_TOO_LARGE.code, REQUEST_TOO_LARGE.stage)
        assert error["limit"] == max_size
    assert written == []


def test_an_input_within_the_limit_still_runs() -> None:
    written: list[str] = []
    gateway = writing_gateway(written, Limits(max_size=1024))
    text = "a" * (1024 - len('{"text":""}'))  # exactly at the limit as compact JSON text
    (result,) = run_anthropic_tool_uses(gateway, [use("t1", {"text": text})], "u1")
    assert result["is_error"] is False
    assert written == [text]
