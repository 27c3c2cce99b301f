"""What an upstream says during a call reaches the caller that made it, through `strictcall
proxy` and `strictcall federate`: progress (the caller's own token) and `notifications/message`
filtered by the caller's level, with the official MCP Python client on stdio and on /mcp (an
SSE answer stream), on both wire versions, in front of a FastMCP server on stdio and on HTTP.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_peers import UPSTREAMS, everything_command
from memory_session import memory_session
from servers import create_token
from stdio_peer import DEADLINE_S
from strictcall.errors import INVALID_REQUEST, TIMEOUT, UPSTREAM_UNAVAILABLE, Reason, Stage
from strictcall.server.proxy import Proxy
from strictcall.services.proxy.subscriptions import MAX_SUBSCRIPTIONS
from strictcall.services.proxy.upstream import UpstreamSpec
from strictcall.transports.jsonrpc import ERROR_CODES
from strictcall.transports.mcp.adapter import McpTools
from strictcall.transports.mcp.content import Subscriber
from strictcall.transports.mcp.stdio import Answers

CHATTY = UPSTREAMS / "fastmcp_chatty.py"
MODERN = "2026-07-28"
LEGACY = "legacy"
LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")

# 2026-07-28 deprecates logging (SEP-2577); hosts of the handshake era still set their level
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def chatty_command(*extra: str) -> str:
    return shlex.join([sys.executable, str(CHATTY), *extra])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def chatty_url() -> Iterator[str]:
    """The chatty FastMCP server on streamable HTTP, once it accepts connections."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(CHATTY), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the chatty server never listened"
                assert process.poll() is None, "the chatty server exited"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE_S)


def _front(kind: str, upstream: str, tmp: Path) -> list[str]:
    """The arguments that put `strictcall proxy` or `strictcall federate` in front of
    `upstream` (a command line, or a URL)."""
    is_url = upstream.startswith("http")
    if kind == "proxy":
        return ["proxy", "--upstream-url" if is_url else "--upstream-cmd", upstream]
    config = tmp / "federation.toml"
    member = "url" if is_url else "command"
    config.write_text(f"[upstreams.chat]\n{member} = {json.dumps(upstream)}\n", encoding="utf-8")
    return ["federate", "--config", str(config)]


def _tool(kind: str, name: str) -> str:
    return name if kind == "proxy" else f"chat_{name}"


@dataclass
class Heard:
    """What the client heard besides the answer."""

    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)
    logs: list[tuple[str, Any]] = field(default_factory=list)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.data))


