"""A federation's resources/read and prompts/get audited as tools/call is
(`strictcall.core.record.content_record`): on stdio and on HTTP, through the official MCP client
on both wire versions, read back with `strictcall audit`; the URI or name served (bounded), the
caller's invented ones never kept; counted in /metrics under their method, never their URI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families

from mcp_peers import fastmcp_command, proxy_argv
from servers import create_token, strictcall
from stdio_peer import DEADLINE_S
from strictcall.core.policy import DEFAULT_DENY
from strictcall.core.record import AUDIT_URI_MAX, PROMPT_GET, RESOURCE_READ
from strictcall.errors import FORBIDDEN_OR_MISSING, ErrorKind
from test_federation_content import (
    SDK_NOTES,
    Mode,
    federate_args,
    run_session,
    write_config,
)

LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")
INVENTED_URI = "nope://never-listed-secret"
INVENTED_PROMPT = "made_up_secret\x1b]0;x\x07"
LONG_URI = "notes://" + "n" * (AUDIT_URI_MAX * 2)


def write_policy(path: Path) -> Path:
    path.write_text('[[rule]]\nname = "sdk"\nwho = ["u1"]\ntools = ["sdk_*"]\n', encoding="utf-8")
    return path


async def read_and_get(client: Client) -> None:
    """One of each: a listed resource, a templated one (too long to keep whole), a forbidden
    one, an invented one; a prompt, a forbidden one and an invented one."""
    assert (await client.read_resource("notes://n1")).contents
    with contextlib.suppress(MCPError):  # the upstream's answer is its own; the record is checked
        await client.read_resource(LONG_URI)
    for uri in ("memo://refunds", INVENTED_URI):
        with pytest.raises(MCPError):
            await client.read_resource(uri)
    assert (await client.get_prompt("sdk_summarize", {"note_id": "n1"})).messages
    for name in ("fast_greet", INVENTED_PROMPT):
        with pytest.raises(MCPError):
            await client.get_prompt(name, {"name": "x"})


def audit_records(db: Path | str, minimum: int) -> list[dict[str, Any]]:
    """The audit's records of content (newest first), polled until `minimum` are written."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        done = strictcall("audit", "--json", "--limit", "200", "--db", str(db))
        assert done.returncode == 0, done.stderr
        assert "secret" not in done.stdout  # an invented URI or name is never kept
        records = [json.loads(line) for line in done.stdout.splitlines()]
        content = [
            r
            for r in records
            if isinstance(r["tool"], str) and r["tool"].startswith((RESOURCE_READ, PROMPT_GET))
        ]
        if len(content) >= minimum or time.monotonic() > deadline:
            return content
        time.sleep(0.05)


def assert_refused(record: dict[str, Any], kind: ErrorKind) -> None:
    assert (record["outcome"], record["code"], record["stage"]) == (
        "error",
        kind.code,
        kind.stage.value,
    )


def assert_audited(records: list[dict[str, Any]], identity: str) -> None:
    """The seven reads and gets of `read_and_get`, as their records keep them."""
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        assert record["identity"] == identity
        assert isinstance(record["call_id"], str) and record["call_id"].startswith("mcp-")
        assert record["latency_us"] >= 0
        by_tool.setdefault(record["tool"], []).append(record)
    kept_long = RESOURCE_READ + LONG_URI[:AUDIT_URI_MAX]
    assert set(by_tool) == {
        RESOURCE_READ + "notes://n1",
        kept_long,
        RESOURCE_READ + "memo://refunds",
        RESOURCE_READ,  # the invented URI: its text not kept
        PROMPT_GET + "sdk_summarize",
        PROMPT_GET + "fast_greet",
        PROMPT_GET,
    }
    for ok in (RESOURCE_READ + "notes://n1", PROMPT_GET + "sdk_summarize"):
        assert [(r["outcome"], r["code"], r["stage"]) for r in by_tool[ok]] == [("ok", None, None)]
    for denied in (RESOURCE_READ + "memo://refunds", PROMPT_GET + "fast_greet"):
        (record,) = by_tool[denied]
        assert_refused(record, FORBIDDEN_OR_MISSING)
        assert record["reason"] == DEFAULT_DENY  # the operator sees the policy's refusal
    for invented in (RESOURCE_READ, PROMPT_GET):
        (record,) = by_tool[invented]
        assert_refused(record, FORBIDDEN_OR_MISSING)
        assert record["reason"] is None  # nothing served by that name: no rule to name


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_reads_and_gets_on_stdio_are_audited_with_the_served_uri_or_name(
    tmp_path: Path, mode: Mode
) -> None:
    config = write_config(
        tmp_path / "federation.toml", {"sdk": SDK_NOTES, "fast": fastmcp_command()}
    )
    policy = write_policy(tmp_path / "policy.toml")
    db = tmp_path / "db.sqlite3"
    run_session(
        federate_args(config, db, "--policy", str(policy)), mode, read_and_get, tmp_path / "err"
    )
    assert_audited(audit_records(db, 7), "u1")
    printed = strictcall("audit", "--limit", "200", "--db", str(db))
    assert printed.returncode == 0, printed.stderr
    assert "\x1b" not in printed.stdout and "secret" not in printed.stdout


