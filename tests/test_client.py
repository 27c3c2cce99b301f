"""The client reads replies as strictly as seed 000 says, whatever a server sends.

The real server is tested end to end in test_service.py; a server that misbehaves does not run
here, so these tests stand one up with httpx's MockTransport.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import orjson
import pytest

from strictcall import Client, ProtocolError, ToolError, UncorrelatedError
from strictcall.errors import JSONValue

Reply = Callable[[dict[str, JSONValue]], JSONValue]


def client_answering(reply: Reply) -> Client:
    def handler(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        return httpx.Response(200, content=orjson.dumps(reply(body)))

    return Client("http://test", "sc_t", transport=httpx.MockTransport(handler))


def ok(value: JSONValue) -> Reply:
    return lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": value}


@pytest.mark.parametrize("value", [0, False, "", [], {}, None], ids=repr)
def test_falsy_results_are_successes(value: JSONValue) -> None:
    with client_answering(ok(value)) as client:
        got = client.call("t")
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    "reply",
    [
        lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": 1, "error": None},
        lambda req: {"jsonrpc": "2.0", "id": req["id"]},
        lambda req: {"jsonrpc": "1.0", "id": req["id"], "result": 1},
        lambda req: {"jsonrpc": "2.0", "id": "other", "result": 1},
        lambda req: {"jsonrpc": "2.0", "id": req["id"], "error": {"code": True, "message": ""}},
        lambda req: {"jsonrpc": "2.0", "id": req["id"], "error": {"code": 1.0, "message": ""}},
        lambda req: {"jsonrpc": "2.0", "id": req["id"], "error": {"code": 1}},
        lambda req: [{"jsonrpc": "2.0", "id": req["id"], "result": 1}],
    ],
    ids=["both", "neither", "v1", "other-id", "bool-code", "float-code", "no-message", "array"],
)
def test_invalid_replies_raise_protocol_error(reply: Reply) -> None:
    with client_answering(reply) as client, pytest.raises(ProtocolError):
        client.call("t")


def test_int_call_id_is_matched_by_type() -> None:
    wrong_type = client_answering(lambda req: {"jsonrpc": "2.0", "id": "7", "result": 1})
    with wrong_type as client, pytest.raises(ProtocolError):
        client.call("t", call_id=7)
    with client_answering(ok(3)) as client:
        assert client.call("t", call_id=7) == 3


def test_error_with_code_zero_and_empty_message_is_an_error() -> None:
    error = {
        "code": 0,
        "message": "",
        "data": {"code": "busy", "stage": "execute", "retryable": True},
    }
    with (
        client_answering(lambda req: {"jsonrpc": "2.0", "id": req["id"], "error": error}) as client,
        pytest.raises(ToolError) as raised,
    ):
        client.call("t")
    assert raised.value.error == error and raised.value.retryable is True


def test_error_with_id_null_is_surfaced() -> None:
    error = {"code": -32700, "message": "Parse error"}
    answering = client_answering(lambda req: {"jsonrpc": "2.0", "id": None, "error": error})
    with answering as client, pytest.raises(UncorrelatedError) as raised:
        client.call("t")
    assert raised.value.error == error


def test_result_with_id_null_is_a_protocol_error() -> None:
    answering = client_answering(lambda req: {"jsonrpc": "2.0", "id": None, "result": 1})
    with answering as client, pytest.raises(ProtocolError):
        client.call("t")


def test_not_json_is_a_protocol_error() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(502, content=b"<html>"))
    with Client("http://test", "t", transport=transport) as client, pytest.raises(ProtocolError):
        client.call("t")


def test_batch_replies_are_matched_by_id_not_position() -> None:
    def reverse(body: JSONValue) -> JSONValue:
        assert isinstance(body, list)
        return [{"jsonrpc": "2.0", "id": r["id"], "result": i} for i, r in enumerate(body)][::-1]

    with client_answering(reverse) as client:
        batch = client.call_many([("a", None), ("b", None), ("c", None)])
    assert [o.value for o in batch.outcomes] == [0, 1, 2]


def test_batch_keeps_id_null_errors_and_marks_missing_replies() -> None:
    def partial(body: JSONValue) -> JSONValue:
        assert isinstance(body, list)
        return [
            {"jsonrpc": "2.0", "id": body[0]["id"], "result": None},
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "x"}},
        ]

    with client_answering(partial) as client:
        batch = client.call_many([("a", None), ("b", None)])
    assert [o.status for o in batch.outcomes] == ["ok", "missing"]
    assert batch.outcomes[0].unwrap() is None
    assert len(batch.uncorrelated) == 1
    with pytest.raises(ProtocolError):
        batch.outcomes[1].unwrap()


def test_batch_answered_by_one_id_null_error_is_surfaced() -> None:
    error = {"code": -32001, "message": "Unauthenticated"}
    with client_answering(lambda req: {"jsonrpc": "2.0", "id": None, "error": error}) as client:
        batch = client.call_many([("a", None)])
    assert [o.status for o in batch.outcomes] == ["missing"]
    assert batch.uncorrelated[0].error == error


def test_batch_reply_for_an_unknown_id_is_a_protocol_error() -> None:
    stranger = [{"jsonrpc": "2.0", "id": "stranger", "result": 1}]
    with client_answering(lambda req: stranger) as client, pytest.raises(ProtocolError):
        client.call_many([("a", None)])


def test_ids_are_unique_across_clients() -> None:
    with client_answering(ok(1)) as a, client_answering(ok(1)) as b:
        assert a.new_id() != b.new_id()


def test_empty_batch_is_refused_before_sending() -> None:
    with client_answering(ok(1)) as client, pytest.raises(ValueError):
        client.call_many([])
