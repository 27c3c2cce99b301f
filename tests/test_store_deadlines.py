"""Every await on the PostgreSQL store has a deadline (issue 32, item 1): a token lookup or a
notes call whose session stopped answering (its backend stopped with SIGSTOP, as a hung or
partitioned database looks to a client) is answered retryable within the deadline, the
connection it waited on is discarded, the pool refills by itself, and a graceful stop is not
held; sessions killed while requests come in never leave one unanswered. A store error caused
by the input itself (a value too long for PostgreSQL's index) is no store fault."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import httpx
import pytest

import pg
from servers import create_token, start_server
from strictcall.core.gateway import Gateway
from strictcall.core.record import AuditRecord
from strictcall.errors import STORE_UNAVAILABLE, TOKEN_STORE_UNAVAILABLE, VALUE_REFUSED
from strictcall.services.notes import notes_tools
from strictcall.storage import IdempotencyKey, StoreRefused, StoreUnavailable
from strictcall.storage.postgres import PostgresStore
from strictcall.storage.postgres.connections import CALL_DEADLINE_S
from strictcall.storage.postgres.faults import call_deadline_for

COUNT = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'
UNKNOWN = "sc_" + "x" * 43
# what a request may take while the database hangs: the deadline, a wait for a free connection,
# and a wide margin for a machine shared by many (the old code never answered at all)
ANSWER_BOUND_S = CALL_DEADLINE_S + 12.0
HTTP_TIMEOUT_S = 60.0


def server_backends(url: str) -> list[int]:
    """The pids of the sessions the server holds on `url`'s database."""
    database = url.rsplit("/", 1)[1]
    with pg.admin() as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return [int(str(row[0])) for row in rows]


@contextmanager
def stopped(pids: list[int]) -> Iterator[None]:
    """The backends stopped (SIGSTOP) until the block ends: sessions that hang, answering
    nothing, with no statement timeout to end them."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def timed_post(base_url: str, headers: dict[str, str]) -> tuple[float, httpx.Response]:
    started = time.monotonic()
    with httpx.Client(base_url=base_url, timeout=HTTP_TIMEOUT_S) as client:
        answer = client.post("/rpc", content=COUNT, headers=headers)
    return time.monotonic() - started, answer


def in_threads(count: int, base_url: str, headers: dict[str, str]) -> list[tuple[float, int]]:
    """`count` requests at once, each on its own connection: (seconds, HTTP status) each."""
    answers: list[tuple[float, int]] = []

    def one() -> None:
        took, answer = timed_post(base_url, headers)
        answers.append((took, answer.status_code))

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HTTP_TIMEOUT_S + 5)
    return answers


def code_of(answer: httpx.Response) -> str:
    return str(answer.json()["error"]["data"]["code"])


def serves_again(base_url: str, known: dict[str, str]) -> bool:
    """Polled with a deadline: a known caller is answered 0 and an unknown one 401."""
    deadline = time.monotonic() + ANSWER_BOUND_S * 2
    while time.monotonic() < deadline:
        _, ok = timed_post(base_url, known)
        _, refused = timed_post(base_url, {"Authorization": f"Bearer {UNKNOWN}"})
        if ok.status_code == 200 and ok.json().get("result") == 0 and refused.status_code == 401:
            return True
        time.sleep(0.1)
    return False


def requests_in_flight(base_url: str) -> int:
    """The server's HTTP requests being answered, as /metrics says (this one among them)."""
    text = httpx.get(f"{base_url}/metrics", timeout=HTTP_TIMEOUT_S).text
    found = re.search(r"^strictcall_requests_in_flight (\S+)$", text, re.MULTILINE)
    assert found is not None
    return int(float(found.group(1)))


def test_hung_sessions_are_answered_within_the_deadline_and_replaced(pg_url: str) -> None:
    token = create_token(pg_url, "u1")
    known = {"Authorization": f"Bearer {token}"}
    unknown = {"Authorization": f"Bearer {UNKNOWN}"}
    server = start_server(pg_url)
    try:
        # every connection of the loop's pool opened and known (a token and a count each)
        assert all(status == 200 for _, status in in_threads(8, server.base_url, known))
        with stopped(server_backends(pg_url)):
            took, first = timed_post(server.base_url, unknown)
            assert first.status_code == 503 and code_of(first) == TOKEN_STORE_UNAVAILABLE.code
            assert first.json()["error"]["data"]["retryable"] is True
            assert took < ANSWER_BOUND_S
            answers = in_threads(6, server.base_url, unknown) + in_threads(
                6, server.base_url, known
            )
            assert len(answers) == 12
            # each answered in bound: 401/503 for the unknown, 200 (a new connection) or a
            # retryable store_unavailable for the known, never a wait without end
            assert max(took for took, _ in answers) < ANSWER_BOUND_S, answers
            assert {status for _, status in answers} <= {200, 401, 503}
            # the hung connections were discarded, the pool opened new ones: served again while
            # the old sessions still hang
            assert serves_again(server.base_url, known)
    finally:
        assert server.stop() == 0


def test_a_graceful_stop_is_not_held_by_a_hung_lookup(pg_url: str) -> None:
    create_token(pg_url, "u1")
    unknown = {"Authorization": f"Bearer {UNKNOWN}"}
    server = start_server(pg_url)
    try:
        assert timed_post(server.base_url, unknown)[1].status_code == 401
        with stopped(server_backends(pg_url)):
            answers: list[tuple[float, httpx.Response]] = []
            waiting = threading.Thread(
                target=lambda: answers.append(timed_post(server.base_url, unknown))
            )
            waiting.start()
            # the request read and waiting on its lookup: in flight beside the metrics' own
            deadline = time.monotonic() + ANSWER_BOUND_S
            while requests_in_flight(server.base_url) < 2:
                assert time.monotonic() < deadline and waiting.is_alive()
                time.sleep(0.01)
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            status = server.process.wait(timeout=ANSWER_BOUND_S * 2)
            stopped_in = time.monotonic() - started
            waiting.join(HTTP_TIMEOUT_S)
        assert status == 0
        assert stopped_in < ANSWER_BOUND_S
        assert [a.status_code for _, a in answers] == [503]
    finally:
        server.stop(signal.SIGKILL)


