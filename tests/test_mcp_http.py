"""MCP streamable HTTP at /mcp on a real `strictcall serve`, with raw HTTP: the bearer token
decides the identity exactly as on /rpc, and the strict intake answers hostile bodies before the
SDK sees them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from servers import RunningServer, create_token, recent_audit, start_server
from strictcall import Client as RpcClient
from strictcall.core.jsontext import MAX_SIZE
from strictcall.errors import (
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    REQUEST_TOO_LARGE,
    UNAUTHENTICATED,
    UNKNOWN_METHOD,
    ErrorKind,
)
from strictcall.transports.jsonrpc import ERROR_CODES

DEADLINE_S = 30
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def db(service_db: str) -> str:
    """The module's store: a SQLite file, then a PostgreSQL database (tests/conftest.py)."""
    return service_db


@pytest.fixture(scope="module")
def tokens(db: str) -> dict[str, str]:
    return {who: create_token(db, who) for who in ("u1", "u2")}


@pytest.fixture(scope="module")
def server(db: str, tokens: dict[str, str]) -> Iterator[RunningServer]:
    running = start_server(db)
    yield running
    assert running.stop() == 0


def post(server: RunningServer, body: bytes, token: str | None) -> httpx.Response:
    headers = dict(MCP_HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(server.base_url + "/mcp", content=body, headers=headers, timeout=DEADLINE_S)


def call(request_id: Any, name: str, arguments: dict[str, Any]) -> bytes:
    params = {"name": name, "arguments": arguments}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message).encode()


