"""Call ids beyond `MAX_CALL_ID_LENGTH` are refused at intake on every wire (/rpc, /mcp,
stdio) as an invalid request carrying the limit, answered with id null and never stored: an
operator's `audit` would otherwise print a caller's 200 KB text."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ops_calls import mcp_headers
from servers import RunningServer, create_token, recent_audit, start_server
from stdio_peer import StdioPeer
from strictcall.errors import INVALID_REQUEST, MAX_CALL_ID_LENGTH, Reason
from strictcall.storage import AuditRecord
from strictcall.transports.jsonrpc import ERROR_CODES

DEADLINE_S = 30
LONGEST = "i" * MAX_CALL_ID_LENGTH
TOO_LONG = "\x1b[2J" + "x" * 200_000


def call(request_id: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "count_notes", "arguments": {}},
    }


def assert_refused_with_the_limit(answer: dict[str, Any]) -> None:
    assert answer["id"] is None
    assert answer["error"]["code"] == ERROR_CODES[INVALID_REQUEST.stage][0] == -32600
    data = answer["error"]["data"]
    assert data["code"] == INVALID_REQUEST.code
    assert data["stage"] == str(INVALID_REQUEST.stage)
    assert data["reason"] == str(Reason.MAX_LENGTH)
    assert data["expected"] == data["limit"] == MAX_CALL_ID_LENGTH
    assert data["pointer"] == "/id"


def never_stored(db: Path | str) -> list[AuditRecord]:
    """The audit, once it holds the refusal: it has no record of the long id."""
    recent = recent_audit(db, 20, lambda rs: any(r.code == INVALID_REQUEST.code for r in rs))
    refused = [r for r in recent if r.code == INVALID_REQUEST.code]
    assert refused and all(r.call_id is None for r in refused)
    # stdio keeps a connection's part before the id: no stored id holds the long one's text
    assert all(r.call_id is None or "x" * 1000 not in r.call_id for r in recent)
    return recent


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ids") / "s.sqlite3"


@pytest.fixture(scope="module")
def token(db: Path) -> str:
    return create_token(db, "u1")


@pytest.fixture(scope="module")
def server(db: Path, token: str) -> Iterator[RunningServer]:
    running = start_server(db)
    yield running
    assert running.stop() == 0


def test_a_call_id_at_the_limit_is_answered_on_rpc(server: RunningServer, token: str) -> None:
    answer = httpx.post(
        server.base_url + "/rpc",
        json=call(LONGEST),
        headers={"Authorization": f"Bearer {token}"},
        timeout=DEADLINE_S,
    ).json()
    assert answer["id"] == LONGEST
    assert "result" in answer


def test_a_call_id_over_the_limit_is_refused_on_rpc(
    server: RunningServer, token: str, db: Path
) -> None:
    response = httpx.post(
        server.base_url + "/rpc",
        json=call(TOO_LONG),
        headers={"Authorization": f"Bearer {token}"},
        timeout=DEADLINE_S,
    )
    assert len(response.content) < 400  # the id is not echoed
    assert_refused_with_the_limit(response.json())
    never_stored(db)


def test_a_call_id_over_the_limit_is_refused_on_mcp(
    server: RunningServer, token: str, db: Path
) -> None:
    headers = mcp_headers(server, token)
    url = server.base_url + "/mcp"
    response = httpx.post(url, content=json.dumps(call(TOO_LONG)), headers=headers, timeout=30)
    assert len(response.content) < 400
    assert_refused_with_the_limit(response.json())
    never_stored(db)


def test_a_call_id_over_the_limit_is_refused_on_stdio(tmp_path: Path) -> None:
    db = tmp_path / "stdio.sqlite3"
    argv = [sys.executable, "-m", "strictcall", "serve", "--mcp-stdio", "--identity", "u1"]
    with (tmp_path / "stderr.log").open("wb") as log:
        peer = StdioPeer([*argv, "--db", str(db)], log)
        try:
            peer.initialize()
            peer.send(json.dumps(call(TOO_LONG)).encode())
            assert_refused_with_the_limit(peer.message())
            peer.send(json.dumps(call(LONGEST)).encode())
            assert peer.message()["id"] == LONGEST
        finally:
            assert peer.close() == 0
    never_stored(db)
