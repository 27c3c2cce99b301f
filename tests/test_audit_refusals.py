"""Every refusal's audit row carries the call id and the tool when they could be read: a call
whose `arguments` is a string, and a request refused for its envelope, on JSON-RPC, MCP over
HTTP and MCP on stdio (real processes, real SQLite files)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import RunningServer, create_token, recent_audit, start_server
from strictcall.errors import INVALID_ARGUMENTS, INVALID_REQUEST
from strictcall.storage import AuditRecord
from test_mcp_stdio import stdio_server

STRING_ARGUMENTS = {"name": "read_note", "arguments": "n1"}
# a valid id and a readable tool, refused for a member the envelope may not have
EXTRA_MEMBER = {"name": "read_note", "arguments": {"note_id": "n1"}}


def request(request_id: str | int, params: Any, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params, **extra}


def row_for(records: list[AuditRecord], call_id_end: str) -> AuditRecord:
    found = [r for r in records if r.call_id is not None and r.call_id.endswith(call_id_end)]
    assert len(found) == 1, records
    return found[0]


def audited(db: Path | str, *call_id_ends: str) -> list[AuditRecord]:
    def all_there(recent: list[AuditRecord]) -> bool:
        ids = [r.call_id or "" for r in recent]
        return all(any(i.endswith(end) for i in ids) for end in call_id_ends)

    return recent_audit(db, 50, all_there)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, str]]:
    db = tmp_path_factory.mktemp("audit-refusals") / "notes.sqlite3"
    token = create_token(db, "u1")
    running = start_server(db)
    yield running, token
    assert running.stop() == 0


def test_json_rpc_audits_the_call_id_and_tool_of_every_refusal(
    served: tuple[RunningServer, str],
) -> None:
    server, token = served
    headers = {"Authorization": f"Bearer {token}"}
    for body in (
        request("rpc-string", STRING_ARGUMENTS),
        request("rpc-envelope", EXTRA_MEMBER, extra=1),
    ):
        httpx.post(server.base_url + "/rpc", json=body, headers=headers, timeout=30)
    records = audited(server.db, "rpc-string", "rpc-envelope")
    string = row_for(records, "rpc-string")
    assert (string.call_id, string.tool, string.code) == (
        "rpc-string",
        "read_note",
        INVALID_ARGUMENTS.code,
    )
    envelope = row_for(records, "rpc-envelope")
    assert (envelope.call_id, envelope.tool, envelope.code) == (
        "rpc-envelope",
        "read_note",
        INVALID_REQUEST.code,
    )


def test_mcp_over_http_audits_the_call_id_and_tool_of_every_refusal(
    served: tuple[RunningServer, str],
) -> None:
    server, token = served
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    for body in (
        request("mcp-string", STRING_ARGUMENTS),
        request("mcp-envelope", EXTRA_MEMBER, extra=1),
    ):
        httpx.post(server.base_url + "/mcp", json=body, headers=headers, timeout=30)
    records = audited(server.db, '"mcp-string"', '"mcp-envelope"')
    string = row_for(records, '"mcp-string"')
    assert (string.tool, string.code) == ("read_note", INVALID_ARGUMENTS.code)
    envelope = row_for(records, '"mcp-envelope"')
    assert (envelope.tool, envelope.code) == ("read_note", INVALID_REQUEST.code)
    assert envelope.call_id is not None and envelope.call_id.startswith("mcp-http-")


def test_mcp_on_stdio_audits_the_call_id_and_tool_of_every_refusal(tmp_path: Path) -> None:
    db = tmp_path / "notes.sqlite3"
    with (tmp_path / "stderr.log").open("wb") as log:
        server = stdio_server(db, "u1", log)
        try:
            server.initialize()
            server.send(json.dumps(request(71, STRING_ARGUMENTS)).encode())
            assert server.message()["id"] == 71
            server.send(json.dumps(request(72, EXTRA_MEMBER, extra=1)).encode())
            assert server.message()["error"]["data"]["code"] == INVALID_REQUEST.code
        finally:
            assert server.close() == 0
    records = audited(db, ":71", ":72")
    string = row_for(records, ":71")
    assert (string.tool, string.code) == ("read_note", INVALID_ARGUMENTS.code)
    envelope = row_for(records, ":72")
    assert (envelope.tool, envelope.code) == ("read_note", INVALID_REQUEST.code)
    assert envelope.call_id is not None and envelope.call_id.startswith("mcp-stdio-")
    assert all(r.identity == "u1" for r in (string, envelope))
