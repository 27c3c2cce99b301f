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

from typing import Final, Literal

from strictcall.core.gateway import Gateway
from strictcall.core.refusals import malformed_call
from strictcall.errors import JSONValue, Reason, Rejection
from strictcall.transports.providers._fields import (
    ABSENT,
    as_dict,
    is_mapping,
    items_of,
    read_field,
    read_str,
)
from strictcall.transports.providers._run import (
    Fields,
    Planned,
    Provider,
    arun_turn,
    check_call_id,
    check_identity,
    content_of,
    from_text,
    refused,
    run_turn,
)


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
    turn = message_or_tool_calls
    tool_calls = turn if type(turn) is list else _tool_calls_of(turn)
    if len(tool_calls) == 1 and type(identity) is str:  # the common turn: one call, at once
        fields = _chat_fields(tool_calls[0])
        if fields is not None:
            call_id, name, arguments = fields
            content, _ = content_of(gateway.call_arguments(name, arguments, identity, call_id))
            return [{"role": "tool", "tool_call_id": call_id, "content": content}]
    return run_turn(gateway, tool_calls, identity, CHAT)


async def arun_openai_tool_calls(
    gateway: Gateway, message_or_tool_calls: object, identity: str
) -> list[dict[str, JSONValue]]:
    """`run_openai_tool_calls` from an event loop, the calls run concurrently.

    Raises:
        TypeError: `identity` is not a str, or there is no list of tool calls.
    """
    check_identity(identity)
    return await arun_turn(gateway, _tool_calls_of(message_or_tool_calls), identity, CHAT)


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
    turn = response_or_output
    items = turn if type(turn) is list else items_of(turn, "output")
    if len(items) == 1 and type(identity) is str:  # the common turn: one call, at once
        fields = _item_fields(items[0])
        if fields:
            call_id, name, arguments = fields
            content, _ = content_of(gateway.call_arguments(name, arguments, identity, call_id))
            return [{"type": "function_call_output", "call_id": call_id, "output": content}]
    return run_turn(gateway, items, identity, RESPONSES)


async def arun_responses_function_calls(
    gateway: Gateway, response_or_output: object, identity: str
) -> list[dict[str, JSONValue]]:
    """`run_responses_function_calls` from an event loop, the calls run concurrently.

    Raises:
        TypeError: `identity` is not a str, or there is no list of items.
    """
    check_identity(identity)
    return await arun_turn(gateway, items_of(response_or_output, "output"), identity, RESPONSES)


def _tool_calls_of(message_or_tool_calls: object) -> list[object] | tuple[object, ...]:
    """The tool calls of an assistant message, or the list itself.

    Raises:
        TypeError: a whole completion (which has no tool calls of its own: pass
            `completion.choices[0].message`), or no list of tool calls.
    """
    if read_field(message_or_tool_calls, "choices") is not ABSENT:
        raise TypeError("pass the assistant message (completion.choices[0].message)")
    return items_of(message_or_tool_calls, "tool_calls")


def _chat_fields(tool_call: object) -> Fields | None:
    """A well-formed tool call's id, name and arguments text, read at the least cost; None
    for anything else, which `_check_chat` then locates."""
    if type(tool_call) is dict:
        function = tool_call.get("function")
        if type(function) is not dict:
            return None
        try:  # subscripts, not `.get` calls: a well-formed call has every member
            call_id = tool_call["id"]
            name = function["name"]
            arguments = function["arguments"]
        except KeyError:
            return None
        kind = tool_call.get("type", "function")
    else:
        try:  # an SDK object: its members are attributes (None where one is missing)
            call_id = tool_call.id  # type: ignore[attr-defined]
            kind = tool_call.type  # type: ignore[attr-defined]
            function = tool_call.function  # type: ignore[attr-defined]
            name = function.name
            arguments = function.arguments
        except AttributeError:  # a mapping of another type, read as a dict; or no tool call
            return _chat_fields(as_dict(tool_call)) if is_mapping(tool_call) else None
    if (
        type(call_id) is str
        and call_id
        and kind == "function"
        and type(name) is str
        and name
        and type(arguments) is str
    ):
        return call_id, name, arguments
    return None


