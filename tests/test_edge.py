"""The HTTP edge holds against hostile clients: Origin checks, slow clients, connection and
in-flight limits, on a real `strictcall serve`, on each store (SQLite, then PostgreSQL)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from servers import RunningServer, create_token, recent_audit, start_server
from strictcall import errors
from strictcall.server.admission import InFlight
from strictcall.server.edge import EdgeLimits, OriginPolicy, is_loopback_host

DEADLINE_S = 20.0
CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


# --- the policy, in process --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "loopback", "admitted"),
    [
        (None, False, True),
        (None, True, True),
        ("http://localhost:5173", True, True),
        ("http://127.0.0.1", True, True),
        ("https://127.0.0.2:8443", True, True),
        ("http://[::1]:3000", True, True),
        ("http://localhost:5173", False, False),
        ("https://app.example", True, True),  # allowed below
        ("https://app.example:443", True, False),  # not as the browser sends it
        ("http://evil.example", True, False),
        ("http://localhost.evil.example", True, False),
        ("http://127.0.0.1.evil.example", True, False),
        ("null", True, False),
        ("", True, False),
        ("file://", True, False),
        ("http://localhost:99999", True, False),
        ("ws://localhost", True, False),
    ],
)
def test_an_origin_is_admitted_only_when_allowed_or_loopback_on_a_loopback_server(
    origin: str | None, loopback: bool, admitted: bool
) -> None:
    policy = OriginPolicy(frozenset({"https://app.example"}), loopback=loopback)
    assert policy.admits(origin) is admitted


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
    ],
)
def test_loopback_bind_addresses_are_told_apart(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_calls_in_flight_are_counted_per_identity_against_the_limit() -> None:
    in_flight = InFlight(2)
    assert in_flight.enter("a") and in_flight.enter("a")
    assert not in_flight.enter("a")
    assert in_flight.enter("b")
    in_flight.leave("a")
    assert in_flight.enter("a")


def test_edge_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        EdgeLimits(header_timeout_s=0)
    with pytest.raises(ValueError):
        EdgeLimits(max_in_flight=0)
    for nonsense in ({"max_streams": 0}, {"max_streams_per_identity": 0}):
        with pytest.raises(ValueError):
            EdgeLimits(**nonsense)
    with pytest.raises(ValueError):
        EdgeLimits(stream_keepalive_s=0.0)
    for rounds in ({"round_wait_s": 0.0}, {"max_rounds_per_identity": 0}):
        with pytest.raises(ValueError):
            EdgeLimits(**rounds)
    edge = EdgeLimits(round_wait_s=0.5, max_rounds_per_identity=1)  # the edge itself
    assert (edge.rounds.wait_s, edge.rounds.max_held) == (0.5, 1)


# --- a real server -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def db(service_db: str) -> str:
    """The servers' store: a SQLite file, then a fresh PostgreSQL database (tests/conftest.py)."""
    return service_db


@pytest.fixture(scope="module")
def tokens(db: str) -> dict[str, str]:
    return {identity: create_token(db, identity) for identity in ("flood", "agent")}


@pytest.fixture(scope="module")
def server(db: str, tokens: dict[str, str]) -> Iterator[RunningServer]:
    running = start_server(
        db,
        "--allow-origin",
        "https://app.example",
        "--header-timeout",
        "1",
        "--body-grace",
        "1",
        "--max-in-flight",
        "4",
        "--max-connections",
        "300",
    )
    yield running
    assert running.stop() == 0


def post(server: RunningServer, path: str, token: str, origin: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **MCP_HEADERS}
    if origin is not None:
        headers["Origin"] = origin
    return httpx.post(server.base_url + path, content=CALL, headers=headers, timeout=DEADLINE_S)


@pytest.mark.parametrize("path", ["/rpc", "/mcp"])
@pytest.mark.parametrize(
    ("origin", "admitted"),
    [
        (None, True),
        ("http://localhost:5173", True),
        ("http://127.0.0.1:8080", True),
        ("https://app.example", True),
        ("http://evil.example", False),
        ("null", False),
    ],
    ids=["absent", "localhost", "loopback-ip", "allowed", "foreign", "null"],
)
def test_the_origin_matrix_on_a_loopback_server(
    server: RunningServer, tokens: dict[str, str], path: str, origin: str | None, admitted: bool
) -> None:
    response = post(server, path, tokens["agent"], origin)
    if admitted:
        assert response.status_code == 200
        return
    assert response.status_code == 403
    error = response.json()["error"]
    assert response.json()["id"] is None
    assert error["data"]["code"] == errors.FORBIDDEN_ORIGIN.code
    assert error["data"]["stage"] == errors.FORBIDDEN_ORIGIN.stage.value