@asynccontextmanager
async def connected(
    wire: str, mode: str, front: list[str], tmp: Path, heard: Heard, *, quiet: bool = False
) -> AsyncIterator[Client]:
    """The official client connected to strictcall on `wire` ("stdio" or "http"), asking for
    info-level messages as `mode` asks (logging/setLevel, or 2026-07-28's per-request level)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    db = tmp / "audit.sqlite3"
    level: dict[str, Any] = {} if mode == LEGACY or quiet else {"log_level": "info"}
    if wire == "stdio":
        args = ["-m", "strictcall", *front, "--stdio", "--identity", "u1", "--db", str(db)]
        server = StdioServerParameters(command=sys.executable, args=args, env=env)
        async with Client(server, logging_callback=heard.on_log, mode=mode, **level) as client:
            if mode == LEGACY:
                await client.set_logging_level("info")
            yield client
        return
    with _http_front(front, tmp) as (base_url, token):
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(
                streamable_http_client(f"{base_url}/mcp", http_client=http),
                logging_callback=heard.on_log,
                mode=mode,
                **level,
            ) as client,
        ):
            if mode == LEGACY and not quiet:
                await client.set_logging_level("info")
            yield client


@contextmanager
def _http_front(front: list[str], tmp: Path) -> Iterator[tuple[str, str]]:
    """strictcall on HTTP (port 0) with `front`'s arguments: its base URL and u1's token."""
    db = tmp / "audit.sqlite3"
    token = create_token(db, "u1")
    argv = [sys.executable, "-m", "strictcall", *front, "--port", "0", "--db", str(db)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert process.stdout is not None
        match = LISTENING.search(process.stdout.readline())
        assert match is not None
        yield match.group(1), token
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE_S)
        if process.stdout is not None:
            process.stdout.close()


CASES = [
    pytest.param(kind, wire, mode, upstream, id=f"{kind}-{wire}-{mode}-{upstream}-upstream")
    for kind, wire, mode, upstream in (
        # each wire, each version and each kind of upstream at least once, for both fronts
        ("proxy", "stdio", LEGACY, "stdio"),
        ("proxy", "stdio", MODERN, "http"),
        ("proxy", "http", LEGACY, "http"),
        ("proxy", "http", MODERN, "stdio"),
        ("federate", "stdio", MODERN, "stdio"),
        ("federate", "http", LEGACY, "http"),
    )
]


@pytest.mark.parametrize(("kind", "wire", "mode", "upstream"), CASES)
def test_progress_and_messages_of_a_call_reach_its_caller(
    kind: str, wire: str, mode: str, upstream: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = chatty_command() if upstream == "stdio" else request.getfixturevalue("chatty_url")
    front = _front(kind, target, tmp_path)
    heard = Heard()

    async def run() -> types.CallToolResult:
        with anyio.fail_after(DEADLINE_S):
            async with connected(wire, mode, front, tmp_path, heard) as client:
                return await client.call_tool(
                    _tool(kind, "count"), {"steps": 3}, progress_callback=heard.on_progress
                )

    result = anyio.run(run)
    assert result.is_error is not True
    assert heard.progress == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    # info and above only: the debug lines the tool writes are filtered out by the caller's level
    assert [level for level, _ in heard.logs] == ["info"] * 3
    assert [data["msg"] for _, data in heard.logs] == [f"counted {n}" for n in (1, 2, 3)]


def test_a_caller_that_asks_for_nothing_hears_nothing(tmp_path: Path) -> None:
    heard = Heard()
    front = _front("proxy", chatty_command(), tmp_path)

    async def run() -> types.CallToolResult:
        with anyio.fail_after(DEADLINE_S):
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            db = tmp_path / "audit.sqlite3"
            args = ["-m", "strictcall", *front, "--stdio", "--identity", "u1", "--db", str(db)]
            server = StdioServerParameters(command=sys.executable, args=args, env=env)
            async with Client(server, logging_callback=heard.on_log, mode=LEGACY) as client:
                return await client.call_tool("count", {"steps": 2})

    result = anyio.run(run)
    assert result.is_error is not True
    assert heard.logs == [] and heard.progress == []


def _start_chatty(port: int, call_log: Path) -> subprocess.Popen[bytes]:
    """The chatty server on HTTP at `port`, once it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, str(CHATTY), "--http", str(port), "--call-log", str(call_log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=DEADLINE_S)


