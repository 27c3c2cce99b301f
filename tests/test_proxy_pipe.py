"""The proxy's own path for tools/call over stdio (`strictcall.services.proxy.stdio`): every odd
answer a
server may write is read as the official client reads it, in front of a hand-written server
(tests/upstreams/scripted_upstream.py) that writes them."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_peers import UPSTREAMS, StdioProxy, error_of
from servers import children, running
from stdio_peer import DEADLINE_S
from strictcall.errors import (
    INVALID_TOOL_RESULT,
    TIMEOUT,
    TOOL_ERROR,
    UPSTREAM_UNAVAILABLE,
    ErrorKind,
)
from strictcall.services.proxy import UPSTREAM_TEXT
from strictcall.services.proxy.results import later_members
from strictcall.services.proxy.stdio import CALL_IDS, TERMINATION_S, open_upstream

SCRIPTED = UPSTREAMS / "scripted_upstream.py"


def assert_kind(error: dict[str, Any], kind: ErrorKind) -> None:
    assert (error["code"], error["stage"], error["retryable"]) == (
        kind.code,
        kind.stage.value,
        kind.retryable,
    ), error


class Scripted(StdioProxy):
    """A stdio proxy in front of the scripted server, and what that server received."""

    def __init__(self, tmp: Path) -> None:
        self.received = tmp / "received.log"
        upstream = shlex.join([sys.executable, str(SCRIPTED), str(self.received)])
        super().__init__(tmp, upstream, "--timeout", "1", "--pass-errors", "rpc_error")

    def sent_upstream(self) -> list[dict[str, Any]]:
        lines = self.received.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def text_of(self, name: str) -> str:
        """The one text a tool without an output schema answered (its one text block)."""
        result = self.peer.call(name, {})
        assert result["isError"] is False, result
        assert "structuredContent" not in result, result
        [block] = result["content"]
        assert block["type"] == "text", result
        text: str = block["text"]
        return text


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scripted]:
    proxy = Scripted(tmp_path_factory.mktemp("proxy-scripted"))
    yield proxy
    stderr = proxy.stderr()
    proxy.close()
    # every odd answer was taken in stride: the server was never taken for gone
    assert stderr.count("upstream started") == 1, stderr


def test_a_json_rpc_error_is_tool_error_even_with_the_connection_closed_code(
    scripted: Scripted,
) -> None:
    error = error_of(scripted.peer.call("rpc_error", {}))
    assert_kind(error, TOOL_ERROR)
    assert error[UPSTREAM_TEXT] == "own"


def test_an_answer_with_both_a_result_and_an_error_is_withheld(scripted: Scripted) -> None:
    result = scripted.peer.call("both", {})
    assert_kind(error_of(result), INVALID_TOOL_RESULT)
    assert "yes" not in json.dumps(result)


def test_an_answer_under_the_calls_id_written_as_a_string_is_its_answer(
    scripted: Scripted,
) -> None:
    assert scripted.text_of("string_id") == "by string"


def test_a_call_never_answered_times_out_and_the_server_is_told_it_was_cancelled(
    scripted: Scripted,
) -> None:
    assert_kind(error_of(scripted.peer.call("never", {})), TIMEOUT)

    def cancels() -> list[dict[str, Any]]:
        sent = scripted.sent_upstream()
        return [m for m in sent if m.get("method") == "notifications/cancelled"]

    deadline = time.monotonic() + DEADLINE_S
    while not cancels() and time.monotonic() < deadline:
        time.sleep(0.05)
    call = next(m for m in scripted.sent_upstream() if m.get("params", {}).get("name") == "never")
    assert call["id"] >= CALL_IDS  # apart from the session's own ids
    assert [m["params"]["requestId"] for m in cancels()] == [call["id"]]
    assert scripted.text_of("string_id") == "by string"  # and the proxy goes on


def test_chatter_and_answers_to_other_ids_around_a_call_leave_its_answer_intact(
    scripted: Scripted,
) -> None:
    assert scripted.text_of("chatty") == "after the chatter"


def test_a_flood_of_notifications_before_an_answer_pauses_reading_and_resumes(
    scripted: Scripted,
) -> None:
    assert scripted.text_of("flood") == "after the flood"


def test_a_result_longer_than_a_pipe_chunk_arrives_whole(scripted: Scripted) -> None:
    assert scripted.text_of("big") == "x" * 300_000


def test_a_member_of_a_later_revision_is_dropped_as_the_session_drops_it(
    scripted: Scripted,
) -> None:
    assert scripted.text_of("later_member") == "complete"


def test_a_hung_server_is_unavailable_then_stopped_and_started_again(tmp_path: Path) -> None:
    proxy = Scripted(tmp_path)
    try:
        assert_kind(error_of(proxy.peer.call("hang", {})), TIMEOUT)
        # no answer to the ping that follows a timeout either: taken for hung, stopped (calls
        # time out until then, and are unavailable from then on) and started again
        deadline = time.monotonic() + DEADLINE_S
        seen: set[str] = set()
        while True:
            result = proxy.peer.call("string_id", {})
            if not result["isError"]:
                break
            error = error_of(result)
            assert error["code"] in {TIMEOUT.code, UPSTREAM_UNAVAILABLE.code}, error
            assert_kind(error, TIMEOUT if error["code"] == TIMEOUT.code else UPSTREAM_UNAVAILABLE)
            seen.add(error["code"])
            assert time.monotonic() < deadline, "not restarted within the deadline"
            time.sleep(0.2)
        assert UPSTREAM_UNAVAILABLE.code in seen
        assert result["content"] == [{"type": "text", "text": "by string"}]
        stderr = proxy.stderr()
        assert stderr.count("upstream started") == 2, stderr
    finally:
        proxy.close()


def test_later_members_are_those_the_official_session_drops() -> None:
    from mcp.client.session import _later_revision_fields
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

    for version in KNOWN_PROTOCOL_VERSIONS:
        assert later_members(version) == _later_revision_fields("tools/call", version), version
    assert "resultType" in later_members("2025-11-25")


@pytest.mark.parametrize(
    "ends", [signal.SIGTERM, signal.SIGKILL], ids=["terminated-after-stdin-ends", "killed"]
)
def test_an_upstream_does_not_outlive_the_proxy_that_started_it(
    ends: signal.Signals, tmp_path: Path
) -> None:
    # an upstream that outlasts the end of its stdin (as server-everything with its updates
    # on does), before a host that waits 2 s for strictcall to stop terminates it
    upstream = shlex.join([sys.executable, "-c", "import time; time.sleep(600)", str(tmp_path)])
    argv = [sys.executable, "-m", "strictcall", "proxy", "--upstream-cmd", upstream]
    argv += ["--stdio", "--identity", "u1", "--db", str(tmp_path / "audit.sqlite3")]
    front = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    started: set[int] = set()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not started:
            started = children(front.pid)
            assert time.monotonic() < deadline, "the proxy never started its upstream"
            assert front.poll() is None, "the proxy exited"
            time.sleep(0.02)
        assert front.stdin is not None
        front.stdin.close()
        front.send_signal(ends)
        front.wait(timeout=DEADLINE_S)
        deadline = time.monotonic() + DEADLINE_S
        while any(running(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(running(pid) for pid in started), "the upstream outlived its proxy"
    finally:
        if front.poll() is None:
            front.kill()
            front.wait(timeout=DEADLINE_S)
        for pid in started:  # this test's own upstream, if it was left running
            if running(pid):
                os.kill(pid, signal.SIGKILL)


# an upstream that exits LINGER_S after its stdin ends, unless it is terminated first (then it
# writes "terminated" to the file its argument names); it writes its second argument's file
# once it would be told
LINGER_S = 0.8
LINGERING = (
    "import signal, sys, time\n"
    "def terminated(*_):\n"
    "    open(sys.argv[1], 'a').write('terminated')\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, terminated)\n"
    "open(sys.argv[2], 'w').close()\n"
    "sys.stdin.read()\n"
    f"time.sleep({LINGER_S})\n"
)


@pytest.mark.parametrize(("grace_s", "terminated"), [(0.1, True), (5.0, False)])
def test_a_stopped_upstream_has_its_grace_to_exit_before_it_is_terminated(
    tmp_path: Path, grace_s: float, terminated: bool
) -> None:
    """`UpstreamPipe.grace_s` (TERMINATION_S unless set; a probing session's is shorter): an
    upstream still running past it once its stdin is closed is terminated, one that exits
    within it is not."""
    told, ready = tmp_path / "told", tmp_path / "ready"

    async def run() -> None:
        with anyio.fail_after(DEADLINE_S):
            command = [sys.executable, "-c", LINGERING, str(told), str(ready)]
            async with open_upstream(command, env=dict(os.environ), errlog=sys.stderr) as pipe:
                assert pipe.grace_s == TERMINATION_S
                pipe.grace_s = grace_s
                while not ready.exists():  # its handler is in place (within the deadline)
                    await anyio.sleep(0.01)

    anyio.run(run)
    assert told.exists() is terminated
