"""2026-07-28's input_required rounds through strictcall: a request the upstream makes during
a 2026-07-28 call (elicitation, sampling) goes to the caller as an input_required result, the
upstream's call held; the caller's follow-up with the requestState and its inputResponses
resumes it. A requestState is its identity's alone, used once, and expires (`Rounds.wait_s`);
an identity holds at most `Rounds.max_held` rounds.

The official MCP Python client at 2026-07-28 (which does the rounds itself, given its
callbacks) through `strictcall proxy` and `strictcall federate` over /mcp, in front of the
FastMCP server in tests/upstreams/fastmcp_chatty.py; the edges by hand with httpx, on the
proxy's app run in process with small budgets.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from running_app import running
from servers import create_token, start_server
from stdio_peer import DEADLINE_S
from strictcall.core.policy import PolicyHolder, parse_policy
from strictcall.core.record import SERVER_REQUEST, AuditRecord
from strictcall.errors import UNKNOWN_ROUND
from strictcall.server.app import build_gateway_app
from strictcall.server.edge import EdgeLimits
from strictcall.server.proxy import Proxy
from strictcall.services.proxy.config import federation_config
from strictcall.services.proxy.federation import Federation
from strictcall.services.proxy.upstream import UpstreamSpec
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.mcp.rounds import KEY
from strictcall.transports.serving import INPUT_ROUND_WAIT_S, MAX_HELD_ROUNDS, Rounds
from test_server_requests import CHATTY, OPEN, _audited, _elicited, _sampled, _text

MODERN = "2026-07-28"


def _envelope(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        types.PROTOCOL_VERSION_META_KEY: MODERN,
        types.CLIENT_INFO_META_KEY: {"name": "by-hand", "version": "1"},
        types.CLIENT_CAPABILITIES_META_KEY: capabilities,
    }


# --- the official client, end to end ----------------------------------------------------------


async def _call_as_official_client(url: str, token: str, name: str, arguments: Any) -> Any:
    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return await _elicited(context, params)

    with anyio.fail_after(DEADLINE_S):
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(
                streamable_http_client(url, http_client=http),
                mode=MODERN,
                elicitation_callback=elicit,
                sampling_callback=_sampled,
            ) as client,
        ):
            asked_result = await client.call_tool(name, arguments)
            sampled = await client.call_tool(name.replace("ask", "sample"), {"prompt": "say"})
    return asked_result, sampled, asked


@pytest.mark.parametrize("command", ["proxy", "federate"])
def test_the_official_client_at_2026_07_28_answers_the_upstreams_requests_in_rounds(
    command: str, tmp_path: Path
) -> None:
    db = tmp_path / "audit.sqlite3"
    token = create_token(db, "u1")
    if command == "proxy":
        extra = ["--upstream-cmd", CHATTY]
        tool = "ask"
        upstream = "upstream"
    else:
        config = tmp_path / "federation.toml"
        config.write_text(f"[upstreams.chat]\ncommand = {json.dumps(CHATTY)}\n", encoding="utf-8")
        extra = ["--config", str(config)]
        tool = "chat_ask"
        upstream = "chat"
    server = start_server(db, *extra, command=command)
    try:
        told, sampled, asked = anyio.run(
            _call_as_official_client,
            f"{server.base_url}/mcp",
            token,
            tool,
            {"question": "which colour?"},
        )
        rows = _audited(db, 2)
    finally:
        server.stop()
    assert told.is_error is False and _text(told) == "told blue"
    assert sampled.is_error is False and _text(sampled) == "sampled green"
    assert asked == ["which colour?"]
    assert sorted((r["tool"], r["identity"], r["outcome"], r["reason"]) for r in rows) == [
        (f"{SERVER_REQUEST}elicitation:{upstream}", "u1", "ok", "answered"),
        (f"{SERVER_REQUEST}sampling:{upstream}", "u1", "ok", "answered"),
    ]
    assert all("colour" not in json.dumps(r) for r in rows)  # never what was asked


# --- by hand, in process ----------------------------------------------------------------------


class Proxied:
    """The proxy's app in process, with a client per identity, its audit records kept."""

    def __init__(self, client: httpx.AsyncClient, tokens: dict[str, str]) -> None:
        self.client = client
        self.tokens = tokens
        self.ids = iter(range(1, 1_000))

    async def call(
        self,
        identity: str,
        arguments: dict[str, Any],
        *,
        tool: str = "ask",
        capabilities: dict[str, Any] | None = None,
        state: Any = None,
        responses: Any = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "name": tool,
            "arguments": arguments,
            "_meta": _envelope({"elicitation": {}} if capabilities is None else capabilities),
        }
        if state is not None:
            params["requestState"] = state
            params["inputResponses"] = responses
        message = {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call", "params": params}
        headers = {
            "Authorization": f"Bearer {self.tokens[identity]}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Mcp-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        }
        answered = await self.client.post("/mcp", json=message, headers=headers)
        assert answered.status_code == 200, answered.text
        result: dict[str, Any] = answered.json()["result"]
        return result


@asynccontextmanager
async def _proxied(
    tmp_path: Path,
    records: list[AuditRecord],
    rounds: Rounds | None = None,
    *,
    federated: bool = False,
    policy: str = OPEN,
) -> AsyncIterator[Proxied]:
    """The proxy's app (or, `federated`, a federation's of two chatty upstreams, `a` and `b`)
    with `rounds` its budgets, the requests of its upstreams' audited in `records` too."""
    served: Proxy | Federation
    if federated:
        upstreams = {"upstreams": {"a": {"command": CHATTY}, "b": {"command": CHATTY}}}
        served = Federation(
            federation_config(upstreams),
            errlog=io.StringIO(),
            policy=PolicyHolder(parse_policy(policy)),
        )
    else:
        served = Proxy(
            UpstreamSpec.of_command(CHATTY),
            errlog=io.StringIO(),
            policy=PolicyHolder(parse_policy(policy)),
        )
    store = SQLiteStore(str(tmp_path / "rounds.sqlite3"))
    tokens = {identity: store.create_token(identity) for identity in ("u1", "u2")}

    def audit_to(record: Any) -> None:
        def both(entry: AuditRecord) -> None:
            records.append(entry)
            record(entry)

        served.audit_server_requests(both)

    held = Rounds() if rounds is None else rounds
    app = build_gateway_app(
        served.gateway,
        store,
        serving=served.serving,
        edge=EdgeLimits(round_wait_s=held.wait_s, max_rounds_per_identity=held.max_held),
        audit_to=audit_to,
        observe=False,
    )
    try:
        async with running(app) as client:
            yield Proxied(client, tokens)
    finally:
        store.close()


def _asked(records: list[AuditRecord]) -> list[tuple[str | None, str | None]]:
    return [
        (r.identity, r.reason)
        for r in records
        if r.tool is not None and r.tool.startswith(SERVER_REQUEST)
    ]


def _round_of(result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A round's requestState and its one request, checked as the protocol's."""
    round_ = types.InputRequiredResult.model_validate(result, by_name=False)
    assert result["resultType"] == "input_required"
    assert round_.request_state is not None and round_.input_requests is not None
    assert list(round_.input_requests) == [KEY]
    return round_.request_state, result["inputRequests"][KEY]


def _error_code(result: dict[str, Any]) -> str:
    assert result["isError"] is True
    error: dict[str, Any] = json.loads(result["content"][0]["text"])
    return str(error["code"])


ACCEPT = {KEY: {"action": "accept", "content": {"answer": "blue"}}}


def test_another_identity_with_a_callers_request_state_is_refused_and_the_call_goes_on(
    tmp_path: Path,
) -> None:
    records: list[AuditRecord] = []
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with _proxied(tmp_path, records) as proxied:
                state, request = _round_of(await proxied.call("u1", {"question": "u1's?"}))
                seen["request"] = request
                seen["u2"] = await proxied.call(
                    "u2",
                    {"question": "x"},
                    state=state,
                    responses={KEY: {"action": "accept", "content": {"answer": "from u2"}}},
                )
                seen["u1"] = await proxied.call(
                    "u1", {"question": "u1's?"}, state=state, responses=ACCEPT
                )
                seen["again"] = await proxied.call(
                    "u1", {"question": "u1's?"}, state=state, responses=ACCEPT
                )
                seen["never"] = await proxied.call(
                    "u1", {"question": "?"}, state="round-0", responses=ACCEPT
                )

    anyio.run(scenario)
    assert seen["request"]["method"] == "elicitation/create"
    assert seen["request"]["params"]["message"] == "u1's?"  # as the upstream sent it
    assert _error_code(seen["u2"]) == UNKNOWN_ROUND.code
    assert "from u2" not in json.dumps(seen["u2"]) and "u1's" not in json.dumps(seen["u2"])
    assert seen["u1"]["resultType"] == "complete" and _text_of(seen["u1"]) == "told blue"
    assert _error_code(seen["again"]) == UNKNOWN_ROUND.code  # used once
    assert _error_code(seen["never"]) == UNKNOWN_ROUND.code
    assert seen["again"] == seen["u2"] == seen["never"]  # alike, whichever the reason
    assert _asked(records) == [("u1", "answered")]


def _text_of(result: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in result["content"] if block["type"] == "text")


def test_a_round_past_its_wait_is_unknown_and_the_upstream_is_told_the_caller_did_not_answer(
    tmp_path: Path,
) -> None:
    records: list[AuditRecord] = []
    seen: dict[str, Any] = {}
    wait_s = 1.0

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with _proxied(tmp_path, records, Rounds(wait_s=wait_s)) as proxied:
                # within its wait: answered
                state, _ = _round_of(await proxied.call("u1", {"question": "soon?"}))
                seen["in time"] = await proxied.call(
                    "u1", {"question": "soon?"}, state=state, responses=ACCEPT
                )
                # past it: the upstream is told, its call ends, the state is unknown
                state, _ = _round_of(await proxied.call("u1", {"question": "late?"}))
                while not any(reason == "timed_out" for _, reason in _asked(records)):
                    await anyio.sleep(0.05)
                seen["late"] = await proxied.call(
                    "u1", {"question": "late?"}, state=state, responses=ACCEPT
                )

    anyio.run(scenario)
    assert _text_of(seen["in time"]) == "told blue"
    assert _error_code(seen["late"]) == UNKNOWN_ROUND.code
    assert _asked(records) == [("u1", "answered"), ("u1", "timed_out")]


def test_an_identity_holds_at_most_its_rounds_and_one_more_is_refused_at_once(
    tmp_path: Path,
) -> None:
    """A federation of two upstreams: u1 holds its one round on `a`; its call to `b` is not
    asked (too_many_rounds), u2's is (a budget of its own); once u1's is answered, it may."""
    records: list[AuditRecord] = []
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with _proxied(tmp_path, records, Rounds(max_held=1), federated=True) as proxied:
                held, _ = _round_of(await proxied.call("u1", {"question": "a?"}, tool="a_ask"))
                seen["over"] = await proxied.call("u1", {"question": "b?"}, tool="b_ask")
                u2, _ = _round_of(await proxied.call("u2", {"question": "u2?"}, tool="b_ask"))
                seen["u2"] = await proxied.call(
                    "u2", {"question": "u2?"}, tool="b_ask", state=u2, responses=ACCEPT
                )
                seen["held"] = await proxied.call(
                    "u1", {"question": "a?"}, tool="a_ask", state=held, responses=ACCEPT
                )
                again, _ = _round_of(await proxied.call("u1", {"question": "b?"}, tool="b_ask"))
                seen["again"] = await proxied.call(
                    "u1", {"question": "b?"}, tool="b_ask", state=again, responses=ACCEPT
                )

    anyio.run(scenario)
    over = seen["over"]
    assert over["resultType"] == "complete" and "told" not in _text_of(over)
    assert [_text_of(seen[name]) for name in ("u2", "held", "again")] == ["told blue"] * 3
    assert _asked(records) == [
        ("u1", "too_many_rounds"),
        ("u2", "answered"),
        ("u1", "answered"),
        ("u1", "answered"),
    ]


def test_a_2026_07_28_caller_that_offers_no_elicitation_has_the_upstream_refused_at_once(
    tmp_path: Path,
) -> None:
    records: list[AuditRecord] = []
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with _proxied(tmp_path, records) as proxied:
                seen["result"] = await proxied.call("u1", {"question": "?"}, capabilities={})

    anyio.run(scenario)
    assert seen["result"]["resultType"] == "complete"
    assert "told" not in _text_of(seen["result"])
    assert _asked(records) == [("u1", "no_capability")]


NO_ELICITATION = """
[[rule]]
name = "no-elicitation"
who = ["*"]
tools = ["*"]
server_requests = ["sampling"]
"""


def test_a_kind_the_policys_rule_forbids_is_no_round_and_is_audited(tmp_path: Path) -> None:
    records: list[AuditRecord] = []
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with _proxied(tmp_path, records, policy=NO_ELICITATION) as proxied:
                seen["result"] = await proxied.call("u1", {"question": "?"})

    anyio.run(scenario)
    assert seen["result"]["resultType"] == "complete"
    assert "told" not in _text_of(seen["result"])
    assert _asked(records) == [("u1", "refused_by_policy")]


def test_the_round_budgets_have_defaults() -> None:
    assert Rounds() == Rounds(wait_s=INPUT_ROUND_WAIT_S, max_held=MAX_HELD_ROUNDS)
    assert INPUT_ROUND_WAIT_S > 0 and MAX_HELD_ROUNDS >= 1


def test_the_official_client_at_2026_07_28_on_stdio_answers_in_rounds_too(tmp_path: Path) -> None:
    config = tmp_path / "federation.toml"
    config.write_text(f"[upstreams.chat]\ncommand = {json.dumps(CHATTY)}\n", encoding="utf-8")
    db = tmp_path / "audit.sqlite3"
    args = ["-m", "strictcall", "federate", "--config", str(config)]
    args += ["--stdio", "--identity", "u1", "--db", str(db)]
    server = StdioServerParameters(
        command=sys.executable, args=args, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )

    async def run() -> types.CallToolResult:
        with (tmp_path / "federate.stderr").open("w") as stderr, anyio.fail_after(DEADLINE_S):
            async with Client(
                stdio_client(server, errlog=stderr), mode=MODERN, elicitation_callback=_elicited
            ) as client:
                return await client.call_tool("chat_ask", {"question": "which?"})

    told = anyio.run(run)
    assert _text(told) == "told blue"
    rows = _audited(db, 1)
    assert [(r["tool"], r["identity"], r["reason"]) for r in rows] == [
        (f"{SERVER_REQUEST}elicitation:chat", "u1", "answered")
    ]
