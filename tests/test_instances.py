"""`instances = "per-identity"`: each caller identity gets its own process of the real npm
`@modelcontextprotocol/server-memory` (its own home, its own graph), started on first call,
stopped when idle, at most `max_instances` at once (then `at_capacity`, retryable, with
`retry_after_ms`); the listing is the shared process's. Over HTTP, through the official
client, as `strictcall federate` serves it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from mcp_peers import UPSTREAMS, everything_command
from promtool import need_promtool
from servers import create_token
from stdio_peer import DEADLINE_S
from strictcall.errors import AT_CAPACITY, CATALOGUE

MEMORY_JS = UPSTREAMS / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist"
LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")


VIAS = ("federate", "proxy")
"""A federation's upstream with `instances = "per-identity"`, and `strictcall proxy
--instances per-identity`: the same instances behind either."""


@dataclass
class Running:
    base_url: str
    process: subprocess.Popen[str]
    tokens: dict[str, str]
    stderr: Path
    via: str

    def tool(self, name: str) -> str:
        """The served name of server-memory's tool `name` (a federation prefixes it)."""
        return f"memory_{name}" if self.via == "federate" else name

    @property
    def upstream(self) -> str:
        """The upstream's name on /metrics and the page."""
        return "memory" if self.via == "federate" else "upstream"


@pytest.fixture(scope="module", params=VIAS)
def federation(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Running]:
    yield from _serve(tmp_path_factory.mktemp("instances"), request.param, idle_s=600)


@pytest.fixture(params=VIAS)
def quickly_idle(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Running]:
    yield from _serve(tmp_path, request.param, idle_s=1)


@pytest.fixture(params=VIAS)
def soon_idle(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Running]:
    # long enough for two instances to be seen running together, short enough to wait out
    yield from _serve(tmp_path, request.param, idle_s=6)


def _argv(tmp: Path, via: str, idle_s: float) -> list[str]:
    """The command serving server-memory with at most two per-identity instances, each
    keeping its graph in its own home."""
    memory = shlex.join(["node", str(MEMORY_JS / "index.js")])
    if via == "proxy":
        return [
            *("proxy", "--upstream-cmd", memory, "--upstream-env", "MEMORY_FILE_PATH=~/m.jsonl"),
            *(
                "--instances",
                "per-identity",
                "--max-instances",
                "2",
                "--instance-idle",
                str(idle_s),
            ),
        ]
    config = tmp / "federation.toml"
    config.write_text(
        f"[upstreams.memory]\ncommand = {json.dumps(memory)}\n"
        f'instances = "per-identity"\nmax_instances = 2\nidle = {idle_s}\n'
        "credentials.env = { MEMORY_FILE_PATH = '~/memory.jsonl' }\n",
        encoding="utf-8",
    )
    return ["federate", "--config", str(config)]


def _serve(tmp: Path, via: str, *, idle_s: float) -> Iterator[Running]:
    everything_command()  # installs tests/upstreams (npm ci) when it is not yet
    db = tmp / "federation.sqlite3"
    tokens = {who: create_token(db, who) for who in ("u1", "u2", "u3")}
    stderr = tmp / "stderr"
    argv = [sys.executable, "-m", "strictcall", *_argv(tmp, via, idle_s)]
    with stderr.open("wb") as errors:
        process = subprocess.Popen(
            [*argv, "--port", "0", "--db", str(db)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    assert process.stdout is not None
    match = LISTENING.search(process.stdout.readline())
    if match is None:
        process.kill()
        raise AssertionError(stderr.read_text(encoding="utf-8"))
    yield Running(match.group(1), process, tokens, stderr, via)
    process.terminate()
    process.stdout.close()
    assert process.wait(timeout=DEADLINE_S) == 0


@asynccontextmanager
async def connect(running: Running, who: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {running.tokens[who]}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=DEADLINE_S) as http,
        Client(
            streamable_http_client(running.base_url + "/mcp", http_client=http),
            read_timeout_seconds=DEADLINE_S,
        ) as client,
    ):
        yield client


def test_another_identity_never_sees_the_first_ones_memory_graph(federation: Running) -> None:
    entity = {"name": "private plan", "entityType": "plan", "observations": ["u1 only"]}

    async def session() -> None:
        with anyio.fail_after(DEADLINE_S * 3):
            async with connect(federation, "u1") as u1:
                made = await u1.call_tool(
                    federation.tool("create_entities"), {"entities": [entity]}
                )
                assert made.is_error is False, made
                found = await u1.call_tool(federation.tool("search_nodes"), {"query": "private"})
                assert "private plan" in json.dumps(found.structured_content)
            async with connect(federation, "u2") as u2:
                names = {tool.name for tool in (await u2.list_tools()).tools}
                assert federation.tool("search_nodes") in names  # the listing is shared
                found = await u2.call_tool(federation.tool("search_nodes"), {"query": "private"})
                assert found.is_error is False, found
                assert "private plan" not in json.dumps(found.structured_content)
                graph = await u2.call_tool(federation.tool("read_graph"), {})
                assert "private plan" not in json.dumps(graph.structured_content)

    anyio.run(session)


def test_past_max_instances_a_new_identity_is_answered_at_capacity(federation: Running) -> None:
    async def session() -> None:
        with anyio.fail_after(DEADLINE_S * 3):
            for who in ("u1", "u2"):  # both running (the first test, or now)
                async with connect(federation, who) as client:
                    await client.call_tool(federation.tool("read_graph"), {})
            async with connect(federation, "u3") as u3:
                refused = await u3.call_tool(federation.tool("read_graph"), {})
                assert refused.is_error is True
                error = json.loads(refused.content[0].text)  # type: ignore[union-attr]
                assert error["code"] == AT_CAPACITY.code and error["retryable"] is True
                assert error["stage"] == AT_CAPACITY.stage
                assert error["retry_after_ms"] > 0

    anyio.run(session)


def test_an_idle_instance_is_stopped_and_its_identity_gets_a_new_one(
    quickly_idle: Running,
) -> None:
    async def call(who: str) -> None:
        async with connect(quickly_idle, who) as client:
            assert (await client.call_tool(quickly_idle.tool("read_graph"), {})).is_error is False

    def lines(word: str) -> int:
        return quickly_idle.stderr.read_text(encoding="utf-8").count(f"instance {word}")

    anyio.run(call, "u1")
    deadline = time.monotonic() + DEADLINE_S
    while lines("stopped, idle") < 1:
        assert time.monotonic() < deadline, quickly_idle.stderr.read_text(encoding="utf-8")
        time.sleep(0.05)
    anyio.run(call, "u1")  # started again on its next call
    assert lines("started") == 2


def _instances_seen(running: Running) -> tuple[dict[str, float], dict[str, object]]:
    """The instance samples of /metrics by name, and the upstream's row of stats.json."""
    text = httpx2.get(running.base_url + "/metrics", timeout=DEADLINE_S).text
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("strictcall_upstream_instance")
        and sample.labels == {"upstream": running.upstream}
    }
    stats = httpx2.get(running.base_url + "/ops/stats.json", timeout=DEADLINE_S).json()
    (row,) = stats["upstreams"]
    return samples, row


def test_metrics_and_the_page_count_each_identitys_instance_until_it_is_idle(
    soon_idle: Running,
) -> None:
    async def calls() -> None:
        with anyio.fail_after(DEADLINE_S * 3):
            for who in ("u1", "u2"):
                async with connect(soon_idle, who) as client:
                    assert (
                        await client.call_tool(soon_idle.tool("read_graph"), {})
                    ).is_error is False

    anyio.run(calls)
    samples, row = _instances_seen(soon_idle)
    assert samples["strictcall_upstream_instances"] == 2
    assert samples["strictcall_upstream_instance_starts_total"] == 2
    assert samples["strictcall_upstream_instance_idle_stops_total"] == 0
    assert (row["instances"], row["max_instances"]) == (2, 2)
    text = httpx2.get(soon_idle.base_url + "/metrics", timeout=DEADLINE_S).text
    checked = subprocess.run(
        [need_promtool(), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert "instance" not in checked.stdout + checked.stderr, checked  # no lint on ours
    deadline = time.monotonic() + DEADLINE_S * 2
    while samples["strictcall_upstream_instances"] != 0 or row["instances"] != 0:
        assert time.monotonic() < deadline, (samples, row)
        time.sleep(0.1)
        samples, row = _instances_seen(soon_idle)
    assert samples["strictcall_upstream_instance_idle_stops_total"] == 2
    assert (row["instances"], row["max_instances"]) == (0, 2)
    page = httpx2.get(soon_idle.base_url + "/", timeout=DEADLINE_S).text
    assert "<th>instances</th>" in page and "<td class=n>0 / 2</td>" in page


def test_at_capacity_is_in_the_catalogue_retryable_at_execute() -> None:
    assert AT_CAPACITY in CATALOGUE
    assert (AT_CAPACITY.code, AT_CAPACITY.stage.value, AT_CAPACITY.retryable) == (
        "at_capacity",
        "execute",
        True,
    )


PROXY_MISUSES = {
    "per-identity on stdio": ["--stdio", "--identity", "u1", "--instances", "per-identity"],
    "settings without per-identity": ["--max-instances", "3"],
    "idle without per-identity": ["--instance-idle", "3"],
    "no instance at all": ["--instances", "per-identity", "--max-instances", "0"],
    "idle of zero": ["--instances", "per-identity", "--instance-idle", "0"],
    "idle of nan": ["--instances", "per-identity", "--instance-idle", "nan"],
    "env without its name": ["--upstream-env", "=s3cret-value"],
    "env without a value's equals": ["--upstream-env", "s3cret-value"],
    "env with a bad name": ["--upstream-env", "1BAD=s3cret-value"],
    "env for a url": ["--upstream-url", "http://127.0.0.1:9/mcp", "--upstream-env", "A=s3cret"],
    "per-identity for a url": [
        *("--upstream-url", "http://127.0.0.1:9/mcp", "--instances", "per-identity"),
    ],
}


@pytest.mark.parametrize("flags", PROXY_MISUSES.values(), ids=PROXY_MISUSES.keys())
def test_a_proxys_instance_and_environment_flags_misused_are_one_line_and_exit_2(
    flags: list[str], tmp_path: Path
) -> None:
    upstream = ["--upstream-cmd", "true"]
    if flags[0] == "--upstream-url":
        upstream, flags = flags[:2], flags[2:]
    argv = [sys.executable, "-m", "strictcall", "proxy", *upstream, *flags]
    done = subprocess.run(
        [*argv, "--db", str(tmp_path / "s.sqlite3")],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("strictcall proxy: --")
    assert "s3cret" not in line  # the value may be a credential: never printed
    assert not (tmp_path / "s.sqlite3").exists()  # refused before anything was opened
