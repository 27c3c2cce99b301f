"""A parse error points at the first offending character, with a reason a model can act on:
invalid UTF-8, a lone surrogate, nesting too deep (where the limit is crossed), each at its
line and column; a too-deep refusal says how deep the arguments may nest on its transport."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from strictcall import Gateway, Tool, errors
from strictcall.core.jsontext import MAX_DEPTH, JSONTextError, TextFault, loads_strict
from strictcall.storage import AuditRecord
from strictcall.transports.jsonrpc import RpcService


def refusal(raw: str | bytes, **limits: int) -> JSONTextError:
    with pytest.raises(JSONTextError) as caught:
        loads_strict(raw, **limits)
    return caught.value


def where(error: JSONTextError) -> tuple[TextFault, int | None, int | None]:
    return error.fault, error.line, error.column


# --- invalid UTF-8 -------------------------------------------------------------------------------


def test_invalid_utf8_is_reported_at_the_first_bad_byte_not_at_column_1() -> None:
    raw = b'{"a":"' + b"x" * 94 + b'\xff\xfe"}'
    assert where(refusal(raw)) == (TextFault.INVALID_UTF8, 1, 101)


def test_invalid_utf8_on_a_later_line_counts_columns_in_characters() -> None:
    raw = '{"a":\n "é", "b": "'.encode() + b"\xc3(" + b'"}'
    # line 2 is ` "é", "b": "` (12 characters) and the bad byte follows it
    assert where(refusal(raw)) == (TextFault.INVALID_UTF8, 2, 13)


@pytest.mark.parametrize(
    "bad", [b"\x80", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe9"]
)
def test_every_kind_of_invalid_utf8_has_its_own_reason(bad: bytes) -> None:
    assert where(refusal(b'["ok", "' + bad + b'"]')) == (TextFault.INVALID_UTF8, 1, 9)


# --- lone surrogates -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "escape", ["\\ud800", "\\udc00", "\\ud800\\u0041", "\\udfff\\ud800", "\\ud83dx"]
)
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_a_lone_surrogate_escape_is_lone_surrogate_at_its_backslash(
    escape: str, as_bytes: bool
) -> None:
    text = '{"name": "é", "x": "ab' + escape + '"}'
    raw: str | bytes = text.encode() if as_bytes else text
    assert where(refusal(raw)) == (TextFault.LONE_SURROGATE, 1, text.index("\\") + 1)


def test_a_raw_surrogate_in_a_str_is_lone_surrogate_at_its_place() -> None:
    assert where(refusal('[\n"abc\udc00"]')) == (TextFault.LONE_SURROGATE, 2, 5)


def test_a_valid_surrogate_pair_escape_is_accepted() -> None:
    assert loads_strict('["\\ud83d\\ude00"]') == ["\U0001f600"]


# --- too deep ------------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [65, 70, 1100, 100_000])
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_too_deep_is_reported_where_the_limit_is_crossed(levels: int, as_bytes: bool) -> None:
    text = '{"a":' * levels + "1" + "}" * levels
    raw: str | bytes = text.encode() if as_bytes else text
    # the 65th '{' opens the level beyond the limit: after 64 times '{"a":' (5 characters)
    assert where(refusal(raw)) == (TextFault.TOO_DEEP, 1, 64 * 5 + 1)


def test_too_deep_counts_no_bracket_inside_a_string() -> None:
    text = '{"s": "[[[{{{", "t":\n' + "[" * 3 + "]" * 3 + "}"
    assert where(refusal(text, max_depth=3)) == (TextFault.TOO_DEEP, 2, 3)


def test_too_deep_with_escapes_takes_the_exact_path_and_is_still_located() -> None:
    text = "[" * 70 + '"\\n"' + "]" * 70
    assert where(refusal(text)) == (TextFault.TOO_DEEP, 1, 65)


# --- through the gateway and the transports ------------------------------------------------------


def echo() -> Tool:
    return Tool(
        name="echo",
        description="Return the value it is given.",
        input_schema={"type": "object", "properties": {"value": {}}, "required": ["value"]},
        output_schema=True,
        handler=lambda ctx, args: args["value"],
    )


def nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def test_the_gateway_answers_each_reason_with_its_position() -> None:
    gateway = Gateway([echo()])
    cases = {
        b'{"name":"echo","arguments":{"value":"\xff"}}': ("invalid_utf8", 1, 38),
        b'{"name":"echo","arguments":{"value":"\\udc00"}}': ("lone_surrogate", 1, 38),
        b'{"name":"echo","arguments":{"value":' + b"[" * 70 + b"]" * 70 + b"}}": (
            "too_deep",
            1,
            len('{"name":"echo","arguments":{"value":') + 63,
        ),
    }
    for raw, (reason, line, column) in cases.items():
        answer = gateway.call(raw, "u1", "c1")
        assert answer["ok"] is False
        error = answer["error"]
        assert (error["code"], error["stage"]) == (
            errors.INVALID_JSON.code,
            errors.INVALID_JSON.stage,
        )
        assert (error["reason"], error["line"], error["column"]) == (reason, line, column)


def test_a_gateway_call_leaves_the_arguments_all_levels_but_the_calls_own() -> None:
    gateway = Gateway([echo()])
    fits = orjson.dumps({"name": "echo", "arguments": {"value": nested(MAX_DEPTH - 2)}})
    assert gateway.call(fits, "u1", "c1")["ok"] is True
    deep = orjson.dumps({"name": "echo", "arguments": {"value": nested(MAX_DEPTH - 1)}})
    error = gateway.call(deep, "u1", "c1")["error"]
    assert error["reason"] == "too_deep"
    assert (error["limit"], error["arguments_limit"]) == (MAX_DEPTH, MAX_DEPTH - 1)


def rpc_answer(body: bytes) -> Any:
    records: list[AuditRecord] = []
    reply = asyncio.run(RpcService(Gateway([echo()]), records.append).answer(body, "u1"))
    assert reply is not None
    return orjson.loads(reply)


def request(arguments: Any, request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": arguments},
    }


def test_json_rpc_says_the_envelope_leaves_the_arguments_two_levels_less() -> None:
    fits = rpc_answer(orjson.dumps(request({"value": nested(MAX_DEPTH - 3)})))
    assert "result" in fits
    reply = rpc_answer(orjson.dumps(request({"value": nested(MAX_DEPTH - 2)})))
    data = reply["error"]["data"]
    assert (data["code"], data["reason"]) == (errors.INVALID_JSON.code, "too_deep")
    assert (data["limit"], data["arguments_limit"]) == (MAX_DEPTH, MAX_DEPTH - 2)
    assert data["line"] == 1 and isinstance(data["column"], int)


def test_json_rpc_batch_says_its_arguments_have_one_level_less_again() -> None:
    reply = rpc_answer(orjson.dumps([request({"value": nested(MAX_DEPTH)})]))
    data = reply["error"]["data"]
    assert data["arguments_limit"] == MAX_DEPTH - 3


def test_mcp_says_the_envelope_leaves_the_arguments_two_levels_less() -> None:
    from strictcall.core.pipeline import Limits
    from strictcall.transports.mcp.intake import Refused, read_message

    deep = orjson.dumps(request({"value": nested(MAX_DEPTH - 2)}))
    refused = read_message(deep, Limits())
    assert isinstance(refused, Refused)
    assert refused.error["reason"] == "too_deep"
    assert (refused.error["limit"], refused.error["arguments_limit"]) == (MAX_DEPTH, MAX_DEPTH - 2)
    fits = read_message(orjson.dumps(request({"value": nested(MAX_DEPTH - 3)})), Limits())
    assert not isinstance(fits, Refused)
