"""Quotas shared by several servers in Redis: three real servers on one state enforce one
bucket, not three; the state killed and restarted mid-load takes each rule's documented way
(open: this process's own bucket, never unlimited; closed: `quota_unavailable`), counted in
/metrics, logged once, and the servers use it again once it answers."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import redis_state
from mcp_peers import fastmcp_command
from servers import RunningServer, create_token, start_server
from strictcall.errors import QUOTA_UNAVAILABLE, RATE_LIMITED

DEADLINE_S = 30.0
RATE_PER_MINUTE = 30
BURST = 5


@pytest.fixture
def prefix() -> Iterator[str]:
    redis_state.require()
    with redis_state.fresh_prefix() as made:
        yield made


def write_policy(path: Path, body: str, url: str, prefix: str) -> Path:
    path.write_text(f'[quotas]\nshared = "{url}"\nkey_prefix = "{prefix}"\n\n{body}')
    return path


def count_notes(
    server: RunningServer,
    client: httpx.Client,
    token: str,
    tool: str,
    arguments: dict[str, object] | None = None,
) -> str:
    """One call (with no argument unless given); its outcome: "ok" or the error's code. Any
    HTTP status but 200 fails."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {} if arguments is None else arguments},
    }
    response = client.post(
        server.base_url + "/rpc",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=DEADLINE_S,
    )
    assert response.status_code == 200
    answer: dict[str, Any] = response.json()
    if "result" in answer:
        return "ok"
    code: str = answer["error"]["data"]["code"]
    return code