def _stdio_client(
    front: list[str], tmp: Path, errlog: TextIO = sys.stderr, **options: Any
) -> Client:
    """The official client of strictcall on stdio, its stderr to `errlog` (`options`: the
    client's own, a `message_handler`)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    db = tmp / "audit.sqlite3"
    args = ["-m", "strictcall", *front, "--stdio", "--identity", "u1", "--db", str(db)]
    server = StdioServerParameters(command=sys.executable, args=args, env=env)
    return Client(stdio_client(server, errlog=errlog), mode=LEGACY, **options)


def _chatty_upstream(
    upstream: str, tmp: Path
) -> tuple[subprocess.Popen[bytes] | None, str, Callable[[], str]]:
    """The chatty server as a proxy's upstream: on HTTP (its process, to stop) or as a stdio
    command; its target; and what its call log says so far."""
    call_log = tmp / "calls.log"

    def told() -> str:
        return call_log.read_text(encoding="utf-8") if call_log.exists() else ""

    if upstream == "http":
        port = _free_port()
        return _start_chatty(port, call_log), f"http://127.0.0.1:{port}/mcp", told
    return None, chatty_command("--call-log", str(call_log)), told


@pytest.mark.parametrize("upstream", ["stdio", "http"])
def test_a_call_the_caller_cancels_is_cancelled_upstream(upstream: str, tmp_path: Path) -> None:
    chatty, target, told = _chatty_upstream(upstream, tmp_path)
    front = _front("proxy", target, tmp_path)

    async def run() -> None:
        async with _stdio_client(front, tmp_path) as client:
            with anyio.move_on_after(DEADLINE_S):
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "hold", {"seconds": 60})
                    while "hold started" not in told():
                        await anyio.sleep(0.05)
                    group.cancel_scope.cancel()  # the client sends notifications/cancelled
            deadline = time.monotonic() + DEADLINE_S
            while "cancelled" not in told():
                assert time.monotonic() < deadline, told()
                await anyio.sleep(0.05)

    try:
        anyio.run(run)
    finally:
        if chatty is not None:
            _stop(chatty)
    assert "hold finished" not in told()


def test_an_http_upstream_that_forgot_its_session_is_started_again_and_the_call_sent_again(
    tmp_path: Path,
) -> None:
    port = _free_port()
    call_log = tmp_path / "calls.log"
    chatty = _start_chatty(port, call_log)
    front = _front("proxy", f"http://127.0.0.1:{port}/mcp", tmp_path)
    errlog = tmp_path / "proxy.stderr"

    async def run() -> list[types.CallToolResult]:
        nonlocal chatty
        results = []
        with errlog.open("w") as stderr, anyio.fail_after(DEADLINE_S * 2):
            async with _stdio_client(front, tmp_path, stderr) as client:
                results.append(await client.call_tool("count", {"steps": 1}))
                _stop(chatty)
                chatty = _start_chatty(port, call_log)  # a new process: the session is gone
                results.append(await client.call_tool("count", {"steps": 1}))
        return results

    try:
        results = anyio.run(run)
    finally:
        _stop(chatty)
    assert [result.is_error for result in results] == [False, False], results[1].content
    assert errlog.read_text(encoding="utf-8").count("forgot its session") == 1


@pytest.mark.parametrize("upstream", ["stdio", "http"])
def test_an_upstream_that_asks_during_a_call_is_answered_at_once(
    upstream: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = chatty_command() if upstream == "stdio" else request.getfixturevalue("chatty_url")
    front = [*_front("proxy", target, tmp_path), "--timeout", str(DEADLINE_S)]

    async def run() -> types.CallToolResult:
        with anyio.fail_after(DEADLINE_S):
            async with _stdio_client(front, tmp_path) as client:
                return await client.call_tool("ask", {"question": "which?"})

    started = time.monotonic()
    result = anyio.run(run)
    # the elicitation is refused at once (the upstream's tool then fails): never the timeout
    assert result.is_error is True  # the upstream's tool failed, its error passed as tool_error
    assert TIMEOUT.code not in str(result.content)
    print(f"answered in {time.monotonic() - started:.2f} s")


HANGS = shlex.join([sys.executable, "-c", "import time; time.sleep(600)"])
"""An upstream that starts and never answers initialize."""


@pytest.fixture
def silent_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A container engine that takes every connection and never answers (`DOCKER_HOST` names
    it for the processes the test starts)."""
    with tempfile.TemporaryDirectory(prefix="sc-engine-") as where:
        listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listening.bind(f"{where}/docker.sock")
        listening.listen(64)  # the kernel takes the connections; nothing reads or answers
        monkeypatch.setenv("DOCKER_HOST", f"unix://{where}/docker.sock")
        try:
            yield
        finally:
            listening.close()


