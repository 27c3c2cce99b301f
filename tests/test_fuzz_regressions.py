"""Inputs the fuzzer found that broke POST /rpc of a real server, each pinned here: a request
with a valid id must get a JSON-RPC reply (never an HTTP 5xx or a body that is not JSON), and a
write's call id must not make the notes tools fail in a way they do not declare; and the
coverage-guided fuzzer's (atheris) finds in the schema describer."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import oracle, procs

from strictcall.core.gateway import Gateway
from strictcall.core.schema import CompiledSchema, QuickDescriber, Violation
from strictcall.errors import INTERNAL_ERROR, INVALID_REQUEST, UNKNOWN_TOOL, Reason
from strictcall.services.notes import notes_gateway
from strictcall.storage.sqlite import SQLiteStore


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[procs.HttpServer, str]]:
    workdir = tmp_path_factory.mktemp("fuzz-regressions")
    db = workdir / "notes.sqlite3"
    token = procs.create_token(db, "u1")
    running = procs.HttpServer(db, workdir / "stderr.log")
    yield running, token
    running.stop()


def post(server: tuple[procs.HttpServer, str], body: bytes) -> httpx.Response:
    running, token = server
    return httpx.post(
        running.base_url + "/rpc",
        content=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=30,
    )


def call_body(request_id: bytes, params: bytes) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":' + request_id + b',"method":"tools/call","params":' + params + b"}"
    )


def assert_answered_by_the_spec(body: bytes, response: httpx.Response) -> list[Any]:
    replies, problems = oracle.rpc_body_problems(body, response.status_code, response.content)
    assert problems == [], (response.status_code, response.content[:200])
    return replies


@pytest.mark.parametrize(
    "request_id",
    [b"18446744073709551616", b"-9223372036854775809", b"1" + b"0" * 40],
    ids=["2**64", "-2**63-1", "10**40"],
)
@pytest.mark.parametrize(
    "params",
    [b'{"name":"count_notes","arguments":{}}', b'{"name":"create_note","arguments":{"text":"x"}}'],
    ids=["count_notes", "create_note"],
)
def test_an_int_id_beyond_64_bits_gets_a_json_rpc_reply(
    server: tuple[procs.HttpServer, str], request_id: bytes, params: bytes
) -> None:
    body = call_body(request_id, params)
    replies = assert_answered_by_the_spec(body, post(server, body))
    # A JSON-RPC int id is any integer: echoed exactly (checked above), the write done.
    assert "error" not in replies[0] or replies[0]["error"]["data"]["code"] != INTERNAL_ERROR.code


@pytest.mark.parametrize(
    "request_id", [b"18446744073709551616", b"-9223372036854775809"], ids=["2**64", "-2**63-1"]
)
def test_an_invalid_request_with_an_int_id_beyond_64_bits_gets_a_json_rpc_reply(
    server: tuple[procs.HttpServer, str], request_id: bytes
) -> None:
    body = b'{"jsonrpc":"2.0","id":' + request_id + b"}"
    replies = assert_answered_by_the_spec(body, post(server, body))
    assert replies[0]["error"]["data"]["code"] == INVALID_REQUEST.code


def test_an_empty_string_id_gets_a_json_rpc_reply(server: tuple[procs.HttpServer, str]) -> None:
    body = call_body(b'""', b'{"name":"count_notes","arguments":{}}')
    assert_answered_by_the_spec(body, post(server, body))


@pytest.mark.parametrize("name", [b"{}", b"[]", b'["count_notes"]', b'{"a":1}'])
def test_a_tool_name_that_is_an_object_or_array_is_an_unknown_tool(
    server: tuple[procs.HttpServer, str], name: bytes
) -> None:
    body = call_body(b"7", b'{"name":' + name + b',"arguments":{}}')
    replies = assert_answered_by_the_spec(body, post(server, body))
    assert replies[0]["error"]["data"]["code"] == UNKNOWN_TOOL.code


def test_one_bad_name_in_a_batch_does_not_lose_the_other_answers(
    server: tuple[procs.HttpServer, str],
) -> None:
    body = (
        b"["
        + call_body(b"1", b'{"name":"count_notes","arguments":{}}')
        + b","
        + call_body(b"2", b'{"name":{},"arguments":{}}')
        + b"]"
    )
    replies = assert_answered_by_the_spec(body, post(server, body))
    assert len(replies) == 2


@pytest.mark.parametrize("tool", ["create_note", "delete_note"])
def test_a_write_with_an_int_call_id_beyond_64_bits_is_not_an_internal_error(
    tmp_path: Path, tool: str
) -> None:
    store = SQLiteStore(tmp_path / "notes.sqlite3")
    gateway: Gateway = notes_gateway(store)
    try:
        arguments = '{"text":"x"}' if tool == "create_note" else '{"note_id":"n0000000000000000"}'
        raw = f'{{"name":"{tool}","arguments":{arguments}}}'
        for call_id in (2**64, -(2**63) - 1, 10**40):
            answer = gateway.call(raw, "u1", call_id)
            assert oracle.answer_problems(answer, call_id) == [], answer
    finally:
        gateway.close()
        store.close()


# --- found by coverage-guided fuzzing (reliability/atheris_fuzz.py) ----------------------------

ATHERIS_DESCRIBER_CASES = [
    # a closed object that never says "properties" (here, a misspelt keyword): the validator
    # refuses any member at the object itself, by additionalProperties: false; the quick
    # describer once called it an unexpected member at the member's place
    (
        {"type": "object", "properties_": {"a": {"type": "integer"}}},
        {"a": 1},
        Violation((), Reason.NOT_ALLOWED, None, False),
    ),
    (
        {"type": "object", "properties": {"o": {"type": "object"}}},
        {"o": {"x": 1}},
        Violation(("o",), Reason.NOT_ALLOWED, None, False),
    ),
]


@pytest.mark.parametrize(("schema", "instance", "expected"), ATHERIS_DESCRIBER_CASES)
def test_the_quick_describer_answers_the_atheris_cases_as_the_exact_path_does(
    schema: dict[str, Any], instance: Any, expected: Violation
) -> None:
    compiled = CompiledSchema(schema)
    quick = QuickDescriber.of(compiled.strict)
    assert quick is not None
    assert quick.first_violation(instance) == expected
    assert compiled.exact_violation(instance) == expected
    assert compiled.first_violation(instance) == expected
