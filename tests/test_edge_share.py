"""Fair shares at the HTTP edge, on a real `strictcall serve`: one client address's idle sockets
leave the other addresses served, and requests without a valid token have a budget per address
and are audited as a sample, counted whole in /metrics."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from servers import create_token, metric, recent_audit, start_server
from strictcall.audit.sampling import UNAUTHENTICATED_ROWS_PER_S, UNSAMPLED
from strictcall.errors import AUTH_THROTTLED, UNAUTHENTICATED
from strictcall.server.edge import DEFAULT_MAX_CONNECTIONS_PER_CLIENT, client_key
from strictcall.storage import AuditRecord

DEADLINE_S = 20.0
CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'
ATTACKER = "127.0.0.2"  # every 127/8 address is this machine's loopback


@pytest.mark.parametrize(
    ("peer", "key"),
    [
        (("192.0.2.7", 5000), "192.0.2.7"),
        (("2001:db8::1", 5000, 0, 0), "2001:db8::/64"),
        (("2001:db8::ffff:1", 5000, 0, 0), "2001:db8::/64"),
        (("::ffff:192.0.2.7", 5000, 0, 0), "192.0.2.7"),
        (("fe80::1%eth0", 5000, 0, 2), "fe80::/64"),
        (None, ""),
        ("/run/strictcall.sock", ""),
    ],
)
def test_a_clients_share_is_counted_by_its_address_and_an_ipv6_clients_by_its_64(
    peer: object, key: str
) -> None:
    assert client_key(peer) == key


def test_a_thousand_idle_sockets_from_one_address_leave_another_address_served(
    tmp_path: Path,
) -> None:
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "agent")
    running = start_server(db, "--header-timeout", "60")
    parts = urlsplit(running.base_url)
    address = (parts.hostname, parts.port)
    idle: list[socket.socket] = []
    try:
        for _ in range(1100):
            sock = socket.socket()
            sock.bind((ATTACKER, 0))
            sock.connect(address)
            idle.append(sock)
        # the server has seen every one of them: the last is refused at once (503, closed)
        idle[-1].settimeout(DEADLINE_S)
        assert idle[-1].recv(4096).startswith(b"HTTP/1.1 503")
        with httpx.Client(timeout=DEADLINE_S) as client:
            headers = {"Authorization": f"Bearer {token}"}
            for _ in range(5):
                answer = client.post(running.base_url + "/rpc", content=CALL, headers=headers)
                assert answer.status_code == 200 and answer.json()["result"] == 0
        refused = 1  # the last, read above
        for sock in idle[:-1]:  # the attacker holds its share and no more
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):  # open, unanswered: within the share
                refused += sock.recv(4096).startswith(b"HTTP/1.1 503")
        assert refused == len(idle) - DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    finally:
        for sock in idle:
            sock.close()
        assert running.stop() == 0


def test_the_share_is_given_back_when_a_connection_closes(tmp_path: Path) -> None:
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "agent")
    running = start_server(db, "--max-connections-per-client", "2")
    parts = urlsplit(running.base_url)
    try:
        held = [socket.create_connection((parts.hostname, parts.port)) for _ in range(2)]
        extra = socket.create_connection((parts.hostname, parts.port), timeout=DEADLINE_S)
        with extra:
            assert extra.recv(4096).startswith(b"HTTP/1.1 503")
        held.pop().close()
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + DEADLINE_S
        while True:  # until the server has seen the close
            try:
                answer = httpx.post(
                    running.base_url + "/rpc", content=CALL, headers=headers, timeout=DEADLINE_S
                )
            except httpx.TransportError:
                answer = None
            if (answer is not None and answer.status_code == 200) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert answer is not None and answer.status_code == 200
        for sock in held:
            sock.close()
    finally:
        assert running.stop() == 0
    assert recent_audit(db, 1, lambda r: True) is not None


def untokened(client: httpx.Client, base_url: str, count: int) -> list[httpx.Response]:
    return [client.post(base_url + "/rpc", content=CALL) for _ in range(count)]


def test_requests_without_a_valid_token_past_the_budget_are_429_auth_throttled(
    tmp_path: Path,
) -> None:
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "agent")
    running = start_server(db, "--max-unauthenticated-rate", "2")  # a burst of 10, then 2/s
    try:
        with httpx.Client(timeout=DEADLINE_S) as client:
            answers = untokened(client, running.base_url, 30)
            statuses = [answer.status_code for answer in answers]
            assert statuses[:10] == [401] * 10
            assert statuses.count(429) >= 15
            throttled = next(answer for answer in answers if answer.status_code == 429)
            data = throttled.json()["error"]["data"]
            assert (data["code"], data["stage"], data["retryable"]) == (
                AUTH_THROTTLED.code,
                AUTH_THROTTLED.stage.value,
                AUTH_THROTTLED.retryable,
            )
            assert data["retry_after_ms"] >= 250 and int(throttled.headers["retry-after"]) >= 1
            bad = client.post(
                running.base_url + "/rpc", content=CALL, headers={"Authorization": "Bearer sc_x"}
            )
            assert bad.status_code == 429  # an unknown token is not looked up past the budget
            known = client.post(
                running.base_url + "/rpc",
                content=CALL,
                headers={"Authorization": f"Bearer {token}"},
            )
            assert known.status_code == 200  # a valid token from the same address is served
        elsewhere = httpx.HTTPTransport(local_address=ATTACKER)
        with httpx.Client(timeout=DEADLINE_S, transport=elsewhere) as other:
            assert untokened(other, running.base_url, 1)[0].status_code == 401  # its own budget
    finally:
        assert running.stop() == 0


def test_refusals_without_a_token_are_audited_as_a_sample_and_counted_whole(
    service_db: str,
) -> None:
    """On each store: a count row shares its batch with calls' records (PostgreSQL writes a
    batch's columns as typed arrays: a count row's time is a float like every other's)."""
    db = service_db
    running = start_server(db)
    codes = (UNAUTHENTICATED.code, AUTH_THROTTLED.code)
    try:
        with httpx.Client(timeout=DEADLINE_S) as client:
            started = time.time()
            sent = len(untokened(client, running.base_url, 300))
            second = int(time.time())
            while int(time.time()) == second:  # one more in a later second settles the last
                time.sleep(0.01)
            sent += len(untokened(client, running.base_url, 1))
            elapsed = time.time() - started

            def counted(records: list[AuditRecord]) -> int:
                total = 0
                for r in records:
                    if r.code in codes and r.identity is None:
                        reason = r.reason or ""
                        total += (
                            int(reason[len(UNSAMPLED) :]) if reason.startswith(UNSAMPLED) else 1
                        )
                return total

            records = recent_audit(db, 1000, lambda r: counted(r) >= sent)
            assert counted(records) == sent
            rows = [r for r in records if r.code in codes]
            seconds = int(elapsed) + 2
            assert len(rows) <= seconds * (UNAUTHENTICATED_ROWS_PER_S + len(codes))
            text = client.get(running.base_url + "/metrics").text
            total = sum(metric(text, "strictcall_calls_total", code=code) for code in codes)
            assert total == sent
    finally:
        assert running.stop() == 0


