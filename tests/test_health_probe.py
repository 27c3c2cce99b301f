"""/healthz and the operator's paths on a database that is up but does not answer: on
PostgreSQL the probe is awaited and the operator's token looked up on a thread, so neither holds
another caller, and the probe says 503 within its bound rather than waiting for the network to
give up (it never does: the bytes are taken, just not answered)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import httpx

import pg
from relay import Relay
from servers import create_token, start_server, strictcall
from strictcall.storage.postgres import HEALTH_TIMEOUT_S

DEADLINE_S = 30.0
LISTING_S = 10 * HEALTH_TIMEOUT_S
"""A listing needs no database: with the loop free it takes milliseconds, so ten times the
probe's bound is a wide margin; on a loop held by a stalled query it never comes."""
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
        Relay(("127.0.0.1", urlsplit(url).port or 5432)) as relay,
    ):
        token = create_token(url, "u1")
        done = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", url)
        assert done.returncode == 0, done.stderr
        # a Host that is not loopback: the page is open without a token on loopback only
        operator = {
            "Authorization": f"Bearer {done.stdout.strip().splitlines()[-1]}",
            "Host": "ops.example",
        }
        server = start_server(url, db_url=_via(url, relay.port))
        headers = {"Authorization": f"Bearer {token}"}
        try:
            with (
                httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as probe_client,
                httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as caller,
                httpx.Client(base_url=server.base_url, timeout=DEADLINE_S) as scraper,
                ThreadPoolExecutor(2) as pool,
            ):
                assert caller.post("/rpc", json=LIST, headers=headers).status_code == 200
                assert probe_client.get("/healthz").status_code == 200
                assert scraper.get("/metrics", headers=operator).status_code == 200
                relay.stall()
                probe = pool.submit(probe_client.get, "/healthz")
                scrape = pool.submit(scraper.get, "/metrics", headers=operator)
                # while both wait on the database (the probe for at most its bound), a caller
                # whose token the server knows needs none: it is answered, again and again
                listings = 0
                while not probe.done():
                    listed = caller.post("/rpc", json=LIST, headers=headers, timeout=LISTING_S)
                    assert listed.status_code == 200
                    assert listed.json()["result"]["tools"]
                    listings += 1
                assert listings > 0
                assert not scrape.done()  # it waits for the database, on its thread
                assert probe.result().status_code == 503
                relay.resume()
                assert scrape.result(timeout=DEADLINE_S).status_code == 200
                deadline = time.monotonic() + DEADLINE_S
                while probe_client.get("/healthz").status_code != 200:
                    assert time.monotonic() < deadline, (
                        "/healthz stayed 503 after the database came back"
                    )
                    time.sleep(HEALTH_TIMEOUT_S / 10)
        finally:
            relay.resume()
            assert server.stop() == 0