@pytest.fixture
def federation_http(tmp_path: Path) -> Iterator[tuple[str, Path, str, str]]:
    """A federation over HTTP (its base URL, db, a caller's and the operator's tokens)."""
    db = tmp_path / "federation.sqlite3"
    token = create_token(db, "u1")
    made = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", str(db))
    assert made.returncode == 0, made.stderr
    operator = made.stdout.strip().splitlines()[-1]
    config = write_config(
        tmp_path / "federation.toml", {"sdk": SDK_NOTES, "fast": fastmcp_command()}
    )
    policy = write_policy(tmp_path / "policy.toml")
    argv = [sys.executable, "-m", "strictcall", "federate", "--config", str(config)]
    process = subprocess.Popen(
        [*argv, "--port", "0", "--db", str(db), "--policy", str(policy)],
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
    try:
        yield match.group(1), db, token, operator
    finally:
        process.terminate()
        process.stdout.close()
        assert process.wait(timeout=DEADLINE_S) == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_reads_and_gets_over_http_are_audited_and_counted_by_method(
    federation_http: tuple[str, Path, str, str], mode: Mode
) -> None:
    base_url, db, token, operator = federation_http

    async def session() -> None:
        with anyio.fail_after(DEADLINE_S * 2):
            async with (
                httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {token}"}, timeout=DEADLINE_S
                ) as http,
                Client(
                    streamable_http_client(base_url + "/mcp", http_client=http),
                    mode=mode,
                    read_timeout_seconds=DEADLINE_S,
                ) as client,
            ):
                await read_and_get(client)

    anyio.run(session)
    assert_audited(audit_records(db, 7), "u1")

    metrics = httpx.get(
        base_url + "/metrics", headers={"Authorization": f"Bearer {operator}"}, timeout=DEADLINE_S
    )
    assert metrics.status_code == 200
    counted: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(metrics.text):
        for sample in family.samples:
            if sample.name == "strictcall_calls_total":
                labels = sample.labels
                assert "notes://" not in labels["tool"] and labels["tool"] != "sdk_summarize"
                key = (labels["tool"], labels["code"], labels["transport"])
                counted[key] = counted.get(key, 0.0) + sample.value
    # the page's live counts keep one latency row per method, never one per URI read
    stats = httpx.get(
        base_url + "/ops/stats.json",
        headers={"Authorization": f"Bearer {operator}"},
        timeout=DEADLINE_S,
    )
    assert stats.status_code == 200
    rows = {row["tool"] for row in stats.json()["live"]["latency"]}
    assert {"resources/read", "prompts/get"} <= rows
    assert not any(row.startswith((RESOURCE_READ, PROMPT_GET)) for row in rows)
    ok, refused = "none", FORBIDDEN_OR_MISSING.code
    assert counted[("resources/read", ok, "mcp")] >= 1
    assert counted[("resources/read", refused, "mcp")] == 2
    assert counted[("prompts/get", ok, "mcp")] == 1
    assert counted[("prompts/get", refused, "mcp")] == 2


def test_the_proxys_reads_and_gets_are_audited_too(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"

    async def work(client: Client) -> None:
        assert (await client.read_resource("notes://n1")).contents
        assert (await client.get_prompt("summarize", {"note_id": "n1"})).messages
        with pytest.raises(MCPError):
            await client.read_resource(INVENTED_URI)

    run_session(proxy_argv(SDK_NOTES, db)[1:], "auto", work, tmp_path / "err")
    records = audit_records(db, 3)
    assert sorted((r["tool"], r["code"]) for r in records) == [
        (PROMPT_GET + "summarize", None),
        (RESOURCE_READ, FORBIDDEN_OR_MISSING.code),
        (RESOURCE_READ + "notes://n1", None),
    ]
    assert {r["identity"] for r in records} == {"u1"}
