"""/healthz on a database that is up but does not answer: on PostgreSQL the probe is awaited,
so it holds no other caller, and it says 503 within its bound rather than waiting for the
network to give up."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import httpx

import pg
from servers import create_token, start_server
from stalling_relay import StallingRelay
from strictcall.storage.postgres import HEALTH_TIMEOUT_S

DEADLINE_S = 30.0
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def _via(url: str, port: int) -> str:
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    return urlunsplit(
        parts._replace(netloc=f"{user}@127.0.0.1:{port}" if user else f"127.0.0.1:{port}")
    )


def test_a_probe_waiting_on_a_stalled_database_holds_no_other_caller(postgres: None) -> None:
    with (
        pg.fresh_database() as url,
        StallingRelay(("127.0.0.1", urlsplit(url).port or 5432)) as relay,
    ):
        token = create_token(url, "u1")
        server = start_server(url, db_url=_via(url, relay.port))
        headers = {"Authorization": f"Bearer {token}"}
        try:
            with (
                httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as probe_client,
                httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as caller,
                ThreadPoolExecutor(1) as pool,
            ):
                assert caller.post("/rpc", json=LIST, headers=headers).status_code == 200
                assert probe_client.get("/healthz").status_code == 200
                relay.stall()
                probe = pool.submit(probe_client.get, "/healthz")
                # the probe is on its way; a caller whose token the server knows needs no database
                listed = caller.post("/rpc", json=LIST, headers=headers)
                answered_while_probing = not probe.done()
                assert listed.status_code == 200
                assert listed.json()["result"]["tools"]
                assert answered_while_probing
                assert probe.result(timeout=DEADLINE_S).status_code == 503
                relay.resume()
                deadline = time.monotonic() + DEADLINE_S
                while probe_client.get("/healthz").status_code != 200:
                    assert time.monotonic() < deadline, (
                        "/healthz stayed 503 after the database came back"
                    )
                    time.sleep(HEALTH_TIMEOUT_S / 10)
        finally:
            relay.resume()
            assert server.stop() == 0
