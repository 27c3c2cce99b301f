"""strictcall.transports.providers.openai: Chat Completions tool calls and Responses function calls
in,
their results out, every call through the gateway with strict intake of the arguments text."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolMessageParam,
)
from openai.types.responses import Response, ResponseFunctionToolCall
from openai.types.responses.response_input_param import FunctionCallOutput

from adapter_tools import MEETING, SECRET, Meeting, adapter_gateway, conforms, error_of, is_kind
from strictcall import errors, loads_strict
from strictcall.core.jsontext import JSONTextError
from strictcall.transports.providers import (
    arun_openai_tool_calls,
    arun_responses_function_calls,
    run_openai_tool_calls,
    run_responses_function_calls,
)

RECORDED = Path(__file__).resolve().parent.parent / "examples" / "recorded"


def recorded(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    return value


def call(call_id: str, name: object, arguments: object) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


# --- recorded responses and the SDK's own types ------------------------------------------------


def test_a_recorded_chat_completion_parsed_by_the_sdk_gets_one_tool_message_per_call() -> None:
    completion = ChatCompletion.model_validate(recorded("openai_chat_1.json"))
    message = completion.choices[0].message
    assert message.tool_calls is not None

    results = run_openai_tool_calls(adapter_gateway(), message, "u1")

    assert [r["tool_call_id"] for r in results] == [c.id for c in message.tool_calls]
    for result in results:
        assert conforms(ChatCompletionToolMessageParam, result)
        assert result["role"] == "tool"
        assert is_kind(error_of(result["content"]), errors.UNKNOWN_TOOL)  # not this gateway's


def test_the_sdks_objects_and_plain_dicts_give_the_same_results() -> None:
    body = recorded("openai_chat_2.json")
    body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = "echo"
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"value":[0]}'
    parsed = ChatCompletion.model_validate(body).choices[0].message
    raw = body["choices"][0]["message"]

    assert run_openai_tool_calls(adapter_gateway(), parsed, "u1") == run_openai_tool_calls(
        adapter_gateway(), raw, "u1"
    )
    assert run_openai_tool_calls(adapter_gateway(), raw["tool_calls"], "u1") == (
        run_openai_tool_calls(adapter_gateway(), raw, "u1")
    )


def test_the_sdks_objects_and_plain_dicts_give_the_same_results_for_one_call_and_several() -> None:
    tool_calls = [call("c1", "echo", '{"value":0}'), call("c2", "add", '{"a":"1"}')]
    items = [{"type": "function_call", "call_id": c["id"], **c["function"]} for c in tool_calls]
    sdk_calls = [ChatCompletionMessageFunctionToolCall.model_validate(c) for c in tool_calls]
    sdk_items = [ResponseFunctionToolCall.model_validate(i) for i in items]
    gateway = adapter_gateway()

    for turn in (tool_calls, tool_calls[:1], tool_calls[1:]):
        sdk_turn = [sdk_calls[tool_calls.index(c)] for c in turn]
        assert run_openai_tool_calls(gateway, sdk_turn, "u1") == (
            run_openai_tool_calls(gateway, turn, "u1")
        )
    for output in (items, items[:1], items[1:]):
        sdk_output = [sdk_items[items.index(i)] for i in output]
        assert run_responses_function_calls(gateway, sdk_output, "u1") == (
            run_responses_function_calls(gateway, output, "u1")
        )


def test_a_mapping_of_another_type_is_read_as_the_dict_it_holds() -> None:
    tool_calls = [call("c1", "echo", '{"value":0}'), call("c2", "add", "{}")]
    items = [{"type": "function_call", "call_id": c["id"], **c["function"]} for c in tool_calls]
    other = {"type": "message", "id": "m1"}
    gateway = adapter_gateway()

    for turn in (tool_calls, tool_calls[:1], tool_calls[1:]):
        proxies = [MappingProxyType(c) for c in turn]
        assert run_openai_tool_calls(gateway, proxies, "u1") == (
            run_openai_tool_calls(gateway, turn, "u1")
        )
    for output in (items, items[:1], [other, *items[1:]], [other]):
        proxies = [MappingProxyType(i) for i in output]
        assert run_responses_function_calls(gateway, proxies, "u1") == (
            run_responses_function_calls(gateway, output, "u1")
        )


def test_an_object_with_no_members_is_no_call_in_an_output_and_a_malformed_tool_call() -> None:
    (result,) = run_openai_tool_calls(adapter_gateway(), [object()], "u1")
    assert is_kind(error_of(result["content"]), errors.INVALID_REQUEST)

    assert run_responses_function_calls(adapter_gateway(), [object()], "u1") == []


def test_a_recorded_response_gets_one_output_item_per_function_call() -> None:
    response = Response.model_validate(recorded("openai_responses_2.json"))

    results = run_responses_function_calls(adapter_gateway(), response, "u1")

    assert [r["call_id"] for r in results] == [
        item.call_id for item in response.output if item.type == "function_call"
    ]
    for result in results:
        assert conforms(FunctionCallOutput, result)
        assert result["type"] == "function_call_output"


def test_output_items_that_are_not_function_calls_get_no_result() -> None:
    response = Response.model_validate(recorded("openai_responses_3.json"))  # a message only

    assert run_responses_function_calls(adapter_gateway(), response, "u1") == []
    assert run_responses_function_calls(adapter_gateway(), response.output, "u1") == []


def test_a_message_without_tool_calls_gets_no_results() -> None:
    message = ChatCompletion.model_validate(recorded("openai_chat_3.json")).choices[0].message

    assert message.tool_calls is None
    assert run_openai_tool_calls(adapter_gateway(), message, "u1") == []
    assert (
        run_openai_tool_calls(adapter_gateway(), {"role": "assistant", "content": "hi"}, "u1") == []
    )


# --- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("0", "0"),
        ("false", "false"),
        ('""', '""'),
        ("[]", "[]"),
        ("null", "null"),
        ("{}", "{}"),
        ('"0"', '"0"'),
    ],
)
def test_a_falsy_result_is_written_as_the_json_value_it_is(value: str, content: str) -> None:
    results = run_openai_tool_calls(
        adapter_gateway(), assistant(call("c1", "echo", f'{{"value":{value}}}')), "u1"
    )
    responses = run_responses_function_calls(
        adapter_gateway(),
        [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "echo",
                "arguments": f'{{"value":{value}}}',
            }
        ],
        "u1",
    )

    assert contents(results) == [content]
    assert [r["output"] for r in responses] == [content]
    assert json.loads(content) == json.loads(value)


def test_the_results_keep_the_order_of_the_calls() -> None:
    calls = [call(f"c{n}", "add", f'{{"a":{n}}}') for n in range(6)]
    calls[3] = call("c3", "add", '{"a":"3"}')

    results = run_openai_tool_calls(adapter_gateway(), assistant(*calls), "u1")

    assert [r["tool_call_id"] for r in results] == [f"c{n}" for n in range(6)]
    assert [json.loads(c) for c in contents(results) if not c.startswith("{")] == [0, 1, 2, 4, 5]
    assert is_kind(error_of(results[3]["content"]), errors.INVALID_ARGUMENTS)


def test_the_call_id_is_the_gateways_call_id_and_the_identity_is_the_callers() -> None:
    tool_call = call("call_abc", "whoami", '{"identity":"admin"}')
    refused = run_openai_tool_calls(adapter_gateway(), [tool_call], "u1")
    answered = run_openai_tool_calls(adapter_gateway(), [call("call_abc", "whoami", "{}")], "u1")

    assert error_of(refused[0]["content"])["pointer"] == "/arguments/identity"
    assert json.loads(answered[0]["content"]) == {"identity": "u1", "call_id": "call_abc"}


def test_a_tools_exception_text_never_reaches_the_model() -> None:
    results = run_openai_tool_calls(adapter_gateway(), [call("c1", "explode", "{}")], "u1")

    assert is_kind(error_of(results[0]["content"]), errors.INTERNAL_ERROR)
    assert SECRET not in results[0]["content"]


def test_the_models_rejected_values_never_come_back() -> None:
    sent = '{"a": 1, "b": "SENT-VALUE-7", "SENT-NAME-8": 1}'
    results = run_openai_tool_calls(adapter_gateway(), [call("c1", "add", sent)], "u1")

    error = error_of(results[0]["content"])
    assert is_kind(error, errors.INVALID_ARGUMENTS)
    assert "SENT-VALUE-7" not in results[0]["content"]


def test_an_unknown_tool_is_refused_with_the_available_tools() -> None:
    results = run_openai_tool_calls(adapter_gateway(), [call("c1", "nope", "{}")], "u1")

    error = error_of(results[0]["content"])
    assert is_kind(error, errors.UNKNOWN_TOOL)
    assert "echo" in error["available"]


# --- strict intake of the arguments text -------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ('{"a": 1, "a": 2}', "duplicate_member"),
        ('{"a": NaN}', "syntax"),
        ('{"a": 1e400}', "number_out_of_range"),
        ('{"a": "\\ud800"}', "lone_surrogate"),
        ('{"a": 1} {"a": 2}', "syntax"),
        ("{'a': 1}", "syntax"),
        ("[" * 65 + "]" * 65, "too_deep"),
    ],
)
def test_arguments_text_a_lenient_parser_takes_is_refused_at_parse(
    arguments: str, reason: str
) -> None:
    with pytest.raises(JSONTextError):
        loads_strict(arguments)
    results = run_openai_tool_calls(adapter_gateway(), [call("c1", "add", arguments)], "u1")

    error = error_of(results[0]["content"])
    assert is_kind(error, errors.INVALID_JSON)
    assert error["reason"] == reason


def test_a_parse_errors_position_is_in_the_arguments_text_the_model_wrote() -> None:
    arguments = '{\n  "a": 1,\n  "b": NaN\n}'
    with pytest.raises(JSONTextError) as raised:
        loads_strict(arguments)

    results = run_openai_tool_calls(adapter_gateway(), [call("c1", "add", arguments)], "u1")

    error = error_of(results[0]["content"])
    assert (error["line"], error["column"]) == (raised.value.line, raised.value.column)
    assert error["line"] == 3


def test_arguments_text_longer_than_the_limit_is_refused_unread() -> None:
    gateway = adapter_gateway()
    arguments = '{"value": "' + "x" * gateway.limits.max_size + '"}'

    results = run_openai_tool_calls(gateway, [call("c1", "echo", arguments)], "u1")

    error = error_of(results[0]["content"])
    assert is_kind(error, errors.REQUEST_TOO_LARGE)
    assert error["limit"] == gateway.limits.max_size


def test_empty_arguments_text_is_a_call_without_arguments() -> None:
    results = run_openai_tool_calls(
        adapter_gateway(), [call("c1", "ping", ""), call("c2", "add", "")], "u1"
    )

    assert json.loads(results[0]["content"]) == "pong"
    error = error_of(results[1]["content"])
    assert is_kind(error, errors.INVALID_ARGUMENTS)
    assert (error["pointer"], error["reason"], error["expected"]) == (
        "/arguments",
        "missing_member",
        "a",
    )


def test_arguments_that_are_not_an_object_are_refused_at_shape() -> None:
    results = run_openai_tool_calls(adapter_gateway(), [call("c1", "ping", "[]")], "u1")

    error = error_of(results[0]["content"])
    assert is_kind(error, errors.INVALID_ARGUMENTS)
    assert (error["pointer"], error["reason"]) == ("/arguments", "type")


# --- malformed turns ---------------------------------------------------------------------------


def test_a_call_without_an_id_is_refused_in_its_place_and_the_others_still_run() -> None:
    nameless = {"type": "function", "function": {"name": "add", "arguments": '{"a":1}'}}
    message = assistant(call("c0", "add", '{"a":5}'), nameless, call("c2", "add", '{"a":2}'))

    results = run_openai_tool_calls(adapter_gateway(), message, "u1")

    assert [r["tool_call_id"] for r in results] == ["c0", "", "c2"]
    assert contents(results)[0::2] == ["5", "2"]
    error = error_of(results[1]["content"])
    assert is_kind(error, errors.INVALID_REQUEST)
    assert (error["pointer"], error["reason"], error["expected"]) == (
        "/tool_calls/1",
        "missing_member",
        "id",
    )


@pytest.mark.parametrize(
    ("tool_call", "pointer", "reason"),
    [
        (call("c1", "add", {"a": 1}), "/tool_calls/1/function/arguments", "type"),
        (call("c1", "add", None), "/tool_calls/1/function/arguments", "type"),
        ({"id": "c1", "type": "function", "function": {"name": "add"}}, "/tool_calls/1/function",
         "missing_member"),
        ({"id": "c1", "type": "function", "function": {"arguments": "{}"}},
         "/tool_calls/1/function", "missing_member"),
        (call("c1", 7, "{}"), "/tool_calls/1/function/name", "type"),
        (call("c1", "", "{}"), "/tool_calls/1/function/name", "min_length"),
        ({"id": "c1", "type": "custom", "custom": {"name": "add", "input": "x"}},
         "/tool_calls/1/type", "const"),
        ({"id": "c1", "type": "function"}, "/tool_calls/1", "missing_member"),
        ({"id": "c1", "type": "function", "function": "add"}, "/tool_calls/1/function", "type"),
        ({"id": 5, "type": "function", "function": {"name": "add", "arguments": "{}"}},
         "/tool_calls/1/id", "type"),
        (call("", "add", "{}"), "/tool_calls/1/id", "min_length"),
        (call("c0", "add", "{}"), "/tool_calls/1/id", "unique_items"),
    ],
)  # fmt: skip
def test_a_malformed_tool_call_gets_a_located_refusal_and_the_others_run(
    tool_call: dict[str, Any], pointer: str, reason: str
) -> None:
    message = assistant(call("c0", "add", '{"a":1}'), tool_call, call("c2", "add", '{"a":2}'))

    results = run_openai_tool_calls(adapter_gateway(), message, "u1")

    assert len(results) == 3
    assert contents(results)[0::2] == ["1", "2"]
    error = error_of(results[1]["content"])
    assert is_kind(error, errors.INVALID_REQUEST)
    assert (error["pointer"], error["reason"]) == (pointer, reason)
    assert "SENT" not in results[1]["content"]


@pytest.mark.parametrize(
    ("item", "pointer", "reason"),
    [
        ({"type": "function_call", "name": "add", "arguments": "{}"}, "/output/1",
         "missing_member"),
        ({"type": "function_call", "call_id": "c1", "name": "add", "arguments": {"a": 1}},
         "/output/1/arguments", "type"),
        ({"type": "function_call", "call_id": "c1", "arguments": "{}"}, "/output/1",
         "missing_member"),
        ({"type": "function_call", "call_id": "c0", "name": "add", "arguments": "{}"},
         "/output/1/call_id", "unique_items"),
    ],
)  # fmt: skip
def test_a_malformed_function_call_item_gets_a_located_refusal(
    item: dict[str, Any], pointer: str, reason: str
) -> None:
    good = {"type": "function_call", "call_id": "c0", "name": "add", "arguments": '{"a":1}'}
    output = [good, item, {"type": "reasoning", "id": "rs_1", "summary": []}]

    results = run_responses_function_calls(adapter_gateway(), {"output": output}, "u1")

    assert len(results) == 2
    assert results[0]["output"] == "1"
    error = error_of(results[1]["output"])
    assert is_kind(error, errors.INVALID_REQUEST)
    assert (error["pointer"], error["reason"]) == (pointer, reason)


def test_a_malformed_call_alone_in_its_turn_is_located_at_index_0() -> None:
    (result,) = run_openai_tool_calls(adapter_gateway(), [call("c0", "add", {"a": 1})], "u1")

    error = error_of(result["content"])
    assert is_kind(error, errors.INVALID_REQUEST)
    assert (error["pointer"], error["reason"]) == ("/tool_calls/0/function/arguments", "type")


def test_the_same_tool_call_twice_in_a_turn_is_refused_at_its_second_place() -> None:
    twice = call("c0", "add", '{"a":1}')

    results = run_openai_tool_calls(adapter_gateway(), [twice, twice], "u1")

    assert results[0]["content"] == "1"
    error = error_of(results[1]["content"])
    assert is_kind(error, errors.INVALID_REQUEST)
    assert (error["pointer"], error["reason"]) == ("/tool_calls/1/id", "unique_items")


def test_a_malformed_items_pointer_counts_the_items_that_are_not_calls() -> None:
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c0", "name": "add", "arguments": '{"a":1}'},
        {"type": "message", "id": "m1", "role": "assistant", "content": []},
        {"type": "function_call", "call_id": "c1", "arguments": "{}"},
    ]

    sync = run_responses_function_calls(adapter_gateway(), output, "u1")
    concurrent = asyncio.run(arun_responses_function_calls(adapter_gateway(), output, "u1"))

    assert sync == concurrent
    assert sync[0]["output"] == "1"
    error = error_of(sync[1]["output"])
    assert is_kind(error, errors.INVALID_REQUEST)
    assert (error["pointer"], error["reason"]) == ("/output/3", "missing_member")


def test_a_tool_call_id_the_provider_omitted_reads_as_missing_on_the_sdks_objects() -> None:
    body = recorded("openai_chat_1.json")
    del body["choices"][0]["message"]["tool_calls"][0]["id"]
    message = ChatCompletion.construct(**body).choices[0].message  # as the SDK reads a response

    results = run_openai_tool_calls(adapter_gateway(), message, "u1")

    assert results[0]["tool_call_id"] == ""
    assert error_of(results[0]["content"])["reason"] == "missing_member"


def test_a_whole_completion_is_refused_rather_than_read_as_a_turn_without_calls() -> None:
    completion = ChatCompletion.model_validate(recorded("openai_chat_1.json"))

    with pytest.raises(TypeError):
        run_openai_tool_calls(adapter_gateway(), completion, "u1")
    with pytest.raises(TypeError):
        asyncio.run(arun_openai_tool_calls(adapter_gateway(), recorded("openai_chat_1.json"), "u1"))


def test_a_turn_that_is_no_list_of_calls_is_the_callers_mistake() -> None:
    with pytest.raises(TypeError):
        run_openai_tool_calls(adapter_gateway(), {"tool_calls": "c1"}, "u1")
    with pytest.raises(TypeError):
        run_openai_tool_calls(adapter_gateway(), [], None)  # type: ignore[arg-type]


# --- async -------------------------------------------------------------------------------------


def test_the_async_form_runs_the_calls_concurrently_and_keeps_their_order() -> None:
    async def turn() -> list[dict[str, Any]]:
        MEETING["now"] = Meeting()  # each meet tool waits until the other has started
        message = assistant(
            call("c1", "meet_a", "{}"), call("c2", "add", '{"a":0}'), call("c3", "meet_b", "{}")
        )
        return await asyncio.wait_for(arun_openai_tool_calls(adapter_gateway(), message, "u1"), 10)

    results = asyncio.run(turn())

    assert [r["tool_call_id"] for r in results] == ["c1", "c2", "c3"]
    assert contents(results) == ['"a"', "0", '"b"']


def test_the_async_responses_form_answers_as_the_sync_one() -> None:
    output = [
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a":1}'},
        {"type": "function_call", "call_id": "c2", "name": "add", "arguments": '{"a":1,"a":1}'},
        {"type": "function_call", "name": "add", "arguments": "{}"},
    ]

    answered = asyncio.run(arun_responses_function_calls(adapter_gateway(), output, "u1"))

    assert answered == run_responses_function_calls(adapter_gateway(), output, "u1")
    assert answered[0]["output"] == "1"


def test_the_async_and_sync_forms_answer_every_kind_of_call_alike() -> None:
    calls: list[Any] = [
        call("c0", "add", '{"a":1}'),
        {"type": "function", "function": {"name": "add", "arguments": "{}"}},
        call("c2", "add", {"a": 1}),
        call("c0", "add", "{}"),
        call("c4", "add", '{"a":NaN}'),
        call("c5", "nope", ""),
        {"id": "c6", "type": "custom", "custom": {"name": "add", "input": "x"}},
        call("c7", "echo", '{"value":null}'),
    ]
    items: list[Any] = [
        {"type": "function_call", "call_id": c.get("id"), **c.get("function", {})} for c in calls
    ]

    chat = run_openai_tool_calls(adapter_gateway(), calls, "u1")
    responses = run_responses_function_calls(adapter_gateway(), items, "u1")

    assert asyncio.run(arun_openai_tool_calls(adapter_gateway(), calls, "u1")) == chat
    assert asyncio.run(arun_responses_function_calls(adapter_gateway(), items, "u1")) == responses
    assert len(chat) == len(calls)
    assert len(responses) == len(items)