def assert_refused(response: httpx.Response, status: int, kind: ErrorKind) -> dict[str, Any]:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    reply: dict[str, Any] = response.json()
    assert reply["error"]["code"] == ERROR_CODES[kind.stage][0]
    data = reply["error"]["data"]
    assert data["code"] == kind.code
    assert data["stage"] == kind.stage.value
    assert data["retryable"] is kind.retryable
    return reply


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer sc_not-a-token", "Basic dTE6cA==", "Bearer", "sc_token-without-scheme"],
    ids=["missing", "unknown", "basic", "empty", "no-scheme"],
)
def test_missing_or_unknown_token_is_401_and_never_reaches_a_tool(
    server: RunningServer, tokens: dict[str, str], authorization: str | None
) -> None:
    headers = dict(MCP_HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization
    for method in ("POST", "GET", "DELETE"):
        response = httpx.request(
            method,
            server.base_url + "/mcp",
            content=call(1, "create_note", {"text": "x"}) if method == "POST" else None,
            headers=headers,
            timeout=DEADLINE_S,
        )
        reply = assert_refused(response, 401, UNAUTHENTICATED)
        assert reply["id"] is None
        assert response.headers["www-authenticate"].startswith("Bearer")
    with RpcClient(server.base_url, tokens["u1"]) as client:
        assert client.list_tools() and client.call("count_notes") == 0


def leaves(error: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (possibly nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


def test_the_official_client_sees_a_refused_token_as_an_auth_error(server: RunningServer) -> None:
    refusals: list[MCPError] = []

    async def session() -> None:
        headers = {"Authorization": "Bearer sc_wrong"}
        with anyio.fail_after(DEADLINE_S):
            async with httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http:
                transport = streamable_http_client(server.base_url + "/mcp", http_client=http)
                try:
                    async with Client(transport, mode="legacy") as client:
                        await client.list_tools()
                except* MCPError as group:  # the client's task groups wrap it
                    refusals.extend(e for e in leaves(group) if isinstance(e, MCPError))

    anyio.run(session)
    assert [e.error.code for e in refusals] == [ERROR_CODES[UNAUTHENTICATED.stage][0]]
    assert [e.error.data["code"] for e in refusals] == [UNAUTHENTICATED.code]


HOSTILE_BODIES = [
    (b"{this is not json", INVALID_JSON, None),
    (
        call(1, "read_note", {"note_id": "n2"}).replace(b'"n2"', b'"n2","note_id":"n1"'),
        INVALID_JSON,
        None,
    ),
    (call(2, "read_note", {"note_id": 0}).replace(b"0}", b"NaN}"), INVALID_JSON, None),
    (call(3, "read_note", {"note_id": "X"}).replace(b"X", b"\xff\xfe"), INVALID_JSON, None),
    (b"[" * 5000 + b"]" * 5000, INVALID_JSON, None),
    (b"[]", INVALID_REQUEST, None),
    (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', INVALID_REQUEST, None),
    (call(True, "count_notes", {}), INVALID_REQUEST, None),
    (call(1.5, "count_notes", {}), INVALID_REQUEST, None),
    (call("k", "count_notes", {}).replace(b'"2.0"', b'"1.0"'), INVALID_REQUEST, "k"),
]


@pytest.mark.parametrize(
    ("body", "kind", "kept_id"),
    HOSTILE_BODIES,
    ids=["syntax", "duplicate", "nan", "utf8", "deep", "empty-batch", "batch", "bool-id",
         "float-id", "v1"],
)  # fmt: skip
def test_hostile_bodies_get_a_json_rpc_error_before_the_sdk_reads_them(
    server: RunningServer, tokens: dict[str, str], body: bytes, kind: ErrorKind, kept_id: Any
) -> None:
    reply = assert_refused(post(server, body, tokens["u1"]), 400, kind)
    assert reply["id"] == kept_id
    # the tool, where the body names one readably, is audited with the refusal (issue 14)
    readable = b'"count_notes"' in body and not body.startswith(b"[")
    expected = ("u1", kind.code, "count_notes" if readable else None)
    recent = recent_audit(
        server.db, 1, lambda rs: bool(rs) and (rs[0].identity, rs[0].code, rs[0].tool) == expected
    )
    assert (recent[0].identity, recent[0].code, recent[0].tool) == expected


def test_a_body_over_the_limit_is_413_unread(server: RunningServer, tokens: dict[str, str]) -> None:
    body = call(1, "create_note", {"text": "x" * MAX_SIZE})
    reply = assert_refused(post(server, body, tokens["u2"]), 413, REQUEST_TOO_LARGE)
    assert reply["error"]["data"]["limit"] == MAX_SIZE
    with RpcClient(server.base_url, tokens["u2"]) as client:
        assert client.call("count_notes") == 0


def test_a_plain_post_is_answered_with_json_and_a_structured_result(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    response = post(server, call("c-1", "list_notes", {}), tokens["u2"])
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    reply = response.json()
    assert reply["id"] == "c-1"
    assert reply["result"]["structuredContent"] == {"result": []}
    assert reply["result"]["content"] == [{"type": "text", "text": "[]"}]


def test_mcp_and_json_rpc_serve_one_identity_the_same_notes(
    server: RunningServer, tokens: dict[str, str], db: str
) -> None:
    with RpcClient(server.base_url, tokens["u1"]) as client:
        note = client.call("create_note", {"text": "from /rpc"})
        listed = client.list_tools()
    reply = post(server, call(7, "read_note", {"note_id": note["note_id"]}), tokens["u1"]).json()
    assert reply["result"]["structuredContent"] == note
    tools = post(server, b'{"jsonrpc":"2.0","id":8,"method":"tools/list"}', tokens["u1"]).json()
    by_name = {tool["name"]: tool for tool in tools["result"]["tools"]}
    for tool in listed:
        assert by_name[tool["name"]]["inputSchema"] == tool["inputSchema"]
    recent = recent_audit(
        db, 20, lambda rs: any(r.tool == "read_note" and r.identity == "u1" for r in rs)
    )
    read = [r for r in recent if r.tool == "read_note" and r.identity == "u1"]
    assert read and read[0].outcome == "ok" and read[0].call_id is not None
    assert read[0].call_id.startswith("mcp-http-") and read[0].call_id.endswith(":7")


def test_get_is_405_post_only_and_never_an_event_stream(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {tokens['u1']}"}
    response = httpx.get(server.base_url + "/mcp", headers=headers, timeout=DEADLINE_S)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert not response.headers.get("content-type", "").startswith("text/event-stream")


def test_a_100000_character_unknown_method_gets_a_short_answer_and_is_audited(
    server: RunningServer, tokens: dict[str, str], db: str
) -> None:
    method = "q" * 100_000
    body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": method}).encode()
    response = post(server, body, tokens["u2"])
    reply = assert_refused(response, 200, UNKNOWN_METHOD)
    assert reply["id"] == 5
    assert len(response.content) < 300
    recent = recent_audit(
        db, 10, lambda rs: any(r.code == UNKNOWN_METHOD.code and r.identity == "u2" for r in rs)
    )
    assert any(r.code == UNKNOWN_METHOD.code and r.identity == "u2" for r in recent)
    assert method not in repr(recent)


def test_params_by_position_are_invalid_params(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    body = b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":["count_notes"]}'
    reply = assert_refused(post(server, body, tokens["u2"]), 400, INVALID_ARGUMENTS)
    assert reply["error"]["code"] == -32602 and reply["id"] == 6
    notification = b'{"jsonrpc":"2.0","method":"notifications/x","params":[1]}'
    accepted = post(server, notification, tokens["u2"])
    assert accepted.status_code == 202 and accepted.content == b""


def test_sigterm_with_a_get_open_shuts_down_cleanly_without_an_error_line(
    tmp_path: Path,
) -> None:
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "u1")
    running = start_server(db)
    headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {token}"}
    with (
        httpx.Client(base_url=running.base_url, headers=headers, timeout=DEADLINE_S) as http,
        http.stream("GET", "/mcp") as response,  # held open while the server is stopped
    ):
        status = response.status_code
        exit_status = running.stop()
    assert (status, exit_status) == (405, 0)
    output = running.output_after_exit()
    assert not [line for line in output if "ERROR" in line or "Traceback" in line], output