@pytest.mark.parametrize("path", ["/mcp", "/rpc"])
def test_a_request_declaring_a_ten_gigabyte_body_is_answered_413_at_once(
    tmp_path: Path, path: str
) -> None:
    from strictcall.core.jsontext import MAX_SIZE
    from strictcall.errors import REQUEST_TOO_LARGE

    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "agent")
    running = start_server(db, "--body-grace", "60")  # an answer, not the rate's cut-off
    parts = urlsplit(running.base_url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=DEADLINE_S) as sock:
            head = (
                f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                "Content-Length: 10737418240\r\n\r\n{"
            )
            sock.sendall(head.encode())
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                assert chunk, answer  # answered, not closed
                answer += chunk
        status = int(answer.split(b" ", 2)[1])
        assert status == (413 if path == "/mcp" else 200)  # /rpc answers JSON-RPC errors 200
        data = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["data"]
        assert (data["code"], data["limit"]) == (REQUEST_TOO_LARGE.code, MAX_SIZE)
    finally:
        assert running.stop() == 0


def nested_arrays_body(size: int = (1 << 20) - 1000) -> bytes:
    """A tools/call of about `size` bytes whose argument is a list of empty arrays: cheap to
    send, a few hundred milliseconds to read and check (a walk over every container)."""
    inner = b"[]," * ((size - 100) // 3)
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes",'
        b'"arguments":{"x":[' + inner + b"[]]}}}"
    )


