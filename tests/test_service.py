"""The notes service end to end: a real `strictcall serve` on 127.0.0.1, called with Client,
httpx and the operator's commands."""

from __future__ import annotations

import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from servers import RunningServer, create_token, start_server, strictcall
from strictcall import Client, ToolError, UncorrelatedError
from strictcall.client.reply import interpret_tool_reply
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    IDEMPOTENCY_CONFLICT,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    REQUEST_TOO_LARGE,
    UNAUTHENTICATED,
    UNKNOWN_METHOD,
    UNKNOWN_TOOL,
)
from strictcall.services.notes import MAX_NOTE_LENGTH
from strictcall.transports.jsonrpc import ERROR_CODES


@pytest.fixture(scope="module")
def db(service_db: str) -> str:
    """The module's store: a SQLite file, then a PostgreSQL database (tests/conftest.py)."""
    return service_db


@pytest.fixture(scope="module")
def tokens(db: str) -> dict[str, str]:
    return {who: create_token(db, who) for who in ("u1", "u2", "u3")}


@pytest.fixture(scope="module")
def server(db: str, tokens: dict[str, str]) -> Iterator[RunningServer]:
    running = start_server(db)
    yield running
    assert running.stop() == 0


def client_for(server: RunningServer, token: str) -> Client:
    return Client(server.base_url, token)


def post(server: RunningServer, body: bytes, token: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(server.base_url + "/rpc", content=body, headers=headers, timeout=10)


def test_healthz_answers_ok(server: RunningServer) -> None:
    response = httpx.get(server.base_url + "/healthz", timeout=10)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_every_tool_end_to_end_with_falsy_values_as_successes(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    with client_for(server, tokens["u3"]) as client:
        count = client.call("count_notes")
        assert count == 0 and type(count) is int
        listed = client.call("list_notes")
        assert listed == [] and type(listed) is list
        empty = client.call("create_note", {"text": ""})
        assert empty["text"] == "" and isinstance(empty["note_id"], str)
        assert client.call("read_note", {"note_id": empty["note_id"]}) == empty
        second = client.call("create_note", {"text": "第二条"})
        assert client.call("list_notes") == [empty, second]
        assert client.call("count_notes") == 2
        assert client.call("delete_note", {"note_id": empty["note_id"]}) is None
        assert client.call("list_notes") == [second]
        assert client.call("delete_note", {"note_id": second["note_id"]}) is None
        assert client.call("count_notes") == 0


def test_another_owners_note_is_refused_exactly_like_a_missing_one(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    with client_for(server, tokens["u1"]) as owner, client_for(server, tokens["u2"]) as other:
        note = owner.call("create_note", {"text": "private"})
        answers = {}
        for tool in ("read_note", "delete_note"):
            for label, note_id in (("other", note["note_id"]), ("missing", "n0000000000000000")):
                request = {
                    "jsonrpc": "2.0",
                    "id": "same-id",
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": {"note_id": note_id}},
                }
                response = post(server, orjson.dumps(request), tokens["u2"])
                answers[(tool, label)] = (response.status_code, response.content)
            assert answers[(tool, "other")] == answers[(tool, "missing")]
            with pytest.raises(ToolError) as refused:
                other.call(tool, {"note_id": note["note_id"]})
            assert refused.value.code == FORBIDDEN_OR_MISSING.code
            assert refused.value.stage == FORBIDDEN_OR_MISSING.stage.value
            assert refused.value.error["code"] == ERROR_CODES[FORBIDDEN_OR_MISSING.stage][0]
        assert owner.call("read_note", {"note_id": note["note_id"]}) == note
        assert b"private" not in b"".join(content for _, content in answers.values())


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer sc_not-a-token", "Basic dTE6cA==", "Bearer", "sc_token-without-scheme"],
    ids=["missing", "unknown", "basic", "empty", "no-scheme"],
)
def test_missing_or_unknown_token_is_401_and_never_reaches_a_tool(
    server: RunningServer, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "create_note", "arguments": {"text": "x"}},
        }
    )
    response = httpx.post(server.base_url + "/rpc", content=body, headers=headers, timeout=10)
    assert response.status_code == 401
    reply = response.json()
    assert reply["id"] is None
    assert reply["error"]["data"]["code"] == UNAUTHENTICATED.code
    assert reply["error"]["code"] == ERROR_CODES[UNAUTHENTICATED.stage][0]


def test_client_surfaces_a_refused_token_as_an_uncorrelated_error(server: RunningServer) -> None:
    with client_for(server, "sc_wrong") as client, pytest.raises(UncorrelatedError) as refused:
        client.call("count_notes")
    assert refused.value.code == UNAUTHENTICATED.code


