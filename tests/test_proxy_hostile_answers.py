"""An upstream answer the proxy cannot read (NaN, a lone surrogate, 5,000 levels, an id of the
wrong kind) is invalid_tool_result at once, and one longer than the cap is result_too_large at
once without being kept (issue 32, item 7): the upstream is not taken for hung, not restarted,
and serves the next call (tests/upstreams/scripted_upstream.py writes each)."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcp_peers import UPSTREAMS, StdioProxy, error_of, start_proxy
from servers import create_token, strictcall
from strictcall.errors import INVALID_TOOL_RESULT, RESULT_TOO_LARGE, ErrorKind
from strictcall.services.proxy.stdio import MAX_RESULT_BYTES

SCRIPTED = UPSTREAMS / "scripted_upstream.py"
TIMEOUT_S = 60  # the proxy's --timeout: far longer than any answer here may take
AT_ONCE_S = 15.0  # "at once", on a loaded machine: well inside the timeout
PEAK_GROWTH_KIB = 64 * 1024  # a 100 MB answer held (let alone parsed) would pass this


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


class Hostile(StdioProxy):
    def __init__(self, tmp: Path) -> None:
        upstream = shlex.join([sys.executable, str(SCRIPTED), str(tmp / "received.log")])
        super().__init__(tmp, upstream, "--timeout", str(TIMEOUT_S))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    proxy = Hostile(tmp_path_factory.mktemp("proxy-hostile"))
    yield proxy
    stderr = proxy.stderr()
    proxy.close()
    # nothing was taken for a hung or gone server
    assert stderr.count("upstream started") == 1, stderr
    assert "hung" not in stderr, stderr


def assert_kind(error: dict[str, object], kind: ErrorKind) -> None:
    assert (error["code"], error["stage"], error["retryable"]) == (
        kind.code,
        kind.stage.value,
        kind.retryable,
    ), error


@pytest.mark.parametrize("tool", ["nan", "surrogate", "deep", "wrong_id"])
def test_an_unreadable_answer_is_invalid_tool_result_at_once(hostile: Hostile, tool: str) -> None:
    started = time.monotonic()
    result = hostile.peer.call(tool, {})
    took = time.monotonic() - started
    assert_kind(error_of(result), INVALID_TOOL_RESULT)
    assert took < AT_ONCE_S
    served = hostile.peer.call("string_id", {})  # and the same upstream serves the next call
    assert served["content"] == [{"type": "text", "text": "by string"}]


def test_an_answer_over_the_cap_is_refused_at_once_without_being_kept(hostile: Hostile) -> None:
    pid = hostile.peer.process.pid
    before = peak_rss_kib(pid)
    started = time.monotonic()
    result = hostile.peer.call("huge", {})  # 100 MB in one line
    took = time.monotonic() - started
    error = error_of(result)
    assert_kind(error, RESULT_TOO_LARGE)
    assert error["limit"] == MAX_RESULT_BYTES
    assert took < AT_ONCE_S * 2
    assert peak_rss_kib(pid) - before < PEAK_GROWTH_KIB
    served = hostile.peer.call("string_id", {})
    assert served["content"] == [{"type": "text", "text": "by string"}]


def test_the_cap_is_the_flags(tmp_path: Path) -> None:
    upstream = shlex.join([sys.executable, str(SCRIPTED), str(tmp_path / "received.log")])
    proxy = StdioProxy(tmp_path, upstream, "--max-result-bytes", "100000")
    try:
        error = error_of(proxy.peer.call("big", {}))  # 300,000 characters
        assert_kind(error, RESULT_TOO_LARGE)
        assert error["limit"] == 100_000
        assert proxy.peer.call("string_id", {})["content"] == [
            {"type": "text", "text": "by string"}
        ]
    finally:
        proxy.close()


def test_a_proxied_tools_calls_are_labelled_with_its_name_in_the_metrics(tmp_path: Path) -> None:
    db = tmp_path / "proxy.sqlite3"
    token = create_token(db, "agent")
    made = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", str(db))
    operator = {"Authorization": "Bearer " + made.stdout.strip().splitlines()[-1]}
    proxy = start_proxy(db)
    try:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "read_note", "arguments": {"note_id": "n1"}},
        }
        headers = {"Authorization": f"Bearer {token}"}
        answer = httpx.post(proxy.base_url + "/rpc", json=body, headers=headers, timeout=30)
        assert answer.status_code == 200
        deadline = time.monotonic() + 30
        while True:  # the counts are made every second
            text = httpx.get(proxy.base_url + "/metrics", headers=operator, timeout=30).text
            calls = [
                line for line in text.splitlines() if line.startswith("strictcall_calls_total")
            ]
            if calls or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert any('tool="read_note"' in line for line in calls), calls
        assert not any('tool="unknown"' in line for line in calls), calls
    finally:
        assert proxy.stop() == 0
