"""The policy on every wire of a real `strictcall serve --policy FILE`: /rpc, /mcp over HTTP
and MCP over stdio list the same tools the calls reach; a hidden tool, by any spelling, is
answered exactly like one that does not exist; a call over its quota is the catalogue's
`rate_limited` (HTTP 200, never a bare 429), audited and counted with its rule."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from servers import RunningServer, create_token, recent_audit, start_server
from stdio_peer import StdioPeer
from strictcall.core.policy import DEFAULT_DENY
from strictcall.errors import RATE_LIMITED, UNKNOWN_TOOL, Stage
from strictcall.transports.jsonrpc import ERROR_CODES
from test_policy import SPELLINGS

DEADLINE_S = 30
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

POLICY = """
[[rule]]
name = "readers"
who = ["u1"]
tools = ["read_note", "list_notes"]

[[rule]]
name = "counters"
who = ["u2"]
tools = ["count_notes"]
rate = "2/hour"
burst = 2
"""
U1_TOOLS = ["list_notes", "read_note"]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("policy") / "notes.sqlite3"


@pytest.fixture(scope="module")
def policy_file(db: Path) -> Path:
    path = db.parent / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokens(db: Path) -> dict[str, str]:
    return {who: create_token(db, who) for who in ("u1", "u2")}


@pytest.fixture(scope="module")
def server(db: Path, policy_file: Path, tokens: dict[str, str]) -> Iterator[RunningServer]:
    running = start_server(db, "--policy", str(policy_file))
    yield running
    assert running.stop() == 0


def message(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return body


def rpc(server: RunningServer, token: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(server.base_url + "/rpc", json=body, headers=headers, timeout=DEADLINE_S)


def mcp(server: RunningServer, token: str, body: dict[str, Any]) -> httpx.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(
        server.base_url + "/mcp", content=json.dumps(body), headers=headers, timeout=DEADLINE_S
    )


def listed(response: httpx.Response) -> list[str]:
    assert response.status_code == 200
    return sorted(tool["name"] for tool in response.json()["result"]["tools"])


def called(name: str) -> dict[str, Any]:
    return message("tools/call", {"name": name, "arguments": {}})


def test_every_wire_lists_each_caller_its_own_tools(
    server: RunningServer, tokens: dict[str, str], policy_file: Path, db: Path
) -> None:
    for ask in (rpc, mcp):
        assert listed(ask(server, tokens["u1"], message("tools/list"))) == U1_TOOLS
        assert listed(ask(server, tokens["u2"], message("tools/list"))) == ["count_notes"]
    peer = stdio(policy_file, db, "u1")
    try:
        assert sorted(peer.tool_names()) == U1_TOOLS
    finally:
        assert peer.close() == 0


def stdio(policy_file: Path, db: Path, identity: str) -> StdioPeer:
    argv = [sys.executable, "-m", "strictcall", "serve", "--mcp-stdio", "--identity", identity]
    peer = StdioPeer([*argv, "--db", str(db), "--policy", str(policy_file)], stderr=-3)
    peer.initialize()
    return peer


HIDDEN = ["delete_note", "count_notes", *SPELLINGS, "Count_notes", "count_notes "]


@pytest.mark.parametrize("name", HIDDEN, ids=[repr(n) for n in HIDDEN])
def test_a_hidden_tool_by_any_spelling_is_answered_like_a_missing_one_on_http(
    server: RunningServer, tokens: dict[str, str], name: str
) -> None:
    for ask in (rpc, mcp):
        hidden = ask(server, tokens["u1"], called(name))
        missing = ask(server, tokens["u1"], called("no_such_tool"))
        assert hidden.status_code == missing.status_code == 200
        assert hidden.json() == missing.json()
        error = error_of(hidden.json())
        assert (error["code"], error["available"]) == (UNKNOWN_TOOL.code, U1_TOOLS)


def test_a_hidden_tool_by_any_spelling_is_answered_like_a_missing_one_on_stdio(
    policy_file: Path, db: Path
) -> None:
    peer = stdio(policy_file, db, "u1")
    try:
        missing = peer.request("tools/call", {"name": "no_such_tool", "arguments": {}})
        for name in HIDDEN:
            hidden = peer.request("tools/call", {"name": name, "arguments": {}})
            assert {k: v for k, v in hidden.items() if k != "id"} == {
                k: v for k, v in missing.items() if k != "id"
            }
            assert error_of(hidden)["available"] == U1_TOOLS
    finally:
        assert peer.close() == 0


def error_of(body: dict[str, Any]) -> dict[str, Any]:
    """The structured error of an answer: a JSON-RPC error's data, or an MCP tool result's."""
    if "error" in body:
        data: dict[str, Any] = body["error"]["data"]
        return data
    return structured(body["result"])


def structured(result: dict[str, Any]) -> dict[str, Any]:
    """The structured error an MCP tool result with isError carries in its one text block."""
    assert result["isError"] is True
    error: dict[str, Any] = json.loads(result["content"][0]["text"])
    return error


def test_a_call_over_its_quota_is_rate_limited_as_the_catalogues_error_on_each_wire(
    server: RunningServer, tokens: dict[str, str], db: Path
) -> None:
    token = tokens["u2"]
    first = [rpc(server, token, called("count_notes")) for _ in range(2)]
    assert all(r.status_code == 200 and "result" in r.json() for r in first)
    over = rpc(server, token, called("count_notes"))
    assert over.status_code == 200  # never a bare 429: an MCP host reads that as the transport
    error = over.json()["error"]
    assert error["code"] == ERROR_CODES[Stage.EXECUTE][0]
    data = error["data"]
    assert (data["code"], data["stage"], data["retryable"]) == (
        RATE_LIMITED.code,
        RATE_LIMITED.stage.value,
        RATE_LIMITED.retryable,
    )
    assert data["rule"] == "counters" and data["retry_after_ms"] > 0
    on_mcp = mcp(server, token, called("count_notes"))
    assert on_mcp.status_code == 200
    mcp_error = structured(on_mcp.json()["result"])
    assert (mcp_error["code"], mcp_error["rule"]) == (RATE_LIMITED.code, "counters")
    records = recent_audit(db, 50, lambda rs: sum(r.code == RATE_LIMITED.code for r in rs) >= 2)
    limited = [r for r in records if r.code == RATE_LIMITED.code]
    assert len(limited) >= 2 and {r.reason for r in limited} == {"counters"}


def test_refusals_are_audited_with_their_rule_and_counted_by_rule_and_code(
    server: RunningServer, tokens: dict[str, str], db: Path
) -> None:
    assert rpc(server, tokens["u1"], called("delete_note")).status_code == 200
    records = recent_audit(db, 50, lambda rs: any(r.reason == DEFAULT_DENY for r in rs))
    hidden = [r for r in records if r.reason == DEFAULT_DENY]
    assert hidden and all(r.code == UNKNOWN_TOOL.code for r in hidden)
    response = httpx.get(server.base_url + "/metrics", timeout=DEADLINE_S)
    counts = {
        (s.labels["rule"], s.labels["code"]): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
        if s.name == "strictcall_policy_refusals_total"
    }
    assert counts.get((DEFAULT_DENY, UNKNOWN_TOOL.code), 0) >= 1
    # a name the model made up that is no tool is not a refusal of the policy
    assert all(rule in (DEFAULT_DENY, "counters", "readers") for rule, _ in counts)


def test_the_operator_page_shows_who_is_nearest_a_quota(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    token = tokens["u2"]
    for _ in range(3):  # u2's bucket of 2 an hour, empty whatever ran before
        rpc(server, token, called("count_notes"))
    stats = httpx.get(server.base_url + "/ops/stats.json", timeout=DEADLINE_S).json()
    rows = {row["identity"]: row["nearest_quota"] for row in stats["live"]["identities"]}
    assert rows["u2"] == "counters: 0 % left"
    assert rows["u1"] is None  # u1's rules hold no quota: "none set" on the page
