"""MCP servers as raw stdio processes for the proxy's tests: the proxy, and the upstreams it
fronts (server-everything from npm, a FastMCP server from PyPI), run bare too.

The npm server is installed by `npm ci` in tests/upstreams (its package-lock.json is committed)
the first time a test needs it. Without node or npm the tests that need it are skipped, with a
message saying so, except on CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

UPSTREAMS = Path(__file__).resolve().parent / "upstreams"
EVERYTHING_JS = (
    UPSTREAMS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
FASTMCP_NOTES = UPSTREAMS / "fastmcp_notes.py"
DEADLINE_S = 60.0
"""Generous: the machine that runs the suite may be busy, and node and FastMCP start slowly."""
HANDSHAKE_VERSION = "2025-11-25"

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


class StdioPeer:
    """A process speaking MCP on stdio; its stdout read line by line by a thread."""

    def __init__(self, argv: list[str], stderr: IO[bytes]) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._ids = itertools.count(1000)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout as stdout:
            for line in stdout:
                self._lines.put(line)
        self._lines.put(None)

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def reply(self, timeout: float = DEADLINE_S) -> dict[str, Any] | None:
        """The next message on stdout within `timeout`, or None; a line that is not one
        JSON-RPC message fails the test (stdout is the wire alone)."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        assert line is not None, "the process closed its stdout"
        message = json.loads(line)
        assert isinstance(message, dict) and message["jsonrpc"] == "2.0", line[:200]
        return message

    def answer_to(self, request_id: Any, timeout: float = DEADLINE_S) -> dict[str, Any]:
        """The answer to `request_id`, skipping notifications, within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.reply(max(deadline - time.monotonic(), 0.0))
            if message is None:
                raise AssertionError(f"no answer to {request_id!r} within {timeout} s")
            if "id" in message and message["id"] == request_id:
                return message
            assert "id" not in message, f"an answer to another request: {message}"

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request with a fresh id and return its answer."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        return self.answer_to(request_id)

    def initialize(self) -> None:
        hello = {"name": "proxy-test", "version": "1"}
        answer = self.request(
            "initialize",
            {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": hello},
        )
        assert answer["result"]["protocolVersion"] == HANDSHAKE_VERSION, answer
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tools/call's result (an MCP tool result)."""
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        result: dict[str, Any] = answer["result"]
        return result

    def tool_names(self) -> set[str]:
        return {tool["name"] for tool in self.request("tools/list")["result"]["tools"]}

    def kill(self) -> None:
        """Kill the process and release its pipes."""
        self.process.kill()
        self.process.wait(timeout=DEADLINE_S)
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()

    def close(self) -> int:
        """Close stdin (as a host does) and wait for the exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=DEADLINE_S)
            raise AssertionError("the process did not exit after stdin closed") from None


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    """The structured error of an isError tool result: the JSON in its one text block (it has
    no structuredContent)."""
    assert result["isError"] is True, result
    assert "structuredContent" not in result, result
    assert [block["type"] for block in result["content"]] == ["text"]
    error: dict[str, Any] = json.loads(result["content"][0]["text"])
    return error
