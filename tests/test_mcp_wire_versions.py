"""Every answer strictcall writes itself on MCP (tool results for calls the SDK would refuse bare,
refusals of malformed messages) is valid on both wire versions, 2025-11-25 (the handshake era)
and 2026-07-28 (the per-request envelope), by the Python SDK's own result validation: in
process, over a real stdio process and over a real `strictcall serve`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import DEVNULL
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp_types.methods import serialize_server_result, validate_server_result

from mcp_results import wire_error
from servers import RunningServer, create_token, start_server
from stdio_peer import StdioPeer
from strictcall.core.pipeline import Limits
from strictcall.errors import FORBIDDEN_OR_MISSING, INVALID_ARGUMENTS, UNKNOWN_METHOD, UNKNOWN_TOOL
from strictcall.services.notes import notes_gateway
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.mcp import McpTools, protocol_version, read_message, result_message
from strictcall.transports.mcp.intake import DirectCall, Refused

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
DEADLINE_S = 30
SERVE_STDIO = ("serve", "--mcp-stdio", "--identity", "u1")
ENVELOPE = {
    types.PROTOCOL_VERSION_META_KEY: MODERN,
    types.CLIENT_CAPABILITIES_META_KEY: {},
    types.CLIENT_INFO_META_KEY: {"name": "wire-test", "version": "1"},
}
BARE_CALLS: list[tuple[dict[str, Any], str]] = [
    ({"arguments": {}}, UNKNOWN_TOOL.code),
    ({"name": 5}, UNKNOWN_TOOL.code),
    ({"name": "read_note", "arguments": "oops"}, INVALID_ARGUMENTS.code),
    ({"name": "read_note", "arguments": [1]}, INVALID_ARGUMENTS.code),
]


def enveloped(params: dict[str, Any], version: str) -> dict[str, Any]:
    return {**params, "_meta": ENVELOPE} if version == MODERN else params


def assert_valid_result(result: dict[str, Any], version: str) -> None:
    """Valid for `version` by the SDK, with nothing the version does not define."""
    validate_server_result("tools/call", version, result)
    assert serialize_server_result("tools/call", version, result) == result
    if version == MODERN:
        assert result["resultType"] == "complete"
    else:
        assert "resultType" not in result


def assert_valid_error(reply: dict[str, Any]) -> None:
    message = types.jsonrpc_message_adapter.validate_python(reply, by_name=False)
    assert isinstance(message, types.JSONRPCError)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(str(tmp_path / "wire.sqlite3"))
    yield opened
    opened.close()


@pytest.mark.parametrize("version", [HANDSHAKE, MODERN])
@pytest.mark.parametrize(("params", "code"), BARE_CALLS)
def test_answers_to_calls_the_sdk_would_refuse_bare_are_valid_on_both_wire_versions(
    store: SQLiteStore, version: str, params: dict[str, Any], code: str
) -> None:
    raw = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": enveloped(params, version)}
    direct = read_message(json.dumps(raw).encode(), Limits())
    assert isinstance(direct, DirectCall)
    assert protocol_version(direct.params) == version
    tools = McpTools(notes_gateway(store), lambda ctx: "u1", lambda: "test")

    async def answer() -> types.CallToolResult:
        return await tools.answer_call(direct.params, direct.request_id, "u1")

    reply = result_message(direct.request_id, anyio.run(answer), version)
    result = reply.model_dump(by_alias=True, mode="json", exclude_none=True)["result"]
    assert_valid_result(result, version)
    assert wire_error(result)["code"] == code


def test_an_envelope_naming_an_unknown_version_is_answered_in_the_handshake_era() -> None:
    assert protocol_version({"_meta": {types.PROTOCOL_VERSION_META_KEY: "2099-01-01"}}) == HANDSHAKE
    assert protocol_version({"_meta": "not an object"}) == HANDSHAKE
    assert protocol_version({}) == HANDSHAKE


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[]",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}',
        b'{"jsonrpc":"2.0","id":2,"method":"' + b"m" * 1000 + b'"}',
    ],
    ids=["parse", "invalid-request", "params-by-position", "unknown-method"],
)
def test_refusals_are_json_rpc_errors_the_sdk_reads(store: SQLiteStore, raw: bytes) -> None:
    tools = McpTools(notes_gateway(store), lambda ctx: "u1", lambda: "test")
    refused = read_message(raw, Limits(), tools.serves)
    assert isinstance(refused, Refused)
    assert_valid_error(refused.reply)


# --- real transports ---------------------------------------------------------------------------


def call(request_id: int, params: dict[str, Any], version: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": enveloped(params, version),
    }


def exchange(ask: Any, version: str) -> None:
    """A success, a refusal by the gateway through the SDK, one the SDK never sees, and an
    unknown method: each valid on `version`."""
    counted = ask(call(1, {"name": "count_notes", "arguments": {}}, version))["result"]
    assert_valid_result(counted, version)
    assert counted["structuredContent"] == {"result": 0}
    missing = ask(call(2, {"name": "read_note", "arguments": {"note_id": "n-0"}}, version))
    assert_valid_result(missing["result"], version)
    assert wire_error(missing["result"])["code"] == FORBIDDEN_OR_MISSING.code
    bare = ask(call(3, {"name": "read_note", "arguments": "oops"}, version))
    assert_valid_result(bare["result"], version)
    assert wire_error(bare["result"])["code"] == INVALID_ARGUMENTS.code
    unknown = ask(
        {"jsonrpc": "2.0", "id": 4, "method": "x" * 5000, "params": enveloped({}, version)}
    )
    assert_valid_error(unknown)
    assert unknown["error"]["data"]["code"] == UNKNOWN_METHOD.code


@pytest.mark.parametrize("version", [HANDSHAKE, MODERN])
def test_a_stdio_process_answers_validly_on_both_wire_versions(
    tmp_path: Path, version: str
) -> None:
    db = tmp_path / "stdio.sqlite3"
    process = StdioPeer(
        [sys.executable, "-m", "strictcall", *SERVE_STDIO, "--db", str(db)], DEVNULL
    )
    try:
        if version == HANDSHAKE:
            hello = {"name": "wire-test", "version": "1"}
            params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": hello}
            process.ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
            process.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        exchange(process.ask, version)
    finally:
        assert process.close() == 0


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, str]]:
    db = tmp_path_factory.mktemp("wire-http") / "notes.sqlite3"
    token = create_token(db, "u1")
    running = start_server(db)
    yield running, token
    assert running.stop() == 0


@pytest.mark.parametrize("version", [HANDSHAKE, MODERN])
def test_mcp_over_http_answers_validly_on_both_wire_versions(
    http_server: tuple[RunningServer, str], version: str
) -> None:
    server, token = http_server
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": version,
    }

    def ask(message: dict[str, Any]) -> dict[str, Any]:
        routing = {"Mcp-Method": message["method"]}  # 2026-07-28 mirrors these in headers
        name = message["params"].get("name")
        if isinstance(name, str):
            routing["Mcp-Name"] = name
        response = httpx.post(
            server.base_url + "/mcp",
            json=message,
            headers={**headers, **routing},
            timeout=DEADLINE_S,
        )
        answer: dict[str, Any] = response.json()
        return answer

    exchange(ask, version)
