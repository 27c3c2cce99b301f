"""The 29 hostile lines of tests/test_proxy_hostile.py sent to one `strictcall federate` in front
of three MCP servers nobody here wrote the framework of (an official MCP SDK server, a FastMCP
server, server-everything from npm), each through its own prefixed tool: every line gets the
structured answer the proxy gives for one upstream, none reaches a tool, and the federation
keeps serving."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_peers import UPSTREAMS, everything_command, fastmcp_command
from stdio_peer import StdioPeer
from test_proxy_hostile import Upstream, run_hostile

SDK_NOTES = UPSTREAMS / "sdk_notes.py"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("federation-hostile")


@pytest.fixture(scope="module")
def federation(logs: Path) -> Iterator[StdioPeer]:
    sdk = shlex.join([sys.executable, str(SDK_NOTES), "--call-log", str(logs / "sdk-calls.log")])
    config = logs / "federation.toml"
    config.write_text(
        f"[upstreams.sdk]\ncommand = {json.dumps(sdk)}\n"
        f"[upstreams.fast]\ncommand = {json.dumps(fastmcp_command(logs / 'fast-calls.log'))}\n"
        f"[upstreams.every]\ncommand = {json.dumps(everything_command())}\n",
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "strictcall", "federate", "--config", str(config)]
    with (logs / "federate.stderr").open("wb") as stderr:
        peer = StdioPeer(
            [*argv, "--stdio", "--identity", "u1", "--db", str(logs / "db.sqlite3")], stderr
        )
        peer.initialize()
        yield peer
        assert peer.close() == 0


@pytest.mark.parametrize(
    ("up", "log"),
    [
        (Upstream("sdk_read_note", "note_id", "n1"), "sdk-calls.log"),
        (Upstream("fast_read_note", "note_id", "n1"), "fast-calls.log"),
        (Upstream("every_echo", "message", "hi"), None),
    ],
    ids=["mcp-sdk", "fastmcp", "server-everything"],
)
def test_every_hostile_line_gets_a_structured_answer_through_a_federation_of_three(
    federation: StdioPeer, logs: Path, up: Upstream, log: str | None
) -> None:
    calls_log = None if log is None else logs / log
    before = (
        0
        if calls_log is None or not calls_log.exists()
        else calls_log.read_text().count("read_note")
    )
    outcomes = run_hostile(federation, up)
    assert outcomes == {"structured": 29, "silent": 0, "let_through": 0}
    if calls_log is not None:  # the tool ran for the 29 good calls in between, nothing else
        assert calls_log.read_text().count("read_note") - before == 29
