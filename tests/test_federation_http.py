"""`strictcall federate` over HTTP, through the official MCP Python client on both wire versions
(2025-11-25, the handshake era, and 2026-07-28 with server/discover and the routing headers),
with a rug pull counted in /metrics."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_peers import everything_command, fastmcp_command
from mcp_results import tool_error
from servers import create_token, strictcall
from stdio_peer import DEADLINE_S
from strictcall.errors import FORBIDDEN_OR_MISSING, TOOL_CHANGED
from strictcall.services.proxy.stdio import AnswerTooLarge
from strictcall.services.proxy.upstream import Upstream, UpstreamSpec
from strictcall.transports.jsonrpc import ERROR_CODES

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")


@dataclass
class Running:
    base_url: str
    process: subprocess.Popen[str]
    token: str
    operator: str


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("federation-http")
    db = tmp / "federation.sqlite3"
    token = create_token(db, "u1")
    made = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", str(db))
    assert made.returncode == 0, made.stderr
    operator = made.stdout.strip().splitlines()[-1]
    config = tmp / "federation.toml"
    config.write_text(
        f"[upstreams.notes]\ncommand = {json.dumps(fastmcp_command() + ' --rug-pull')}\n"
        f"[upstreams.everything]\ncommand = {json.dumps(everything_command())}\n",
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "strictcall", "federate", "--config", str(config)]
    process = subprocess.Popen(
        [*argv, "--port", "0", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    first = process.stdout.readline()  # the one line, once it listens (or "" if it died)
    match = LISTENING.search(first)
    if match is None:
        process.kill()
        raise AssertionError(first)
    yield Running(match.group(1), process, token, operator)
    process.terminate()
    process.stdout.close()
    assert process.wait(timeout=DEADLINE_S) == 0


Mode = Literal["legacy", "auto"]


async def bounded(work: Callable[[], Awaitable[None]]) -> None:
    with anyio.fail_after(DEADLINE_S * 2):
        await work()


@asynccontextmanager
async def connect(running: Running, mode: Mode) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {running.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http,
        Client(
            streamable_http_client(running.base_url + "/mcp", http_client=http),
            mode=mode,
            read_timeout_seconds=DEADLINE_S,
        ) as client,
    ):
        yield client


@pytest.mark.parametrize(("mode", "version"), [("legacy", HANDSHAKE), ("auto", MODERN)])
def test_the_official_client_lists_and_calls_prefixed_tools_on_both_wire_versions(
    federation: Running, mode: Mode, version: str
) -> None:
    async def session() -> None:
        async with connect(federation, mode) as client:
            assert client.protocol_version == version
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names == sorted(names)
            assert {"notes_add", "everything_echo"} <= set(names)
            added = await client.call_tool("notes_add", {"a": 2, "b": 3})
            assert added.structured_content == {"result": 5}
            echoed = await client.call_tool("everything_echo", {"message": "hi"})
            assert echoed.is_error is False

    anyio.run(bounded, session)


@pytest.mark.parametrize(("mode", "version"), [("legacy", HANDSHAKE), ("auto", MODERN)])
def test_the_official_client_lists_and_reads_resources_and_prompts_on_both_wire_versions(
    federation: Running, mode: Mode, version: str
) -> None:
    async def session() -> None:
        async with connect(federation, mode) as client:
            assert client.protocol_version == version
            capabilities = client.server_capabilities
            assert capabilities is not None
            assert capabilities.resources is not None and capabilities.prompts is not None
            resources = (await client.list_resources()).resources
            uris = [resource.uri for resource in resources]
            assert uris == sorted(uris)
            assert {r.uri: r.name for r in resources}["memo://refunds"] == "notes_refunds"
            read = await client.read_resource("memo://refunds")
            assert [c.text for c in read.contents if isinstance(c, types.TextResourceContents)] == [
                "The refund window is 7 days."
            ]
            prompts = [prompt.name for prompt in (await client.list_prompts()).prompts]
            assert prompts == sorted(prompts) and {
                "notes_greet",
                "everything_simple-prompt",
            } <= set(prompts)
            got = await client.get_prompt("notes_greet", {"name": "Ada"})
            texts = [
                m.content.text for m in got.messages if isinstance(m.content, types.TextContent)
            ]
            assert texts == ["Greet Ada warmly."]
            with pytest.raises(MCPError) as unlisted:
                await client.read_resource("memo://never-listed")
            assert unlisted.value.code == ERROR_CODES[FORBIDDEN_OR_MISSING.stage][0]
            assert unlisted.value.error.data == FORBIDDEN_OR_MISSING.as_error()

    anyio.run(bounded, session)


def post(federation: Running, message: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(
        federation.base_url + "/mcp",
        json=message,
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {federation.token}",
            "MCP-Protocol-Version": MODERN,
            **headers,
        },
        timeout=DEADLINE_S,
    )


ENVELOPE = {
    types.PROTOCOL_VERSION_META_KEY: MODERN,
    types.CLIENT_CAPABILITIES_META_KEY: {},
    types.CLIENT_INFO_META_KEY: {"name": "federation-test", "version": "1"},
}


def test_a_routing_header_that_disagrees_with_the_body_is_refused_header_mismatch(
    federation: Running,
) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "notes_add", "arguments": {"a": 1, "b": 1}, "_meta": ENVELOPE},
    }
    agreed = post(federation, call, **{"Mcp-Method": "tools/call", "Mcp-Name": "notes_add"})
    assert agreed.status_code == 200
    assert agreed.json()["result"]["structuredContent"] == {"result": 2}
    refused = post(federation, call, **{"Mcp-Method": "tools/call", "Mcp-Name": "notes_slow"})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == types.HEADER_MISMATCH


def test_server_discover_is_answered(federation: Running) -> None:
    discover = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "server/discover",
        "params": {"_meta": ENVELOPE},
    }
    answer = post(federation, discover, **{"Mcp-Method": "server/discover"}).json()
    assert MODERN in answer["result"]["supportedVersions"], answer


def test_a_rug_pull_answers_tool_changed_and_is_counted_in_metrics(federation: Running) -> None:
    async def session() -> None:
        async with connect(federation, "auto") as client:
            pulled = await client.call_tool("notes_rug_pull", {})
            assert pulled.is_error is False
            for _ in range(int(DEADLINE_S * 20)):  # the relisting follows the notification
                result = await client.call_tool("notes_add", {"a": 1, "b": 1})
                if result.is_error:
                    error = tool_error(result)
                    assert (error["code"], error["stage"], error["retryable"]) == (
                        TOOL_CHANGED.code,
                        TOOL_CHANGED.stage.value,
                        TOOL_CHANGED.retryable,
                    )
                    return
                await anyio.sleep(0.05)
            raise AssertionError("the change was never held back")

    anyio.run(bounded, session)
    metrics = httpx.get(
        federation.base_url + "/metrics",
        headers={"Authorization": f"Bearer {federation.operator}"},
        timeout=DEADLINE_S,
    )
    assert metrics.status_code == 200
    assert "strictcall_tool_changes_total 1.0" in metrics.text.splitlines()


def test_an_http_upstreams_answer_over_the_cap_is_refused_on_the_post_path(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*shlex.split(fastmcp_command()), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:  # poll until it listens, with a deadline
            with socket.socket() as attempt:
                if attempt.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the upstream did not listen"
            time.sleep(0.05)

        async def calls() -> None:
            spec = UpstreamSpec.of_url(f"http://127.0.0.1:{port}/mcp", [])
            with (tmp_path / "log").open("w") as log:
                for cap, fits in ((100_000, True), (20, False)):
                    upstream = Upstream(
                        spec, lambda listing: None, errlog=log, max_result_bytes=cap
                    )
                    async with upstream.running():
                        if fits:  # the POST path, not the session's: a handshake-era session
                            assert upstream._live is not None and upstream._live.http is not None
                            assert upstream._live.http.takes_calls()
                            result = await upstream.call("add", {"a": 1, "b": 2})
                            assert result.structured_content == {"result": 3}
                        else:
                            with pytest.raises(AnswerTooLarge):
                                await upstream.call("add", {"a": 1, "b": 2})

        anyio.run(bounded, calls)
    finally:
        server.kill()
        server.wait(timeout=DEADLINE_S)


@pytest.mark.parametrize(("mode", "version"), [("legacy", HANDSHAKE), ("auto", MODERN)])
def test_the_official_client_on_stdio_lists_and_calls_on_both_wire_versions(
    tmp_path: Path, mode: Mode, version: str
) -> None:
    from mcp.client.stdio import StdioServerParameters

    config = tmp_path / "federation.toml"
    config.write_text(f"[upstreams.notes]\ncommand = {json.dumps(fastmcp_command())}\n")
    federate = ["federate", "--config", str(config), "--stdio", "--identity", "u1"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "strictcall", *federate, "--db", str(tmp_path / "db.sqlite3")],
    )

    async def session() -> None:
        async with Client(params, mode=mode, read_timeout_seconds=DEADLINE_S) as client:
            assert client.protocol_version == version
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names == sorted(names) and "notes_add" in names
            added = await client.call_tool("notes_add", {"a": 2, "b": 3})
            assert added.structured_content == {"result": 5}

    anyio.run(bounded, session)