def test_unparsable_text_is_parse_error_with_id_null(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    for body in (b'{"jsonrpc":', b'{"a":1,"a":2}', b"NaN", b"\xff\xfe"):
        reply = post(server, body, tokens["u1"]).json()
        assert reply["id"] is None
        assert reply["error"]["code"] == -32700
        assert reply["error"]["data"]["code"] == INVALID_JSON.code


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": True, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "extra": 1},
        5,
    ],
    ids=[
        "v1",
        "no-jsonrpc",
        "bool-id",
        "float-id",
        "null-id",
        "int-method",
        "extra-member",
        "number",
    ],
)
def test_malformed_envelope_is_invalid_request(
    server: RunningServer, tokens: dict[str, str], message: object
) -> None:
    reply = post(server, orjson.dumps(message), tokens["u1"]).json()
    assert reply["error"]["code"] == -32600
    assert reply["error"]["data"]["code"] == INVALID_REQUEST.code


def test_valid_id_is_kept_when_the_envelope_is_otherwise_invalid(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    reply = post(
        server, b'{"jsonrpc":"2.0","id":"k","method":"tools/call","params":3}', tokens["u1"]
    ).json()
    assert reply["id"] == "k"


def test_unknown_method_and_unknown_tool_are_route_errors(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    reply = post(server, b'{"jsonrpc":"2.0","id":1,"method":"nope"}', tokens["u1"]).json()
    assert reply["error"]["data"]["code"] == UNKNOWN_METHOD.code
    with client_for(server, tokens["u1"]) as client, pytest.raises(ToolError) as refused:
        client.call("drop_tables")
    assert refused.value.code == UNKNOWN_TOOL.code
    assert refused.value.error["code"] == ERROR_CODES[UNKNOWN_TOOL.stage][0]


def test_argument_error_carries_a_pointer_and_never_the_value(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    with client_for(server, tokens["u1"]) as client, pytest.raises(ToolError) as refused:
        client.call("create_note", {"text": "SECRET-VALUE", "admin": "SECRET-VALUE-2"})
    data = refused.value.data
    assert data is not None
    assert data["code"] == INVALID_ARGUMENTS.code and data["pointer"] == "/arguments/admin"
    assert "SECRET-VALUE" not in orjson.dumps(refused.value.error).decode()


def test_note_longer_than_the_documented_maximum_is_refused(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    with client_for(server, tokens["u1"]) as client:
        assert (
            client.call("create_note", {"text": "x" * MAX_NOTE_LENGTH})["text"]
            == "x" * MAX_NOTE_LENGTH
        )
        with pytest.raises(ToolError) as refused:
            client.call("create_note", {"text": "x" * (MAX_NOTE_LENGTH + 1)})
    assert refused.value.data is not None and refused.value.data["reason"] == "max_length"


def test_batch_answers_are_matched_by_id(server: RunningServer, tokens: dict[str, str]) -> None:
    with client_for(server, tokens["u2"]) as client:
        batch = client.call_many(
            [("count_notes", None), ("read_note", {"note_id": "n-missing"}), ("list_notes", {})]
        )
        assert [o.status for o in batch.outcomes] == ["ok", "error", "ok"]
        assert type(batch.outcomes[0].value) is int
        assert batch.uncorrelated == []


def test_batch_rules_of_the_spec(server: RunningServer, tokens: dict[str, str]) -> None:
    empty = post(server, b"[]", tokens["u1"])
    assert empty.status_code == 200
    assert empty.json()["error"]["code"] == -32600 and empty.json()["id"] is None
    notifications = b'[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"count_notes"}}]'
    nothing = post(server, notifications, tokens["u1"])
    assert nothing.status_code == 204 and nothing.content == b""
    mixed = post(
        server,
        b'[1,{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"count_notes"}},'
        b'{"jsonrpc":"2.0","method":"tools/list"}]',
        tokens["u1"],
    ).json()
    assert len(mixed) == 2
    by_id = {reply["id"]: reply for reply in mixed}
    assert by_id[None]["error"]["code"] == -32600
    assert interpret_tool_reply(by_id["b"], "b")["status"] == "ok"


def test_notification_runs_but_gets_no_answer(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    owner = create_token(server.db, "notifier")
    with client_for(server, owner) as client:
        client.notify("create_note", {"text": "fire and forget"})
        assert client.call("count_notes") == 1


def test_idempotent_retries_return_the_first_answer(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    owner = create_token(server.db, "retrier")
    with client_for(server, owner) as client:
        first = client.call("create_note", {"text": "once"}, call_id="w-1")
        assert client.call("create_note", {"text": "once"}, call_id="w-1") == first
        assert client.call("count_notes") == 1
        with pytest.raises(ToolError) as conflict:
            client.call("create_note", {"text": "other"}, call_id="w-1")
        assert conflict.value.code == IDEMPOTENCY_CONFLICT.code
        assert conflict.value.retryable is False
        # 7 and "7" are different call ids
        a = client.call("create_note", {"text": "seven"}, call_id=7)
        b = client.call("create_note", {"text": "seven"}, call_id="7")
        assert a != b
        assert client.call("delete_note", {"note_id": first["note_id"]}, call_id="d-1") is None
        assert client.call("delete_note", {"note_id": first["note_id"]}, call_id="d-1") is None
        with pytest.raises(ToolError) as gone:
            client.call("delete_note", {"note_id": first["note_id"]}, call_id="d-2")
        assert gone.value.code == FORBIDDEN_OR_MISSING.code
        assert client.call("count_notes") == 2


def test_tools_list_gives_mcp_definitions(server: RunningServer, tokens: dict[str, str]) -> None:
    with client_for(server, tokens["u1"]) as client:
        tools = client.list_tools()
    names = {tool["name"] for tool in tools}
    assert names == {"read_note", "list_notes", "count_notes", "create_note", "delete_note"}
    for tool in tools:
        assert set(tool) == {"name", "description", "inputSchema", "outputSchema"}


def test_data_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "restart.sqlite3"
    token = create_token(db, "u1")
    first = start_server(db)
    try:
        with Client(first.base_url, token) as client:
            note = client.call("create_note", {"text": "still here"}, call_id="c-1")
    finally:
        assert first.stop(signal.SIGINT) == 0
    second = start_server(db)
    try:
        with Client(second.base_url, token) as client:
            assert client.call("read_note", {"note_id": note["note_id"]}) == note
            assert client.call("create_note", {"text": "still here"}, call_id="c-1") == note
            assert client.call("count_notes") == 1
    finally:
        assert second.stop() == 0


def test_operator_commands_add_list_and_audit(tmp_path: Path) -> None:
    db = str(tmp_path / "ops.sqlite3")
    added = strictcall("notes", "add", "--owner", "u9", "--text", "运维", "--db", db)
    assert added.returncode == 0
    note_id = added.stdout.strip()
    listed = strictcall("notes", "list", "--owner", "u9", "--db", db)
    assert listed.returncode == 0 and note_id in listed.stdout and "运维" in listed.stdout
    audit = strictcall("audit", "--db", db)
    assert audit.returncode == 0


def test_demo_run_prints_tokens_and_a_working_curl_line(tmp_path: Path) -> None:
    running = start_server(tmp_path / "demo.sqlite3", "--demo")
    try:
        curl_line = next(line for line in running.lines if line.startswith("try (u1)"))
        command = shlex.split(curl_line.split(":", 1)[1])
        assert command[0] == "curl"
        url = command[2]
        headers = dict(
            command[i + 1].split(": ", 1) for i, part in enumerate(command) if part == "-H"
        )
        body = command[command.index("-d") + 1]
        response = httpx.post(url, content=body.encode(), headers=headers, timeout=10)
        reply = response.json()
        assert interpret_tool_reply(reply, 1)["status"] == "ok"
        assert reply["result"]["text"] == "退款窗口为 7 天。"
    finally:
        assert running.stop() == 0


def test_server_refuses_a_store_it_cannot_open(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "strictcall",
            "serve",
            "--port",
            "0",
            "--db",
            str(tmp_path / "no" / "db"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr


def test_a_body_declared_too_long_is_refused_before_it_is_sent(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    host, port = server.base_url.removeprefix("http://").split(":")
    request = (
        "POST /rpc HTTP/1.1\r\n"
        f"Host: {host}\r\nAuthorization: Bearer {tokens['u1']}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request.encode())
        answer = b""  # answered although not one byte of the body was sent
        while b"\r\n\r\n" not in answer or not _complete(answer):
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 ")
    assert orjson.loads(body)["error"]["data"]["code"] == REQUEST_TOO_LARGE.code


def test_pipelined_requests_on_one_connection_are_answered_whole_and_in_order(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    """Responses are written one write each (strictcall.server._uvicorn): several requests sent at
    once on one connection, the last asking to close it, get every answer whole, in order."""
    host, port = server.base_url.removeprefix("http://").split(":")
    ids = list(range(1, 6))
    requests = b""
    for request_id in ids:
        body = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": "count_notes", "arguments": {}},
            }
        )
        close = "Connection: close\r\n" if request_id == ids[-1] else ""
        requests += (
            f"POST /rpc HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {tokens['u1']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{close}\r\n"
        ).encode() + body
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(requests)
        received = b""
        while chunk := sock.recv(65536):  # until the server closes, as the last one asked
            received += chunk
    answered = []
    while received:
        head, rest = received.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 200 ")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        answered.append(orjson.loads(rest[:length])["id"])
        received = rest[length:]
    assert answered == ids


def _complete(answer: bytes) -> bool:
    head, body = answer.split(b"\r\n\r\n", 1)
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return len(body) >= int(value)
    return False


def test_a_server_started_with_stdout_closed_still_serves(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port: with stdout closed, nothing can say which
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "strictcall", "serve", "--port", str(port)]
    command += ["--db", str(tmp_path / "closed.sqlite3")]
    process = subprocess.Popen(
        ["sh", "-c", 'exec "$@" >&-', "sh", *command], stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 20
        answer = None
        while answer is None and time.monotonic() < deadline and process.poll() is None:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            except httpx.TransportError:
                time.sleep(0.05)
        assert answer is not None and answer.status_code == 200
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0
    assert "Traceback" not in stderr
