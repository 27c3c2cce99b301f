"""Running a turn's planned calls through the gateway and writing their results as JSON text."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import orjson

from strictcall.errors import JSONValue, Rejection
from strictcall.jsontext import dump_text
from strictcall.pipeline import WITHHELD, fail, read_call, read_value

if TYPE_CHECKING:
    from strictcall.gateway import Gateway

Planned: TypeAlias = tuple[str, dict[str, JSONValue] | None, bool, Rejection | None]
"""One call of a turn: its id, then the call for the gateway and whether its arguments may hold
a float, or None and its refusal. A plain tuple: it is made once per call, on the hot path."""

R = TypeVar("R")

Result: TypeAlias = Callable[[str, str, bool], R]
"""Writes one result as the provider reads it: (call id, JSON text, whether a refusal)."""


def refused(call_id: str, rejection: Rejection) -> Planned:
    """A call answered without reaching the gateway."""
    return (call_id, None, False, rejection)


def from_text(gateway: Gateway, call_id: str, name: str, arguments: str) -> Planned:
    """A call whose arguments are the model's raw JSON text, read with the strict intake.

    Positions in a parse error (`line`, `column`) are positions in `arguments`, the text the
    model wrote. An empty text is the arguments of a call without any (OpenAI's API writes ""
    there for tools whose parameters are all optional): it is `{}`, still checked at shape.
    """
    if not arguments:
        return (call_id, {"name": name, "arguments": {}}, False, None)
    document = read_call(arguments, gateway.limits, numbers=gateway.reads_numbers)
    if type(document) is Rejection:
        return (call_id, None, False, document)
    return (call_id, {"name": name, "arguments": document.value}, document.has_float, None)


def from_value(gateway: Gateway, call_id: str, name: str, arguments: JSONValue) -> Planned:
    """A call whose arguments an SDK already parsed (there is no text to read strictly): they
    must still be a JSON value (no NaN, no infinity, str keys) within the depth limit."""
    has_float = read_value(arguments, gateway.limits)
    if type(has_float) is Rejection:
        return (call_id, None, False, has_float)
    return (call_id, {"name": name, "arguments": arguments}, has_float is True, None)


def answer_text(
    gateway: Gateway, call_id: str, name: str, arguments: str, identity: str
) -> tuple[str, bool]:
    """`from_text`, the call and `content_of` in one, for the well-formed call of a sync turn:
    the hot path, with no step it does not need."""
    if arguments:
        document = read_call(arguments, gateway.limits, numbers=gateway.reads_numbers)
        if type(document) is Rejection:
            return content_of(fail(call_id, document))
        call = {"name": name, "arguments": document.value}
        answer = gateway.call_parsed(call, identity, call_id, has_float=document.has_float)
    else:
        call = {"name": name, "arguments": {}}
        answer = gateway.call_parsed(call, identity, call_id, has_float=False)
    if answer["ok"] is True:
        try:
            return orjson.dumps(answer["result"]).decode(), False
        except orjson.JSONEncodeError:
            pass
    return content_of(answer)


def answer_planned(gateway: Gateway, planned: Planned, identity: str) -> tuple[str, bool]:
    """The text and refusal flag for one planned call, run now."""
    call_id, call, has_float, refusal = planned
    if call is None:
        return content_of(fail(call_id, refusal))  # type: ignore[arg-type]
    return content_of(gateway.call_parsed(call, identity, call_id, has_float=has_float))


async def arun_planned(
    gateway: Gateway, planned: list[Planned], identity: str, result: Result[R]
) -> list[R]:
    """The results of the planned calls, in order, the calls run concurrently."""
    if len(planned) == 1:  # the common turn: no tasks to make
        answers = [await _answer(gateway, planned[0], identity)]
    else:
        answers = await asyncio.gather(*(_answer(gateway, one, identity) for one in planned))
    return [
        result(one[0], *content_of(answer)) for one, answer in zip(planned, answers, strict=True)
    ]


async def _answer(gateway: Gateway, one: Planned, identity: str) -> dict[str, JSONValue]:
    call_id, call, has_float, refusal = one
    if call is None:
        return fail(call_id, refusal)  # type: ignore[arg-type]
    return await gateway.call_parsed_async(call, identity, call_id, has_float=has_float)


def content_of(answer: dict[str, JSONValue]) -> tuple[str, bool]:
    """The text the model reads for one answer, and whether it is a refusal.

    A value is written as JSON text, so `0`, `false`, `""`, `[]` and `null` read as the values
    they are, never as an empty result; a refusal is the structured error as JSON text.
    """
    if answer["ok"] is True:
        try:
            return orjson.dumps(answer["result"]).decode(), False
        except orjson.JSONEncodeError:  # an integer beyond 64 bits, say: the exact writer
            text = dump_text(answer["result"])
        if text is not None:
            return text.decode(), False
        answer = fail(answer["call_id"], WITHHELD)  # a value JSON cannot write is withheld
    text = dump_text(answer["error"])
    if text is None:  # only a schema's own unwritable text could get here
        text = dump_text(WITHHELD.as_error()) or b""
    return text.decode(), True


def check_identity(identity: object) -> None:
    """Refuse a caller's programming error before any call runs.

    Raises:
        TypeError: `identity` is not a str.
    """
    if type(identity) is not str and not isinstance(identity, str):
        raise TypeError("identity is a str")
