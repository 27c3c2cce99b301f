"""Running a turn's planned calls through the gateway and writing their results as JSON text."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

import orjson

from strictcall.core.content import Content
from strictcall.core.jsontext import dump_text
from strictcall.core.pipeline import ARGUMENTS_LEVELS, WITHHELD, fail, read_call, read_value
from strictcall.core.refusals import malformed_call
from strictcall.errors import JSONValue, Reason, Rejection
from strictcall.transports.providers._fields import read_str

if TYPE_CHECKING:
    from strictcall.core.gateway import Gateway

Planned: TypeAlias = tuple[str, dict[str, JSONValue] | None, bool, Rejection | None]
"""One call of a turn: its id, then the call for the gateway and whether its arguments may hold
a float, or None and its refusal. A plain tuple: it is made once per call, on the hot path."""

R = TypeVar("R")

Result: TypeAlias = Callable[[str, str, bool], R]
"""Writes one result as the provider reads it: (call id, JSON text, whether a refusal)."""


def refused(call_id: str, rejection: Rejection) -> Planned:
    """A call answered without reaching the gateway."""
    return (call_id, None, False, rejection)


def check_call_id(item: object, key: str, at: str, seen: set[str]) -> str | Planned:
    """The id of the call at `at` (its member `key`), now in `seen`; or the refusal of an id
    that is missing, not a str, empty, or the id of an earlier call of the turn."""
    call_id = read_str(item, key, at)
    if isinstance(call_id, Rejection):
        return refused("", call_id)
    if call_id in seen:
        return refused(call_id, malformed_call(f"{at}/{key}", Reason.UNIQUE_ITEMS))
    seen.add(call_id)
    return call_id


def from_text(gateway: Gateway, call_id: str, name: str, arguments: str) -> Planned:
    """A call whose arguments are the model's raw JSON text, read with the strict intake, as
    `Gateway.call_arguments` reads it (for the async form, which parses first, then runs).

    Positions in a parse error (`line`, `column`) are positions in `arguments`, the text the
    model wrote. An empty text is the arguments of a call without any (OpenAI's API writes ""
    there for tools whose parameters are all optional): it is `{}`, still checked at shape.
    """
    if not arguments:
        return (call_id, {"name": name, "arguments": {}}, False, None)
    limits, numbers = gateway.limits, gateway.reads_numbers
    document = read_call(arguments, limits, numbers=numbers, levels=ARGUMENTS_LEVELS)
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


def ask_value(
    gateway: Gateway, name: str, arguments: JSONValue, identity: str, call_id: str
) -> dict[str, JSONValue]:
    """The gateway's answer to a call whose arguments an SDK already parsed, checked first as
    `from_value` says."""
    has_float = read_value(arguments, gateway.limits)
    if type(has_float) is Rejection:
        return fail(call_id, has_float)
    call = {"name": name, "arguments": arguments}
    return gateway.call_parsed(call, identity, call_id, has_float=has_float is True)


Fields: TypeAlias = tuple[str, str, Any]
"""A well-formed call: its id, its tool's name, its arguments (text, or a parsed value)."""

Ask: TypeAlias = Callable[["Gateway", str, Any, str, str], dict[str, JSONValue]]
"""Runs one well-formed call: (gateway, name, arguments, identity, call id) -> the answer."""


@dataclass(frozen=True, slots=True)
class Provider:
    """How one provider's turn holds its calls and how its results are written.

    A slotted class, not a NamedTuple: `run_turn` reads its members on every call, and a
    NamedTuple's field is read through a descriptor call where a slot is read directly.
    """

    member: str
    """Where a turn holds its calls ("tool_calls", "output", "content"), for the pointers."""
    read: Callable[[object], Fields | Literal[False] | None]
    """A well-formed call's (id, name, arguments) read at the least cost; False for an item
    that is not a call (no result); None for anything else, which `check` then locates."""
    check: Callable[[Gateway, object, str, set[str]], Planned]
    """The call read member by member: the first thing wrong with it, located, or its plan."""
    ask: Ask
    """Runs a well-formed call: `Gateway.call_arguments` for the model's JSON text (read
    strictly), `ask_value` for arguments an SDK already parsed."""
    plan: Callable[[Gateway, str, str, Any], Planned]
    """A well-formed call read for the async form: `from_text` or `from_value`, as `ask`."""
    kind_key: str
    """The member that says what a result is ("role", "type")."""
    kind: str
    """What a result is ("tool", "function_call_output", "tool_result")."""
    id_key: str
    """The member a result names its call by."""
    text_key: str
    """The member that holds a result's JSON text."""
    error_key: str | None
    """The member that says whether a result is a refusal, if the provider has one."""

    def at(self, index: int) -> str:
        """The pointer to the turn's call at `index`."""
        return f"/{self.member}/{index}"

    def write(self, call_id: str, text: str, refusal: bool) -> dict[str, JSONValue]:
        """One result as the provider reads it."""
        result: dict[str, JSONValue] = {self.kind_key: self.kind, self.id_key: call_id}
        result[self.text_key] = text
        if self.error_key is not None:
            result[self.error_key] = refusal
        return result