def test_three_servers_on_one_shared_state_accept_at_most_one_buckets_calls(
    tmp_path: Path, prefix: str
) -> None:
    rule = (
        '[[rule]]\nname = "counted"\nwho = ["*"]\ntools = ["count_notes"]\n'
        f'rate = "{RATE_PER_MINUTE}/minute"\nburst = {BURST}\n'
    )
    policy = write_policy(tmp_path / "policy.toml", rule, redis_state.URL, prefix)
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "u1")
    servers = [start_server(db, "--policy", str(policy)) for _ in range(3)]
    try:
        outcomes: Counter[str] = Counter()
        lock = threading.Lock()

        def drive(n: int) -> None:
            with httpx.Client() as client:
                for i in range(15):
                    outcome = count_notes(servers[(n + i) % 3], client, token, "count_notes")
                    with lock:
                        outcomes[outcome] += 1

        started = time.monotonic()
        threads = [threading.Thread(target=drive, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(DEADLINE_S * 4)
        ended = time.monotonic()
        elapsed = ended - started
        # the same bucket, on /mcp: refused once the tokens it refilled since are spent (a
        # loaded machine may take a few seconds to get here, and it refills one per 2 s)
        passed_on_mcp = 0
        while True:
            on_mcp = mcp_call(servers[0], token, "count_notes")
            if on_mcp["isError"] is True:
                break
            passed_on_mcp += 1
            assert (
                passed_on_mcp <= math.floor((time.monotonic() - ended) * RATE_PER_MINUTE / 60) + 1
            )
        assert json.loads(on_mcp["content"][0]["text"])["code"] == RATE_LIMITED.code
    finally:
        for server in servers:
            assert server.stop() == 0
    assert set(outcomes) <= {"ok", RATE_LIMITED.code}
    assert sum(outcomes.values()) == 90
    refilled = math.floor(elapsed * RATE_PER_MINUTE / 60)
    assert BURST <= outcomes["ok"] <= BURST + refilled  # three local buckets: 3 * BURST at once
    assert outcomes["ok"] <= RATE_PER_MINUTE + BURST
    assert outcomes[RATE_LIMITED.code] == 90 - outcomes["ok"]


def mcp_call(server: RunningServer, token: str, tool: str) -> dict[str, Any]:
    """One tools/call on /mcp; its tool result."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }
    params = {"name": tool, "arguments": {}}
    response = httpx.post(
        server.base_url + "/mcp",
        content=json.dumps({**body, "params": params}),
        headers=headers,
        timeout=DEADLINE_S,
    )
    assert response.status_code == 200
    result: dict[str, Any] = response.json()["result"]
    return result


def test_the_shared_state_killed_and_restarted_mid_load(tmp_path: Path, prefix: str) -> None:
    own = redis_state.OwnRedis(tmp_path)
    own.start()
    body = (
        '[[rule]]\nname = "counted"\nwho = ["*"]\ntools = ["count_notes"]\n'
        'rate = "3/hour"\nburst = 3\non_shared_down = "open"\n\n'
        '[[rule]]\nname = "listed"\nwho = ["*"]\ntools = ["list_notes"]\n'
        'rate = "6000/minute"\nburst = 1000\non_shared_down = "closed"\n'
    )
    policy = write_policy(tmp_path / "policy.toml", body, own.url, prefix)
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db, "--policy", str(policy))
    load: Counter[str] = Counter()
    stop = threading.Event()

    def background() -> None:  # the load the outage happens under
        with httpx.Client() as client:
            while not stop.is_set():
                load[count_notes(server, client, token, "list_notes")] += 1

    try:
        with httpx.Client() as client:
            shared = [count_notes(server, client, token, "count_notes") for _ in range(5)]
            assert shared == ["ok"] * 3 + [RATE_LIMITED.code] * 2
            loader = threading.Thread(target=background)
            loader.start()
            own.kill()
            # fail open: this process's own bucket (full: a fresh one), never unlimited
            alone = [count_notes(server, client, token, "count_notes") for _ in range(6)]
            assert alone == ["ok"] * 3 + [RATE_LIMITED.code] * 3
            # fail closed: refused, retryable, with a wait
            closed = client.post(
                server.base_url + "/rpc",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "list_notes", "arguments": {}},
                },
                headers={"Authorization": f"Bearer {token}"},
            ).json()["error"]["data"]
            assert (closed["code"], closed["retryable"]) == (QUOTA_UNAVAILABLE.code, True)
            assert closed["retry_after_ms"] > 0 and closed["rule"] == "listed"
            faults = quota_faults(server, client)
            assert faults >= 7
            own.start()
            deadline = time.monotonic() + DEADLINE_S
            while count_notes(server, client, token, "list_notes") != "ok":
                assert time.monotonic() < deadline, "the shared state was not used again"
                time.sleep(0.05)
            # back on the shared state: its bucket is a fresh one there (the restart lost it)
            back = [count_notes(server, client, token, "count_notes") for _ in range(4)]
            assert back == ["ok"] * 3 + [RATE_LIMITED.code]
        stop.set()
        loader.join(DEADLINE_S)
    finally:
        stop.set()
        own.kill()
        assert server.stop() == 0
    assert set(load) <= {"ok", QUOTA_UNAVAILABLE.code} and load["ok"] > 0
    lines = server.output_after_exit()
    down = [line for line in lines if "shared quota state cannot be reached" in line]
    again = [line for line in lines if "shared quota state answers again" in line]
    assert (len(down), len(again)) == (1, 1)


def quota_faults(server: RunningServer, client: httpx.Client) -> float:
    text = client.get(server.base_url + "/metrics", timeout=DEADLINE_S).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "strictcall_store_faults_total" and sample.labels["where"] == "quota":
                return sample.value
    raise AssertionError("no quota faults counted")


def test_an_event_loops_wire_awaits_shared_quotas_rather_than_block(prefix: str) -> None:
    import asyncio

    from strictcall import Gateway
    from strictcall.core.gateway import AWAIT
    from strictcall.core.policy import PolicyHolder, parse_policy
    from strictcall.storage.quotas import RedisBuckets
    from test_policy import _tool

    text = (
        f'[quotas]\nshared = "{redis_state.URL}"\nkey_prefix = "{prefix}"\n\n'
        '[[rule]]\nname = "counted"\nwho = ["*"]\ntools = ["read_note"]\n'
        'rate = "2/hour"\nburst = 2\n'
    )
    holder = PolicyHolder(parse_policy(text), shared=RedisBuckets)
    gw = Gateway([_tool("read_note")], policy=holder)
    call = {"name": "read_note", "arguments": {}}

    async def calls() -> list[Any]:
        async with holder.serving():
            assert gw.settle(call, "u1", "c1", in_place=True) is AWAIT
            assert gw.must_await(call, "u1") is True
            return [(await gw.settle_async(call, "u1", f"c{i}")).answer for i in range(3)]

    try:
        answers = asyncio.run(calls())
    finally:
        holder.close()
    assert [a["ok"] for a in answers] == [True, True, False]
    assert answers[2]["error"]["code"] == RATE_LIMITED.code


@pytest.mark.parametrize("command", ["serve", "federate"])
def test_the_page_shows_a_callers_nearest_shared_quota_read_back_from_the_shared_state(
    tmp_path: Path, prefix: str, command: str
) -> None:
    extra: tuple[str, ...] = ()
    tool = "count_notes"
    arguments: dict[str, object] = {}
    if command == "federate":  # in front of an MCP server
        config = tmp_path / "federation.toml"
        config.write_text(f"[upstreams.notes]\ncommand = {json.dumps(fastmcp_command())}\n")
        extra, tool, arguments = ("--config", str(config)), "notes_add", {"a": 1, "b": 2}
    rule = (
        f'[[rule]]\nname = "counters"\nwho = ["u2"]\ntools = ["{tool}"]\n'
        'rate = "2/hour"\nburst = 2\n'
        f'[[rule]]\nname = "readers"\nwho = ["u1"]\ntools = ["{tool}"]\n'
    )
    policy = write_policy(tmp_path / "policy.toml", rule, redis_state.URL, prefix)
    db = tmp_path / "s.sqlite3"
    tokens = {who: create_token(db, who) for who in ("u1", "u2")}
    first = start_server(db, "--policy", str(policy), *extra, command=command)
    second = start_server(db, "--policy", str(policy), *extra, command=command)
    try:
        with httpx.Client() as client:
            # two of u2's calls on the first server empty the bucket they share; the second
            # server has one of u2's calls (refused) and u1's, and reads the bucket back
            assert [
                count_notes(first, client, tokens["u2"], tool, arguments) for _ in range(2)
            ] == [
                "ok",
                "ok",
            ]
            assert count_notes(second, client, tokens["u2"], tool, arguments) == RATE_LIMITED.code
            assert count_notes(second, client, tokens["u1"], tool, arguments) == "ok"
            stats = client.get(second.base_url + "/ops/stats.json", timeout=DEADLINE_S).json()
            page = client.get(second.base_url + "/", timeout=DEADLINE_S).text
    finally:
        first.stop()
        second.stop()
    rows = {row["identity"]: row["nearest_quota"] for row in stats["live"]["identities"]}
    assert rows["u2"] == "counters: 0 % left"
    assert rows["u1"] is None  # no quota holds u1's calls
    assert "<td>counters: 0 % left</td>" in page
