"""OpenAI's tool calls in, OpenAI's tool results out: Chat Completions and Responses.

    messages.append(message)
    messages += run_openai_tool_calls(gateway, message, identity)         # Chat Completions
    items += response.output
    items += run_responses_function_calls(gateway, response, identity)    # Responses

The model's `arguments` is JSON text: it is read with the strict intake (duplicate names, NaN,
numbers out of range, lone surrogates refused; a parse error's `line` and `column` are in that
text), then checked by the gateway like any call, under the call's own id. Both the SDK's objects
and plain dicts are read; the SDK is never imported.

A call the turn itself gets wrong (no id, no name, arguments that are not a str, a `type` other
than "function") is answered at its place with `invalid_request` and a pointer into the turn,
e.g. `/tool_calls/1/function/arguments`; the other calls still run. A call without an id cannot
be answered by id: its result carries `""`, which names no call (the provider refuses such a
turn anyway, since the assistant message itself has no id there).
"""

from __future__ import annotations

from strictcall.adapters._fields import ABSENT, items_of, malformed, read_field, read_str
from strictcall.adapters._run import (
    Planned,
    arun_planned,
    check_identity,
    content_of,
    from_text,
    refused,
    run_planned,
)
from strictcall.errors import JSONValue, Rejection
from strictcall.gateway import Gateway


def run_openai_tool_calls(
    gateway: Gateway, message_or_tool_calls: object, identity: str
) -> list[dict[str, JSONValue]]:
    """The `{"role": "tool", "tool_call_id", "content"}` messages answering an assistant
    message's `tool_calls` (or the list itself), in the calls' order.

    Raises:
        TypeError: `identity` is not a str, or there is no list of tool calls.
        RuntimeError: an async tool was called from inside a running event loop (use
            `arun_openai_tool_calls` there).
    """
    check_identity(identity)
    planned = plan_chat(gateway, message_or_tool_calls)
    return [_tool_message(answer) for answer in run_planned(gateway, planned, identity)]


async def arun_openai_tool_calls(
    gateway: Gateway, message_or_tool_calls: object, identity: str
) -> list[dict[str, JSONValue]]:
    """`run_openai_tool_calls` from an event loop, the calls run concurrently.

    Raises:
        TypeError: `identity` is not a str, or there is no list of tool calls.
    """
    check_identity(identity)
    planned = plan_chat(gateway, message_or_tool_calls)
    return [_tool_message(answer) for answer in await arun_planned(gateway, planned, identity)]


def run_responses_function_calls(
    gateway: Gateway, response_or_output: object, identity: str
) -> list[dict[str, JSONValue]]:
    """The `{"type": "function_call_output", "call_id", "output"}` items answering the
    `function_call` items of a Responses API response's `output` (or the list itself), in order;
    items of other types are not calls and get nothing.

    Raises:
        TypeError: `identity` is not a str, or there is no list of items.
        RuntimeError: an async tool was called from inside a running event loop (use
            `arun_responses_function_calls` there).
    """
    check_identity(identity)
    planned = plan_responses(gateway, response_or_output)
    return [_output_item(answer) for answer in run_planned(gateway, planned, identity)]


async def arun_responses_function_calls(
    gateway: Gateway, response_or_output: object, identity: str
) -> list[dict[str, JSONValue]]:
    """`run_responses_function_calls` from an event loop, the calls run concurrently.

    Raises:
        TypeError: `identity` is not a str, or there is no list of items.
    """
    check_identity(identity)
    planned = plan_responses(gateway, response_or_output)
    return [_output_item(answer) for answer in await arun_planned(gateway, planned, identity)]


def plan_chat(gateway: Gateway, message_or_tool_calls: object) -> list[Planned]:
    """Each Chat Completions tool call, read and its arguments parsed, or its refusal."""
    planned: list[Planned] = []
    seen: set[str] = set()
    for index, tool_call in enumerate(items_of(message_or_tool_calls, "tool_calls")):
        at = f"/tool_calls/{index}"
        call_id = read_str(tool_call, "id", at)
        if isinstance(call_id, Rejection):
            planned.append(refused("", call_id))
            continue
        if call_id in seen:
            planned.append(refused(call_id, malformed(f"{at}/id", "duplicate_id", "unique")))
            continue
        seen.add(call_id)
        kind = read_field(tool_call, "type")
        if kind is not ABSENT and kind != "function":
            planned.append(refused(call_id, malformed(f"{at}/type", "const", "function")))
            continue
        function = read_field(tool_call, "function")
        if function is ABSENT:
            planned.append(refused(call_id, malformed(at, "missing_member", "function")))
            continue
        if function is None or isinstance(function, str | int | float | list | tuple):
            planned.append(refused(call_id, malformed(f"{at}/function", "type", "object")))
            continue
        planned.append(_read_function(gateway, call_id, function, f"{at}/function"))
    return planned


def plan_responses(gateway: Gateway, response_or_output: object) -> list[Planned]:
    """Each Responses `function_call` item, read and its arguments parsed, or its refusal."""
    planned: list[Planned] = []
    seen: set[str] = set()
    for index, item in enumerate(items_of(response_or_output, "output")):
        if read_field(item, "type") != "function_call":
            continue
        at = f"/output/{index}"
        call_id = read_str(item, "call_id", at)
        if isinstance(call_id, Rejection):
            planned.append(refused("", call_id))
            continue
        if call_id in seen:
            planned.append(refused(call_id, malformed(f"{at}/call_id", "duplicate_id", "unique")))
            continue
        seen.add(call_id)
        planned.append(_read_function(gateway, call_id, item, at))
    return planned


def _read_function(gateway: Gateway, call_id: str, function: object, at: str) -> Planned:
    """A call's `name` and `arguments` text, as Chat's `function` and a Responses item hold
    them."""
    name = read_str(function, "name", at)
    if isinstance(name, Rejection):
        return refused(call_id, name)
    arguments = read_field(function, "arguments")
    if arguments is ABSENT:
        return refused(call_id, malformed(at, "missing_member", "arguments"))
    if type(arguments) is not str and not isinstance(arguments, str):
        # a dict here was parsed by someone, leniently or not: only the text can be read strictly
        return refused(call_id, malformed(f"{at}/arguments", "type", "string"))
    return from_text(gateway, call_id, name, arguments)


def _tool_message(answer: dict[str, JSONValue]) -> dict[str, JSONValue]:
    content, _refused = content_of(answer)
    return {"role": "tool", "tool_call_id": answer["call_id"], "content": content}


def _output_item(answer: dict[str, JSONValue]) -> dict[str, JSONValue]:
    output, _refused = content_of(answer)
    return {"type": "function_call_output", "call_id": answer["call_id"], "output": output}
