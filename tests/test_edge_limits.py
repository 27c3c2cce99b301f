"""The edge's limits on a request's head (issue 32, items 4 and 8), on a real server: a request
line past `MAX_REQUEST_LINE_BYTES` is 414 and a head past `MAX_HEADER_BYTES` 431, whatever the
HTTP parser would have done, and while clients send megabytes of header another client's calls
stay served; a request to switch protocols (a WebSocket handshake, h2c) is 400, never 5xx."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from servers import RunningServer, create_token, start_server
from strictcall.server.edge import MAX_HEADER_BYTES, MAX_REQUEST_LINE_BYTES

TIMEOUT_S = 60.0
COUNT = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("edge-limits") / "notes.sqlite3")
    yield running
    assert running.stop() == 0


def status_after_sending(server: RunningServer, head: bytes, rest: int = 0) -> int:
    """Send `head`, then `rest` more header bytes in 64 KiB pieces (stopping when the server
    has closed), and read the status the server answered."""
    parts = urlsplit(server.base_url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=TIMEOUT_S) as sock:
        try:
            sock.sendall(head)
            piece = b"a" * 65_536
            for _ in range(rest // len(piece)):
                sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed before it was all sent: what the limit is for
        received = b""
        try:
            while b"\r\n" not in received:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                received += chunk
        except ConnectionResetError:
            pass
    assert received.startswith(b"HTTP/1.1 "), received[:200]
    return int(received.split(b" ", 2)[1])


def test_a_request_line_past_the_limit_is_414(server: RunningServer) -> None:
    path = b"/rpc?" + b"a" * MAX_REQUEST_LINE_BYTES
    assert status_after_sending(server, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n") == 414
    # 32 MB of URL, sent as it would be: refused long before the end
    assert status_after_sending(server, b"GET /rpc?", rest=32 << 20) == 414


def test_a_head_past_the_limit_is_431(server: RunningServer) -> None:
    many = b"".join(b"X-Filler-%d: %s\r\n" % (n, b"v" * 100) for n in range(400))  # 45 KB
    assert status_after_sending(server, b"GET /healthz HTTP/1.1\r\n" + many + b"\r\n") == 431
    one_line = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: "
    assert status_after_sending(server, one_line, rest=64 << 20) == 431


def test_a_head_within_the_limits_is_served(server: RunningServer) -> None:
    headers = {"X-Filler": "v" * (MAX_HEADER_BYTES // 2)}
    assert httpx.get(server.base_url + "/healthz", headers=headers).status_code == 200


@pytest.mark.parametrize(
    ("path", "upgrade"),
    [("/mcp", "websocket"), ("/rpc", "websocket"), ("/", "websocket"), ("/rpc", "h2c")],
)
def test_an_upgrade_request_is_400_never_5xx(
    server: RunningServer, path: str, upgrade: str
) -> None:
    head = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: {upgrade}\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    assert status_after_sending(server, head.encode()) == 400
    assert httpx.get(server.base_url + "/healthz").status_code == 200  # and serves on


def _latencies(client: httpx.Client, count: int) -> list[float]:
    took = []
    for _ in range(count):
        started = time.monotonic()
        assert client.post("/rpc", content=COUNT).status_code == 200
        took.append(time.monotonic() - started)
    return took


def test_huge_headers_cost_another_client_nothing_much(server: RunningServer) -> None:
    token = create_token(server.db, "agent")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=TIMEOUT_S) as agent:
        idle = _latencies(agent, 150)
        statuses: list[int] = []
        stop = threading.Event()

        def attack() -> None:  # one long header line, again and again (the issue: 64 MB)
            while not stop.is_set():
                head = b"POST /rpc HTTP/1.1\r\nHost: x\r\nX-Long: "
                statuses.append(status_after_sending(server, head, rest=16 << 20))

        attackers = [threading.Thread(target=attack) for _ in range(4)]
        for thread in attackers:
            thread.start()
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not statuses and time.monotonic() < deadline:  # the attack under way first
                time.sleep(0.001)
            before = len(statuses)
            beside = _latencies(agent, 150)  # every one answered 200 (asserted inside)
            during = len(statuses) - before
        finally:
            stop.set()
            for thread in attackers:
                thread.join(TIMEOUT_S)
    # the agent was served while the huge heads kept coming and were refused early (the old
    # server read them whole and stalled others 3.4-8.4 s); how long its calls took is a
    # figure printed below, not an assertion on a shared machine
    assert before > 0 and during > 0
    assert set(statuses) == {431}
    idle_p99 = statistics.quantiles(idle, n=100)[98]
    beside_p99 = statistics.quantiles(beside, n=100)[98]
    print(
        f"agent p99 idle {idle_p99 * 1e3:.1f} ms, beside 4 huge-header senders "
        f"{beside_p99 * 1e3:.1f} ms ({len(statuses)} refused)"
    )
