"""`strictcall serve --workers N`: N processes on one port, on either store; one SIGINT stops
them all, each finishing its requests in flight."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from servers import RunningServer, children, create_token, metric, start_server
from strictcall import Client
from strictcall.errors import FORBIDDEN_ORIGIN
from strictcall.storage import open_store

DEADLINE_S = 30.0


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "workers.sqlite3")
    return str(request.getfixturevalue("pg_url"))


def workers_of(server: RunningServer) -> set[int]:
    """The server's worker processes (not multiprocessing's resource tracker)."""
    return {pid for pid in children(server.process.pid) if b"spawn_main" in _cmdline(pid)}


def _cmdline(pid: int) -> bytes:
    """A process's command line; empty once it has gone (a killed worker may go meanwhile)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return b""


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def two_workers(db: str) -> Iterator[tuple[RunningServer, str]]:
    token = create_token(db, "u1")
    running = start_server(db, "--workers", "2")
    yield running, token
    running.stop(signal.SIGINT)


def test_two_workers_serve_one_port_and_one_sigint_stops_them_all(
    two_workers: tuple[RunningServer, str],
) -> None:
    server, token = two_workers
    workers = workers_of(server)
    assert len(workers) == 2

    def write(n: int) -> str:
        with Client(server.base_url, token) as client:
            return str(client.call("create_note", {"text": f"w{n}"})["note_id"])

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(write, range(40)))
    with Client(server.base_url, token) as client:
        assert client.call("count_notes") == 40
        assert {n["note_id"] for n in client.call("list_notes")} == set(ids)
    assert httpx.get(server.base_url + "/healthz", timeout=10).status_code == 200
    assert server.stop(signal.SIGINT) == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


@pytest.mark.parametrize("db", ["sqlite"], indirect=True)  # the supervisor's, whatever the store
def test_a_killed_worker_is_replaced_and_the_port_keeps_serving(
    two_workers: tuple[RunningServer, str],
) -> None:
    server, token = two_workers
    victim = min(workers_of(server))
    os.kill(victim, signal.SIGKILL)
    wait_until(
        lambda: victim not in workers_of(server) and len(workers_of(server)) == 2, "replaced"
    )
    with Client(server.base_url, token) as client:
        for _ in range(10):  # connections land on either worker
            assert client.call("count_notes") == 0


def test_sigint_lets_a_request_in_flight_finish(pg_url: str) -> None:
    token = create_token(pg_url, "u1")
    server = start_server(pg_url, "--workers", "2")
    answers: list[object] = []
    try:
        with psycopg.connect(pg_url) as holder:
            # the call's key is held by a transaction here: the server's write waits for it
            holder.execute("INSERT INTO idempotency VALUES ('u1', '\"held\"', 'fp', 'n-x', 0)")

            def call() -> None:
                with Client(server.base_url, token) as client:
                    answers.append(client.call("create_note", {"text": "late"}, call_id="held"))

            caller = threading.Thread(target=call)
            caller.start()
            with psycopg.connect(pg_url, autocommit=True) as watcher:

                def waiting() -> bool:
                    row = watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    ).fetchone()
                    return row is not None and row[0] > 0

                wait_until(waiting, "the write waits on the held key")
            server.process.send_signal(signal.SIGINT)
            holder.rollback()  # the key is free: the write in flight goes on
        caller.join(DEADLINE_S)
        assert server.process.wait(timeout=DEADLINE_S) == 0
    finally:
        server.stop()
    assert len(answers) == 1
    store = open_store(pg_url)
    try:
        assert store.list_notes("u1") == [(answers[0]["note_id"], "late")]  # type: ignore[index]
    finally:
        store.close()


