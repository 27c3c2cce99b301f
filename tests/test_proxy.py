"""`strictcall proxy` in front of real MCP servers: results as the upstream's own schemas say,
its failures in the catalogue's terms, restarts, relisting, allow-lists, and the command line.

The upstreams are server-everything (npm) and a FastMCP server (tests/upstreams), run by the
proxy as its users would run theirs."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_peers import (
    FASTMCP_NOTES,
    StdioProxy,
    error_of,
    everything_command,
    fastmcp_command,
    proxy_argv,
    start_proxy,
)
from servers import STAMP, create_token, running, strictcall, unstamped
from stdio_peer import DEADLINE_S, HANDSHAKE_VERSION, StdioPeer, until
from strictcall.errors import (
    INVALID_TOOL_RESULT,
    TIMEOUT,
    TOOL_ERROR,
    UNKNOWN_TOOL,
    UPSTREAM_UNAVAILABLE,
    ErrorKind,
)
from strictcall.services.proxy import UPSTREAM_TEXT


def assert_kind(error: dict[str, Any], kind: ErrorKind) -> None:
    assert (error["code"], error["stage"], error["retryable"]) == (
        kind.code,
        kind.stage.value,
        kind.retryable,
    ), error


@pytest.fixture(scope="module")
def fastmcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioProxy]:
    tmp = tmp_path_factory.mktemp("proxy-fastmcp")
    proxy = StdioProxy(tmp, fastmcp_command(tmp / "calls.log"), "--timeout", "3")
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioProxy]:
    command = everything_command()
    proxy = StdioProxy(tmp_path_factory.mktemp("proxy-everything"), command)
    yield proxy
    proxy.close()


# --- results -----------------------------------------------------------------------------------


def test_a_structured_result_is_the_upstreams_structured_content(fastmcp: StdioProxy) -> None:
    result = fastmcp.peer.call("read_note", {"note_id": "n1"})
    assert result["isError"] is False
    note = {"note_id": "n1", "text": "The refund window is 7 days."}
    assert result["structuredContent"] == note
    assert [json.loads(block["text"]) for block in result["content"]] == [note]


def test_a_result_that_breaks_the_upstreams_output_schema_never_reaches_the_caller(
    fastmcp: StdioProxy,
) -> None:
    result = fastmcp.peer.call("broken_count", {})
    error = error_of(result)
    assert_kind(error, INVALID_TOOL_RESULT)
    assert "not-a-number" not in json.dumps(result)


def test_the_upstreams_input_schema_is_made_strict(fastmcp: StdioProxy) -> None:
    for arguments in ({"a": 1.0, "b": 2}, {"a": True, "b": 2}, {"a": "1", "b": 2}):
        error = error_of(fastmcp.peer.call("add", arguments))
        assert (error["pointer"], error["reason"]) == ("/arguments/a", "type")
    assert fastmcp.peer.call("add", {"a": 1, "b": 2})["structuredContent"] == {"result": 3}


def test_an_error_result_reaches_the_caller_with_the_upstreams_blocks(fastmcp: StdioProxy) -> None:
    result = fastmcp.peer.call("read_note", {"note_id": "zz"})
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "note not found: zz"}]
    assert "structuredContent" not in result


def test_a_slow_call_is_a_retryable_timeout_and_the_proxy_keeps_serving(
    fastmcp: StdioProxy,
) -> None:
    error = error_of(fastmcp.peer.call("slow", {"seconds": 20}))
    assert_kind(error, TIMEOUT)
    assert fastmcp.peer.call("slow", {"seconds": 0})["structuredContent"] == {"result": "done"}


def test_a_tool_whose_schema_cannot_compile_is_reported_and_the_others_are_served(
    fastmcp: StdioProxy,
) -> None:
    reported = [line for line in fastmcp.stderr().splitlines() if "not served" in line]
    assert len(reported) == 1
    assert STAMP.match(reported[0])
    assert unstamped(reported[0]).startswith('strictcall proxy: tool "bad_schema" not served: ')
    names = fastmcp.peer.tool_names()
    assert "bad_schema" not in names
    assert {"read_note", "add", "broken_count", "slow", "grow"} <= names
    assert_kind(error_of(fastmcp.peer.call("bad_schema", {"x": "y"})), UNKNOWN_TOOL)


def test_the_listing_follows_the_upstreams_list_changed(fastmcp: StdioProxy) -> None:
    assert "late" not in fastmcp.peer.tool_names()
    assert fastmcp.peer.call("grow", {})["isError"] is False
    until(lambda: "late" in fastmcp.peer.tool_names(), "the new tool listed")
    assert fastmcp.peer.call("late", {})["structuredContent"] == {"result": "late"}


def test_server_everything_text_and_content_blocks_and_structured_content(
    everything: StdioProxy,
) -> None:
    echoed = everything.peer.call("echo", {"message": "hi"})
    assert echoed["content"] == [{"type": "text", "text": "Echo: hi"}]
    assert "structuredContent" not in echoed
    image = everything.peer.call("get-tiny-image", {})
    assert [block["type"] for block in image["content"]] == ["text", "image", "text"]
    assert image["content"][1]["mimeType"] == "image/png"
    weather = everything.peer.call("get-structured-content", {"location": "Chicago"})
    assert set(weather["structuredContent"]) == {"temperature", "conditions", "humidity"}
    refused = error_of(everything.peer.call("get-structured-content", {"location": "Paris"}))
    assert (refused["pointer"], refused["reason"]) == ("/arguments/location", "enum")


# --- pass-errors and the allow-list ------------------------------------------------------------


@pytest.fixture(scope="module")
def allow_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("allow") / "allow.json"
    path.write_text(json.dumps({"u1": ["read_note", "add"], "*": ["add"]}), encoding="utf-8")
    return path


def test_withhold_errors_answers_a_bare_tool_error_save_for_pass_errors(tmp_path: Path) -> None:
    proxy = StdioProxy(
        tmp_path, fastmcp_command(), "--withhold-errors", "--pass-errors", "read_note"
    )
    try:
        result = proxy.peer.call("read_note", {"note_id": "zz"})
        assert result["content"] == [{"type": "text", "text": "note not found: zz"}]
    finally:
        proxy.close()
    proxy = StdioProxy(tmp_path, fastmcp_command(), "--withhold-errors")
    try:
        result = proxy.peer.call("read_note", {"note_id": "secret-zz"})
        error = error_of(result)
        assert_kind(error, TOOL_ERROR)
        assert UPSTREAM_TEXT not in error
        assert "secret-zz" not in json.dumps(result)
    finally:
        proxy.close()


@pytest.mark.parametrize(("identity", "allowed"), [("u1", ["add", "read_note"]), ("u2", ["add"])])
def test_a_tool_not_allowed_is_answered_like_an_unknown_tool(
    tmp_path: Path, allow_file: Path, identity: str, allowed: list[str]
) -> None:
    proxy = StdioProxy(
        tmp_path, fastmcp_command(), "--identity", identity, "--allow", str(allow_file)
    )
    try:
        assert proxy.peer.tool_names() == set(allowed)
        for name in ("broken_count", "no_such_tool"):
            error = error_of(proxy.peer.call(name, {}))
            assert_kind(error, UNKNOWN_TOOL)
            assert error["available"] == allowed
        assert proxy.peer.call("add", {"a": 1, "b": 1})["structuredContent"] == {"result": 2}
    finally:
        proxy.close()


# --- an upstream that dies ---------------------------------------------------------------------


def test_an_upstream_killed_mid_call_is_unavailable_then_restarted(tmp_path: Path) -> None:
    pids, calls = tmp_path / "pids", tmp_path / "calls.log"
    upstream = f"sh -c {shlex.quote(f'echo $$ >> {pids}; exec {fastmcp_command(calls)}')}"
    proxy = StdioProxy(tmp_path, upstream)
    try:
        first = int(pids.read_text().split()[0])
        proxy.peer.send(
            b'{"jsonrpc":"2.0","id":"slow","method":"tools/call",'
            b'"params":{"name":"slow","arguments":{"seconds":30}}}'
        )
        until(lambda: calls.exists() and "slow" in calls.read_text(), "the call ran")
        os.kill(first, signal.SIGKILL)
        error = error_of(proxy.peer.answer_to("slow")["result"])
        assert_kind(error, UPSTREAM_UNAVAILABLE)
        assert error["retry_after_ms"] >= 250

        def recovered() -> bool:
            result = proxy.peer.call("add", {"a": 2, "b": 2})
            if result["isError"]:
                assert_kind(error_of(result), UPSTREAM_UNAVAILABLE)
                return False
            return bool(result["structuredContent"] == {"result": 4})

        until(recovered, "the upstream restarted")
        # one process of it runs, a new one (one that probed it at its start has stopped)
        alive = [pid for pid in map(int, pids.read_text().split()) if running(pid)]
        assert len(alive) == 1 and alive[0] != first
        assert "restarting" in proxy.stderr()
    finally:
        proxy.close()


SLOW_START_S = 1.5
"""How long the slow upstream below sleeps before it starts: every start takes at least this."""


def test_the_retry_hint_of_a_down_upstream_is_its_measured_restart_time(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    slow = f"echo $$ >> {pids}; sleep {SLOW_START_S}; exec {fastmcp_command()}"
    proxy = StdioProxy(tmp_path, f"sh -c {shlex.quote(slow)}")
    try:
        first = int(pids.read_text().split()[0])
        os.kill(first, signal.SIGKILL)
        killed = time.monotonic()
        until(lambda: "restarting" in proxy.stderr(), "the proxy never saw it exit")
        error = error_of(proxy.peer.call("add", {"a": 1, "b": 1}))
        assert_kind(error, UPSTREAM_UNAVAILABLE)
        hint_ms = error["retry_after_ms"]
        hinted_at = time.monotonic()

        def recovered() -> bool:
            result = proxy.peer.call("add", {"a": 2, "b": 2})
            return not result["isError"]

        until(recovered, "the upstream restarted")
        restart_ms = (time.monotonic() - hinted_at) * 1000
    finally:
        proxy.close()
    # the hint counts the start itself (at least the sleep), not only the backoff before it
    assert hint_ms >= SLOW_START_S * 1000, (hint_ms, restart_ms)
    # and is near the restart measured here (the start before it took as long, give or take)
    assert hint_ms <= 3 * restart_ms + 1000, (hint_ms, restart_ms, time.monotonic() - killed)


# --- the command line --------------------------------------------------------------------------


def test_an_upstream_that_does_not_start_is_one_line_and_exit_1(tmp_path: Path) -> None:
    done = strictcall(
        "proxy",
        "--upstream-cmd",
        f"{sys.executable} -c 'raise SystemExit(3)'",
        "--stdio",
        "--identity",
        "u1",
        "--db",
        str(tmp_path / "a.sqlite3"),
    )
    assert done.returncode == 1
    assert "strictcall proxy: the upstream did not start" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    "args",
    [
        ["--upstream-cmd", "x", "--stdio"],
        ["--upstream-cmd", "x", "--identity", "u1"],
        ["--upstream-cmd", "x", "--upstream-url", "http://127.0.0.1:1/mcp"],
        ["--upstream-cmd", "x", "--upstream-header", "A: b"],
        ["--upstream-cmd", "x", "--timeout", "0"],
        [],
    ],
)
def test_proxy_usage_errors_exit_2(args: list[str]) -> None:
    done = strictcall("proxy", *args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_a_malformed_allow_list_is_one_line_and_exit_1(tmp_path: Path) -> None:
    allow = tmp_path / "allow.json"
    allow.write_text('{"u1": "read_note"}', encoding="utf-8")
    done = strictcall(
        "proxy",
        "--upstream-cmd",
        str(FASTMCP_NOTES),
        "--stdio",
        "--identity",
        "u1",
        "--allow",
        str(allow),
        "--db",
        str(tmp_path / "a.sqlite3"),
    )
    assert done.returncode == 1
    assert done.stderr.startswith("strictcall proxy: the allow-list")
    assert "Traceback" not in done.stderr


# --- over HTTP ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_proxy(
    tmp_path_factory: pytest.TempPathFactory, allow_file: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("proxy-http")
    db = tmp / "proxy.sqlite3"
    tokens = {identity: create_token(db, identity) for identity in ("u1", "u2")}
    proxy = start_proxy(db, "--allow", str(allow_file))
    try:
        yield proxy.base_url, tokens
    finally:
        assert proxy.stop() == 0


def rpc(base: str, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(
        base + "/rpc", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=DEADLINE_S
    )
    assert response.status_code == 200
    answer: dict[str, Any] = response.json()
    return answer


def test_over_http_each_token_sees_and_calls_its_own_tools(
    http_proxy: tuple[str, dict[str, str]],
) -> None:
    base, tokens = http_proxy
    listed = rpc(base, tokens["u1"], "tools/list", {})["result"]["tools"]
    assert sorted(tool["name"] for tool in listed) == ["add", "read_note"]
    read = {"name": "read_note", "arguments": {"note_id": "n1"}}
    assert rpc(base, tokens["u1"], "tools/call", read)["result"]["note_id"] == "n1"
    refused = rpc(base, tokens["u2"], "tools/call", read)["error"]["data"]
    assert_kind(refused, UNKNOWN_TOOL)
    assert refused["available"] == ["add"]
    mcp_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": read}
    response = httpx.post(
        base + "/mcp",
        json=mcp_call,
        headers={
            "Authorization": f"Bearer {tokens['u1']}",
            "Accept": "application/json, text/event-stream",
        },
        timeout=DEADLINE_S,
    )
    assert response.json()["result"]["structuredContent"]["note_id"] == "n1"


# --- an upstream over streamable HTTP ----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_an_upstream_over_http_is_served_and_its_loss_is_unavailable(tmp_path: Path) -> None:
    port = _free_port()
    calls = tmp_path / "calls.log"
    upstream = subprocess.Popen(
        [*shlex.split(fastmcp_command(calls)), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        until(lambda: _listening(port), "the upstream listens")
        proxy = StdioProxy(
            tmp_path,
            None,
            "--upstream-url",
            f"http://127.0.0.1:{port}/mcp",
            "--upstream-header",
            "X-Team: strictcall",
        )
        try:
            assert proxy.peer.call("add", {"a": 1, "b": 2})["structuredContent"] == {"result": 3}
            upstream.kill()
            upstream.wait(timeout=DEADLINE_S)
            error = error_of(proxy.peer.call("add", {"a": 1, "b": 2}))
            assert_kind(error, UPSTREAM_UNAVAILABLE)
        finally:
            proxy.close()
    finally:
        upstream.kill()
        upstream.wait(timeout=DEADLINE_S)
    assert calls.read_text().split() == ["add"]


LIST_CHANGED = "notifications/tools/list_changed"


def test_a_change_upstream_is_told_downstream_with_list_changed(tmp_path: Path) -> None:
    with (tmp_path / "proxy.stderr").open("wb") as stderr:
        peer = StdioPeer(proxy_argv(fastmcp_command(), tmp_path / "audit.sqlite3"), stderr)
        try:
            hello = {"name": "proxy-test", "version": "1"}
            answer = peer.request(
                "initialize",
                {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": hello},
            )
            assert answer["result"]["capabilities"]["tools"]["listChanged"] is True
            peer.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
            assert "late" not in peer.tool_names()
            grow = {"jsonrpc": "2.0", "id": 77, "method": "tools/call"}
            peer.send(json.dumps({**grow, "params": {"name": "grow", "arguments": {}}}).encode())
            seen: list[dict[str, Any]] = []
            while not (
                any(m.get("method") == LIST_CHANGED for m in seen)
                and any(m.get("id") == 77 for m in seen)
            ):
                message = peer.reply()
                assert message is not None, f"no list_changed within {DEADLINE_S} s: {seen}"
                seen.append(message)
            # told once the new listing is served: no wait for it
            assert "late" in peer.tool_names()
            told = [m for m in seen if m.get("method") == LIST_CHANGED]
            assert told == [{"jsonrpc": "2.0", "method": LIST_CHANGED}]
        finally:
            assert peer.close() == 0


def test_a_cancelled_call_is_never_answered_and_the_session_goes_on(fastmcp: StdioProxy) -> None:
    def line(request_id: int, name: str, arguments: dict[str, Any]) -> bytes:
        params = {"name": name, "arguments": arguments}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return json.dumps(message).encode()

    fastmcp.peer.send(line(91, "slow", {"seconds": 1}))
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 91}}
    fastmcp.peer.send(json.dumps(cancel).encode())
    # a later call that ends after the cancelled one would have: its answer comes, 91's never
    fastmcp.peer.send(line(93, "slow", {"seconds": 2}))
    seen: list[dict[str, Any]] = []
    while not any(message.get("id") == 93 for message in seen):
        message = fastmcp.peer.reply()
        assert message is not None, f"no answer to 93 within {DEADLINE_S} s: {seen}"
        seen.append(message)
    assert not any(message.get("id") == 91 for message in seen), seen
    assert fastmcp.peer.call("add", {"a": 1, "b": 2})["structuredContent"] == {"result": 3}
