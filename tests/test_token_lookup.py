"""On PostgreSQL a token the server does not know yet (an unknown one is looked up every time) is
looked up on the event loop without blocking it: while one request's lookup waits on the
database, a caller whose token is known is answered."""

from __future__ import annotations

import threading
import time

import httpx
import psycopg

from servers import create_token, start_server

DEADLINE_S = 20.0
CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'
UNKNOWN = "sc_" + "x" * 43
# the server's statements may wait for the test's lock as long as the test needs
PATIENT = "?options=-c%20statement_timeout%3D60000"


def lookups_waiting(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Sessions of this database waiting on a lock (the server's token lookup, once sent)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'"
    ).fetchone()
    assert row is not None
    return int(str(row[0]))


def test_a_token_lookup_waiting_on_the_database_holds_no_other_caller(pg_url: str) -> None:
    token = create_token(pg_url, "u1")
    server = start_server(pg_url, db_url=pg_url + PATIENT)
    try:
        known = {"Authorization": f"Bearer {token}"}
        with (
            httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as client,
            psycopg.connect(pg_url, autocommit=True) as watcher,
            psycopg.connect(pg_url) as locker,
        ):
            first = client.post("/rpc", content=CALL, headers=known)  # its token now known
            assert first.status_code == 200 and first.json()["result"] == 0
            locker.execute("LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE")
            answers: list[httpx.Response] = []

            def unknown_caller() -> None:
                headers = {"Authorization": f"Bearer {UNKNOWN}"}
                with httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as other:
                    answers.append(other.post("/rpc", content=CALL, headers=headers))

            waiting = threading.Thread(target=unknown_caller)
            waiting.start()
            deadline = time.monotonic() + DEADLINE_S
            while lookups_waiting(watcher) == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert lookups_waiting(watcher) >= 1  # the unknown token's lookup waits on the lock

            served = client.post("/rpc", content=CALL, headers=known)
            assert served.status_code == 200 and served.json()["result"] == 0
            assert waiting.is_alive() and not answers  # answered while the lookup still waits

            locker.rollback()  # the lock goes: the lookup ends, and the token is unknown
            waiting.join(DEADLINE_S)
            assert [a.status_code for a in answers] == [401]
    finally:
        assert server.stop() == 0