@pytest.mark.parametrize("stuck", ["at initialize", "in its sandbox's start"])
def test_an_upstream_that_hangs_at_its_start_delays_no_other(
    stuck: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if stuck == "at initialize":
        member = f"command = {json.dumps(HANGS)}\n"
    else:  # the container engine does not answer: its first probe must not hold the others
        if shutil.which("docker") is None:
            pytest.skip("the container engine's command (docker) is not installed")
        request.getfixturevalue("silent_engine")
        member = f'command = {json.dumps(chatty_command())}\nsandbox = "container"\n'
    config = tmp_path / "federation.toml"
    config.write_text(
        f"[upstreams.chat]\ncommand = {json.dumps(chatty_command())}\n[upstreams.stuck]\n{member}",
        encoding="utf-8",
    )
    errlog = tmp_path / "federate.stderr"

    async def run() -> types.CallToolResult:
        with errlog.open("w") as stderr:
            # served before the stuck one's start times out (30 s): within SERVE_WITHIN_S
            with anyio.fail_after(DEADLINE_S):
                front = ["federate", "--config", str(config)]
                async with _stdio_client(front, tmp_path, stderr) as client:
                    # a loaded machine may take longer than the bound to start even chat: it
                    # is served once it answers, and the host is told its tools changed
                    while "chat_count" not in {t.name for t in (await client.list_tools()).tools}:
                        await anyio.sleep(0.1)
                    while True:  # listed a moment before its session is taken: retryable
                        result = await client.call_tool("chat_count", {"steps": 1})
                        if UPSTREAM_UNAVAILABLE.code not in str(result.content):
                            return result
                        await anyio.sleep(0.25)

    result = anyio.run(run)
    assert result.is_error is not True
    said = errlog.read_text(encoding="utf-8")
    # served while the stuck one was still starting, not after its start timed out
    assert "stuck (still starting 10 s after the first one settled" in said
    assert "did not answer initialize" not in said


def test_an_elicitation_during_a_call_is_asked_of_its_caller_and_answered(tmp_path: Path) -> None:
    asked: list[str] = []

    async def elicit(
        context: object, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "blue"})

    errlog = tmp_path / "proxy.stderr"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    db = tmp_path / "audit.sqlite3"
    args = ["-m", "strictcall", "proxy", "--upstream-cmd", chatty_command()]
    args += ["--stdio", "--identity", "u1", "--db", str(db)]
    server = StdioServerParameters(command=sys.executable, args=args, env=env)

    async def run() -> types.CallToolResult:
        with errlog.open("w") as stderr, anyio.fail_after(DEADLINE_S):
            transport = stdio_client(server, errlog=stderr)
            async with Client(transport, mode=LEGACY, elicitation_callback=elicit) as client:
                return await client.call_tool("ask", {"question": "which colour?"})

    result = anyio.run(run)
    assert asked == ["which colour?"]
    assert result.is_error is not True
    assert "told blue" in str(result.content)
    said = errlog.read_text(encoding="utf-8")
    assert "elicitation/create to caller" in said and "answered" in said
    assert "which colour" not in said and "blue" not in said  # audited, never its content


@pytest.mark.parametrize("kind", ["proxy", "federate"])
def test_completions_of_a_prompts_argument_come_from_its_upstream(
    kind: str, tmp_path: Path
) -> None:
    front = _front(kind, everything_command(), tmp_path)
    # a federation's member "chat" serves its prompt prefixed; the proxy serves it as it is
    prompt = "chat_completable-prompt" if kind == "federate" else "completable-prompt"

    async def run() -> tuple[types.CompleteResult, BaseException | None]:
        with anyio.fail_after(DEADLINE_S):
            async with _stdio_client(front, tmp_path) as client:
                ref = types.PromptReference(type="ref/prompt", name=prompt)
                found = await client.complete(ref, {"name": "department", "value": "E"})
                unknown = types.PromptReference(type="ref/prompt", name="no-such-prompt")
                try:
                    await client.complete(unknown, {"name": "department", "value": "E"})
                except MCPError as exc:
                    return found, exc
                return found, None

    found, refused = anyio.run(run)
    assert found.completion.values == ["Engineering"]
    assert isinstance(refused, MCPError)  # a prompt not served is not asked of any upstream


@pytest.mark.parametrize(
    ("kind", "mode", "upstream"),
    [
        pytest.param("proxy", LEGACY, "stdio", id="proxy-legacy-stdio-upstream"),
        pytest.param("proxy", MODERN, "http", id="proxy-modern-http-upstream"),
        pytest.param("federate", LEGACY, "http", id="federate-legacy-http-upstream"),
        pytest.param("federate", LEGACY, "stdio", id="federate-legacy-stdio-upstream"),
    ],
)
def test_a_call_a_host_on_mcp_cancels_is_cancelled_upstream(
    kind: str, mode: str, upstream: str, tmp_path: Path
) -> None:
    """2025-11-25: the host posts notifications/cancelled; 2026-07-28: it closes the call's
    stream (its body in the read of its head or in a later one: both happen, the raw-socket
    test below makes the later one sure). Either way the tool stops at the upstream."""
    chatty, target, told = _chatty_upstream(upstream, tmp_path)
    front = _front(kind, target, tmp_path)

    async def run() -> None:
        # quiet: a plain call, answered with one JSON body (no SSE stream of the SDK's)
        async with connected("http", mode, front, tmp_path, Heard(), quiet=True) as client:
            with anyio.fail_after(DEADLINE_S):
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, _tool(kind, "hold"), {"seconds": 60})
                    while "hold started" not in told():
                        await anyio.sleep(0.05)
                    group.cancel_scope.cancel()
                while "cancelled" not in told():
                    await anyio.sleep(0.05)
                # the host's next call is served as ever
                result = await client.call_tool(_tool(kind, "count"), {"steps": 1})
                assert result.is_error is not True

    try:
        anyio.run(run)
    finally:
        if chatty is not None:
            _stop(chatty)
    assert "hold finished" not in told()