@pytest.mark.parametrize("db", ["sqlite"], indirect=True)  # the settings' path, not the store's
def test_every_worker_gets_the_servers_origins_and_operator_routes(db: str) -> None:
    token = create_token(db, "u1")
    server = start_server(
        db, "--workers", "2", "--allow-origin", "https://app.example", "--max-in-flight", "4"
    )
    try:
        assert len(workers_of(server)) == 2
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body = {**call, "params": {"name": "count_notes", "arguments": {}}}
        auth = {"Authorization": f"Bearer {token}"}
        for _ in range(10):  # each on a new connection: they land on either worker
            allowed = httpx.post(
                server.base_url + "/rpc",
                json=body,
                headers={**auth, "Origin": "https://app.example"},
                timeout=DEADLINE_S,
            )
            assert allowed.status_code == 200
            foreign = httpx.post(
                server.base_url + "/rpc",
                json=body,
                headers={**auth, "Origin": "http://evil.example"},
                timeout=DEADLINE_S,
            )
            assert foreign.status_code == 403
            assert foreign.json()["error"]["data"]["code"] == FORBIDDEN_ORIGIN.code
            # a loopback server's operator routes are open without an operator's token
            stats = httpx.get(server.base_url + "/ops/stats.json", timeout=DEADLINE_S)
            assert stats.status_code == 200
    finally:
        assert server.stop(signal.SIGINT) == 0


@pytest.mark.parametrize(
    "limit",
    [
        '[[quota]]\nname = "q"\nper = "identity"\nrate = "10/minute"\ntools = ["*"]\nwho = ["*"]\n',
        '[[rule]]\nname = "r"\nwho = ["*"]\ntools = ["*"]\nrate = "10/minute"\n',
    ],
    ids=["quota", "rule-rate"],
)
def test_workers_refuse_to_start_with_a_policys_limits_counted_in_memory(
    tmp_path: Path, limit: str
) -> None:
    from servers import strictcall

    policy = tmp_path / "policy.toml"
    grant = '[[rule]]\nname = "all"\nwho = ["*"]\ntools = ["*"]\n' if "quota" in limit else ""
    policy.write_text(grant + limit)
    db = str(tmp_path / "notes.sqlite3")
    checked = strictcall("policy", "check", str(policy))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    refused = strictcall(
        "serve", "--port", "0", "--db", db, "--workers", "2", "--policy", str(policy)
    )
    assert refused.returncode == 1 and "--workers 2" in refused.stderr, refused.stderr


def families_of(text: str) -> set[str]:
    """The metric families a scrape names."""
    return {family.name for family in text_string_to_metric_families(text)}


@pytest.mark.parametrize("db", ["sqlite"], indirect=True)
def test_with_a_multiprocess_directory_metrics_sums_both_workers_counts(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "metrics"
    shared.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(shared))
    token = create_token(db, "u1")
    server = start_server(db, "--workers", "2")
    try:
        workers = workers_of(server)
        assert len(workers) == 2
        calls = 40
        for _ in range(calls):  # a connection each: the kernel hands them to either worker
            with Client(server.base_url, token) as client:
                client.call("list_notes")
        ok = {"tool": "list_notes", "outcome": "ok", "transport": "rpc"}

        def counted() -> float:  # each worker counts its calls within a second
            text = httpx.get(server.base_url + "/metrics", timeout=DEADLINE_S).text
            return metric(text, "strictcall_calls_total", **ok)

        wait_until(lambda: counted() == calls, "the workers' calls summed on /metrics")
        text = httpx.get(server.base_url + "/metrics", timeout=DEADLINE_S).text
        # every family a single process has, its counts from both workers
        assert {"strictcall_store_outages", "strictcall_store_faults"} <= families_of(text)
        assert metric(text, "strictcall_store_outages_total") == 0
        assert metric(text, "strictcall_store_faults_total", where="quota") == 0
        assert metric(text, "strictcall_call_duration_seconds_count", **ok) == calls
        wrote = {path.stem.rpartition("_")[2] for path in shared.glob("counter_*.db")}
        assert {str(pid) for pid in workers} <= wrote  # both workers counted there
    finally:
        assert server.stop(signal.SIGINT) == 0
