"""/healthz is honest: on a database whose tables went from under a running server (every call
answered 503), it answers 503 too, not 200; and 200 again once the tables are back."""

from __future__ import annotations

import time

import httpx
import psycopg

from servers import create_token, start_server
from strictcall.errors import TOKEN_STORE_UNAVAILABLE

DEADLINE_S = 30.0


def call(base_url: str, token: str) -> httpx.Response:
    return httpx.post(
        base_url + "/rpc",
        headers={"Authorization": f"Bearer {token}"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "list_notes", "arguments": {}},
        },
        timeout=DEADLINE_S,
    )


def test_healthz_is_503_while_the_database_has_no_tables_and_200_once_they_are_back(
    pg_url: str,
) -> None:
    token = create_token(pg_url, "u1")
    server = start_server(pg_url)
    try:
        assert httpx.get(server.base_url + "/healthz", timeout=DEADLINE_S).status_code == 200
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE tokens RENAME TO tokens_away")
        answered = call(server.base_url, token)  # a token never seen: it cannot be looked up
        assert answered.status_code == 503
        assert answered.json()["error"]["data"]["code"] == TOKEN_STORE_UNAVAILABLE.code
        deadline = time.monotonic() + DEADLINE_S
        while httpx.get(server.base_url + "/healthz", timeout=DEADLINE_S).status_code != 503:
            assert time.monotonic() < deadline, "/healthz stayed 200 with no tokens table"
            time.sleep(0.1)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("ALTER TABLE tokens_away RENAME TO tokens")
        assert httpx.get(server.base_url + "/healthz", timeout=DEADLINE_S).status_code == 200
    finally:
        assert server.stop() == 0
