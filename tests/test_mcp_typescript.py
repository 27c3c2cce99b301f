"""The official TypeScript MCP client (`@modelcontextprotocol/sdk` on npm, the one most MCP hosts
embed) on a real `strictcall serve --mcp-stdio` and on /mcp of a real `strictcall serve`: every
success and falsy value arrives, and every refusal is an isError result it hands back, never a
throw (it checks structuredContent against the tool's outputSchema even on error results).

The client is the Node script tests/ts/client.mjs; `node_client` installs its packages (npm ci,
once per session, when missing). Without node and npm the tests are skipped locally and fail in
CI (CI=true), where the suite must run them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from node_client import TS_DIR, node_with_packages
from servers import RunningServer, create_token, start_server
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    INVALID_ARGUMENTS,
    UNKNOWN_TOOL,
    ErrorKind,
)
from strictcall.services.notes import notes_gateway
from strictcall.storage.sqlite import SQLiteStore

RUN_DEADLINE_S = 120
WRAPPED = {"list_notes", "count_notes", "delete_note"}


@pytest.fixture
def node() -> str:
    return node_with_packages()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "notes.sqlite3"


@pytest.fixture
def others_note(db: Path) -> Iterator[str]:
    """A note of u2's, which u1's calls must never reach; it is still there afterwards."""
    store = SQLiteStore(str(db))
    try:
        gateway = notes_gateway(store)
        created = gateway.call('{"name":"create_note","arguments":{"text":"u2"}}', "u2", "c-u2")
        note_id = created["result"]["note_id"]
        assert isinstance(note_id, str)
        yield note_id
        assert store.read_note("u2", note_id) is not None
    finally:
        store.close()


def run_client(node: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [node, str(TS_DIR / "client.mjs"), *args],
        cwd=TS_DIR,
        capture_output=True,
        text=True,
        timeout=RUN_DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def value(step: dict[str, Any], name: str) -> Any:
    """A success's value as the TypeScript client returned it, checked against its text."""
    assert "threw" not in step, step
    result = step["result"]
    assert not result.get("isError", False)
    structured = result["structuredContent"]
    if name in WRAPPED:
        assert set(structured) == {"result"}
        structured = structured["result"]
    assert [block["type"] for block in result["content"]] == ["text"]
    assert json.loads(result["content"][0]["text"]) == structured
    return structured


def refusal(step: dict[str, Any], kind: ErrorKind) -> dict[str, Any]:
    """A refusal as the TypeScript client returned it: an isError result (not a throw) whose
    one text block is the structured error the model reads."""
    assert "threw" not in step, step
    result = step["result"]
    assert result["isError"] is True
    assert "structuredContent" not in result
    assert [block["type"] for block in result["content"]] == ["text"]
    error: dict[str, Any] = json.loads(result["content"][0]["text"])
    assert (error["code"], error["stage"], error["retryable"]) == (
        kind.code,
        kind.stage.value,
        kind.retryable,
    )
    return error


def check_report(report: dict[str, Any]) -> None:
    assert report["server"] == "strictcall"
    assert {tool["name"] for tool in report["tools"]} == {
        "read_note",
        "list_notes",
        "count_notes",
        "create_note",
        "delete_note",
    }
    assert all(tool["inputType"] == tool["outputType"] == "object" for tool in report["tools"])
    assert value(report["count"], "count_notes") == 0
    assert value(report["listEmpty"], "list_notes") == []
    note = value(report["created"], "create_note")
    assert note["text"] == ""
    assert value(report["read"], "read_note") == note
    assert value(report["listOne"], "list_notes") == [note]
    assert value(report["deleted"], "delete_note") is None
    gone = refusal(report["gone"], FORBIDDEN_OR_MISSING)
    refusal(report["unknownTool"], UNKNOWN_TOOL)
    extra = refusal(report["badArguments"], INVALID_ARGUMENTS)
    assert (extra["pointer"], extra["reason"]) == ("/arguments/admin", "unexpected_member")
    wrong = refusal(report["wrongType"], INVALID_ARGUMENTS)
    assert (wrong["pointer"], wrong["reason"], wrong["expected"]) == (
        "/arguments/note_id",
        "type",
        "string",
    )
    assert refusal(report["othersNote"], FORBIDDEN_OR_MISSING) == gone  # exactly like missing
    refusal(report["othersDelete"], FORBIDDEN_OR_MISSING)
    refusal(report["noName"], UNKNOWN_TOOL)
    assert refusal(report["stringArguments"], INVALID_ARGUMENTS)["pointer"] == "/arguments"
    assert refusal(report["extraMember"], INVALID_ARGUMENTS)["pointer"] == "/admin"


def test_the_typescript_client_over_stdio_gets_every_answer_and_never_throws(
    node: str, db: Path, others_note: str
) -> None:
    command = [sys.executable, "-m", "strictcall", "serve", "--mcp-stdio", "--identity", "u1"]
    report = run_client(node, "stdio", others_note, *command, "--db", str(db))
    check_report(report)


@pytest.fixture
def server(db: Path, others_note: str) -> Iterator[RunningServer]:
    running = start_server(db)
    yield running
    assert running.stop() == 0


def test_the_typescript_client_over_http_gets_every_answer_and_never_throws(
    node: str, db: Path, others_note: str, server: RunningServer
) -> None:
    token = create_token(db, "u1")
    report = run_client(node, "http", others_note, server.base_url + "/mcp", token)
    check_report(report)
