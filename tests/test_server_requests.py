"""Requests an upstream makes of its caller during a call (sampling, elicitation, roots): asked
of the caller that made the call and no other, refused at once when the policy's rule forbids
the kind or the caller's client lacks it, bounded in time and size by the upstream's budgets,
and each audited (kind, upstream, caller, outcome; never what was asked or answered).

The official MCP Python client is the caller (with and without callbacks), the FastMCP server
in tests/upstreams/fastmcp_chatty.py the upstream, behind a `Proxy` whose sessions are served
as stdio serves them (on in-memory streams, so that two callers share one upstream), and once
end to end through `strictcall federate --stdio` with a policy file and its audit database.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mcp_peers import UPSTREAMS, everything_command
from memory_session import memory_session
from servers import create_token, strictcall
from stdio_peer import DEADLINE_S
from strictcall.core.policy import PolicyHolder, parse_policy
from strictcall.core.record import SERVER_REQUEST, AuditRecord, content_method
from strictcall.server.proxy import Proxy
from strictcall.services.proxy.budgets import Budgets
from strictcall.services.proxy.config import ConfigError, federation_config
from strictcall.services.proxy.session import NOT_OFFERED
from strictcall.services.proxy.upstream import UpstreamSpec
from strictcall.transports.mcp.adapter import McpTools
from strictcall.transports.mcp.stdio import Answers
from strictcall.transports.serving import Serving

CHATTY = shlex.join([sys.executable, str(UPSTREAMS / "fastmcp_chatty.py")])
LEGACY = "legacy"
MODERN = "2026-07-28"
LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")

OPEN = """
[[rule]]
name = "everyone"
who = ["*"]
tools = ["*"]
"""

Callbacks = dict[str, Any]


def _proxy(policy: str = OPEN, budgets: Budgets | None = None, command: str = CHATTY) -> Proxy:
    options = {} if budgets is None else {"budgets": budgets}
    return Proxy(
        UpstreamSpec.of_command(command),
        errlog=io.StringIO(),
        policy=PolicyHolder(parse_policy(policy)),
        upstream_options=options,
    )


def _caller(
    proxy: Proxy,
    caller: str,
    identity: str,
    records: list[AuditRecord],
    callbacks: Callbacks,
    mode: str = LEGACY,
) -> AbstractAsyncContextManager[Client]:
    """A downstream session of the proxy's as stdio serves one, named `caller`, of
    `identity`, its audit records in `records`, held by the official client with
    `callbacks` (sampling_callback, elicitation_callback, list_roots_callback)."""

    def tools_for(answers: Answers) -> McpTools:
        return McpTools(
            proxy.gateway, lambda ctx: identity, lambda: caller, Serving(record=records.append)
        )

    return memory_session(tools_for, mode=mode, **callbacks)


def _asked(records: list[AuditRecord]) -> list[tuple[str | None, str | None, str, str | None]]:
    """(tool, identity, outcome, reason) of each record of a request of the upstream's."""
    return [
        (r.tool, r.identity, r.outcome, r.reason)
        for r in records
        if r.tool is not None and r.tool.startswith(SERVER_REQUEST)
    ]


def _text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def _elicited(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"answer": "blue"})


async def _sampled(context: object, params: types.CreateMessageRequestParams) -> Any:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="green"), model="m"
    )


async def _rooted(context: object) -> types.ListRootsResult:
    return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///work/here"}]})


ALL_CALLBACKS: Callbacks = {
    "elicitation_callback": _elicited,
    "sampling_callback": _sampled,
    "list_roots_callback": _rooted,
}

CALLS = [("ask", {"question": "which colour?"}), ("sample", {"prompt": "say"}), ("roots", {})]


