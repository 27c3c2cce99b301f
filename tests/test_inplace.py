"""POST /rpc answered in place (`strictcall.server._uvicorn`) against the same request
run through the app: a real `strictcall serve`, raw HTTP/1.1 on a socket, so that how the
bytes arrive (with the headers or after them, pipelined, closing) is the test's to choose."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from servers import RunningServer, create_token, recent_audit, start_server
from strictcall import errors

DEADLINE_S = 10.0


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inplace") / "notes.sqlite3"


@pytest.fixture(scope="module")
def token(db: Path) -> str:
    return create_token(db, "u1")


@pytest.fixture(scope="module")
def server(db: Path, token: str) -> Iterator[RunningServer]:
    running = start_server(db)
    yield running
    assert running.stop() == 0


def connect(server: RunningServer) -> socket.socket:
    url = urlsplit(server.base_url)
    sock = socket.create_connection((url.hostname, url.port), timeout=DEADLINE_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def request(token: str, body: bytes, *, extra: bytes = b"", version: bytes = b"1.1") -> bytes:
    return (
        b"POST /rpc HTTP/" + version + b"\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\n" + extra
        + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )  # fmt: skip


class Reader:
    """HTTP/1.1 responses read off a socket, one at a time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            assert self._fill(), "the connection closed before a response"
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers["content-length"])
        while len(self.buffer) < length:
            assert self._fill(), "the connection closed inside a body"
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(status_line.split()[1]), headers, body

    def closed(self) -> bool:
        """Whether the server closed the connection (nothing more arrives)."""
        return not self.buffer and not self._fill()


