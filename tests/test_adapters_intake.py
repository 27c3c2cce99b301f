"""The adapters read a model's arguments text exactly as strictly as `loads_strict` does."""

from __future__ import annotations

import asyncio
import json

from hypothesis import given
from hypothesis import strategies as st

from adapter_tools import adapter_gateway, error_of
from strictcall import loads_strict
from strictcall.core.jsontext import JSONTextError
from strictcall.errors import INVALID_JSON, REQUEST_TOO_LARGE
from strictcall.transports.providers import (
    arun_openai_tool_calls,
    run_openai_tool_calls,
    run_responses_function_calls,
)

GATEWAY = adapter_gateway()
PARSE_CODES = {INVALID_JSON.code, REQUEST_TOO_LARGE.code}

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_oddities = st.sampled_from(
    [
        "NaN",
        "-Infinity",
        "Infinity",
        "1e400",
        "-1e400",
        "1" * 320,
        "1" * 19,
        "1.5e308",
        '"\\ud800"',
        '"\\udc00x"',
        '"\\ud83d\\ude00"',
        '"\\u0000"',
        '"\x01"',
        "'a'",
        "01",
        "1.",
        ".5",
        "true",
        "[1,]",
        "// c",
        "",
    ]
)


@st.composite
def arguments_texts(draw: st.DrawFn) -> str:
    """Objects with duplicate members, lenient-only tokens, big numbers and odd escapes."""
    members = draw(st.lists(st.tuples(st.sampled_from("abc"), st.one_of(_values, _oddities))))
    parts = []
    for name, value in members:
        written = value if isinstance(value, str) and value in _ODD else json.dumps(value)
        parts.append(f'"{name}":{written}')
    text = "{" + ",".join(parts) + "}"
    tail = draw(st.sampled_from(["", " ", "x", "}", "\n", " {}"]))
    cut = draw(st.integers(min_value=0, max_value=len(text)))
    return draw(st.sampled_from([text + tail, text[:cut] or "{", text]))


_ODD = frozenset(
    {"NaN", "-Infinity", "Infinity", "1e400", "-1e400", "1" * 320, "1" * 19, "1.5e308"}
    | {'"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"', '"\\u0000"', '"\x01"', "'a'", "01"}
    | {"1.", ".5", "true", "[1,]", "// c", ""}
)

_texts = st.one_of(arguments_texts(), st.text(min_size=1, max_size=40))


def _refusal(content: str) -> dict[str, object] | None:
    value = json.loads(content)
    if isinstance(value, dict) and value.get("code") in PARSE_CODES:
        return error_of(content)
    return None


@given(_texts)
def test_the_chat_adapter_refuses_at_parse_exactly_what_loads_strict_refuses(text: str) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "free", "arguments": text}}
    (result,) = asyncio.run(arun_openai_tool_calls(GATEWAY, [call], "u1"))
    assert run_openai_tool_calls(GATEWAY, [call], "u1") == [result]  # the sync form's own path
    refusal = _refusal(result["content"])
    try:
        loads_strict(text)
    except JSONTextError as exc:
        assert refusal is not None
        assert refusal["reason"] == exc.fault.value
        assert (refusal.get("line"), refusal.get("column")) == (exc.line, exc.column)
    else:
        assert refusal is None


@given(_texts)
def test_the_responses_adapter_refuses_at_parse_exactly_what_loads_strict_refuses(
    text: str,
) -> None:
    item = {"type": "function_call", "call_id": "c1", "name": "free", "arguments": text}
    (result,) = run_responses_function_calls(GATEWAY, [item], "u1")
    try:
        loads_strict(text)
    except JSONTextError:
        assert _refusal(result["output"]) is not None
    else:
        assert _refusal(result["output"]) is None
