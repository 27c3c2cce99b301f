"""Anthropic's `tool_use` blocks in, `tool_result` blocks out (Messages API).

    messages.append({"role": "assistant", "content": message.content})
    results = run_anthropic_tool_uses(gateway, message, identity)
    messages.append({"role": "user", "content": results})

All the results of a turn go back in one user message, first in its content, as Anthropic
requires. A refusal has `is_error: true` and the structured error as JSON text in `content`.

Anthropic has no arguments text: the SDK hands over `input` already parsed (by a lenient parser,
so a duplicate member name was already merged there). The adapter applies OpenAI's intake rules
to what is left to check: a value JSON cannot hold (NaN, infinity, a key that is not a str:
`invalid_json`, reason `syntax`), a str holding a lone surrogate (reason `lone_surrogate`: no
UTF-8 text can carry it), one nested deeper than the gateway's limit, and one whose JSON text
(compact, UTF-8) is longer than the gateway's size limit (`request_too_large`); then the gateway
checks it like any call. For strict intake of the raw text, read the
response with `client.messages.with_raw_response.create(...)`, parse its `.text()` with
`strictcall.loads_strict` and pass the resulting dict here.

A block the turn itself gets wrong (no id, no name, no input) is answered at its place with
`invalid_request` and a pointer into the turn, e.g. `/content/1/name`; the other calls still run.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import orjson

from strictcall.core.content import Content
from strictcall.core.gateway import Gateway
from strictcall.core.jsontext import JSONTextError, TextFault
from strictcall.core.pipeline import ARGUMENTS_LEVELS, fail, text_refusal, too_large
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
    ask_value,
    check_call_id,
    check_identity,
    content_of,
    from_value,
    refused,
    run_turn,
)


def run_anthropic_tool_uses(
    gateway: Gateway, message_or_content: object, identity: str
) -> list[dict[str, JSONValue]]:
    """The `{"type": "tool_result", "tool_use_id", "content", "is_error"}` blocks answering the
    `tool_use` blocks of a message's `content` (or the list itself), in order; blocks of other
    types are not calls and get nothing.

    Raises:
        TypeError: `identity` is not a str, or there is no list of blocks.
        RuntimeError: an async tool was called from inside a running event loop (use
            `arun_anthropic_tool_uses` there).
    """
    turn = message_or_content
    blocks = turn if type(turn) is list else items_of(turn, "content")
    if len(blocks) == 1 and type(identity) is str:  # the common turn: one call, at once
        fields = _block_fields(blocks[0])
        if fields:
            call_id, name, arguments = fields
            answer = _ask(gateway, name, arguments, identity, call_id)
            content, refusal = content_of(answer, anthropic_blocks)
            return [
                {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": content,
                    "is_error": refusal,
                }
            ]
    return run_turn(gateway, blocks, identity, ANTHROPIC)


async def arun_anthropic_tool_uses(
    gateway: Gateway, message_or_content: object, identity: str
) -> list[dict[str, JSONValue]]:
    """`run_anthropic_tool_uses` from an event loop, the calls run concurrently.

    Raises:
        TypeError: `identity` is not a str, or there is no list of blocks.
    """
    check_identity(identity)
    blocks = items_of(message_or_content, "content")
    return await arun_turn(gateway, blocks, identity, ANTHROPIC)


def _block_fields(block: object) -> Fields | Literal[False] | None:
    """A well-formed tool_use block's id, name and input; False for a block of another type;
    None for anything else, which `_check_block` then locates."""
    if type(block) is dict:
        if block.get("type") != "tool_use":
            return False
        call_id = block.get("id")
        name = block.get("name")
        arguments = block.get("input", ABSENT)
    else:
        try:  # an SDK object: its members are attributes (None where one is missing)
            kind = block.type  # type: ignore[attr-defined]
        except AttributeError:  # a mapping of another type, read as a dict; or no block
            return _block_fields(as_dict(block)) if is_mapping(block) else False
        if kind != "tool_use":
            return False
        call_id = getattr(block, "id", None)
        name = getattr(block, "name", None)
        arguments = getattr(block, "input", None)
        if arguments is None:
            arguments = ABSENT
    if type(call_id) is str and call_id and type(name) is str and name and arguments is not ABSENT:
        return call_id, name, arguments
    return None


def _check_block(gateway: Gateway, block: object, at: str, seen: set[str]) -> Planned:
    """A tool_use block read member by member: the first thing wrong with it, located."""
    call_id = check_call_id(block, "id", at, seen)
    if not isinstance(call_id, str):
        return call_id
    name = read_str(block, "name", at)
    if isinstance(name, Rejection):
        return refused(call_id, name)
    arguments = read_field(block, "input")
    if arguments is ABSENT:
        return refused(call_id, malformed_call(at, Reason.MISSING_MEMBER, "input"))
    return _plan(gateway, call_id, name, arguments)


def _intake(gateway: Gateway, arguments: JSONValue) -> Rejection | None:
    """What OpenAI's strict intake refuses and `read_value` does not look for: a lone
    surrogate, and arguments longer (as compact JSON text, in UTF-8 bytes) than the limit."""
    try:
        size = len(orjson.dumps(arguments))
    except (orjson.JSONEncodeError, TypeError):  # a surrogate, or what read_value refuses
        if not _has_lone_surrogate(arguments, gateway.limits.max_depth):
            return None
        lone = JSONTextError(TextFault.LONE_SURROGATE)  # no text, so no line and column
        return text_refusal(lone, "", gateway.limits, ARGUMENTS_LEVELS)
    limit = gateway.limits.max_size
    return too_large(limit) if size > limit else None


def _has_lone_surrogate(value: Any, max_depth: int, depth: int = 0) -> bool:
    """Whether a str in `value` (a key or a value, nested at most `max_depth` deep: deeper is
    refused as too deep anyway) holds half of a surrogate pair, which names no character."""
    if type(value) is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if depth > max_depth:
        return False
    if type(value) is dict:
        return any(
            _has_lone_surrogate(key, max_depth, depth + 1)
            or _has_lone_surrogate(item, max_depth, depth + 1)
            for key, item in value.items()
        )
    if type(value) is list:
        return any(_has_lone_surrogate(item, max_depth, depth + 1) for item in value)
    return False


def _ask(
    gateway: Gateway, name: str, arguments: JSONValue, identity: str, call_id: str
) -> dict[str, JSONValue]:
    """`ask_value`, after the intake rules `read_value` leaves out."""
    refusal = _intake(gateway, arguments)
    if refusal is not None:
        return fail(call_id, refusal)
    return ask_value(gateway, name, arguments, identity, call_id)


def _plan(gateway: Gateway, call_id: str, name: str, arguments: JSONValue) -> Planned:
    """`from_value`, after the intake rules `read_value` leaves out."""
    refusal = _intake(gateway, arguments)
    if refusal is not None:
        return refused(call_id, refusal)
    return from_value(gateway, call_id, name, arguments)


_IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types Anthropic's API takes in a tool_result (any other is written as JSON)."""


def anthropic_blocks(content: Content) -> JSONValue | None:
    """A content result holding an image as a `tool_result`'s blocks, as Anthropic's API takes
    them: text blocks as text, images as base64 image sources, any other block as a text block
    of its JSON; None (its one value as text) for a result without an image."""
    if not any(block["type"] == "image" for block in content.blocks):
        return None
    written: list[JSONValue] = []
    for block in content.blocks:
        kind = block["type"]
        if kind == "text":
            written.append({"type": "text", "text": block["text"]})
        elif kind == "image" and block["mimeType"] in _IMAGE_TYPES:
            source = {"type": "base64", "media_type": block["mimeType"], "data": block["data"]}
            written.append({"type": "image", "source": source})
        else:
            written.append({"type": "text", "text": orjson.dumps(block).decode()})
    return written


ANTHROPIC: Final = Provider(
    "content",
    _block_fields,
    _check_block,
    _ask,
    _plan,
    "type",
    "tool_result",
    "tool_use_id",
    "content",
    "is_error",
    anthropic_blocks,
)
"""`{"type": "tool_result", "tool_use_id", "content", "is_error"}` blocks answering `tool_use`s."""
