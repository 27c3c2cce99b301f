"""A burst of good and refused calls against a real server, for the operator's tests: each
refused call carries a distinctive value that must never appear in metrics, page or spans."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
import orjson

from servers import RunningServer

SECRET_VALUES = (
    "zq-secret-note-id-4711",  # an argument value
    "zq-made-up-member-0815",  # a member name the schema does not declare
    "zq-unknown-tool-2342",  # a tool name no one registered
    "zq-note-text-9999",  # a note's text
)


@dataclass
class Burst:
    """What a burst did: calls by (tool label, outcome, stage, code)."""

    counts: dict[tuple[str, str, str, str], int] = field(default_factory=dict)

    def add(self, key: tuple[str, str, str, str], n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def failed(self) -> int:
        return sum(n for (_, outcome, _, _), n in self.counts.items() if outcome == "error")


def rpc(server: RunningServer, token: str, name: str, arguments: object, call_id: int) -> object:
    body = {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = httpx.post(
        server.base_url + "/rpc",
        content=orjson.dumps(body),
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    reply = response.json()
    return reply.get("error", {}).get("data", reply.get("result"))


def burst(server: RunningServer, token: str, *, good: int = 6, refused: int = 2) -> Burst:
    """`good` successes, then `refused` of each of four refusals, each with secret values."""
    done = Burst()
    note_id = "n0"
    for i in range(good):
        if i == 0:
            created = rpc(server, token, "create_note", {"text": SECRET_VALUES[3]}, 1000 + i)
            assert isinstance(created, dict)
            note_id = created["note_id"]
            done.add(("create_note", "ok", "none", "none"))
        else:
            assert rpc(server, token, "count_notes", {}, 1000 + i) == 1
            done.add(("count_notes", "ok", "none", "none"))
    for i in range(refused):
        missing = rpc(server, token, "read_note", {"note_id": SECRET_VALUES[0]}, 2000 + i)
        assert isinstance(missing, dict) and missing["code"] == "forbidden_or_missing"
        done.add(("read_note", "error", "resource", "forbidden_or_missing"))
        extra = {"note_id": note_id, SECRET_VALUES[1]: SECRET_VALUES[0]}
        unexpected = rpc(server, token, "read_note", extra, 3000 + i)
        assert isinstance(unexpected, dict) and unexpected["reason"] == "unexpected_member"
        done.add(("read_note", "error", "shape", "invalid_arguments"))
        unknown = rpc(server, token, SECRET_VALUES[2], {"x": SECRET_VALUES[0]}, 4000 + i)
        assert isinstance(unknown, dict) and unknown["code"] == "unknown_tool"
        done.add(("unknown", "error", "route", "unknown_tool"))
        wrong_type = rpc(server, token, "create_note", {"text": 12345}, 5000 + i)
        assert isinstance(wrong_type, dict) and wrong_type["reason"] == "type"
        done.add(("create_note", "error", "shape", "invalid_arguments"))
    return done


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def mcp_headers(server: RunningServer, token: str, **extra: str) -> dict[str, str]:
    """The headers of raw HTTP requests to /mcp as `token`'s caller, after an initialize
    (with its session's id, when the server gives one); `extra` headers go on each."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}", **extra}
    initialize = {
        "jsonrpc": "2.0",
        "id": "init-1",
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "strictcall-tests", "version": "1"},
        },
    }
    started = httpx.post(server.base_url + "/mcp", json=initialize, headers=headers, timeout=30)
    assert started.status_code == 200
    session = started.headers.get("mcp-session-id")
    if session is not None:
        headers["mcp-session-id"] = session
    return headers