def test_a_call_whose_body_came_after_its_head_is_cancelled_by_its_closed_stream(
    tmp_path: Path,
) -> None:
    """2026-07-28: a call's closed stream cancels it also when its body reached the server
    apart from its head (answered through the app, not in place)."""
    _, target, told = _chatty_upstream("stdio", tmp_path)
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "hold", "arguments": {"seconds": 60}, "_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    with _http_front(_front("proxy", target, tmp_path), tmp_path) as (base_url, token):
        address = urlsplit(base_url)
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: {address.netloc}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"Mcp-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: hold\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        host, port = address.hostname, address.port
        assert host is not None and port is not None
        with socket.create_connection((host, port), timeout=DEADLINE_S) as sock:
            sock.sendall(head.encode())
            time.sleep(0.2)  # apart from its head, in a later read (not a readiness wait)
            sock.sendall(body.encode())
            deadline = time.monotonic() + DEADLINE_S
            while "hold started" not in told():
                assert time.monotonic() < deadline, "the upstream never began the call"
                time.sleep(0.05)
        deadline = time.monotonic() + DEADLINE_S
        while "cancelled" not in told():
            assert time.monotonic() < deadline, "the upstream was never told of the cancel"
            time.sleep(0.05)
    assert "hold finished" not in told()


# --- resource subscriptions ----------------------------------------------------------------------

TOGGLE = "toggle-subscriber-updates"
"""server-everything's tool that starts its updates (one at once, then every 5 s, of each URI
its session is subscribed to, in the order they were first subscribed)."""


def _dynamic(n: int) -> str:
    """A URI of server-everything's text template (served through the template, not listed)."""
    return f"demo://resource/dynamic/text/{n}"


@dataclass
class Updates:
    """The URIs of the `notifications/resources/updated` one client heard, in order."""

    uris: list[str] = field(default_factory=list)

    async def on_message(self, message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))

    async def until(self, uri: str, after: int = 0) -> None:
        """Return once `uri` is heard past the first `after` updates (the caller's deadline)."""
        while uri not in self.uris[after:]:
            await anyio.sleep(0.05)


async def _subscribe(client: Client, uri: str) -> None:
    params = types.SubscribeRequestParams(uri=uri)
    await client.session.send_request(types.SubscribeRequest(params=params), types.EmptyResult)


async def _unsubscribe(client: Client, uri: str) -> None:
    params = types.UnsubscribeRequestParams(uri=uri)
    await client.session.send_request(types.UnsubscribeRequest(params=params), types.EmptyResult)


@pytest.mark.parametrize("kind", ["proxy", "federate"])
def test_a_subscribed_caller_gets_its_resources_updates_until_it_unsubscribes(
    kind: str, tmp_path: Path
) -> None:
    front = _front(kind, everything_command(), tmp_path)
    heard = Updates()
    first, second = _dynamic(1), _dynamic(2)

    async def run() -> tuple[bool | None, list[str], list[str], MCPError | None]:
        with anyio.fail_after(DEADLINE_S):
            async with _stdio_client(front, tmp_path, message_handler=heard.on_message) as client:
                resources = client.server_capabilities.resources
                advertised = None if resources is None else resources.subscribe
                await client.call_tool(_tool(kind, TOGGLE), {})
                await _subscribe(client, first)
                await heard.until(first)
                await _unsubscribe(client, first)
                held = len(heard.uris)
                # the upstream's next round of updates: `first` would come before `second`
                await _subscribe(client, second)
                await heard.until(second, after=held)
                after_unsubscribe = heard.uris[held:]
                before = list(heard.uris)
                for n in range(3, MAX_SUBSCRIPTIONS + 2):  # 99 more: 100 held with `second`
                    await _subscribe(client, _dynamic(n))
                try:
                    await _subscribe(client, _dynamic(MAX_SUBSCRIPTIONS + 2))
                except MCPError as exc:
                    return advertised, before, after_unsubscribe, exc
                return advertised, before, after_unsubscribe, None

    advertised, before, after_unsubscribe, refused = anyio.run(run)
    assert advertised is True  # the upstream offers subscriptions: so does strictcall
    assert set(before[: before.index(second)]) == {first}
    assert after_unsubscribe == [second]  # no update of `first` once unsubscribed
    assert refused is not None and refused.code == ERROR_CODES[Stage.PROTOCOL][0]
    data = refused.error.data
    assert isinstance(data, dict)
    assert data["code"] == INVALID_REQUEST.code and data["expected"] == MAX_SUBSCRIPTIONS
    assert data["reason"] == Reason.MAX_ITEMS.value
    assert "dynamic" not in json.dumps([refused.error.message, data])  # never the URI


