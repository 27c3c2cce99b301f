"""SIGHUP reloads a real server's policy under load: a bad file is refused with its line and
reason and the old policy stays; a good one applies to the calls after it; no call is lost."""

from __future__ import annotations

import queue
import re
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from servers import RunningServer, create_token, start_server
from strictcall.errors import UNKNOWN_TOOL

DEADLINE_S = 30.0

BOTH = '[[rule]]\nname = "both"\nwho = ["u1"]\ntools = ["count_notes", "list_notes"]\n'
LISTING_ONLY = '[[rule]]\nname = "listing"\nwho = ["u1"]\ntools = ["list_notes"]\n'
BAD = '[[rule]]\nname = "both"\nwho = ["u1"]\ntools = ["count_notes"]\nrate = "0/minute"\n'


def next_line(server: RunningServer, pattern: str) -> str:
    """The server's next output line matching `pattern`, waited for with a deadline."""
    assert server.output is not None
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            line = server.output.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no line matching {pattern!r}") from None
        assert line is not None, "the server exited"
        if re.search(pattern, line):
            return line


def call(client: httpx.Client, server: RunningServer, token: str, tool: str) -> str:
    params = {"name": tool, "arguments": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    response = client.post(
        server.base_url + "/rpc", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200
    answer = response.json()
    return "ok" if "result" in answer else str(answer["error"]["data"]["code"])


def test_sighup_reloads_under_load_refusing_a_bad_file_and_losing_no_call(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(BOTH)
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db, "--policy", str(policy))
    sent: Counter[str] = Counter()
    answered: Counter[str] = Counter()
    stop = threading.Event()
    lock = threading.Lock()

    def load() -> None:
        with httpx.Client(timeout=DEADLINE_S) as client:
            while not stop.is_set():
                with lock:
                    sent["count_notes"] += 1
                outcome = call(client, server, token, "count_notes")
                with lock:
                    answered[outcome] += 1

    threads = [threading.Thread(target=load) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        policy.write_text(BAD)
        server.process.send_signal(signal.SIGHUP)
        refused = next_line(server, "not reloaded")
        assert "line 5" in refused
        with httpx.Client(timeout=DEADLINE_S) as client:
            assert call(client, server, token, "count_notes") == "ok"  # the old policy stays
            policy.write_text(LISTING_ONLY)
            server.process.send_signal(signal.SIGHUP)
            next_line(server, r"policy \S+ reloaded$")
            assert call(client, server, token, "count_notes") == UNKNOWN_TOOL.code
            assert call(client, server, token, "list_notes") == "ok"
        stop.set()
        for thread in threads:
            thread.join(DEADLINE_S)
    finally:
        stop.set()
        assert server.stop() == 0
    assert set(answered) <= {"ok", UNKNOWN_TOOL.code}
    assert answered["ok"] > 0
    assert sum(answered.values()) == sent["count_notes"]


def test_sighup_to_a_server_of_several_workers_checks_the_file_then_restarts_them(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(BOTH)
    db = tmp_path / "notes.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db, "--policy", str(policy), "--workers", "2")
    try:
        with httpx.Client(timeout=DEADLINE_S) as client:
            assert call(client, server, token, "count_notes") == "ok"
            policy.write_text(BAD)
            server.process.send_signal(signal.SIGHUP)
            assert "line 5" in next_line(server, "not reloaded")
            assert call(client, server, token, "count_notes") == "ok"
            policy.write_text(LISTING_ONLY)
            server.process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + DEADLINE_S * 2
            while call(client, server, token, "count_notes") != UNKNOWN_TOOL.code:
                assert time.monotonic() < deadline, "the workers kept the old policy"
                time.sleep(0.1)
            assert call(client, server, token, "list_notes") == "ok"
    finally:
        assert server.stop() == 0


def test_a_server_or_proxy_given_a_bad_policy_does_not_start_and_says_where(
    tmp_path: Path,
) -> None:
    from servers import strictcall

    policy = tmp_path / "policy.toml"
    policy.write_text(BAD)
    db = str(tmp_path / "notes.sqlite3")
    for command in (
        ["serve", "--port", "0", "--db", db, "--policy", str(policy)],
        ["serve", "--mcp-stdio", "--identity", "u1", "--db", db, "--policy", str(policy)],
        [
            "proxy",
            "--upstream-cmd",
            "true",
            "--stdio",
            "--identity",
            "u1",
            "--db",
            db,
            "--policy",
            str(policy),
        ],
    ):
        done = strictcall(*command)
        assert done.returncode == 1, command
        assert done.stderr.count("\n") == 1 and "line 5: " in done.stderr, command