@pytest.mark.parametrize("path", ["/rpc", "/mcp"])
def test_another_client_stays_served_while_big_nested_bodies_are_read(
    tmp_path: Path, path: str
) -> None:
    import statistics
    import threading

    db = tmp_path / "notes.sqlite3"
    agent_token, heavy_token = create_token(db, "agent"), create_token(db, "heavy")
    running = start_server(db)
    body = nested_arrays_body()
    mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        agent = httpx.Client(
            base_url=running.base_url,
            headers={"Authorization": f"Bearer {agent_token}"},
            timeout=DEADLINE_S,
        )
        heavy = httpx.Client(
            base_url=running.base_url,
            headers={"Authorization": f"Bearer {heavy_token}", **mcp},
            timeout=DEADLINE_S * 3,
        )
        with agent, heavy:

            def latencies(count: int) -> list[float]:
                took = []
                for _ in range(count):
                    started = time.monotonic()
                    assert agent.post("/rpc", content=CALL).status_code == 200
                    took.append(time.monotonic() - started)
                return took

            idle = latencies(50)
            stop = threading.Event()
            answered = 0

            def flood() -> None:
                nonlocal answered
                while not stop.is_set():
                    assert heavy.post(path, content=body).status_code == 200
                    answered += 1

            flooding = threading.Thread(target=flood)
            flooding.start()
            try:
                deadline = time.monotonic() + DEADLINE_S * 3
                while answered == 0 and time.monotonic() < deadline:  # the bodies under way
                    time.sleep(0.001)
                before = answered
                beside = latencies(100)
                during = answered - before
            finally:
                stop.set()
                flooding.join(DEADLINE_S * 3)
    finally:
        assert running.stop() == 0
    # read off the loop, a body lets the agent in every few milliseconds of its read: many
    # calls per body; read on the loop, one call got in between bodies (a count of turns, not
    # a time)
    assert before > 0 and during <= 25, (before, during)  # 2-4 measured; 52-53 on the loop
    print(
        f"agent p50 idle {statistics.median(idle) * 1e3:.1f} ms, beside 1 MiB nested bodies on "
        f"{path} {statistics.median(beside) * 1e3:.1f} ms ({during} bodies during 100 calls)"
    )


def test_a_body_is_read_off_the_loop_with_the_short_switch_interval_given_back() -> None:
    import asyncio
    import sys
    import threading

    from strictcall.transports.offload import READ_SWITCH_S, read_off_loop

    before = sys.getswitchinterval()
    assert before != READ_SWITCH_S  # the interpreter's own (5 ms), or a test would say nothing

    def read() -> tuple[float, bool]:
        return sys.getswitchinterval(), threading.current_thread() is threading.main_thread()

    interval, on_main = asyncio.run(read_off_loop(read))
    assert (interval, on_main) == (READ_SWITCH_S, False)
    assert sys.getswitchinterval() == before  # given back once the read is done

    def fails() -> None:
        raise ValueError

    with pytest.raises(ValueError):
        asyncio.run(read_off_loop(fails))
    assert sys.getswitchinterval() == before  # and after a read that raised
