"""docs/federation.md's "Standing it up for a team, step by step", followed as an operator
would: the page's own `federation.toml` and `policy.toml`, filled in where the page says the
operator fills in (the upstreams: mcp-server-time as `files` on stdio in bubblewrap and
server-everything as `tickets` over streamable HTTP; the credentials marked `...`; the hosts),
a PostgreSQL store, the page's shared quotas on Redis under a prefix of the test's own, the real
oidc-provider as the team's identity provider, `strictcall policy check`, then `strictcall
federate` on port 0: a provider's token calls a tool of each upstream, the page's rate refuses
a caller past it, and an operator's token opens the page and /metrics."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

import redis_state
from doc_pages import code_block
from mcp_peers import EVERYTHING_JS, everything_command
from oidc_provider import Provider, SigningKey, free_port
from real_servers import SERVERS_BIN
from servers import lines_of, strictcall
from servers_setup import ensure_servers
from stdio_peer import until
from strictcall.errors import RATE_LIMITED
from strictcall.transports.jsonrpc import ERROR_CODES
from test_federation import toml_text

DEADLINE_S = 30.0
STOP_S = 20.0
RESOURCE = "https://agents.team.example/mcp"  # what the agents name: the provider's audience


def fill(text: str, written: str, filled: str) -> str:
    """`text` with the one place the page writes `written` filled in by the operator."""
    assert text.count(written) == 1, written
    return text.replace(written, filled)


def stop(process: subprocess.Popen[Any]) -> int:
    if process.poll() is None:
        process.terminate()
    try:
        return process.wait(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(timeout=STOP_S)


@pytest.fixture
def servers() -> None:
    why = ensure_servers()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real MCP servers are needed on CI: {why}")
        pytest.skip(f"the real MCP servers are not installed: {why}")
    everything_command()  # node and server-everything, or skip


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[Provider]:
    running = Provider(tmp_path, {RESOURCE: "jwt"}, [SigningKey("k1")])
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def tickets() -> Iterator[str]:
    """server-everything over streamable HTTP: the page's `tickets`, an upstream already running."""
    port = free_port()
    process = subprocess.Popen(
        ["node", str(EVERYTHING_JS), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    def listening() -> bool:
        assert process.poll() is None, "server-everything exited at start"
        try:
            httpx.get(url, timeout=1.0)
        except httpx.TransportError:
            return False
        return True

    try:
        until(listening, "server-everything listens")
        yield url
    finally:
        stop(process)


@pytest.fixture
def quota_prefix() -> Iterator[str]:
    redis_state.require()
    with redis_state.fresh_prefix() as prefix:
        yield prefix


def post(base: str, path: str, body: dict[str, Any], token: str) -> dict[str, Any]:
    answer = httpx.post(
        base + path,
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=DEADLINE_S,
    )
    assert answer.status_code == 200, answer.text
    reply: dict[str, Any] = answer.json()
    return reply


def call(name: str, arguments: dict[str, Any], request_id: int) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def test_an_operator_stands_the_federation_up_from_the_page_alone(
    bwrap: None,
    servers: None,
    provider: Provider,
    tickets: str,
    quota_prefix: str,
    pg_url: str,
    tmp_path: Path,
) -> None:
    # 1. The config: the page's federation.toml, the upstreams and the `...` the operator's.
    share = tmp_path / "share"
    share.mkdir()
    time_server = shlex.join([str(SERVERS_BIN / "mcp-server-time"), "--local-timezone", "UTC"])
    config = code_block("federation.md", "# federation.toml")
    config = fill(config, '"node /srv/mcp/files.js --root /srv/share"', toml_text(time_server))
    config = fill(config, 'FILES_TOKEN = "..."', 'FILES_TOKEN = "files-secret-of-the-team"')
    config = fill(config, '"/srv/share"', toml_text(str(share)))
    config = fill(config, '"https://tickets.internal/mcp"', toml_text(tickets))
    config = fill(config, '"Bearer ..."', '"Bearer tickets-secret-of-the-team"')
    assert "..." not in config
    (tmp_path / "federation.toml").write_text(config, encoding="utf-8")

    # 4. Quotas shared by several processes: the page's policy.toml, on this Redis.
    policy = code_block("federation.md", "# policy.toml")
    policy = fill(policy, '"redis://HOST:6379/0"', toml_text(redis_state.URL))
    policy = fill(policy, '"strictcall:quota:"', toml_text(quota_prefix))
    assert "..." not in policy
    (tmp_path / "policy.toml").write_text(policy, encoding="utf-8")
    checked = strictcall("policy", "check", str(tmp_path / "policy.toml"))
    assert checked.returncode == 0, checked.stderr
    burst = int(re.findall(r"^burst = (\d+)", policy, re.MULTILINE)[0])

    # 5. Start it (2. the store on PostgreSQL, 3. the identity provider by the flags).
    argv = [
        *(sys.executable, "-m", "strictcall", "federate", "--config", "federation.toml"),
        *("--db", pg_url, "--policy", "policy.toml"),
        *("--oauth-issuer", provider.issuer, "--oauth-resource", RESOURCE),
        *("--host", "127.0.0.1", "--port", "0"),
    ]
    federate = subprocess.Popen(
        argv,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert federate.stdout is not None
    output = lines_of(federate.stdout)
    seen: list[str] = []
    try:
        deadline = time.monotonic() + DEADLINE_S * 2
        base = None
        while base is None:
            line = output.get(timeout=max(deadline - time.monotonic(), 0.01))
            assert line is not None, "".join(seen)
            seen.append(line)
            listening = re.search(r"listening on (http://[0-9.]+:\d+)", line)
            base = listening.group(1) if listening else None
        assert any("bwrap" in line and "files" in line for line in seen), "".join(seen)

        agent = provider.token(RESOURCE)

        def served() -> list[str]:
            listed = post(base, "/rpc", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, agent)
            names = [tool["name"] for tool in listed["result"]["tools"]]
            both = {"files_get_current_time", "jira_echo"} <= set(names)
            return names if both else []

        try:
            until(served, "both upstreams' tools served")
        except AssertionError:  # with what the federation said meanwhile
            while not output.empty():
                seen.append(str(output.get()))
            raise AssertionError("".join(seen)) from None
        now = post(base, "/rpc", call("files_get_current_time", {"timezone": "UTC"}, 2), agent)
        assert "error" not in now, now
        assert "UTC" in json.dumps(now["result"])
        assert redis.Redis.from_url(redis_state.URL).keys(quota_prefix + "*")  # shared on Redis

        # Past the page's burst, one caller's calls to one tool are refused, never run.
        answers = [post(base, "/rpc", call("jira_echo", {"message": "hi"}, 10), agent)]
        while "error" not in answers[-1] and len(answers) <= 3 * burst:
            echo = call("jira_echo", {"message": "hi"}, 10 + len(answers))
            answers.append(post(base, "/rpc", echo, agent))
        assert "error" not in answers[0] and "hi" in json.dumps(answers[0]["result"])
        assert burst <= len(answers) - 1 <= 3 * burst, answers
        error = answers[-1]["error"]
        assert error["code"] == ERROR_CODES[RATE_LIMITED.stage][0], error
        assert (error["data"]["code"], error["data"]["retryable"]) == (RATE_LIMITED.code, True)
        assert error["data"]["retry_after_ms"] > 0

        # 6. The page: an operator's token, on the same store.
        made = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", pg_url)
        assert made.returncode == 0, made.stderr
        operator = made.stdout.strip().splitlines()[-1]
        for path in ("/", "/metrics"):
            page = httpx.get(
                base + path, headers={"Authorization": f"Bearer {operator}"}, timeout=DEADLINE_S
            )
            assert page.status_code == 200, (path, page.text[:500])
        held = strictcall("tools", "diff", "--db", pg_url)  # nothing held for approval
        assert held.returncode == 0, held.stderr
        assert federate.poll() is None
    finally:
        status = stop(federate)
    assert status == 0
