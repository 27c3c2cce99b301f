"""The capacity drill: three `strictcall serve` processes, each in a network namespace of its
own (three hosts, tests/netns.py), on one PostgreSQL database and one Redis (a key prefix of
the drill's own) whose global quota the three share, loaded at once with create_note through
all three. Every acknowledged write is in the notes and in the audit exactly once, every
refusal is the quota's and audited once, and the three together admit no more than the one
bucket allows. The drill's throughput and CPU per call are recorded beside the model's
(bench/CAPACITY-results.json; `STRICTCALL_DRILL_FIGURES=FILE` writes them there too), never
asserted: speed is the bench's matter.

Needs root and `ip` (iproute2): skipped with one line elsewhere, except in CI, where it fails.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import psycopg
import pytest
import redis

import netns
import redis_state
from servers import RunningServer, create_token, start_server
from strictcall.errors import RATE_LIMITED
from strictcall.storage import open_store

HOSTS = 3
WRITERS_PER_HOST = 4
LOAD_S = 3.0
WARM_CALLS = 30
RATE_PER_S = 50
BURST = 10
DEADLINE_S = 30.0
MODEL = Path(__file__).resolve().parents[1] / "bench" / "CAPACITY-results.json"
PATH = "serve /rpc create_note, postgresql"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Mcp-Protocol-Version": "2025-11-25",
}


def policy_for(host: netns.Host, redis_port: int, prefix: str) -> str:
    """One host's policy: every tool granted, create_note under one global quota kept in the
    Redis its relay reaches (and list_notes under a quota it never reaches, so that warming a
    server up with it opens its way to Redis too)."""
    return (
        f'[quotas]\nshared = "redis://{host.gateway}:{redis_port}/0"\nkey_prefix = "{prefix}"\n\n'
        '[[rule]]\nname = "everyone"\nwho = ["*"]\ntools = ["*"]\n\n'
        '[[quota]]\nname = "all-hosts"\nper = "global"\n'
        f'rate = "{RATE_PER_S}/second"\nburst = {BURST}\ntools = ["create_note"]\n\n'
        '[[quota]]\nname = "warm"\nper = "identity"\nrate = "100000/second"\n'
        'tools = ["list_notes"]\n'
    )


@contextmanager
def three_hosts(pg_url: str, tmp_path: Path, prefix: str) -> Iterator[list[RunningServer]]:
    """A server in each of three namespaces, reaching PostgreSQL and Redis through its link;
    namespaces, relays and servers removed after, whatever happens."""
    redis_port = urlsplit(redis_state.URL).port or 6379
    with netns.hosts(HOSTS) as hosts, netns.relays(hosts), netns.relays(hosts, redis_port):
        servers: list[RunningServer] = []

        def start(k: int) -> RunningServer:
            host = hosts[k]
            policy = tmp_path / f"policy-{k}.toml"
            policy.write_text(policy_for(host, redis_port, prefix), encoding="utf-8")
            return start_server(
                pg_url,
                "--host",
                host.address,
                "--policy",
                str(policy),
                prefix=host.command(),
                db_url=netns.url_via(pg_url, host),
            )

        try:
            with ThreadPoolExecutor(HOSTS) as pool:
                futures = [pool.submit(start, k) for k in range(HOSTS)]
                for future in futures:
                    servers.append(future.result(timeout=DEADLINE_S * 2))
            yield servers
        finally:
            for server in servers:
                server.stop()  # already stopped by the test, unless it failed


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid`, every thread of it."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    rest = raw[raw.rindex(")") + 2 :].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def database_cpu_s(pg_url: str) -> float:
    """CPU seconds of the PostgreSQL backends serving `pg_url`'s database (live ones)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        ).fetchall()
    total = 0.0
    for (pid,) in rows:
        with suppress(OSError):
            total += cpu_s(int(pid))
    return total


def redis_scripts() -> int:
    """Script calls the (shared) Redis has answered: other clients' count too."""
    client = redis.Redis.from_url(redis_state.URL)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def model_figures(calls: int, ok: int) -> dict[str, Any]:
    """What the bench's model says the drill's calls cost, when its figures are there."""
    if not MODEL.exists():
        return {}
    model = json.loads(MODEL.read_text("utf-8"))["model"]
    write = model["paths"].get(PATH, {})
    quota = model["quota"]
    if not write.get("cpu_us_per_call") or quota.get("refused_cpu_us_per_call") is None:
        return {}
    per_ok = float(write["cpu_us_per_call"]) + float(quota["cpu_us_per_call"])
    predicted = ok * per_ok + (calls - ok) * float(quota["refused_cpu_us_per_call"])
    over = model["paths"].get("serve /rpc over its shared quota, postgresql", {})
    database = ok * float(write.get("db_cpu_us_per_call", 0.0)) + (calls - ok) * float(
        over.get("db_cpu_us_per_call", 0.0)
    )
    return {
        "model_calls_per_core_s": round(calls / (predicted / 1e6)),
        "model_database_cpu_us_per_call": round(database / calls, 1),
        "model_redis_round_trips_per_call": quota["redis_round_trips_per_call"],
        "model_audit_rows_per_db_core_s": model["audit"]["rows_per_db_core_s"],
    }