def run_turn(
    gateway: Gateway, items: Sequence[object], identity: str, provider: Provider
) -> list[dict[str, JSONValue]]:
    """The results of a turn's calls, run one after the other, in order.

    The sync forms answer a turn of one well-formed call themselves, at once (the common turn,
    where every step costs some 2 % of a call); this is every other turn. A well-formed call is
    read by the provider's `read`, run by its `ask`, and its result written as a dict literal;
    what only a malformed call or a turn of several calls needs (its index, the ids seen) is
    done only then.

    Raises:
        TypeError: `identity` is not a str.
        RuntimeError: an async tool was called from inside a running event loop.
    """
    if type(identity) is not str:
        check_identity(identity)
    read, ask = provider.read, provider.ask
    results: list[dict[str, JSONValue]] = []
    seen: set[str] | None = None if len(items) == 1 else set()  # one call: no duplicate
    skipped = 0  # items that are not calls: a call's index is len(results) + skipped
    for item in items:
        fields = read(item)
        if fields is False:
            skipped += 1
            continue
        if fields is None or (seen is not None and fields[0] in seen):
            if seen is None:
                seen = set()
            planned = provider.check(gateway, item, provider.at(len(results) + skipped), seen)
            results.append(provider.write(planned[0], *answer_planned(gateway, planned, identity)))
            continue
        call_id, name, arguments = fields
        if seen is not None:
            seen.add(call_id)
        content, refusal = content_of(ask(gateway, name, arguments, identity, call_id))
        result: dict[str, JSONValue] = {
            provider.kind_key: provider.kind,
            provider.id_key: call_id,
            provider.text_key: content,
        }
        if provider.error_key is not None:
            result[provider.error_key] = refusal
        results.append(result)
    return results


def plan_turn(gateway: Gateway, items: Sequence[object], provider: Provider) -> list[Planned]:
    """Each call of a turn, read and its arguments parsed, or its refusal (the async form's
    first half: the calls then run concurrently)."""
    planned: list[Planned] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        fields = provider.read(item)
        if fields is False:
            continue
        if fields is None or fields[0] in seen:
            planned.append(provider.check(gateway, item, provider.at(index), seen))
            continue
        seen.add(fields[0])
        planned.append(provider.plan(gateway, *fields))
    return planned


async def arun_turn(
    gateway: Gateway, items: Sequence[object], identity: str, provider: Provider
) -> list[dict[str, JSONValue]]:
    """`run_turn` from an event loop, the calls run concurrently (the caller checks
    `identity`)."""
    planned = plan_turn(gateway, items, provider)
    return await arun_planned(gateway, planned, identity, provider.write)


def answer_planned(gateway: Gateway, planned: Planned, identity: str) -> tuple[str, bool]:
    """The text and refusal flag for one planned call, run now."""
    return content_of(answer_of(gateway, planned, identity))


def answer_of(gateway: Gateway, planned: Planned, identity: str) -> dict[str, JSONValue]:
    """The gateway's answer to one planned call, run now."""
    call_id, call, has_float, refusal = planned
    if call is None:
        return fail(call_id, refusal)  # type: ignore[arg-type]
    return gateway.call_parsed(call, identity, call_id, has_float=has_float)


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
    they are, never as an empty result; a refusal is the structured error as JSON text. A
    content result (`Content`) is its one value (`Content.as_value`): text blocks alone their
    text as it is, anything else as JSON text.
    """
    refusal = answer["ok"] is not True
    if not refusal and type(answer["result"]) is Content:
        value = answer["result"].as_value()
        if type(value) is str and answer["result"].structured is None:
            return value, False
        answer = {"ok": True, "call_id": answer["call_id"], "result": value}
    try:  # the common answer, written at once; anything else as `_written_exactly` says
        return orjson.dumps(answer["error" if refusal else "result"]).decode(), refusal
    except orjson.JSONEncodeError:
        return _written_exactly(answer)


def _written_exactly(answer: dict[str, JSONValue]) -> tuple[str, bool]:
    """`content_of` for an answer orjson cannot write: an integer beyond 64 bits is written by
    the exact writer; a value JSON cannot hold at all is withheld."""
    if answer["ok"] is True:
        text = dump_text(answer["result"])
        if text is not None:
            return text.decode(), False
        answer = fail(answer["call_id"], WITHHELD)
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