def _check_chat(gateway: Gateway, tool_call: object, at: str, seen: set[str]) -> Planned:
    """A tool call read member by member: the first thing wrong with it, located."""
    call_id = check_call_id(tool_call, "id", at, seen)
    if not isinstance(call_id, str):
        return call_id
    kind = read_field(tool_call, "type")
    if kind is not ABSENT and kind != "function":
        return refused(call_id, malformed_call(f"{at}/type", Reason.CONST, "function"))
    function = read_field(tool_call, "function")
    if function is ABSENT:
        return refused(call_id, malformed_call(at, Reason.MISSING_MEMBER, "function"))
    if function is None or isinstance(function, str | int | float | list | tuple):
        return refused(call_id, malformed_call(f"{at}/function", Reason.TYPE, "object"))
    return _read_function(gateway, call_id, function, f"{at}/function")


def _item_fields(item: object) -> Fields | Literal[False] | None:
    """A well-formed function_call item's call id, name and arguments text; False for an item
    that is not a function call; None for anything else, which `_check_item` then locates."""
    if type(item) is dict:
        if item.get("type") != "function_call":
            return False
        try:  # subscripts, not `.get` calls: a well-formed call has every member
            call_id = item["call_id"]
            name = item["name"]
            arguments = item["arguments"]
        except KeyError:
            return None
    else:
        try:  # an SDK object: its members are attributes (None where one is missing)
            kind = item.type  # type: ignore[attr-defined]
        except AttributeError:  # a mapping of another type, read as a dict; or no item
            return _item_fields(as_dict(item)) if is_mapping(item) else False
        if kind != "function_call":
            return False
        call_id = getattr(item, "call_id", None)
        name = getattr(item, "name", None)
        arguments = getattr(item, "arguments", None)
    if type(call_id) is str and call_id and type(name) is str and name and type(arguments) is str:
        return call_id, name, arguments
    return None


def _check_item(gateway: Gateway, item: object, at: str, seen: set[str]) -> Planned:
    """A function_call item read member by member: the first thing wrong with it, located."""
    call_id = check_call_id(item, "call_id", at, seen)
    if not isinstance(call_id, str):
        return call_id
    return _read_function(gateway, call_id, item, at)


def _read_function(gateway: Gateway, call_id: str, function: object, at: str) -> Planned:
    """A call's `name` and `arguments` text, as Chat's `function` and a Responses item hold
    them."""
    name = read_str(function, "name", at)
    if isinstance(name, Rejection):
        return refused(call_id, name)
    arguments = read_field(function, "arguments")
    if arguments is ABSENT:
        return refused(call_id, malformed_call(at, Reason.MISSING_MEMBER, "arguments"))
    if type(arguments) is not str and not isinstance(arguments, str):
        # a dict here was parsed by someone, leniently or not: only the text can be read strictly
        return refused(call_id, malformed_call(f"{at}/arguments", Reason.TYPE, "string"))
    return from_text(gateway, call_id, name, str.__str__(arguments))


CHAT: Final = Provider(
    "tool_calls",
    _chat_fields,
    _check_chat,
    Gateway.call_arguments,
    from_text,
    "role",
    "tool",
    "tool_call_id",
    "content",
    None,
)
"""`{"role": "tool", "tool_call_id", "content"}` messages answering `tool_calls`."""
RESPONSES: Final = Provider(
    "output",
    _item_fields,
    _check_item,
    Gateway.call_arguments,
    from_text,
    "type",
    "function_call_output",
    "call_id",
    "output",
    None,
)
"""`{"type": "function_call_output", "call_id", "output"}` items answering `function_call`s."""
