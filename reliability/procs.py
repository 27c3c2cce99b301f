"""Real strictcall processes for the harnesses: the HTTP server and the MCP stdio server.

Readiness is polled with a deadline (the "listening on" line, the initialize answer); nothing
sleeps to wait. Every process started here is stopped by the object that started it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import orjson

from strictcall.storage import open_store

ROOT = Path(__file__).resolve().parents[1]
START_DEADLINE_S = 60.0
STOP_DEADLINE_S = 20.0
REPLY_DEADLINE_S = 30.0
MCP_PROTOCOL_VERSION = "2025-11-25"

_LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")


def _env() -> dict[str, str]:
    """The child's environment: unbuffered, and able to import strictcall from src/ even when
    the package is not installed in the running interpreter."""
    src = str(ROOT / "src")
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": src if not path else src + os.pathsep + path,
    }


def tool_call(request_id: str, tool: str, arguments: dict[str, Any]) -> bytes:
    """The body of a JSON-RPC 2.0 tools/call request."""
    return orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    )


def create_token(db: Path | str, identity: str) -> str:
    """A new API token for `identity` in `db` (the store's own operation, in process)."""
    store = open_store(str(db))
    try:
        return store.create_token(identity)
    finally:
        store.close()


def rss_kib(pid: int) -> int:
    """The resident set size of process `pid`, in KiB, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


class HttpServer:
    """`strictcall serve --port 0 --db DB` on 127.0.0.1 (a SQLite path or a PostgreSQL URL);
    stderr goes to `stderr_path`."""

    def __init__(self, db: Path | str, stderr_path: Path, extra: tuple[str, ...] = ()) -> None:
        """`extra`: more `strictcall serve` flags (the edge's limits, --workers, say)."""
        self.db = db
        self.stderr_path = stderr_path
        self._stderr = stderr_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "strictcall", "serve", "--port", "0", "--db", str(db), *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=_env(),
        )
        self.base_url = self._wait_listening()

    def _wait_listening(self) -> str:
        assert self.process.stdout is not None
        lines = _pump(self.process.stdout)
        deadline = time.monotonic() + START_DEADLINE_S
        seen: list[bytes] = []
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            match = _LISTENING.search(line.decode("utf-8", "replace"))
            if match:
                return match.group(1)
        self.kill()
        raise RuntimeError(f"the server did not start: {seen!r}, see {self.stderr_path}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_kib(self) -> int:
        return rss_kib(self.process.pid)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the server and wait for its exit status (killed if it will not stop)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            status = self.process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait(timeout=STOP_DEADLINE_S)
        self._stderr.close()
        return status

    def kill(self) -> int:
        """kill -9, as a crash."""
        return self.stop(signal.SIGKILL)

    def stderr_text(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_bytes().decode("utf-8", "replace")


class McpStdioServer:
    """`strictcall serve --mcp-stdio --identity ID --db DB`, its stdout read line by line."""

    def __init__(self, db: Path, identity: str, stderr_path: Path) -> None:
        self._stderr = stderr_path.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "strictcall",
                "serve",
                "--mcp-stdio",
                "--identity",
                identity,
                "--db",
                str(db),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=_env(),
        )
        assert self.process.stdout is not None
        self._lines = _pump(self.process.stdout)
        self._ids = itertools.count(1)

    def send(self, line: bytes) -> None:
        """Write one line (a newline is added)."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def next_line(self, deadline: float) -> bytes | None:
        """The next stdout line before `deadline` (monotonic), or None at its end.

        Raises:
            TimeoutError: nothing came before the deadline.
        """
        try:
            return self._lines.get(timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Empty:
            raise TimeoutError("no line from the MCP server before the deadline") from None

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request with a fresh id and return its answer (other lines are an error)."""
        request_id = f"h-{next(self._ids)}"
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(orjson.dumps(message))
        line = self.next_line(time.monotonic() + REPLY_DEADLINE_S)
        if line is None:
            raise RuntimeError("the MCP server closed its stdout")
        answer = orjson.loads(line)
        if not isinstance(answer, dict) or answer.get("id") != request_id:
            raise RuntimeError(f"unexpected answer {line[:200]!r}")
        return answer

    def initialize(self) -> None:
        """The MCP handshake: initialize, then notifications/initialized."""
        answer = self.request(
            "initialize",
            {
                "protocolVersion": MCP_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "strictcall-reliability", "version": "1"},
            },
        )
        if "result" not in answer:
            raise RuntimeError(f"initialize failed: {answer!r}")
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> int:
        """Close stdin as a host does and wait for the exit status (killed if it hangs)."""
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        try:
            status = self.process.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = -9
            self.process.wait(timeout=STOP_DEADLINE_S)
        self._stderr.close()
        return status


def _pump(stream: IO[bytes]) -> queue.Queue[bytes | None]:
    """The stream's lines as they come, from a reader thread; None at its end."""
    lines: queue.Queue[bytes | None] = queue.Queue()

    def read() -> None:
        with stream:
            for line in stream:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines
