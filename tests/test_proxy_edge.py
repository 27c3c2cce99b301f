"""`strictcall proxy` over HTTP behind the same edge as `strictcall serve`: browser origins,
calls in flight per identity and the connection cap, with a real FastMCP upstream."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from mcp_peers import HttpProxy, fastmcp_command, start_proxy
from servers import create_token
from stdio_peer import DEADLINE_S
from strictcall import errors
from strictcall.cli.parser import EXIT_USAGE

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proxy-edge") / "proxy.sqlite3"


@pytest.fixture(scope="module")
def tokens(db: Path) -> dict[str, str]:
    return {identity: create_token(db, identity) for identity in ("flood", "agent")}


@pytest.fixture(scope="module")
def proxy(db: Path, tokens: dict[str, str]) -> Iterator[HttpProxy]:
    running = start_proxy(db, "--allow-origin", "https://app.example", "--max-in-flight", "2")
    yield running
    assert running.stop() == 0


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def post(
    proxy: HttpProxy, path: str, token: str, body: dict[str, Any], origin: str | None = None
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **MCP_HEADERS}
    if origin is not None:
        headers["Origin"] = origin
    return httpx.post(proxy.base_url + path, json=body, headers=headers, timeout=DEADLINE_S)


@pytest.mark.parametrize("path", ["/rpc", "/mcp"])
@pytest.mark.parametrize(
    ("origin", "admitted"),
    [(None, True), ("https://app.example", True), ("http://evil.example", False)],
    ids=["absent", "allowed", "foreign"],
)
def test_origins_are_admitted_as_allow_origin_says(
    proxy: HttpProxy, tokens: dict[str, str], path: str, origin: str | None, admitted: bool
) -> None:
    response = post(proxy, path, tokens["agent"], call("add", {"a": 1, "b": 2}), origin)
    if admitted:
        assert response.status_code == 200
        return
    assert response.status_code == 403
    data = response.json()["error"]["data"]
    assert (data["code"], data["stage"]) == (
        errors.FORBIDDEN_ORIGIN.code,
        errors.FORBIDDEN_ORIGIN.stage.value,
    )


def test_one_identity_at_max_in_flight_is_refused_busy_while_another_is_served(
    proxy: HttpProxy, tokens: dict[str, str]
) -> None:
    slow = call("slow", {"seconds": 4})
    held_status: list[int] = []

    def hold() -> None:
        # one of the probes below may take a slot for a moment and leave this call refused
        # busy: it is sent again until it runs, so that both slots end up held by slow calls
        deadline = time.monotonic() + DEADLINE_S
        while True:
            answer = post(proxy, "/rpc", tokens["flood"], slow)
            if answer.status_code != 429 or time.monotonic() > deadline:
                held_status.append(answer.status_code)
                return
            time.sleep(0.02)

    held = [threading.Thread(target=hold) for _ in range(2)]
    for thread in held:
        thread.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:  # until the proxy has both slow calls in flight
            refused = post(proxy, "/rpc", tokens["flood"], call("add", {"a": 1, "b": 2}))
            if refused.status_code == 429 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert refused.status_code == 429
        data = refused.json()["error"]["data"]
        assert data["code"] == errors.BUSY.code and data["retryable"] is True
        served = post(proxy, "/rpc", tokens["agent"], call("add", {"a": 1, "b": 2}))
        assert served.status_code == 200 and served.json()["result"] == {"result": 3}
    finally:
        for thread in held:
            thread.join(timeout=DEADLINE_S)
    assert held_status == [200, 200]  # the slow calls themselves ran


def test_connections_beyond_max_connections_are_answered_503_at_once(db: Path) -> None:
    running = start_proxy(db, "--max-connections", "3", "--header-timeout", "5")
    parts = urlsplit(running.base_url)
    assert parts.hostname is not None and parts.port is not None
    idle = [socket.create_connection((parts.hostname, parts.port)) for _ in range(3)]
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=DEADLINE_S) as extra:
            answer = extra.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503")
    finally:
        for sock in idle:
            sock.close()
        assert running.stop() == 0


@pytest.mark.parametrize(
    "flag", [["--allow-origin", "https://app.example"], ["--max-in-flight", "2"]]
)
def test_edge_flags_with_stdio_are_refused_as_usage(tmp_path: Path, flag: list[str]) -> None:
    argv = [sys.executable, "-m", "strictcall", "proxy", "--upstream-cmd", fastmcp_command()]
    done = subprocess.run(
        [*argv, "--stdio", "--identity", "u1", "--db", str(tmp_path / "x.sqlite3"), *flag],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == EXIT_USAGE
    assert f"{flag[0]} is for HTTP" in done.stderr
