"""`strictcall serve --mcp-stdio` as a raw process: hostile lines on its stdin, answers read from
its stdout with a deadline. Every line gets an answer, the process keeps serving, and stdout
carries nothing but JSON-RPC.

The first 19 probes are those of the shared research on MCP servers under hostile stdio
(research/mcp-hostile-stdio.md), where the SDK's MCPServer and FastMCP left 10 unanswered."""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from mcp_results import wire_error
from servers import strictcall
from stdio_peer import DEADLINE_S, StdioPeer
from strictcall.core.jsontext import MAX_SIZE
from strictcall.errors import (
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    REQUEST_TOO_LARGE,
    UNKNOWN_METHOD,
    UNKNOWN_TOOL,
    ErrorKind,
)
from strictcall.storage import AuditRecord
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.jsonrpc import ERROR_CODES


def serve_args(identity: str, db: Path) -> list[str]:
    return ["serve", "--mcp-stdio", "--identity", identity, "--db", str(db)]


def stdio_server(db: Path, identity: str, stderr: IO[bytes]) -> StdioPeer:
    """A `strictcall serve --mcp-stdio` process for `identity` on `db`."""
    return StdioPeer([sys.executable, "-m", "strictcall", *serve_args(identity, db)], stderr)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-stdio") / "notes.sqlite3"


@pytest.fixture
def stderr_log(tmp_path: Path) -> Iterator[IO[bytes]]:
    with (tmp_path / "stderr.log").open("wb") as log:
        yield log


@pytest.fixture(scope="module")
def server(db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioPeer]:
    with (tmp_path_factory.mktemp("mcp-stdio-log") / "stderr.log").open("wb") as log:
        running = stdio_server(db, "u1", log)
        running.initialize()
        yield running
        assert running.close() == 0


def call_line(request_id: Any, params: Any) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    ).encode()


def read_note(request_id: int, arguments: Any) -> bytes:
    return call_line(request_id, {"name": "read_note", "arguments": arguments})


@dataclass(frozen=True)
class Refusal:
    """A JSON-RPC error answer: its strictcall kind (or the SDK's own code), and its id."""

    kind: ErrorKind | None
    request_id: str | int | None
    sdk_code: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ToolError:
    """A tools/call result with isError: its kind and where the error points."""

    kind: ErrorKind
    request_id: int
    pointer: str | None = None
    reason: str | None = None


HUGE = MAX_SIZE * 16