def _run_calls(
    proxy: Proxy, callbacks: Callbacks, calls: list[tuple[str, dict[str, Any]]] = CALLS
) -> tuple[list[types.CallToolResult], list[AuditRecord]]:
    records: list[AuditRecord] = []
    proxy.audit_server_requests(records.append)

    async def run() -> list[types.CallToolResult]:
        with anyio.fail_after(DEADLINE_S):
            async with proxy.lifespan(), _caller(proxy, "a", "u1", records, callbacks) as client:
                return [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(run), records


def test_each_kind_is_asked_of_its_caller_and_answered_and_audited_without_its_content() -> None:
    results, records = _run_calls(_proxy(), ALL_CALLBACKS)
    assert [_text(r) for r in results] == ["told blue", "sampled green", "roots file:///work/here"]
    assert _asked(records) == [
        (f"{SERVER_REQUEST}elicitation:upstream", "u1", "ok", "answered"),
        (f"{SERVER_REQUEST}sampling:upstream", "u1", "ok", "answered"),
        (f"{SERVER_REQUEST}roots:upstream", "u1", "ok", "answered"),
    ]
    call_ids = {r.call_id for r in records if r.tool == "ask"}
    # the request's record names the call it came during
    assert {r.call_id for r in records if r.tool == f"{SERVER_REQUEST}elicitation:upstream"} == (
        call_ids
    )
    kept = json.dumps([list(r) for r in records])
    assert "blue" not in kept and "green" not in kept and "which colour" not in kept
    assert "/work/here" not in kept
    methods = [content_method(r.tool) for r in records if r.reason == "answered"]
    assert methods == ["elicitation/create", "sampling/createMessage", "roots/list"]


def test_server_everythings_sampling_and_roots_are_answered_by_their_caller() -> None:
    proxy = _proxy(command=everything_command())
    calls = [
        ("trigger-sampling-request", {"prompt": "say", "maxTokens": 5}),
        ("get-roots-list", {}),
    ]
    results, records = _run_calls(proxy, ALL_CALLBACKS, calls)
    assert [r.is_error for r in results] == [False, False], results
    assert "green" in _text(results[0]) and "file:///work/here" in _text(results[1])
    asked = _asked(records)
    assert [(tool, identity) for tool, identity, _, reason in asked if reason == "answered"] == [
        (f"{SERVER_REQUEST}sampling:upstream", "u1"),
        (f"{SERVER_REQUEST}roots:upstream", "u1"),
    ]
    # server-everything asks for the roots outside any call too: nobody's, nobody asked
    others = {(tool, identity, reason) for tool, identity, _, reason in asked}
    assert others - {(tool, "u1", "answered") for tool, *_ in asked} <= {
        (f"{SERVER_REQUEST}roots:upstream", None, "no_caller")
    }


def test_a_caller_without_the_capability_gets_the_upstream_refused_at_once() -> None:
    started = time.monotonic()
    results, records = _run_calls(_proxy(), {})  # the client offers none of the three
    took = time.monotonic() - started
    assert all(r.is_error for r in results)
    # the upstream was told what the MCP SDK tells it for a client without the capability
    assert f"refused {types.INVALID_REQUEST}: {NOT_OFFERED['sampling']}" in _text(results[1])
    assert f"refused {types.INVALID_REQUEST}: {NOT_OFFERED['roots']}" in _text(results[2])
    assert [(kind, outcome, reason) for kind, _, outcome, reason in _asked(records)] == [
        (f"{SERVER_REQUEST}elicitation:upstream", "error", "no_capability"),
        (f"{SERVER_REQUEST}sampling:upstream", "error", "no_capability"),
        (f"{SERVER_REQUEST}roots:upstream", "error", "no_capability"),
    ]
    print(f"three calls refused in {took:.2f} s")


FORBIDS = """
[[rule]]
name = "no-asking"
who = ["u1"]
tools = ["ask", "sample"]
server_requests = ["roots"]

[[rule]]
name = "roots-only-not"
who = ["u1"]
tools = ["roots"]
server_requests = ["sampling", "elicitation"]
"""


def test_a_kind_the_policys_rule_forbids_never_reaches_the_caller() -> None:
    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append("elicitation")
        return await _elicited(context, params)

    async def sample(context: object, params: types.CreateMessageRequestParams) -> Any:
        asked.append("sampling")
        return await _sampled(context, params)

    async def roots(context: object) -> types.ListRootsResult:
        asked.append("roots")
        return await _rooted(context)

    callbacks: Callbacks = {
        "elicitation_callback": elicit,
        "sampling_callback": sample,
        "list_roots_callback": roots,
    }
    results, records = _run_calls(_proxy(FORBIDS), callbacks)
    assert asked == []  # the caller offers all three; its rules forbid them here
    assert all(r.is_error for r in results)
    assert f"refused {types.INVALID_REQUEST}: {NOT_OFFERED['sampling']}" in _text(results[1])
    assert [reason for _, identity, _, reason in _asked(records) if identity == "u1"] == [
        "refused_by_policy",
        "refused_by_policy",
        "refused_by_policy",
    ]


def test_a_caller_that_does_not_answer_in_time_has_the_upstream_told_so() -> None:
    released = anyio.Event()

    async def never(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        with anyio.move_on_after(DEADLINE_S):
            await released.wait()
        return await _elicited(context, params)

    budgets = Budgets(server_request_timeout_s=1)
    started = time.monotonic()
    callbacks: Callbacks = {"elicitation_callback": never}
    results, records = _run_calls(_proxy(budgets=budgets), callbacks, [CALLS[0]])
    took = time.monotonic() - started
    released.set()
    assert results[0].is_error is True  # the upstream was told the caller did not answer
    assert [reason for *_, reason in _asked(records)] == ["timed_out"]
    assert took < DEADLINE_S
    print(f"timed out and answered in {took:.2f} s (limit 1 s)")


def _answer_bytes(answer: str) -> int:
    result = types.ElicitResult(action="accept", content={"answer": answer})
    return len(result.model_dump_json(by_alias=True))


def test_an_answer_at_the_size_limit_passes_and_one_byte_over_is_refused() -> None:
    answers = iter(["x" * 20, "x" * 21])

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": next(answers)})

    budgets = Budgets(max_server_answer_bytes=_answer_bytes("x" * 20))
    calls = [CALLS[0], CALLS[0]]
    results, records = _run_calls(_proxy(budgets=budgets), {"elicitation_callback": elicit}, calls)
    assert _text(results[0]) == "told " + "x" * 20
    assert "told" not in _text(results[1])
    assert [reason for *_, reason in _asked(records)] == ["answered", "too_large"]


def test_a_callers_error_answer_goes_back_to_the_upstream_as_it_is() -> None:
    async def refuse(context: object, params: types.CreateMessageRequestParams) -> Any:
        return types.ErrorData(code=-1, message="User rejected sampling request")

    results, records = _run_calls(_proxy(), {"sampling_callback": refuse}, [CALLS[1]])
    assert "refused -1: User rejected sampling request" in _text(results[0])
    assert [reason for *_, reason in _asked(records)] == ["caller_error"]


def test_a_caller_on_2026_07_28_cannot_be_asked_and_the_upstream_is_refused_at_once() -> None:
    """2026-07-28 replaces requests of the server with input_required rounds, which a session
    whose tools do not change (no proxy's, no federation's) does not hold: its caller, though it
    offers elicitation, is not asked."""
    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return await _elicited(context, params)

    proxy = _proxy()
    records: list[AuditRecord] = []
    proxy.audit_server_requests(records.append)
    callbacks: Callbacks = {"elicitation_callback": elicit}

    async def run() -> types.CallToolResult:
        with anyio.fail_after(DEADLINE_S):
            async with (
                proxy.lifespan(),
                _caller(proxy, "a", "u1", records, callbacks, mode=MODERN) as client,
            ):
                return await client.call_tool(*CALLS[0])

    result = anyio.run(run)
    assert result.is_error is True and asked == []
    assert [(identity, reason) for _, identity, _, reason in _asked(records)] == [
        ("u1", "no_capability")
    ]


def test_two_callers_elicitations_never_cross() -> None:
    """`a` is asked during its call; while it holds its answer, `b` calls too: `b`'s
    elicitation could be either's (MCP does not say), so it is refused, never asked of `a`;
    `a`'s answer goes back to `a`'s call alone."""
    proxy = _proxy()
    records: list[AuditRecord] = []
    proxy.audit_server_requests(records.append)
    asked: dict[str, list[str]] = {"a": [], "b": []}
    b_done = anyio.Event()
    b_result: list[types.CallToolResult] = []

    def elicit_as(who: str) -> Any:
        async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked[who].append(params.message)
            if who == "a":
                with anyio.fail_after(DEADLINE_S):
                    await b_done.wait()  # `b`'s call runs, and ends, while `a` is being asked
            return types.ElicitResult(action="accept", content={"answer": f"from {who}"})

        return elicit

    async def run() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with (
                proxy.lifespan(),
                _caller(
                    proxy, "a", "alice", records, {"elicitation_callback": elicit_as("a")}
                ) as caller_a,
                _caller(
                    proxy, "b", "bob", records, {"elicitation_callback": elicit_as("b")}
                ) as caller_b,
                anyio.create_task_group() as group,
            ):

                async def call_b() -> None:
                    while not asked["a"]:  # once `a` is being asked
                        await anyio.sleep(0.02)
                    b_result.append(await caller_b.call_tool("ask", {"question": "b's?"}))
                    b_done.set()

                group.start_soon(call_b)
                a_result.append(await caller_a.call_tool("ask", {"question": "a's?"}))

    a_result: list[types.CallToolResult] = []
    anyio.run(run)
    assert _text(a_result[0]) == "told from a"
    assert "from a" not in _text(b_result[0])  # never the other caller's answer
    assert asked == {"a": ["a's?"], "b": []}  # never the other caller's question
    assert [(identity, reason) for _, identity, _, reason in _asked(records)] == [
        (None, "no_caller"),  # whose it was could not be told: nobody was asked
        ("alice", "answered"),
    ]


def test_a_caller_on_mcp_over_http_is_not_asked_and_the_refusal_is_audited(
    tmp_path: Path,
) -> None:
    """A 2025-11-25 caller over stateless /mcp has no stream to be asked on (a 2026-07-28
    caller is asked in input_required rounds: tests/test_input_required.py)."""
    mode = LEGACY
    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return await _elicited(context, params)

    db = tmp_path / "audit.sqlite3"
    token = create_token(db, "u1")
    argv = [sys.executable, "-m", "strictcall", "proxy", "--upstream-cmd", CHATTY]
    argv += ["--port", "0", "--db", str(db)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        listening = LISTENING.search(process.stdout.readline())
        assert listening is not None
        url = f"{listening.group(1)}/mcp"

        async def run() -> types.CallToolResult:
            with anyio.fail_after(DEADLINE_S):
                headers = {"Authorization": f"Bearer {token}"}
                async with (
                    httpx2.AsyncClient(headers=headers) as http,
                    Client(
                        streamable_http_client(url, http_client=http),
                        mode=mode,
                        elicitation_callback=elicit,
                    ) as client,
                ):
                    return await client.call_tool(*CALLS[0])

        result = anyio.run(run)
        rows = _audited(db, 1)
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE_S)
        if process.stdout is not None:
            process.stdout.close()
    assert result.is_error is True and asked == []
    assert [(r["tool"], r["identity"], r["reason"]) for r in rows] == [
        (f"{SERVER_REQUEST}elicitation:upstream", "u1", "no_capability")
    ]


POLICY_FILE = """
[[rule]]
name = "chat-no-elicitation"
who = ["u1"]
tools = ["chat_*"]
server_requests = ["sampling"]
"""


def test_federate_refuses_a_forbidden_elicitation_and_audits_it_in_its_database(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return await _elicited(context, params)

    config = tmp_path / "federation.toml"
    config.write_text(
        f"[upstreams.chat]\ncommand = {json.dumps(CHATTY)}\n"
        "budgets = { server_request_timeout_s = 5 }\n",
        encoding="utf-8",
    )
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY_FILE, encoding="utf-8")
    db = tmp_path / "audit.sqlite3"
    args = ["-m", "strictcall", "federate", "--config", str(config), "--policy", str(policy)]
    args += ["--stdio", "--identity", "u1", "--db", str(db)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = StdioServerParameters(command=sys.executable, args=args, env=env)
    errlog = tmp_path / "federate.stderr"

    async def run() -> list[types.CallToolResult]:
        with errlog.open("w") as stderr, anyio.fail_after(DEADLINE_S):
            callbacks: Callbacks = {"elicitation_callback": elicit, "sampling_callback": _sampled}
            async with Client(stdio_client(server, errlog=stderr), mode=LEGACY, **callbacks) as c:
                return [
                    await c.call_tool("chat_ask", {"question": "which?"}),
                    await c.call_tool("chat_sample", {"prompt": "say"}),
                ]

    forbidden, allowed = anyio.run(run)
    assert asked == []
    assert forbidden.is_error is True
    assert _text(allowed) == "sampled green"
    rows = _audited(db, 2)
    assert sorted((r["tool"], r["identity"], r["outcome"], r["reason"]) for r in rows) == [
        (f"{SERVER_REQUEST}elicitation:chat", "u1", "error", "refused_by_policy"),
        (f"{SERVER_REQUEST}sampling:chat", "u1", "ok", "answered"),
    ]
    said = errlog.read_text(encoding="utf-8")
    assert "the policy forbids it" in said and "which?" not in said


def _audited(db: Path, minimum: int) -> list[dict[str, Any]]:
    """The audit's records of requests of the upstreams', polled until `minimum` are
    written."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        done = strictcall("audit", "--json", "--limit", "200", "--db", str(db))
        assert done.returncode == 0, done.stderr
        records = [json.loads(line) for line in done.stdout.splitlines()]
        found = [
            r
            for r in records
            if isinstance(r["tool"], str) and r["tool"].startswith(SERVER_REQUEST)
        ]
        if len(found) >= minimum or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize("value", [0, "60", 1.5])
def test_a_federations_server_request_budgets_are_whole_numbers_of_at_least_one(
    value: object,
) -> None:
    for budget in ("server_request_timeout_s", "max_server_answer_bytes"):
        upstream = {"command": CHATTY, "budgets": {budget: value}}
        with pytest.raises(ConfigError):
            federation_config({"upstreams": {"chat": upstream}})
    taken = {"command": CHATTY, "budgets": {"server_request_timeout_s": 1}}
    (member,) = federation_config({"upstreams": {"chat": taken}}).upstreams
    assert member.budgets.server_request_timeout_s == 1
    assert member.budgets.max_server_answer_bytes == Budgets().max_server_answer_bytes


def test_an_identitys_own_process_keeps_its_upstreams_answer_budget_and_audit(
    tmp_path: Path,
) -> None:
    answers = iter(["x" * 20, "x" * 21])

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": next(answers)})

    config = tmp_path / "federation.toml"
    config.write_text(
        f'[upstreams.chat]\ncommand = {json.dumps(CHATTY)}\ninstances = "per-identity"\n'
        f"budgets = {{ max_server_answer_bytes = {_answer_bytes('x' * 20)} }}\n",
        encoding="utf-8",
    )
    db = tmp_path / "audit.sqlite3"
    args = ["-m", "strictcall", "federate", "--config", str(config)]
    args += ["--stdio", "--identity", "u1", "--db", str(db)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = StdioServerParameters(command=sys.executable, args=args, env=env)

    async def run() -> list[types.CallToolResult]:
        with (tmp_path / "federate.stderr").open("w") as stderr, anyio.fail_after(DEADLINE_S):
            callbacks: Callbacks = {"elicitation_callback": elicit}
            async with Client(stdio_client(server, errlog=stderr), mode=LEGACY, **callbacks) as c:
                return [await c.call_tool("chat_ask", {"question": "which?"}) for _ in range(2)]

    at_limit, over = anyio.run(run)
    assert _text(at_limit) == "told " + "x" * 20
    assert "told" not in _text(over)
    rows = _audited(db, 2)
    assert sorted((r["tool"], r["identity"], r["reason"]) for r in rows) == [
        (f"{SERVER_REQUEST}elicitation:chat", "u1", "answered"),
        (f"{SERVER_REQUEST}elicitation:chat", "u1", "too_large"),
    ]