@asynccontextmanager
async def _session_of(proxy: Proxy, caller: str, heard: Updates) -> AsyncIterator[Client]:
    """A session of the proxy's as stdio serves one, named `caller`, held by the official
    client on in-memory streams; its subscriptions forgotten when it ends."""

    def tools_for(answers: Answers) -> McpTools:
        subscriber = Subscriber(caller, answers.notify)
        return McpTools(
            proxy.gateway,
            lambda ctx: "u1",
            lambda: caller,
            proxy.serving,
            subscriber_of=lambda ctx: subscriber,
        )

    try:
        async with memory_session(
            tools_for, mode=LEGACY, message_handler=heard.on_message
        ) as client:
            yield client
    finally:
        await proxy.content.forget(caller)


def test_two_callers_of_one_proxy_get_the_updates_of_their_own_subscriptions() -> None:
    errlog = io.StringIO()
    proxy = Proxy(UpstreamSpec.of_command(everything_command()), errlog=errlog)
    a, b = Updates(), Updates()
    mine, shared = _dynamic(1), _dynamic(2)

    def seen(what: str) -> int:  # the upstream logs each (un)subscribe it is sent
        return errlog.getvalue().count(f"Received {what} Resource request")

    async def until_seen(what: str, count: int) -> int:
        while seen(what) < count:  # its log lines come beside the answers
            await anyio.sleep(0.05)
        return seen(what)

    async def run() -> tuple[list[str], list[str], list[int], list[str], list[str]]:
        with anyio.fail_after(DEADLINE_S):
            async with proxy.lifespan(), _session_of(proxy, "b", b) as caller_b:
                async with _session_of(proxy, "a", a) as caller_a:
                    await caller_a.call_tool(TOGGLE, {})
                    await _subscribe(caller_a, mine)
                    await _subscribe(caller_a, shared)
                    await _subscribe(caller_b, shared)
                    await a.until(mine)
                    await a.until(mine, after=a.uris.index(mine) + 1)  # a second round
                    await b.until(shared)
                    told = [await until_seen("Subscribe", 2)]
                held_after_a = proxy.content.subscriptions.subscribed()
                told.append(await until_seen("Unsubscribe", 1))
                await _unsubscribe(caller_b, shared)
                held_after_b = proxy.content.subscriptions.subscribed()
                told.append(await until_seen("Unsubscribe", 2))
        return a.uris, b.uris, told, held_after_a, held_after_b

    heard_a, heard_b, told, held_after_a, held_after_b = anyio.run(run)
    assert set(heard_a) == {mine, shared}
    assert set(heard_b) == {shared}  # never the update of a URI only `a` holds
    # `shared` subscribed once for both callers; unsubscribed when the last one let it go
    assert told == [2, 1, 2]
    assert held_after_a == [shared]  # `a`'s session ended: its own URI is let go
    assert held_after_b == []


def test_mcp_over_http_offers_subscriptions_on_its_change_streams(tmp_path: Path) -> None:
    """Accepted and advertised; the updates' way to the host (its identity's GET streams) is
    tests/test_mcp_resource_subscriptions.py's."""
    front = _front("proxy", everything_command(), tmp_path)

    async def run() -> bool | None:
        with anyio.fail_after(DEADLINE_S):
            async with connected("http", LEGACY, front, tmp_path, Heard(), quiet=True) as client:
                resources = client.server_capabilities.resources
                await _subscribe(client, _dynamic(1))
                await _unsubscribe(client, _dynamic(1))
                return None if resources is None else resources.subscribe

    assert anyio.run(run) is True