PROBES: list[tuple[str, bytes, Refusal | ToolError]] = [
    ("01-not-json", b"{this is not json", Refusal(INVALID_JSON, None, reason="syntax")),
    ("02-empty-array", b"[]", Refusal(INVALID_REQUEST, None)),
    ("03-array", b"[1]", Refusal(INVALID_REQUEST, None)),
    ("04-string", b'"just a string"', Refusal(INVALID_REQUEST, None)),
    (
        "05-jsonrpc-1.0",
        b'{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"read_note",'
        b'"arguments":{"note_id":"n1"}}}',
        Refusal(INVALID_REQUEST, 7),
    ),
    (
        "06-nan",
        read_note(8, {"note_id": 0}).replace(b"0}", b"NaN}"),
        Refusal(INVALID_JSON, None, reason="syntax"),
    ),
    (
        "07-duplicate-name",
        read_note(9, {"note_id": "n2"}).replace(b'"n2"', b'"n2","note_id":"n1"'),
        Refusal(INVALID_JSON, None, reason="duplicate_member"),
    ),
    (
        "08-20000-digits",
        read_note(10, {"note_id": 0}).replace(b"0}", b"1" * 20000 + b"}"),
        Refusal(INVALID_JSON, None, reason="number_out_of_range"),
    ),
    (
        "09-100000-deep",
        b"[" * 100_000 + b"]" * 100_000,
        Refusal(INVALID_JSON, None, reason="too_deep"),
    ),
    (
        "10-lone-surrogate",
        read_note(12, {"note_id": "X"}).replace(b"X", b"\\ud800"),
        Refusal(INVALID_JSON, None),
    ),
    (
        "11-extra-argument",
        read_note(13, {"note_id": "n1", "admin": True}),
        ToolError(INVALID_ARGUMENTS, 13, "/arguments/admin", "unexpected_member"),
    ),
    (
        "12-bool-for-string",
        read_note(14, {"note_id": True}),
        ToolError(INVALID_ARGUMENTS, 14, "/arguments/note_id", "type"),
    ),
    (
        "13-empty-id",
        read_note(15, {"note_id": ""}),
        ToolError(INVALID_ARGUMENTS, 15, "/arguments/note_id", "min_length"),
    ),
    (
        "14-unknown-tool",
        call_line(16, {"name": "drop_tables", "arguments": {}}),
        ToolError(UNKNOWN_TOOL, 16),
    ),
    (
        "15-arguments-string",
        read_note(17, "oops"),
        ToolError(INVALID_ARGUMENTS, 17, "/arguments", "type"),
    ),
    (
        "16-16-mib-line",
        read_note(18, {"note_id": "X"}).replace(b"X", b"x" * HUGE),
        Refusal(REQUEST_TOO_LARGE, None, reason="too_large"),
    ),
    (
        "17-invalid-utf8",
        read_note(19, {"note_id": "X"}).replace(b"X", b"\xff\xfe"),
        Refusal(INVALID_JSON, None),
    ),
    (
        "18a-bool-id",
        read_note(20, {"note_id": "n1"}).replace(b"20", b"true"),
        Refusal(INVALID_REQUEST, None),
    ),
    (
        "18b-float-id",
        read_note(21, {"note_id": "n1"}).replace(b"21", b"1.5"),
        Refusal(INVALID_REQUEST, None),
    ),
    # beyond the research's probes
    (
        "arguments-null",
        read_note(22, None),
        ToolError(INVALID_ARGUMENTS, 22, "/arguments", "type"),
    ),
    (
        "extra-params-member",
        call_line(23, {"name": "count_notes", "arguments": {}, "admin": True}),
        ToolError(INVALID_ARGUMENTS, 23, "/admin", "unexpected_member"),
    ),
    ("null-id", read_note(24, {}).replace(b"24", b"null"), Refusal(INVALID_REQUEST, None)),
    ("string-id-kept", b'{"jsonrpc":"2.0","id":"k","method":5}', Refusal(INVALID_REQUEST, "k")),
    (
        "params-by-position",
        b'{"jsonrpc":"2.0","id":27,"method":"tools/list","params":[]}',
        Refusal(INVALID_ARGUMENTS, 27),
    ),
    ("batch", b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', Refusal(INVALID_REQUEST, None)),
    (
        "unknown-method",
        b'{"jsonrpc":"2.0","id":25,"method":"nope"}',
        Refusal(UNKNOWN_METHOD, 25),
    ),
    (
        "trailing-data",
        b'{"jsonrpc":"2.0","id":26,"method":"tools/list"} {}',
        Refusal(INVALID_JSON, None),
    ),
]


@pytest.mark.parametrize(("line", "expected"), [p[1:] for p in PROBES], ids=[p[0] for p in PROBES])
def test_every_hostile_line_is_answered_and_the_server_keeps_serving(
    server: StdioPeer, line: bytes, expected: Refusal | ToolError
) -> None:
    server.send(line)
    answer = server.message()
    if isinstance(expected, Refusal):
        assert "result" not in answer
        assert answer["id"] == expected.request_id
        assert type(answer["id"]) is type(expected.request_id)
        error = answer["error"]
        if expected.kind is None:
            assert error["code"] == expected.sdk_code
        else:
            assert error["code"] == ERROR_CODES[expected.kind.stage][0]
            data = error["data"]
            assert data["code"] == expected.kind.code
            assert data["stage"] == expected.kind.stage.value
            assert data["retryable"] is expected.kind.retryable
            if expected.reason is not None:
                assert data["reason"] == expected.reason
    else:
        assert answer["id"] == expected.request_id
        result = answer["result"]
        error = wire_error(result)
        assert error["code"] == expected.kind.code
        assert error["stage"] == expected.kind.stage.value
        if expected.pointer is not None:
            assert error["pointer"] == expected.pointer
        if expected.reason is not None:
            assert error["reason"] == expected.reason
    survived = server.call("count_notes", {})
    assert survived["structuredContent"] == {"result": 0}


def test_a_too_large_line_says_the_limit_and_nothing_of_it_reaches_a_tool(
    server: StdioPeer, db: Path
) -> None:
    server.send(call_line(1, {"name": "create_note", "arguments": {"text": "x" * MAX_SIZE}}))
    answer = server.message()
    assert answer["id"] is None
    assert answer["error"]["data"]["code"] == REQUEST_TOO_LARGE.code
    assert answer["error"]["data"]["limit"] == MAX_SIZE
    assert server.call("count_notes", {})["structuredContent"] == {"result": 0}


def audited(db: Path, code: str) -> list[AuditRecord]:
    """The recent audit records, once one has `code` (the server writes its audit records in
    batches, within a fraction of a second): polled until the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        store = SQLiteStore(str(db))
        try:
            recent = store.recent_calls(50)
        finally:
            store.close()
        if any(record.code == code for record in recent) or time.monotonic() > deadline:
            return recent
        time.sleep(0.02)


def test_refused_lines_are_audited_without_their_text(server: StdioPeer, db: Path) -> None:
    server.send(b'{"secret-value": ')
    assert server.message()["error"]["data"]["code"] == INVALID_JSON.code
    recent = audited(db, INVALID_JSON.code)
    refused = [r for r in recent if r.code == INVALID_JSON.code]
    assert refused and all(r.identity == "u1" and r.stage == "parse" for r in refused)
    assert "secret-value" not in repr(recent)


def test_a_100000_character_unknown_method_gets_a_short_answer_and_is_audited(
    server: StdioPeer, db: Path
) -> None:
    method = "m" * 100_000
    answer = server.request(method)
    assert answer["error"]["code"] == ERROR_CODES[UNKNOWN_METHOD.stage][0]
    assert answer["error"]["data"]["code"] == UNKNOWN_METHOD.code
    assert len(json.dumps(answer)) < 300
    recent = audited(db, UNKNOWN_METHOD.code)
    assert any(r.code == UNKNOWN_METHOD.code and r.identity == "u1" for r in recent)
    assert method not in repr(recent)


def test_a_notification_with_params_by_position_gets_no_answer(server: StdioPeer) -> None:
    server.send(b'{"jsonrpc":"2.0","method":"notifications/x","params":[1]}')
    answer = server.request("tools/list")  # the next line on stdout answers this request
    assert {tool["name"] for tool in answer["result"]["tools"]} >= {"count_notes"}


def test_blank_lines_carry_no_message_and_get_no_answer(server: StdioPeer) -> None:
    server.send(b"")
    server.send(b" \t\r")
    answer = server.request("tools/list")
    assert {tool["name"] for tool in answer["result"]["tools"]} >= {"count_notes"}


def test_one_request_id_is_one_write_within_a_process_and_never_across_processes(
    db: Path, stderr_log: IO[bytes]
) -> None:
    notes = []
    for _ in range(2):
        process = stdio_server(db, "writer", stderr_log)
        process.initialize()
        for _ in range(2):
            process.send(call_line("w-1", {"name": "create_note", "arguments": {"text": "once"}}))
            answer = process.message()
            assert answer["id"] == "w-1"
            notes.append(answer["result"]["structuredContent"])
        assert process.close() == 0
    first, retried, second, retried_again = notes
    assert first == retried and second == retried_again
    assert first["note_id"] != second["note_id"]


def test_requests_sent_just_before_stdin_closes_are_all_answered(
    db: Path, stderr_log: IO[bytes]
) -> None:
    process = stdio_server(db, "u1", stderr_log)
    process.initialize()
    for request_id in range(5):
        process.send(call_line(request_id, {"name": "count_notes"}))
    process.send(call_line(5, {"name": "list_notes"}), newline=False)  # the last line, unended
    assert process.close() == 0
    answers = {answer["id"]: answer for answer in (process.message() for _ in range(6))}
    assert set(answers) == set(range(6))
    assert answers[0]["result"]["structuredContent"] == {"result": 0}
    assert answers[5]["result"]["structuredContent"] == {"result": []}


def test_an_interrupt_ends_the_process_cleanly_while_it_waits_for_stdin(
    db: Path, tmp_path: Path
) -> None:
    with (tmp_path / "err.log").open("wb") as log:
        process = stdio_server(db, "u1", log)
        process.initialize()  # serving, its reader blocked on an open stdin
        process.process.send_signal(signal.SIGINT)
        assert process.process.wait(timeout=DEADLINE_S) == 130
        process.close()
    assert "Fatal" not in (tmp_path / "err.log").read_text("utf-8")


def test_the_process_says_where_its_store_is_on_stderr_only(db: Path, tmp_path: Path) -> None:
    with (tmp_path / "err.log").open("wb") as log:
        process = stdio_server(db, "u1", log)
        process.initialize()
        assert process.close() == 0
    assert str(db) in (tmp_path / "err.log").read_text("utf-8")


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--mcp-stdio"],
        ["serve", "--mcp-stdio", "--identity", ""],
        ["serve", "--identity", "u1"],
        ["serve", "--mcp-stdio", "--identity", "u1", "--demo"],
    ],
    ids=["no-identity", "empty-identity", "identity-without-stdio", "with-demo"],
)
def test_mcp_stdio_needs_exactly_an_identity(args: list[str]) -> None:
    done = strictcall(*args, stdin="")
    assert done.returncode == 2
    assert done.stdout == ""


def test_a_store_that_cannot_be_opened_is_a_clean_failure(tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "such" / "dir" / "db")
    done = strictcall("serve", "--mcp-stdio", "--identity", "u1", "--db", missing, stdin="")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