def call(name: str, arguments: dict[str, Any], request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def text(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_a_body_with_its_headers_and_one_after_them_get_the_same_answer(
    server: RunningServer, token: str
) -> None:
    body = text(call("count_notes", {}, 7))
    refused = text(call("read_note", {"note_id": 5}, 8))
    answers = []
    for payload in (body, refused):
        with connect(server) as sock:
            reader = Reader(sock)
            sock.sendall(request(token, payload))  # in one piece
            whole = reader.response()
            head, _, rest = request(token, payload).partition(b"\r\n\r\n")
            sock.sendall(head + b"\r\n\r\n")
            sock.sendall(rest)  # the body after the headers
            split = reader.response()
            answers.append((whole, split))
    for whole, split in answers:
        assert whole[0] == split[0] == 200
        assert whole[2] == split[2]
    counted = json.loads(answers[0][0][2])
    assert counted == {"jsonrpc": "2.0", "id": 7, "result": 0}
    data = json.loads(answers[1][0][2])["error"]["data"]
    assert data["code"] == errors.INVALID_ARGUMENTS.code


def test_pipelined_requests_are_answered_in_order_with_an_awaited_write_among_them(
    server: RunningServer, token: str
) -> None:
    created = call("create_note", {"text": "pipelined"}, 2)  # a write: awaited, not in place
    bodies = [call("count_notes", {}, 1), created, call("count_notes", {}, 3)]
    with connect(server) as sock:
        reader = Reader(sock)
        sock.sendall(b"".join(request(token, text(body)) for body in bodies))
        replies = [json.loads(reader.response()[2]) for _ in bodies]
    assert [reply["id"] for reply in replies] == [1, 2, 3]
    before, made, after = (reply["result"] for reply in replies)
    assert made["text"] == "pipelined"
    assert after == before + 1


def test_a_batch_with_a_write_is_answered_whole_and_audited_once_per_call(
    server: RunningServer, token: str, db: Path
) -> None:
    batch = [call("create_note", {"text": "batched"}, 11), call("read_note", {"note_id": 5}, 12)]
    with connect(server) as sock:
        reader = Reader(sock)
        sock.sendall(request(token, text(batch)))
        status, _, body = reader.response()
    assert status == 200
    replies = {reply["id"]: reply for reply in json.loads(body)}
    assert replies[11]["result"]["text"] == "batched"
    assert replies[12]["error"]["data"]["code"] == errors.INVALID_ARGUMENTS.code

    def ids(records: list[Any]) -> list[object]:
        return [record.call_id for record in records]

    both = recent_audit(db, 50, lambda records: {"11", "12"} <= set(map(str, ids(records))))
    call_ids = [str(call_id) for call_id in ids(both)]
    assert call_ids.count("11") == 1 and call_ids.count("12") == 1


@pytest.mark.parametrize(
    ("extra", "version"), [(b"Connection: close\r\n", b"1.1"), (b"", b"1.0")], ids=["close", "1.0"]
)
def test_a_connection_that_asks_to_close_is_answered_then_closed(
    server: RunningServer, token: str, extra: bytes, version: bytes
) -> None:
    with connect(server) as sock:
        reader = Reader(sock)
        sock.sendall(request(token, text(call("count_notes", {}, 4)), extra=extra, version=version))
        status, headers, body = reader.response()
        assert status == 200 and headers["connection"] == "close"
        assert json.loads(body)["id"] == 4
        assert reader.closed()


def test_refusals_in_place_carry_their_status_and_headers(server: RunningServer) -> None:
    with connect(server) as sock:
        reader = Reader(sock)
        sock.sendall(request("not-a-token", text(call("count_notes", {}, 1))))
        status, headers, body = reader.response()
    assert status == 401
    assert headers["www-authenticate"] == 'Bearer realm="strictcall"'
    assert json.loads(body)["error"]["data"]["code"] == errors.UNAUTHENTICATED.code


@pytest.mark.parametrize(
    ("who", "origin", "status", "code"),
    [
        ("unknown", None, 401, errors.UNAUTHENTICATED.code),
        ("known", "http://evil.example", 403, errors.FORBIDDEN_ORIGIN.code),
        ("unknown", "http://evil.example", 403, errors.FORBIDDEN_ORIGIN.code),
    ],
    ids=["no-token", "foreign-origin", "foreign-origin-and-no-token"],
)
def test_a_refusal_is_the_same_in_place_and_awaited(
    server: RunningServer,
    token: str,
    db: Path,
    who: str,
    origin: str | None,
    status: int,
    code: str,
) -> None:
    """A body with its headers is answered in place; one after them, by the app: admission
    refuses both alike (status, headers, body) and audits each once."""
    presented = token if who == "known" else "sc_unknown"
    extra = b"" if origin is None else b"Origin: " + origin.encode() + b"\r\n"
    payload = request(presented, text(call("count_notes", {}, 9)), extra=extra)
    head, _, rest = payload.partition(b"\r\n\r\n")
    started = time.time()  # the server's records carry this machine's clock
    answers = []
    for pieces in ([payload], [head + b"\r\n\r\n", rest]):  # in place, then awaited
        with connect(server) as sock:
            reader = Reader(sock)
            for piece in pieces:
                sock.sendall(piece)
            answers.append(reader.response())
    in_place, awaited = answers
    assert in_place[0] == status
    assert in_place == awaited
    assert json.loads(in_place[2])["error"]["data"]["code"] == code

    def mine(records: list[Any]) -> list[tuple[str, str | None]]:
        return [(r.code, r.identity) for r in records if r.at >= started]

    audited = recent_audit(db, 50, lambda records: len(mine(records)) >= 2)
    assert mine(audited) == [(code, None), (code, None)]


MCP_ACCEPT = b"Accept: application/json, text/event-stream\r\n"


def mcp_request(token: str, body: bytes, extra: bytes = b"") -> bytes:
    return request(token, body, extra=MCP_ACCEPT + extra).replace(b"POST /rpc ", b"POST /mcp ", 1)


@pytest.mark.parametrize(
    ("payload", "extra"),
    [
        (text(call("count_notes", {}, 7)), b""),
        (text(call("read_note", {"note_id": 5}, 8)), b""),
        (text({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}), b""),
        (
            text(
                {
                    **call("count_notes", {}, 10),
                    "params": {
                        "name": "count_notes",
                        "arguments": {},
                        "_meta": {
                            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                            "io.modelcontextprotocol/clientCapabilities": {},
                        },
                    },
                }
            ),
            b"Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
            b"Mcp-Name: count_notes\r\n",
        ),
    ],
    ids=["call", "refused call", "tools/list", "2026-07-28 call"],
)
def test_mcp_with_its_body_in_place_and_after_its_headers_get_the_same_answer(
    server: RunningServer, token: str, payload: bytes, extra: bytes
) -> None:
    with connect(server) as sock:
        reader = Reader(sock)
        sock.sendall(mcp_request(token, payload, extra))  # in one piece: answered in place
        whole = reader.response()
        head, _, rest = mcp_request(token, payload, extra).partition(b"\r\n\r\n")
        sock.sendall(head + b"\r\n\r\n")
        sock.sendall(rest)  # the body after the headers: through the app
        split = reader.response()
    assert whole[0] == split[0] == 200
    assert whole[1]["content-type"] == split[1]["content-type"] == "application/json"
    mine, theirs = json.loads(whole[2]), json.loads(split[2])
    assert mine == theirs
    assert "result" in mine


def test_an_awaited_mcp_call_in_place_and_through_the_app_get_the_same_answer(
    server: RunningServer, token: str
) -> None:
    """A write's tool is awaited: on /mcp, with its body in the headers' read, it is answered
    in place once awaited (a `Later`), and a request sent behind it on the connection waits
    for it; with its body after its headers it runs through the app. Same answers."""
    first = call("create_note", {"text": "awaited in place"}, 2)
    second = call("create_note", {"text": "awaited through the app"}, 3)
    with connect(server) as sock:
        reader = Reader(sock)
        sock.sendall(mcp_request(token, text(call("count_notes", {}, 1))))
        before = reader.response()
        sock.sendall(mcp_request(token, text(first)) + mcp_request(token, text(second)))
        in_place, behind = reader.response(), reader.response()
        head, _, rest = mcp_request(token, text(second)).partition(b"\r\n\r\n")
        sock.sendall(head + b"\r\n\r\n")
        sock.sendall(rest)  # the body after the headers: through the app (a note of its own)
        split = reader.response()
        sock.sendall(mcp_request(token, text(call("count_notes", {}, 4))))
        after = reader.response()
    answers = [before, in_place, behind, split, after]
    assert [status for status, _, _ in answers] == [200] * 5
    assert {headers["content-type"] for _, headers, _ in answers} == {"application/json"}
    replies = [json.loads(body) for _, _, body in answers]
    assert [reply["id"] for reply in replies] == [1, 2, 3, 3, 4]
    made = [reply["result"]["structuredContent"] for reply in replies[1:4]]
    assert [note["text"] for note in made] == [
        "awaited in place",
        "awaited through the app",
        "awaited through the app",
    ]
    counted = [reply["result"]["structuredContent"]["result"] for reply in (replies[0], replies[4])]
    assert counted[1] == counted[0] + 3  # three writes (MCP request ids are per connection)
