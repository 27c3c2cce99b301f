"""strictcall.transports.providers.agents: the gateway's tools as the OpenAI Agents SDK's
FunctionTools,
invoked as the SDK invokes them (a real ToolContext and the raw arguments text; no network)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from agents import FunctionTool, RunContextWrapper
from agents.exceptions import UserError
from agents.tool_context import ToolContext

from adapter_tools import SECRET, adapter_gateway, error_of, is_kind
from strictcall import errors
from strictcall.transports.providers import agents_function_tools


@dataclass
class Caller:
    identity: str


def invoke(tool: FunctionTool, context: Any, arguments: str, call_id: str = "call_1") -> Any:
    ctx = ToolContext(
        context=context, tool_name=tool.name, tool_call_id=call_id, tool_arguments=arguments
    )
    return run(tool, ctx, arguments)


def run(tool: FunctionTool, ctx: ToolContext[Any], arguments: str) -> Any:
    async def go() -> Any:
        return await tool.on_invoke_tool(ctx, arguments)

    return asyncio.run(go())


def by_name(**kwargs: Any) -> dict[str, FunctionTool]:
    return {t.name: t for t in agents_function_tools(adapter_gateway(), **kwargs)}


def test_every_registered_tool_is_a_function_tool_with_the_gateways_schema() -> None:
    gateway = adapter_gateway()
    tools = agents_function_tools(gateway)

    listed = gateway.list_tools("openai")
    assert [t.name for t in tools] == [entry["function"]["name"] for entry in listed]
    assert all(isinstance(t, FunctionTool) for t in tools)
    loose = {e["function"]["name"] for e in listed if not e["function"]["strict"]}
    assert {t.name for t in tools if not t.strict_json_schema} == loose  # as listed
    assert {"free", "add"} <= loose  # an open object; an optional member (b)
    assert "ping" not in loose
    add = next(t for t in tools if t.name == "add")
    assert add.params_json_schema["additionalProperties"] is False
    assert set(add.params_json_schema["properties"]) == {"a", "b"}


def test_strict_true_refuses_a_schema_the_sdk_cannot_make_strict_and_false_makes_none_strict() -> (
    None
):
    with pytest.raises(UserError):
        agents_function_tools(adapter_gateway(), strict=True)
    assert not any(
        t.strict_json_schema for t in agents_function_tools(adapter_gateway(), strict=False)
    )


def test_a_call_runs_under_the_run_contexts_identity_and_the_sdks_call_id() -> None:
    answer = invoke(by_name()["whoami"], Caller("u7"), "{}", call_id="call_xyz")

    assert isinstance(answer, str)
    assert json.loads(answer) == {"identity": "u7", "call_id": "call_xyz"}


def test_the_identity_may_come_from_a_mapping_context_or_a_function_of_the_run_context() -> None:
    from_mapping = invoke(by_name()["whoami"], {"identity": "u2"}, "{}")
    chosen = by_name(identity=lambda ctx: ctx.context.user)["whoami"]

    @dataclass
    class Session:
        user: str

    from_function = invoke(chosen, Session("u3"), "{}")

    assert json.loads(from_mapping)["identity"] == "u2"
    assert json.loads(from_function)["identity"] == "u3"


def test_a_run_context_without_an_identity_is_the_hosts_mistake() -> None:
    with pytest.raises(TypeError):
        invoke(by_name()["whoami"], None, "{}")
    with pytest.raises(TypeError):
        invoke(by_name()["whoami"], {"identity": 7}, "{}")


@pytest.mark.parametrize(
    ("value", "content"), [("0", "0"), ('""', '""'), ("[]", "[]"), ("null", "null")]
)
def test_a_falsy_value_is_returned_as_its_json_text(value: str, content: str) -> None:
    assert invoke(by_name()["echo"], Caller("u1"), f'{{"value":{value}}}') == content


def test_the_raw_arguments_text_is_read_strictly() -> None:
    duplicate = invoke(by_name()["add"], Caller("u1"), '{"a": 1, "a": 2}')
    nan = invoke(by_name()["add"], Caller("u1"), '{"a": NaN}')

    assert is_kind(error_of(duplicate), errors.INVALID_JSON)
    assert error_of(duplicate)["reason"] == "duplicate_member"
    assert is_kind(error_of(nan), errors.INVALID_JSON)


def test_a_refusal_is_returned_to_the_model_as_the_structured_error() -> None:
    answer = invoke(by_name()["add"], Caller("u1"), '{"a": 1, "admin": "SENT-VALUE-7"}')

    error = error_of(answer)
    assert is_kind(error, errors.INVALID_ARGUMENTS)
    assert (error["pointer"], error["reason"]) == ("/arguments/admin", "unexpected_member")
    assert "SENT-VALUE-7" not in answer


def test_a_tools_exception_text_never_reaches_the_model() -> None:
    answer = invoke(by_name()["explode"], Caller("u1"), "{}")

    assert is_kind(error_of(answer), errors.INTERNAL_ERROR)
    assert SECRET not in answer


def test_empty_arguments_text_is_a_call_without_arguments_as_in_the_sdk() -> None:
    assert json.loads(invoke(by_name()["ping"], Caller("u1"), "")) == "pong"


def test_the_tools_work_with_a_plain_run_context_wrapper_context() -> None:
    wrapper = RunContextWrapper(context=Caller("u4"))
    ctx = ToolContext(
        context=wrapper.context, tool_name="whoami", tool_call_id="c1", tool_arguments="{}"
    )

    answer = run(by_name()["whoami"], ctx, "{}")

    assert json.loads(answer)["identity"] == "u4"


def test_without_the_agents_sdk_making_the_tools_names_the_extra_in_one_line() -> None:
    script = (
        "import sys\n"
        "sys.modules['agents'] = None\n"  # import agents now raises ImportError
        "from strictcall import Gateway\n"
        "from strictcall.transports.providers import agents_function_tools\n"
        "from strictcall.errors import MissingExtra\n"
        "try:\n"
        "    agents_function_tools(Gateway())\n"
        "except MissingExtra as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )

    assert done.stdout.strip().splitlines() == [
        "this needs strictcall[agents] (agents is not installed): pip install 'strictcall[agents]'"
    ]