def test_three_hosts_on_one_database_and_one_redis_keep_each_write_once_under_one_quota(
    pg_url: str, tmp_path: Path
) -> None:
    reason = netns.cannot_make()
    if reason is not None:
        if redis_state.in_ci():
            pytest.fail("the capacity drill needs network namespaces in CI: " + reason)
        pytest.skip("network namespaces cannot be made here: " + reason)
    redis_state.require()
    token = create_token(pg_url, "u1")
    acked: dict[str, tuple[str, str]] = {}
    refused: dict[str, str] = {}
    served: Counter[int] = Counter()
    failures: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    with redis_state.fresh_prefix() as prefix, three_hosts(pg_url, tmp_path, prefix) as servers:
        addresses = {urlsplit(s.base_url).hostname for s in servers}
        assert len(addresses) == HOSTS and all(a and a.startswith(netns.SUBNET) for a in addresses)

        def writer(w: int) -> None:
            k = w % HOSTS
            where = urlsplit(servers[k].base_url)
            # the stdlib's client: the drill's own CPU is spent on the calls, not on a client
            conn = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
            n = 0
            try:
                while not stop.is_set():
                    call_id, text = f"d{w}-{n}", f"drill {w}-{n}"
                    body = {
                        "jsonrpc": "2.0",
                        "id": call_id,
                        "method": "tools/call",
                        "params": {"name": "create_note", "arguments": {"text": text}},
                    }
                    try:
                        conn.request("POST", "/rpc", orjson.dumps(body), headers)
                        reply = orjson.loads(conn.getresponse().read())
                    except (OSError, http.client.HTTPException) as exc:  # none may fail a call
                        with lock:
                            failures.append(f"{call_id}: {type(exc).__name__}")
                        return
                    with lock:
                        served[k] += 1
                        if "result" in reply:
                            acked[call_id] = (reply["result"]["note_id"], text)
                        else:
                            refused[call_id] = reply["error"]["data"]["code"]
                    n += 1
            finally:
                conn.close()

        for server in servers:  # warm: the MCP SDK loaded (a thread of its start-up), pools open
            ping = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
            httpx.post(server.base_url + "/mcp", json=ping, headers=MCP_HEADERS, timeout=DEADLINE_S)
            listed = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "tools/call",
                "params": {"name": "list_notes", "arguments": {}},
            }
            with httpx.Client(base_url=server.base_url, headers=headers, timeout=10) as client:
                for _ in range(WARM_CALLS):
                    assert "result" in client.post("/rpc", json=listed).json()
        pids = [s.process.pid for s in servers]
        cpu_before = [cpu_s(pid) for pid in pids]
        scripts_before = redis_scripts()
        database_before = database_cpu_s(pg_url)
        threads = [
            threading.Thread(target=writer, args=(w,)) for w in range(HOSTS * WRITERS_PER_HOST)
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(LOAD_S)  # the load's length, not a wait for readiness
        stop.set()
        for thread in threads:
            thread.join(DEADLINE_S)
        elapsed = time.monotonic() - started
        server_cpu = sum(cpu_s(pid) - before for pid, before in zip(pids, cpu_before, strict=True))
        scripts = redis_scripts() - scripts_before
        database_cpu = database_cpu_s(pg_url) - database_before
        for server in servers:  # each writes the audit records it still holds as it stops
            assert server.stop() == 0

    assert not failures
    assert all(served[k] > 0 for k in range(HOSTS))
    calls = len(acked) + len(refused)
    # one quota across the three: its burst, then its rate, never three buckets' worth
    assert set(refused.values()) <= {RATE_LIMITED.code}
    assert BURST <= len(acked) <= BURST + math.ceil(elapsed * RATE_PER_S) + 1
    assert refused  # the load was over the quota, so the quota was what held it

    store = open_store(pg_url)
    try:
        notes = store.list_notes("u1")
    finally:
        store.close()
    by_text = Counter(note.text for note in notes)
    by_id = {note.note_id: note.text for note in notes}
    assert len(notes) == len(acked)  # no refused call wrote a note
    for call_id, (note_id, text) in acked.items():
        assert by_id.get(note_id) == text, call_id  # acknowledged: there
        assert by_text[text] == 1, call_id  # and once

    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT call_id, outcome, code FROM audit WHERE tool = 'create_note'"
        ).fetchall()
    audited = Counter(call_id for call_id, _, _ in rows)
    outcome = {call_id: (kind, code) for call_id, kind, code in rows}
    assert set(audited) == set(acked) | set(refused)
    assert all(count == 1 for count in audited.values())  # none lost, none doubled
    assert all(outcome[call_id] == ("ok", None) for call_id in acked)
    assert all(outcome[call_id] == ("error", RATE_LIMITED.code) for call_id in refused)

    figures = {
        "hosts": HOSTS,
        "seconds": round(elapsed, 2),
        "calls": calls,
        "acknowledged": len(acked),
        "refused": len(refused),
        "calls_s": round(calls / elapsed),
        "server_cpu_s": round(server_cpu, 2),
        "calls_per_core_s": round(calls / server_cpu) if server_cpu else None,
        "audit_rows_s": round(len(rows) / elapsed),
        "database_cpu_us_per_call": round(database_cpu / calls * 1e6, 1),
        "redis_round_trips_per_call": round(scripts / calls, 3),
        "loadavg": os.getloadavg(),
        **model_figures(calls, len(acked)),
    }
    print("capacity drill:", json.dumps(figures))
    where = os.environ.get("STRICTCALL_DRILL_FIGURES")
    if where:
        Path(where).write_text(json.dumps(figures, indent=1) + "\n", "utf-8")
