"""`strictcall check --contract reply`: a function against strictcall's reply contract
(`interpret_tool_reply`), over generated JSON-RPC 2.0 replies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from strictcall.client.reply import interpret_tool_reply
from strictcall.errors import MissingExtra
from strictcall.review.hints import Hints
from strictcall.review.values import (
    FALSY,
    TRUTHY,
    HypothesisSource,
    Source,
    _Builder,
    neighbours,
)

try:
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - the review extra is part of dev
    raise MissingExtra("review", "hypothesis") from None

CONTRACTS: Final = ("reply",)
REFERENCE_SPEC: Final = "strictcall.client.reply:interpret_tool_reply"
FIXED_ID: Final = "call-7"
"""The id a one-parameter reader is taken to expect."""

_ABSENT: Final = object()

_EXPECTED: Final = (FIXED_ID, 7)
_JSONRPC: Final = ("2.0", "2.0", _ABSENT, "1.0", 2.0)
_ANY: Final = FALSY + TRUTHY
_CODE: Final = (-32001, 0, _ABSENT, True, 1.0, "1", None)
_MESSAGE: Final = ("Retry later", "", _ABSENT, None, 0)
_IDS: Final = {
    expected: (expected, expected, _ABSENT, None, "call-8", "7", 7.0, True, 8)
    for expected in _EXPECTED
}


def reference(arity: int) -> Callable[..., Any]:
    """The contract's own function, called as the candidate is: `(reply, expected_id)`, or
    `(reply)` with the id fixed at "call-7"."""
    if arity == 2:
        return interpret_tool_reply

    def interpret_fixed_id(reply: Any) -> dict[str, Any]:
        return interpret_tool_reply(reply, FIXED_ID)

    return interpret_fixed_id


_HINTS = Hints(keys=("items", "count"))


def reply_arguments(arity: int, *, str_ids: bool = False) -> st.SearchStrategy[tuple[Any, ...]]:
    """A reply, mostly a well-formed envelope for the expected id, and the expected id (a str
    only when `str_ids`: the function says it takes no int)."""

    @st.composite
    def build(draw: st.DrawFn) -> tuple[Any, ...]:
        return draw_reply(HypothesisSource(draw), arity, str_ids=str_ids)

    return build()


def takes_str_ids(function: Callable[..., Any]) -> bool:
    """True when the function's second parameter is annotated `str` (the seed's contract)."""
    import inspect

    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    return len(parameters) >= 2 and parameters[1].annotation in (str, "str")


def draw_reply(source: Source, arity: int, *, str_ids: bool = False) -> tuple[Any, ...]:
    """One (reply, expected_id), or (reply,), from `source`."""
    expected: Any = FIXED_ID if arity == 1 or str_ids else source.pick(_EXPECTED)
    builder = _Builder(source, _HINTS)
    if source.below(6) == 5:
        reply: Any = builder.value(1)
    else:
        reply = {}
        _put(reply, "jsonrpc", source.pick(_JSONRPC))
        _put(reply, "id", source.pick(_IDS[expected]))
        if source.below(3) > 0:
            reply["result"] = builder.value(1)
        if source.below(3) == 2:
            reply["error"] = _error(source)
        if source.below(8) == 7:
            reply["extra"] = builder.value(2)
    return (reply, expected) if arity == 2 else (reply,)


def probes(arity: int) -> list[tuple[Any, ...]]:
    """A well-formed envelope for the expected id, then its neighbours: a result or an error
    of each falsy and truthy value, each member left out or changed (the seed's null result
    among them)."""
    envelope = {"jsonrpc": "2.0", "id": FIXED_ID}
    base = (envelope, FIXED_ID) if arity == 2 else (envelope,)
    return [base, *neighbours(base, frozenset({1}), ("result", "error"))]


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not _ABSENT:
        target[key] = value


def _error(source: Source) -> Any:
    if source.below(5) == 4:
        return source.pick(_ANY)()
    error: dict[str, Any] = {}
    _put(error, "code", source.pick(_CODE))
    _put(error, "message", source.pick(_MESSAGE))
    if source.below(3) == 0:
        error["data"] = source.pick(_ANY)()
    return error
