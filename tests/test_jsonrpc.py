"""JSON-RPC 2.0 in front of the gateway, in process: the code table, envelopes, batches,
notifications, falsy results and the audit record of every call."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from strictcall import Gateway, Tool
from strictcall.client.reply import interpret_tool_reply
from strictcall.errors import (
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    INVALID_TOOL_RESULT,
    UNKNOWN_METHOD,
    UNKNOWN_TOOL,
    JSONValue,
    Stage,
)
from strictcall.storage import AuditRecord
from strictcall.transports.jsonrpc import ERROR_CODES, RpcService

FALSY = [0, 0.0, False, "", [], {}, None, {"a": [0, False, None, ""]}]


def _echo_tool() -> Tool:
    return Tool(
        name="echo",
        description="Return the value it is given.",
        input_schema={"type": "object", "properties": {"value": {}}, "required": ["value"]},
        output_schema=True,
        handler=lambda ctx, args: args["value"],
    )


def _surrogate_tool() -> Tool:
    return Tool(
        name="broken",
        description="Return a string that cannot be written as UTF-8.",
        input_schema={"type": "object"},
        output_schema={"type": "string"},
        handler=lambda ctx, args: "\ud800",
    )


class Service:
    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.rpc = RpcService(Gateway([_echo_tool(), _surrogate_tool()]), self.records.append)

    def answer(self, body: JSONValue | bytes) -> JSONValue:
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        reply = asyncio.run(self.rpc.answer(raw, "u1"))
        return None if reply is None else orjson.loads(reply)


def call(request_id: JSONValue, name: str, arguments: JSONValue) -> dict[str, JSONValue]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def test_error_code_table_is_pinned() -> None:
    assert {stage.value: code for stage, (code, _) in ERROR_CODES.items()} == {
        "parse": -32700,
        "protocol": -32600,
        "route": -32601,
        "shape": -32602,
        "execute": -32603,
        "auth": -32001,
        "resource": -32002,
        "output": -32003,
    }
    assert set(ERROR_CODES) == set(Stage)


@pytest.mark.parametrize("value", FALSY, ids=repr)
def test_falsy_results_come_back_unchanged_as_successes(value: JSONValue) -> None:
    reply = Service().answer(call(7, "echo", {"value": value}))
    read = interpret_tool_reply(reply, 7)
    assert read["status"] == "ok"
    assert orjson.dumps(read["value"]) == orjson.dumps(value)
    assert type(read["value"]) is type(value)


def test_result_that_cannot_be_written_is_withheld_on_the_wire() -> None:
    reply = Service().answer(call("w", "broken", {}))
    assert reply["error"]["data"]["code"] == INVALID_TOOL_RESULT.code


def test_missing_arguments_mean_no_arguments_but_null_arguments_are_refused() -> None:
    service = Service()
    reply = service.answer(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "broken"}}
    )
    assert reply["error"]["data"]["code"] == INVALID_TOOL_RESULT.code  # it ran
    refused = service.answer(call(2, "echo", None))
    assert refused["error"]["data"]["code"] == INVALID_ARGUMENTS.code
    assert refused["error"]["data"]["pointer"] == "/arguments"


def test_every_call_leaves_one_audit_record_without_values() -> None:
    service = Service()
    service.answer(call(1, "echo", {"value": "SECRET-TEXT"}))
    service.answer(call(2, "nope", {}))
    service.answer(b"{not json")
    service.answer({"jsonrpc": "2.0", "id": 3, "method": "nope"})
    service.answer([call(4, "echo", {"value": 1}), {"jsonrpc": "2.0", "id": True}])
    assert len(service.records) == 6
    outcomes = [(r.outcome, r.code, r.tool) for r in service.records]
    assert outcomes == [
        ("ok", None, "echo"),
        ("error", UNKNOWN_TOOL.code, None),
        ("error", INVALID_JSON.code, None),
        ("error", UNKNOWN_METHOD.code, None),
        ("ok", None, "echo"),
        ("error", INVALID_REQUEST.code, None),
    ]
    assert "SECRET-TEXT" not in repr(service.records)


def test_batch_of_notifications_gets_no_body_and_still_runs() -> None:
    service = Service()
    notification = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "echo"}}
    assert service.answer([notification, notification]) is None
    assert len(service.records) == 2


def test_empty_batch_is_one_invalid_request() -> None:
    reply = Service().answer([])
    assert reply["id"] is None and reply["error"]["code"] == -32600


def test_tools_list_notification_gets_no_answer() -> None:
    assert Service().answer({"jsonrpc": "2.0", "method": "tools/list"}) is None


def test_tools_list_gives_mcp_definitions() -> None:
    reply = Service().answer({"jsonrpc": "2.0", "id": "l", "method": "tools/list"})
    assert [tool["name"] for tool in reply["result"]["tools"]] == ["echo", "broken"]


def test_params_by_position_are_invalid_params_and_audited() -> None:
    service = Service()
    reply = service.answer({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": [1]})
    assert reply["id"] == 7 and reply["error"]["code"] == -32602
    assert reply["error"]["data"]["code"] == INVALID_ARGUMENTS.code
    assert reply["error"]["data"]["pointer"] == ""
    assert service.answer({"jsonrpc": "2.0", "method": "tools/list", "params": []}) is None
    assert [r.code for r in service.records] == [INVALID_ARGUMENTS.code] * 2


def test_params_that_are_not_structured_are_still_an_invalid_request() -> None:
    reply = Service().answer({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": 3})
    assert reply["id"] == 8 and reply["error"]["code"] == -32600


def test_a_100000_character_unknown_method_gets_a_short_answer() -> None:
    service = Service()
    body = orjson.dumps({"jsonrpc": "2.0", "id": 9, "method": "m" * 100_000})
    reply = asyncio.run(service.rpc.answer(body, "u1"))
    assert reply is not None and len(reply) < 300
    assert orjson.loads(reply)["error"]["data"]["code"] == UNKNOWN_METHOD.code
    assert [r.code for r in service.records] == [UNKNOWN_METHOD.code]
