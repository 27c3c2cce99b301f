"""A process that speaks MCP on stdio, for the tests: written to one line at a time, its stdout
read by a thread, so that every answer is awaited within a deadline and a line that is not one
JSON-RPC message fails the test (stdout is the wire alone). `strictcall serve --mcp-stdio`,
`strictcall proxy --stdio` and the proxy's upstreams run bare are all driven by it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from typing import IO, Any

DEADLINE_S = 60.0
"""Generous: the machine that runs the suite may be busy, and node and FastMCP start slowly."""
HANDSHAKE_VERSION = "2025-11-25"


def until(check: Callable[[], Any], what: str) -> Any:
    """Poll `check` until it returns something truthy, within the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_S} s: {what}")
        time.sleep(0.05)


class StdioPeer:
    """A process speaking MCP on stdio; its stdout read line by line by a thread."""

    def __init__(self, argv: list[str], stderr: IO[bytes] | int) -> None:
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

    def send(self, line: bytes, *, newline: bool = True) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + (b"\n" if newline else b""))
        self.process.stdin.flush()

    def line(self, timeout: float = DEADLINE_S) -> bytes | None:
        """The next line on stdout within `timeout` (None: none came, or stdout closed)."""
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def reply(self, timeout: float = DEADLINE_S) -> dict[str, Any] | None:
        """The next message on stdout within `timeout`, or None."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        assert line is not None, "the process closed its stdout"
        message = json.loads(line)
        assert isinstance(message, dict) and message["jsonrpc"] == "2.0", line[:200]
        return message

    def message(self) -> dict[str, Any]:
        """The next message on stdout, which must come within the deadline."""
        message = self.reply()
        if message is None:
            raise AssertionError(f"no message within {DEADLINE_S} s")
        return message

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send `message` and return the next message on stdout."""
        self.send(json.dumps(message).encode())
        return self.message()

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

    def initialize(self, client: str = "strictcall-tests") -> None:
        """The handshake, at `HANDSHAKE_VERSION`."""
        hello = {"name": client, "version": "1"}
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
        """Close stdin (as a host does) and wait for the exit status; a process still running
        at the deadline is killed and fails the test."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=DEADLINE_S)
            raise AssertionError("the process did not exit after stdin closed") from None
