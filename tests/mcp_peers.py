"""MCP servers as raw stdio processes for the proxy's tests: the proxy, and the upstreams it
fronts (server-everything from npm, a FastMCP server from PyPI), run bare too.

The npm server is installed by `npm ci` in tests/upstreams (its package-lock.json is committed)
the first time a test needs it. Without node or npm the tests that need it are skipped, with a
message saying so, except on CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stdio_peer import DEADLINE_S, StdioPeer

UPSTREAMS = Path(__file__).resolve().parent / "upstreams"
EVERYTHING_JS = (
    UPSTREAMS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
FASTMCP_NOTES = UPSTREAMS / "fastmcp_notes.py"
SDK_NOTES = shlex.join([sys.executable, str(UPSTREAMS / "sdk_notes.py")])
"""The command line that runs the official SDK's notes server (tests/upstreams) on stdio."""

_npm_lock = threading.Lock()


def everything_command() -> str:
    """The command line that runs @modelcontextprotocol/server-everything on stdio, installed
    with `npm ci` if it is not yet; skips (fails on CI) without node and npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        message = "node and npm are needed for the npm MCP server (tests/upstreams)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with _npm_lock:
        if not EVERYTHING_JS.exists():
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=UPSTREAMS,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, done.stderr
    return shlex.join([node, str(EVERYTHING_JS), "stdio"])


def fastmcp_command(call_log: Path | None = None) -> str:
    """The command line that runs the FastMCP notes server on stdio."""
    extra = [] if call_log is None else ["--call-log", str(call_log)]
    return shlex.join([sys.executable, str(FASTMCP_NOTES), *extra])


def watched_federation(base: Path, restart_s: float) -> tuple[Path, Path]:
    """A federation for the operator page's tests, in `base`: its config (returned first) has
    two stdio upstreams, `notes` (the FastMCP server, through a shell that appends its pid to
    `base / "pids"`, so a test can kill it; restarted `restart_s` after it exits) and `spare`
    (the SDK's), and its store (returned second) has `spare_add` pinned as something else, so
    one change of spare's waits for an approval."""
    from strictcall.storage import open_store

    pids = base / "pids"
    killable = f"sh -c {shlex.quote(f'echo $$ >> {pids}; exec {fastmcp_command()}')}"
    config = base / "federation.toml"
    config.write_text(
        f"[upstreams.notes]\ncommand = {json.dumps(killable)}\n"
        f"restart = {{ min = {restart_s}, max = {restart_s} }}\n"
        f"[upstreams.spare]\ncommand = {json.dumps(SDK_NOTES)}\n",
        encoding="utf-8",
    )
    db = base / "gateway.sqlite3"
    store = open_store(str(db))
    try:
        old = {"upstream": "spare", "name": "add", "description": "adds", "inputSchema": {}}
        store.pin_tool("spare_add", json.dumps({**old, "outputSchema": None}))
    finally:
        store.close()
    return config, db


@dataclass
class HttpProxy:
    """A started `strictcall proxy` over HTTP: its base URL and process."""

    base_url: str
    process: subprocess.Popen[str]

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.stdout is not None
        self.process.stdout.close()
        return self.process.wait(timeout=DEADLINE_S)


def start_proxy(db: Path, *extra: str) -> HttpProxy:
    """`strictcall proxy` over HTTP in front of the FastMCP notes server, on `db`, once it
    listens (`extra`: more flags)."""
    argv = [sys.executable, "-m", "strictcall", "proxy", "--upstream-cmd", fastmcp_command()]
    process = subprocess.Popen(
        [*argv, "--port", "0", "--db", str(db), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    first = process.stdout.readline()  # the one line, once it listens (or "" if it died)
    match = re.search(r"listening on (http://[0-9.]+:\d+)", first)
    if match is None:
        process.kill()
        raise AssertionError(first)
    return HttpProxy(match.group(1), process)


def proxy_argv(upstream_cmd: str | None, db: Path, *extra: str) -> list[str]:
    """`strictcall proxy` in front of `upstream_cmd` (None: `extra` names the upstream), on
    stdio as u1 unless `extra` says."""
    identity = [] if "--identity" in extra else ["--identity", "u1"]
    upstream = [] if upstream_cmd is None else ["--upstream-cmd", upstream_cmd]
    return [
        sys.executable,
        "-m",
        "strictcall",
        "proxy",
        *upstream,
        "--stdio",
        *identity,
        "--db",
        str(db),
        *extra,
    ]


class StdioProxy:
    """A `strictcall proxy` on stdio, its stderr in a file."""

    def __init__(self, tmp: Path, upstream_cmd: str | None, *extra: str) -> None:
        self.stderr_path = tmp / "proxy.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.peer = StdioPeer(proxy_argv(upstream_cmd, tmp / "audit.sqlite3", *extra), self._stderr)
        self.peer.initialize()

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        try:
            assert self.peer.close() == 0
        finally:
            self._stderr.close()


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    """The structured error of an isError tool result: the JSON in its one text block (it has
    no structuredContent)."""
    assert result["isError"] is True, result
    assert "structuredContent" not in result, result
    assert [block["type"] for block in result["content"]] == ["text"]
    error: dict[str, Any] = json.loads(result["content"][0]["text"])
    return error
