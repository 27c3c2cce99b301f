"""`strictcall federate` and `strictcall proxy` as an operator runs them, as `serve` is run: the
operator page open on loopback, a start line naming the page and /metrics, "stopping" and
"stopped" on Ctrl-C, and an upstream's stderr in the log prefixed with its name and escaped."""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from mcp_peers import fastmcp_command, watched_federation
from servers import STAMP, lines_of, unstamped

DEADLINE_S = 60.0
LISTENING = re.compile(r"listening on (http://[0-9.]+:\d+)")
# an upstream that paints its banner in colour, clears the screen and forges a log line
BANNER = "\x1b[2J\x1b[31mnotes server\x1b[0m ready\rstrictcall: forged"


@dataclass
class Gateway:
    process: subprocess.Popen[str]
    lines: queue.Queue[str | None]
    seen: list[str]
    base_url: str

    def until(self, wanted: str) -> list[str]:
        """The lines read until one holding `wanted` (included), within the deadline."""
        if any(wanted in line for line in self.seen):
            return self.seen
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if wanted in line:
                return self.seen
        raise AssertionError(f"never printed {wanted!r}: {self.seen!r}")


def noisy_upstream() -> str:
    """The FastMCP notes server, started by a process that first writes `BANNER` to stderr."""
    server = shlex.split(fastmcp_command())
    start = (
        f"import os, sys; sys.stderr.write({BANNER!r} + chr(10)); sys.stderr.flush();"
        f" os.execv({server[0]!r}, {server!r})"
    )
    return shlex.join([sys.executable, "-c", start])


@pytest.fixture(params=["federate", "proxy"])
def gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Gateway]:
    db = tmp_path / "gateway.sqlite3"
    if request.param == "federate":
        config = tmp_path / "federation.toml"
        config.write_text(
            f"[upstreams.notes]\ncommand = {json.dumps(noisy_upstream())}\n", encoding="utf-8"
        )
        command = ["federate", "--config", str(config)]
    else:
        command = ["proxy", "--upstream-cmd", noisy_upstream()]
    process = subprocess.Popen(
        [sys.executable, "-m", "strictcall", *command, "--port", "0", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    lines = lines_of(process.stdout)
    try:
        running = Gateway(process, lines, [], "")
        started = running.until("listening on")
        match = LISTENING.search(started[-1])
        assert match is not None
        running.base_url = match.group(1)
        yield running
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=DEADLINE_S)


def test_the_start_line_names_the_operator_page_and_metrics(gateway: Gateway) -> None:
    line = gateway.seen[-1]
    assert f"{gateway.base_url}/ " in line or f"{gateway.base_url}/," in line
    assert f"{gateway.base_url}/metrics" in line


def test_on_loopback_the_page_and_metrics_open_without_a_token(gateway: Gateway) -> None:
    for path in ("/", "/ops/stats.json", "/metrics"):
        assert httpx.get(gateway.base_url + path, timeout=DEADLINE_S).status_code == 200, path


def test_an_upstreams_stderr_is_prefixed_with_its_name_and_escaped(gateway: Gateway) -> None:
    seen = gateway.until("notes server")
    relayed = [line for line in seen if ": stderr: " in line and "notes server" in line]
    assert len(relayed) == 1  # the carriage return forged no second line
    assert STAMP.match(relayed[0])
    assert unstamped(relayed[0]).startswith(("strictcall federate: notes: ", "strictcall proxy: "))
    assert not any("\x1b" in line or "\r" in line for line in seen)  # no raw ESC, no CR
    assert not any(line.startswith("strictcall: forged") for line in seen)


def test_ctrl_c_says_stopping_then_stopped_and_exits_0(gateway: Gateway) -> None:
    gateway.process.send_signal(signal.SIGINT)
    after = gateway.until("stopped")
    assert any("stopping" in line for line in after)
    assert gateway.process.wait(timeout=DEADLINE_S) == 0


def test_the_log_lines_carry_their_time_and_level_as_serves_do(gateway: Gateway) -> None:
    gateway.until("upstream started")
    gateway.process.send_signal(signal.SIGINT)
    seen = gateway.until("stopped")
    # what stdout says of the start and the stop is as serve's: unstamped
    said = ("listening on", ": stopping", ": stopped")
    logged = [line for line in seen if not any(s in line for s in said)]
    assert any("upstream started" in line for line in logged)
    for line in logged:
        assert STAMP.match(line), line
        assert unstamped(line).startswith(("strictcall federate: ", "strictcall proxy: ")), line
    started = next(line for line in logged if "upstream started" in line)
    assert STAMP.match(started)[1] == "INFO"  # type: ignore[index]


def test_stamped_lines_stamp_whole_lines_only_and_grade_faults_warning() -> None:
    import io

    from strictcall.server.logs import stamped_lines

    out = io.StringIO()
    log = stamped_lines(out)
    log.write("strictcall proxy: upstream ")  # a line written in two pieces is one line
    log.write("started (x)\nstrictcall proxy: upstream failed (exited 1)\n")
    log.write("strictcall proxy: stderr: it failed, it says\nstrictcall proxy: half")
    lines = out.getvalue().splitlines()
    assert [m[1] for m in map(STAMP.match, lines) if m] == ["INFO", "WARNING", "INFO"]
    assert [unstamped(line) for line in lines] == [
        "strictcall proxy: upstream started (x)",
        "strictcall proxy: upstream failed (exited 1)",
        "strictcall proxy: stderr: it failed, it says",
    ]


def test_the_page_shows_each_upstream_up_restarting_and_its_changes_waiting(
    tmp_path: Path,
) -> None:
    config, db = watched_federation(tmp_path, restart_s=5)
    pids = tmp_path / "pids"
    process = subprocess.Popen(
        [sys.executable, "-m", "strictcall", "federate", "--config", str(config), "--port", "0",
         "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    running = Gateway(process, lines_of(process.stdout), [], "")
    try:
        match = LISTENING.search(running.until("listening on")[-1])
        assert match is not None
        stats_url = match.group(1) + "/ops/stats.json"

        def upstreams() -> dict[str, dict[str, object]]:
            document = httpx.get(stats_url, timeout=DEADLINE_S).json()
            return {row["upstream"]: row for row in document["upstreams"]}

        rows = upstreams()
        assert {name: row["state"] for name, row in rows.items()} == {"notes": "up", "spare": "up"}
        assert (rows["notes"]["changes_waiting"], rows["spare"]["changes_waiting"]) == (0, 1)
        assert rows["notes"]["retry_after_ms"] is None and rows["notes"]["starts"] == 1
        assert isinstance(rows["notes"]["tools"], int) and rows["notes"]["tools"] > 0

        os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)
        deadline = time.monotonic() + DEADLINE_S
        while (down := upstreams()["notes"])["state"] != "restarting":
            assert time.monotonic() < deadline, down
            time.sleep(0.05)
        wait = down["retry_after_ms"]
        assert isinstance(wait, int) and 0 < wait <= 5000 + 60_000
        assert upstreams()["spare"]["state"] == "up"
        fragment = httpx.get(stats_url, timeout=DEADLINE_S).json()["html"]
        assert "<table id=upstreams>" in fragment
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=DEADLINE_S)
