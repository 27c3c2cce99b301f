"""Running a turn's planned calls through the gateway and writing their results as JSON text."""

from __future__ import annotations

import asyncio
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from strictcall.errors import INVALID_JSON, JSONValue, Rejection
from strictcall.jsontext import JSONTextError, _check_depth, dump_text
from strictcall.pipeline import WITHHELD, fail, json_kind, read_call

if TYPE_CHECKING:
    from strictcall.gateway import Gateway


class Planned(NamedTuple):
    """One call of a turn: its id and either the call for the gateway or its refusal."""

    call_id: str
    call: dict[str, JSONValue] | None
    has_float: bool
    refusal: Rejection | None


def refused(call_id: str, rejection: Rejection) -> Planned:
    """A call answered without reaching the gateway."""
    return Planned(call_id, None, False, rejection)


def from_text(gateway: Gateway, call_id: str, name: str, arguments: str) -> Planned:
    """A call whose arguments are the model's raw JSON text, read with the strict intake.

    Positions in a parse error (`line`, `column`) are positions in `arguments`, the text the
    model wrote. An empty text is the arguments of a call without any (OpenAI's API writes ""
    there for tools whose parameters are all optional): it is `{}`, still checked at shape.
    """
    if not arguments:
        return Planned(call_id, {"name": name, "arguments": {}}, False, None)
    document = read_call(arguments, gateway.limits, numbers=gateway.reads_numbers)
    if type(document) is Rejection:
        return refused(call_id, document)
    call: dict[str, JSONValue] = {"name": name, "arguments": document.value}
    return Planned(call_id, call, document.has_float, None)


def from_value(gateway: Gateway, call_id: str, name: str, arguments: JSONValue) -> Planned:
    """A call whose arguments an SDK already parsed (there is no text to read strictly): they
    must still be a JSON value (no NaN, no infinity, str keys) within the depth limit."""
    limit = gateway.limits.max_depth
    has_float = json_kind(arguments, limit)
    if has_float is None:
        reason = "syntax"
        try:
            _check_depth(arguments, limit)
        except (JSONTextError, RecursionError):
            reason = "too_deep"
        details: dict[str, JSONValue] = {"reason": reason}
        if reason == "too_deep":
            details["limit"] = limit
        return refused(call_id, Rejection(INVALID_JSON, MappingProxyType(details)))
    call: dict[str, JSONValue] = {"name": name, "arguments": arguments}
    return Planned(call_id, call, has_float, None)


def run_planned(
    gateway: Gateway, planned: list[Planned], identity: str
) -> list[dict[str, JSONValue]]:
    """The gateway's answers to the planned calls, in order, one after another."""
    answers = []
    for one in planned:
        if one.refusal is not None:
            answers.append(fail(one.call_id, one.refusal))
        else:
            answers.append(
                gateway.call_parsed(one.call, identity, one.call_id, has_float=one.has_float)
            )
    return answers


async def arun_planned(
    gateway: Gateway, planned: list[Planned], identity: str
) -> list[dict[str, JSONValue]]:
    """The gateway's answers to the planned calls, in order, the calls run concurrently."""
    if len(planned) == 1:  # the common turn: no tasks to make
        return [await _answer(gateway, planned[0], identity)]
    return list(await asyncio.gather(*(_answer(gateway, one, identity) for one in planned)))


async def _answer(gateway: Gateway, one: Planned, identity: str) -> dict[str, JSONValue]:
    if one.refusal is not None:
        return fail(one.call_id, one.refusal)
    return await gateway.call_parsed_async(one.call, identity, one.call_id, has_float=one.has_float)


def content_of(answer: dict[str, JSONValue]) -> tuple[str, bool]:
    """The text the model reads for one answer, and whether it is a refusal.

    A value is written as JSON text, so `0`, `false`, `""`, `[]` and `null` read as the values
    they are, never as an empty result; a refusal is the structured error as JSON text.
    """
    if answer["ok"] is True:
        text = dump_text(answer["result"])
        if text is not None:
            return text.decode("utf-8"), False
        answer = fail(answer["call_id"], WITHHELD)  # a value JSON cannot write is withheld
    text = dump_text(answer["error"])
    if text is None:  # only a schema's own unwritable text could get here
        text = dump_text(WITHHELD.as_error()) or b""
    return text.decode("utf-8"), True


def check_identity(identity: object) -> None:
    """Refuse a caller's programming error before any call runs.

    Raises:
        TypeError: `identity` is not a str.
    """
    if type(identity) is not str and not isinstance(identity, str):
        raise TypeError("identity is a str")
