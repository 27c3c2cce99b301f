"""strictcall.transports.mcp in process: listings, answers as tool results, the strict intake of
messages,
and the handlers behind the official client's in-process connection (both protocol eras)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import jsonschema_rs
import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.client.client import Client

from mcp_results import tool_error
from strictcall import Gateway, ToolContext, tool
from strictcall.core.pipeline import Limits
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    INVALID_TOOL_RESULT,
    REQUEST_TOO_LARGE,
    UNAUTHENTICATED,
    UNKNOWN_METHOD,
    UNKNOWN_TOOL,
    ErrorKind,
    Stage,
)
from strictcall.services.notes import notes_gateway
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.jsonrpc import ERROR_CODES
from strictcall.transports.mcp import (
    RESULT_MEMBER,
    WRAP_MARKER,
    DirectCall,
    McpTools,
    Refused,
    Serving,
    describe_tools,
    read_message,
    result_is_wrapped,
    tool_result,
    wrap_schema,
)

DEADLINE_S = 30
LIMITS = Limits()
NOTES = {"read_note", "list_notes", "count_notes", "create_note", "delete_note"}
WRAPPED = {"list_notes", "count_notes", "delete_note"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(str(tmp_path / "mcp.sqlite3"))
    yield opened
    opened.close()


def run(work: Callable[[], Awaitable[None]]) -> None:
    """Run `work` on an event loop, within the deadline."""

    async def bounded() -> None:
        with anyio.fail_after(DEADLINE_S):
            await work()

    anyio.run(bounded)


def assert_error(structured: Any, kind: ErrorKind) -> None:
    assert structured["code"] == kind.code
    assert structured["stage"] == kind.stage.value
    assert structured["retryable"] is kind.retryable


def assert_refused(
    message: types.JSONRPCMessage | DirectCall | Refused, kind: ErrorKind
) -> Refused:
    assert isinstance(message, Refused)
    assert message.reply["error"]["code"] == ERROR_CODES[kind.stage][0]
    assert_error(message.error, kind)
    return message


# --- tools/list --------------------------------------------------------------------------------


def test_only_a_declared_object_result_goes_unwrapped() -> None:
    assert result_is_wrapped({"type": "object"}) is False
    for schema in (
        {"type": "integer"},
        {"type": "array"},
        {"type": "null"},
        {"type": ["object", "null"]},
        {"$ref": "#/$defs/Note"},
        {},
        True,
    ):
        assert result_is_wrapped(schema) is True


def test_wrapped_schema_is_an_object_holding_result_and_moves_local_references() -> None:
    inner = {
        "type": "array",
        "items": {"$ref": "#/$defs/Item"},
        "$defs": {"Item": {"type": "object", "properties": {"next": {"$ref": "#"}}}},
        "default": [{"$ref": "#/not/a/schema"}],
    }
    wrapped = wrap_schema(inner)
    assert wrapped == {
        "type": "object",
        "properties": {
            RESULT_MEMBER: {
                "type": "array",
                "items": {"$ref": "#/properties/result/$defs/Item"},
                "$defs": {
                    "Item": {
                        "type": "object",
                        "properties": {"next": {"$ref": "#/properties/result"}},
                    }
                },
                "default": [{"$ref": "#/not/a/schema"}],
            }
        },
        "required": [RESULT_MEMBER],
        "additionalProperties": False,
        WRAP_MARKER: True,
    }
    jsonschema_rs.meta.validate(wrapped)
    validator = jsonschema_rs.Draft202012Validator(wrapped)
    assert validator.is_valid({RESULT_MEMBER: [{"next": [{"next": []}]}]})
    assert not validator.is_valid({RESULT_MEMBER: [{"next": 1}]})


def test_listing_gives_every_tool_with_object_output_schemas(store: SQLiteStore) -> None:
    gateway = notes_gateway(store)
    tools = {t.name: t for t in describe_tools(gateway)}
    assert set(tools) == NOTES
    plain = {t["name"]: t for t in gateway.list_tools("mcp")}
    declared = {t.name: t.output_schema for t in gateway.tools}
    for name, listed in tools.items():
        assert listed.description == plain[name]["description"]
        assert listed.input_schema == plain[name]["inputSchema"]
        assert listed.output_schema == plain[name]["outputSchema"]
        assert listed.output_schema is not None and listed.output_schema["type"] == "object"
        if name in WRAPPED:
            assert listed.output_schema == wrap_schema(declared[name])
        else:
            assert listed.output_schema == declared[name]


# --- tools/call answers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wrapped", "structured", "text"),
    [
        (0, True, {"result": 0}, "0"),
        ([], True, {"result": []}, "[]"),
        ("", True, {"result": ""}, '""'),
        (None, True, {"result": None}, "null"),
        (False, True, {"result": False}, "false"),
        ({}, False, {}, "{}"),
        ({"a": "é"}, False, {"a": "é"}, '{"a":"é"}'),
        (2**70, True, {"result": 2**70}, str(2**70)),
    ],
    ids=["zero", "empty-list", "empty-string", "null", "false", "empty-object", "object", "big"],
)
def test_success_is_the_value_and_exactly_one_text_block(
    value: Any, wrapped: bool, structured: Any, text: str
) -> None:
    result = tool_result({"ok": True, "call_id": "c", "result": value}, wrapped=wrapped)
    assert result.is_error is False
    assert result.structured_content == structured
    assert [block.model_dump() for block in result.content] == [
        types.TextContent(text=text).model_dump()
    ]
    assert json.loads(text) == value


def test_failure_is_is_error_with_the_error_as_json_text_and_no_structured_content() -> None:
    error = {"code": "invalid_arguments", "stage": "shape", "retryable": False, "pointer": "/a"}
    result = tool_result({"ok": False, "call_id": "c", "error": error}, wrapped=True)
    assert tool_error(result) == error


def test_a_value_that_cannot_be_written_is_withheld() -> None:
    result = tool_result({"ok": True, "call_id": "c", "result": "\ud800"}, wrapped=True)
    assert_error(tool_error(result), INVALID_TOOL_RESULT)


# --- intake ------------------------------------------------------------------------------------


PARSE_ERRORS = [
    b"{this is not json",
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":NaN}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list","id":2}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":' + b"1" * 20000 + b"}}",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
    b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}',
    b"",
]


@pytest.mark.parametrize(
    "raw",
    PARSE_ERRORS,
    ids=["syntax", "nan", "duplicate", "huge-int", "deep", "surrogate", "utf8", "empty"],
)
def test_text_that_is_not_strict_json_is_a_parse_error_with_id_null(raw: bytes) -> None:
    refused = assert_refused(read_message(raw, LIMITS), INVALID_JSON)
    assert refused.reply["id"] is None


def test_text_longer_than_the_limit_is_refused_unread() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"' + b"x" * 64 + b'"}}'
    refused = assert_refused(read_message(raw, Limits(max_size=32)), REQUEST_TOO_LARGE)
    assert refused.reply["id"] is None and refused.error["limit"] == 32


INVALID_MESSAGES: list[tuple[Any, str | int | None]] = [
    ([], None),
    ([1], None),
    ([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], None),
    ("just a string", None),
    (5, None),
    (None, None),
    ({"jsonrpc": "1.0", "id": 7, "method": "tools/list"}, 7),
    ({"id": "k", "method": "tools/list"}, "k"),
    ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, None),
    ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, None),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "extra": 1}, 1),
    ({"jsonrpc": "2.0", "method": "notifications/initialized", "params": 3}, None),
    ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}, 1),
    ({"jsonrpc": "2.0", "id": 1, "result": 0}, 1),
    ({"jsonrpc": "2.0", "result": {}}, None),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}}, 1),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1.0, "message": "m"}}, 1),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}, 1),
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "m"}, "x": 1}, 1),
    ({"jsonrpc": "2.0", "id": 1.0, "error": {"code": 1, "message": "m"}}, None),
]


@pytest.mark.parametrize(
    ("message", "kept_id"),
    INVALID_MESSAGES,
    ids=[
        "empty-batch",
        "batch-of-number",
        "batch",
        "string",
        "number",
        "null",
        "v1",
        "no-jsonrpc",
        "bool-id",
        "float-id",
        "null-id",
        "int-method",
        "extra-member",
        "notification-number-params",
        "result-and-error",
        "number-result",
        "response-without-id",
        "bool-error-code",
        "float-error-code",
        "error-without-message",
        "response-extra-member",
        "float-id-error",
    ],
)
def test_anything_but_a_json_rpc_message_is_an_invalid_request(
    message: Any, kept_id: str | int | None
) -> None:
    raw = json.dumps(message).encode()
    refused = assert_refused(read_message(raw, LIMITS), INVALID_REQUEST)
    assert refused.reply["id"] == kept_id
    assert type(refused.reply["id"]) is type(kept_id)
    assert isinstance(refused.message(), types.JSONRPCError)
    assert json.loads(refused.body()) == refused.reply


def test_params_by_position_are_invalid_params_not_an_invalid_request() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}'
    refused = assert_refused(read_message(raw, LIMITS), INVALID_ARGUMENTS)
    assert refused.reply["error"]["code"] == -32602
    assert refused.reply["id"] == 1
    assert refused.error["pointer"] == ""
    assert refused.status == 400


def test_a_method_the_server_does_not_serve_is_refused_without_echoing_its_name(
    store: SQLiteStore,
) -> None:
    tools = tools_for(store, "u1", [])
    method = "x" * 100_000
    raw = json.dumps({"jsonrpc": "2.0", "id": 9, "method": method}).encode()
    refused = assert_refused(read_message(raw, LIMITS, tools.serves), UNKNOWN_METHOD)
    assert refused.reply["error"]["code"] == -32601
    assert refused.reply["id"] == 9
    assert len(refused.body()) < 300
    assert method not in refused.body().decode()
    for served in ("initialize", "ping", "tools/list", "tools/call"):
        assert tools.serves(served)
    for unserved in ("prompts/list", "resources/read", "tools/destroy", ""):
        assert not tools.serves(unserved)


def test_a_notification_of_an_unknown_method_passes_to_the_sdk_unanswered(
    store: SQLiteStore,
) -> None:
    tools = tools_for(store, "u1", [])
    raw = b'{"jsonrpc":"2.0","method":"notifications/whatever"}'
    assert isinstance(read_message(raw, LIMITS, tools.serves), types.JSONRPCNotification)


@pytest.mark.parametrize(
    ("message", "model"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, types.JSONRPCRequest),
        ({"jsonrpc": "2.0", "id": "7", "method": "ping", "params": {}}, types.JSONRPCRequest),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, types.JSONRPCNotification),
        ({"jsonrpc": "2.0", "id": 3, "result": {}}, types.JSONRPCResponse),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": ""}}, types.JSONRPCError),
    ],
    ids=["request", "string-id", "notification", "response", "error"],
)
def test_a_json_rpc_message_passes_unchanged(message: dict[str, Any], model: type[Any]) -> None:
    read = read_message(json.dumps(message).encode(), LIMITS)
    assert isinstance(read, model)
    assert read.model_dump(by_alias=True, exclude_unset=True) == message


def test_a_request_id_keeps_its_json_type() -> None:
    read = read_message(b'{"jsonrpc":"2.0","id":"7","method":"tools/list"}', LIMITS)
    assert isinstance(read, types.JSONRPCRequest) and read.id == "7"
    edge = read_message(
        b'{"jsonrpc":"2.0","id":' + str(2**63 - 1).encode() + b',"method":"x"}', LIMITS
    )
    assert isinstance(edge, types.JSONRPCRequest) and edge.id == 2**63 - 1
    for beyond in (2**63, -(2**63) - 1, 2**70):
        raw = b'{"jsonrpc":"2.0","id":' + str(beyond).encode() + b',"method":"x"}'
        refused = read_message(raw, LIMITS)
        assert isinstance(refused, Refused)
        assert refused.error["code"] == INVALID_REQUEST.code
    empty = read_message(b'{"jsonrpc":"2.0","id":"","method":"x"}', LIMITS)
    assert isinstance(empty, Refused) and empty.error["code"] == INVALID_REQUEST.code


@given(st.binary(max_size=200))
def test_any_bytes_get_a_message_or_a_parse_or_request_error(raw: bytes) -> None:
    read = read_message(raw, LIMITS)
    if isinstance(read, Refused):
        assert read.error["stage"] in (Stage.PARSE.value, Stage.PROTOCOL.value)
        assert read.reply["error"]["code"] in (-32700, -32600)


# --- the handlers, through the official client in process --------------------------------------


def tools_for(store: SQLiteStore, identity: str | None, audit: list[AuditRecord]) -> McpTools:
    return McpTools(
        notes_gateway(store), lambda ctx: identity, lambda: "test", Serving(record=audit.append)
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_tool_through_the_official_client(
    store: SQLiteStore, mode: Literal["legacy", "auto"]
) -> None:
    audit: list[AuditRecord] = []
    server = tools_for(store, "u1", audit).server()

    async def session() -> None:
        async with Client(server, mode=mode) as client:
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == NOTES
            count = await client.call_tool("count_notes", {})
            assert count.structured_content == {"result": 0} and not count.is_error
            empty = await client.call_tool("create_note", {"text": ""})
            note = empty.structured_content
            assert note is not None and note["text"] == ""
            read = await client.call_tool("read_note", {"note_id": note["note_id"]})
            assert read.structured_content == note
            listing = await client.call_tool("list_notes")
            assert listing.structured_content == {"result": [note]}
            deleted = await client.call_tool("delete_note", {"note_id": note["note_id"]})
            assert deleted.structured_content == {"result": None} and not deleted.is_error
            gone = await client.call_tool("read_note", {"note_id": note["note_id"]})
            assert gone.is_error
            assert_error(tool_error(gone), FORBIDDEN_OR_MISSING)
            extra = await client.call_tool("create_note", {"text": "x", "admin": True})
            assert_error(tool_error(extra), INVALID_ARGUMENTS)
            assert tool_error(extra)["pointer"] == "/arguments/admin"
            unknown = await client.call_tool("drop_tables", {})
            assert_error(tool_error(unknown), UNKNOWN_TOOL)

    run(session)
    assert [(r.tool, r.outcome) for r in audit] == [
        ("count_notes", "ok"),
        ("create_note", "ok"),
        ("read_note", "ok"),
        ("list_notes", "ok"),
        ("delete_note", "ok"),
        ("read_note", "error"),
        ("create_note", "error"),
        (None, "error"),
    ]
    assert all(
        r.identity == "u1" and r.call_id and r.call_id.startswith("mcp-test:") for r in audit
    )


def test_a_call_without_an_identity_is_refused_before_any_tool(store: SQLiteStore) -> None:
    audit: list[AuditRecord] = []
    server = tools_for(store, None, audit).server()

    async def session() -> None:
        async with Client(server, mode="legacy") as client:
            refused = await client.call_tool("create_note", {"text": "x"})
            assert refused.is_error
            assert_error(tool_error(refused), UNAUTHENTICATED)

    run(session)
    assert store.count_notes("u1") == 0
    assert [r.code for r in audit] == [UNAUTHENTICATED.code]


def raw_call(params: dict[str, Any]) -> types.Request[dict[str, Any], str]:
    """A tools/call request with params exactly as given (the SDK's model would drop members)."""
    return types.Request[dict[str, Any], str](method="tools/call", params=params)


def test_params_members_other_than_mcp_ones_reach_the_gateway_and_are_refused() -> None:
    @tool()
    def echo(ctx: ToolContext, n: int) -> int:
        """Echo n."""
        return n

    tools = McpTools(Gateway([echo]), lambda ctx: "u1", lambda: "test")
    server = tools.server()

    async def session() -> None:
        async with Client(server, mode="legacy") as client:
            ok = await client.session.send_request(
                raw_call({"name": "echo", "arguments": {"n": 3}, "_meta": {"progressToken": "p"}}),
                types.CallToolResult,
            )
            assert ok.structured_content == {"result": 3}
            lax = await client.call_tool("echo", {"n": 3.0})
            assert_error(tool_error(lax), INVALID_ARGUMENTS)
            extra = await client.session.send_request(
                raw_call({"name": "echo", "arguments": {"n": 1}, "admin": True}),
                types.CallToolResult,
            )
            assert tool_error(extra)["pointer"] == "/admin"
            missing = await client.session.send_request(
                raw_call({"name": "echo"}), types.CallToolResult
            )
            refused = tool_error(missing)
            assert refused["pointer"] == "/arguments"
            assert refused["reason"] == "missing_member"
            assert refused["expected"] == "n"

    run(session)


@pytest.mark.parametrize(
    ("params", "kind", "pointer"),
    [
        ({"arguments": {}}, UNKNOWN_TOOL, None),
        ({"name": 5, "arguments": {}}, UNKNOWN_TOOL, None),
        ({"name": "read_note", "arguments": "oops"}, INVALID_ARGUMENTS, "/arguments"),
        ({"name": "read_note", "arguments": [1]}, INVALID_ARGUMENTS, "/arguments"),
    ],
    ids=["no-name", "int-name", "string-arguments", "array-arguments"],
)
def test_call_params_the_sdk_would_refuse_bare_are_answered_by_the_gateway(
    store: SQLiteStore, params: dict[str, Any], kind: ErrorKind, pointer: str | None
) -> None:
    raw = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params})
    direct = read_message(raw.encode(), LIMITS)
    assert isinstance(direct, DirectCall) and direct.request_id == 3
    audit: list[AuditRecord] = []
    tools = tools_for(store, "u1", audit)
    result: types.CallToolResult | None = None

    async def answer() -> None:
        nonlocal result
        result = await tools.answer_call(direct.params, direct.request_id, "u1")

    run(answer)
    assert result is not None
    structured = tool_error(result)
    assert_error(structured, kind)
    assert structured.get("pointer") == pointer
    if kind is UNKNOWN_TOOL:
        assert structured["available"] == sorted(NOTES)
    assert [record.code for record in audit] == [kind.code]


def test_an_unknown_tool_with_bad_arguments_is_refused_at_route_first(store: SQLiteStore) -> None:
    raw = b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"nope","arguments":[1]}}'
    direct = read_message(raw, LIMITS)
    assert isinstance(direct, DirectCall)
    tools = tools_for(store, "u1", [])
    result: types.CallToolResult | None = None

    async def answer() -> None:
        nonlocal result
        result = await tools.answer_call(direct.params, direct.request_id, "u1")

    run(answer)
    assert result is not None
    assert_error(tool_error(result), UNKNOWN_TOOL)