def ended_within(work: Callable[[], object], seconds: float) -> BaseException | None:
    """What `work`, run on a thread of its own, raised (None: it returned); failed when it has
    not ended within `seconds`."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the test to assert on
            raised.append(exc)
        else:
            raised.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"not ended within {seconds} s"
    return raised[0]


def test_a_call_made_on_a_thread_is_cut_at_the_deadline(pg_url: str) -> None:
    """The threads' side (an audit batch written as the server stops, the operator's commands)
    has the same deadline: its session stopped, a write fails retryable in bound, a read's
    check of the other idle sessions is bounded too, and the store serves again after."""
    store = PostgresStore(pg_url)
    try:
        assert store.count_notes("u1") == 0  # the threads' pool has its sessions open
        record = AuditRecord(time.time(), "c1", "u1", "count_notes", "ok", None, None, 1)
        with stopped(server_backends(pg_url)):
            for work in (lambda: store.record_calls([record]), lambda: store.count_notes("u1")):
                assert isinstance(ended_within(work, ANSWER_BOUND_S), StoreUnavailable)
        deadline = time.monotonic() + ANSWER_BOUND_S * 2
        while True:
            try:
                store.record_calls([record])
                break
            except StoreUnavailable:  # the fault is held a moment, then the pool reconnects
                assert time.monotonic() < deadline
                time.sleep(0.1)
        with store.connection() as conn:
            assert conn.execute("SELECT count(*) FROM audit").fetchone() == (1,)
    finally:
        store.close()


def test_sessions_killed_while_requests_come_in_leave_none_unanswered(pg_url: str) -> None:
    token = create_token(pg_url, "u1")
    known = {"Authorization": f"Bearer {token}"}
    # the five unknown callers share 127.0.0.1: each request must reach the token lookup (the
    # sessions being killed), not the address's budget of requests without a valid token
    server = start_server(pg_url, "--max-unauthenticated-rate", "1000000")
    stop = threading.Event()
    kills = 0

    def killer() -> None:
        nonlocal kills
        while not stop.wait(0.15):
            kills += pg.terminate_backends(pg_url)

    try:
        answers: list[tuple[float, int]] = []
        lock = threading.Lock()

        def caller(headers: dict[str, str]) -> None:
            with httpx.Client(base_url=server.base_url, timeout=HTTP_TIMEOUT_S) as client:
                while not stop.is_set():
                    started = time.monotonic()
                    answer = client.post("/rpc", content=COUNT, headers=headers)
                    with lock:
                        answers.append((time.monotonic() - started, answer.status_code))

        unknowns = [{"Authorization": f"Bearer sc_{i:043d}"} for i in range(5)]
        callers = [
            threading.Thread(target=caller, args=(headers,)) for headers in [known] * 3 + unknowns
        ]
        kill_thread = threading.Thread(target=killer)
        for thread in [*callers, kill_thread]:
            thread.start()
        time.sleep(4.0)  # the attack's length, not a wait for readiness
        stop.set()
        for thread in [*callers, kill_thread]:
            thread.join(HTTP_TIMEOUT_S + 5)
        assert not any(thread.is_alive() for thread in callers)
        assert kills > 0 and len(answers) > 0
        assert max(took for took, _ in answers) < ANSWER_BOUND_S
        assert {status for _, status in answers} <= {200, 401, 503}
        assert serves_again(server.base_url, known)
    finally:
        stop.set()
        assert server.stop() == 0


def test_a_value_postgresql_refuses_is_no_store_fault(pg_url: str) -> None:
    # a call id past the btree's row limit (~2.7 KB; random, so not compressed below it): the
    # database refuses the input itself; the same call fails again, and it says nothing about
    # the database's health
    store = PostgresStore(pg_url)
    try:
        key = IdempotencyKey(os.urandom(4_000).hex(), "f" * 64)

        async def create() -> None:
            await store.create_note_async("u1", "text", key)

        for _ in range(2):
            with pytest.raises(StoreRefused):
                asyncio.run(create())
        with pytest.raises(StoreRefused):
            store.create_note("u1", "text", key)
        assert store.count_notes("u1") == 0  # served at once: no fault held
    finally:
        store.close()


def test_a_refused_value_is_answered_value_refused_not_store_unavailable(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        gateway = Gateway(notes_tools(store))
        call_id = os.urandom(4_000).hex()

        async def create() -> dict[str, object]:
            raw = '{"name": "create_note", "arguments": {"text": "t"}}'
            return await gateway.call_async(raw, "u1", call_id)

        answer = asyncio.run(create())
        assert answer["ok"] is False
        error = answer["error"]
        assert isinstance(error, dict)
        assert (error["code"], error["stage"], error["retryable"]) == (
            VALUE_REFUSED.code,
            VALUE_REFUSED.stage,
            False,
        )
        assert error["code"] != STORE_UNAVAILABLE.code
    finally:
        store.close()


def test_the_deadline_follows_the_urls_statement_timeout_and_is_never_none() -> None:
    assert call_deadline_for("", 3.0) == 3.0
    assert call_deadline_for("-c statement_timeout=60000", 3.0) == 61.0
    assert call_deadline_for("-c statement_timeout=5s", 3.0) == 6.0
    assert call_deadline_for("-c statement_timeout=0", 3.0) == 3.0  # none: still a deadline