def test_a_foreign_origin_is_refused_before_the_token_is_read_and_audited(
    server: RunningServer, db: str
) -> None:
    response = post(server, "/rpc", "sc_not-a-token", "http://evil.example")
    assert response.status_code == 403  # not 401: a foreign page learns nothing of tokens
    audit = recent_audit(
        db, 5, lambda rows: any(r.code == errors.FORBIDDEN_ORIGIN.code for r in rows)
    )
    assert any(r.code == errors.FORBIDDEN_ORIGIN.code for r in audit)


def slow_client(base_url: str, stop: threading.Event, closed: list[bool]) -> None:
    """Send a request's headers one byte at a time, slowly, until the server closes."""
    parts = urlsplit(base_url)
    request = b"POST /rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer x\r\nX-Slow: " + b"a" * 200
    with socket.create_connection((parts.hostname, parts.port), timeout=DEADLINE_S) as sock:
        sock.settimeout(0.25)
        for byte in request:
            if stop.is_set():
                return
            try:
                sock.sendall(bytes([byte]))
                if sock.recv(4096) == b"":
                    closed.append(True)
                    return
            except TimeoutError:
                continue  # nothing from the server yet: send the next byte
            except OSError:
                closed.append(True)
                return
            closed.append(True)  # the server answered (408) before the headers ended
            return


def test_slow_header_clients_are_cut_off_while_an_agent_is_served(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    stop = threading.Event()
    closed: list[bool] = []
    threads = [
        threading.Thread(target=slow_client, args=(server.base_url, stop, closed), daemon=True)
        for _ in range(200)
    ]
    for thread in threads:
        thread.start()
    try:
        with httpx.Client(timeout=DEADLINE_S) as client:
            headers = {"Authorization": f"Bearer {tokens['agent']}"}
            for _ in range(50):
                answer = client.post(server.base_url + "/rpc", content=CALL, headers=headers)
                assert answer.status_code == 200 and answer.json()["result"] == 0
        deadline = time.monotonic() + DEADLINE_S
        while len(closed) < len(threads) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(closed) == len(threads)  # every slow client was disconnected by the server
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=DEADLINE_S)


def open_slow_body(base_url: str, token: str) -> socket.socket:
    """A request whose headers arrive and whose body does not (yet): a call in flight."""
    parts = urlsplit(base_url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=DEADLINE_S)
    sock.sendall(
        b"POST /rpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Length: {len(CALL)}\r\n\r\n".encode()
        + CALL[:5]
    )
    return sock


def test_one_identity_at_its_limit_is_refused_busy_while_another_is_served(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    held = [open_slow_body(server.base_url, tokens["flood"]) for _ in range(4)]
    try:
        flood_headers = {"Authorization": f"Bearer {tokens['flood']}"}
        agent_headers = {"Authorization": f"Bearer {tokens['agent']}"}
        with httpx.Client(timeout=DEADLINE_S) as client:
            deadline = time.monotonic() + DEADLINE_S
            while True:  # until the server has all four in flight
                refused = client.post(server.base_url + "/rpc", content=CALL, headers=flood_headers)
                if refused.status_code == 429 or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) >= 1
            data: dict[str, Any] = refused.json()["error"]["data"]
            assert data["code"] == errors.BUSY.code and data["retryable"] is True
            assert data["retry_after_ms"] > 0
            for _ in range(20):
                served = client.post(server.base_url + "/rpc", content=CALL, headers=agent_headers)
                assert served.status_code == 200 and served.json()["result"] == 0
    finally:
        for sock in held:
            sock.close()


def test_a_body_that_stalls_is_cut_off_by_the_minimum_rate(
    server: RunningServer, tokens: dict[str, str]
) -> None:
    sock = open_slow_body(server.base_url, tokens["agent"])
    try:
        sock.settimeout(DEADLINE_S)
        assert sock.recv(4096) == b""  # closed by the server after the grace, not answered
    finally:
        sock.close()


def test_connections_beyond_the_limit_are_answered_503_at_once(
    db: str, tokens: dict[str, str]
) -> None:
    running = start_server(db, "--max-connections", "3", "--header-timeout", "5")
    parts = urlsplit(running.base_url)
    idle = [socket.create_connection((parts.hostname, parts.port)) for _ in range(3)]
    try:
        extra = socket.create_connection((parts.hostname, parts.port), timeout=DEADLINE_S)
        with extra:
            answer = extra.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503")
        head = answer.split(b"\r\n\r\n", 1)[0].lower().split(b"\r\n")
        assert b"retry-after: 1" in head and b"connection: close" in head  # retry, elsewhere
    finally:
        for sock in idle:
            sock.close()
        assert running.stop() == 0
