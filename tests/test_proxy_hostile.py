"""The research's hostile lines sent to `strictcall proxy` in front of two MCP servers nobody
here wrote (server-everything from npm, a FastMCP server from PyPI): every line gets the
structured answer strictcall gives for its own tools, none reaches the upstream's tool, and the
proxy keeps serving. The same lines sent to the bare upstreams leave some unanswered.

The 29 lines: the research's 19 (research/mcp-hostile-stdio.md; its case 13, an empty string,
is valid by these tools' schemas, so a missing argument takes its place) and 10 more of the
same classes (envelope, ids, names, argument types)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_peers import everything_command, fastmcp_command, proxy_argv
from mcp_results import wire_error
from stdio_peer import DEADLINE_S, StdioPeer
from strictcall.core.jsontext import MAX_SIZE
from strictcall.errors import (
    INVALID_ARGUMENTS,
    INVALID_JSON,
    INVALID_REQUEST,
    REQUEST_TOO_LARGE,
    UNKNOWN_TOOL,
    ErrorKind,
    Stage,
)
from strictcall.transports.jsonrpc import ERROR_CODES

REFUSED_BEFORE_EXECUTE = {Stage.PARSE, Stage.ROUTE, Stage.SHAPE, Stage.PROTOCOL}
BARE_WAIT_S = 2.0
"""How long a bare upstream is given to answer a hostile line (the research gave 3 s)."""


@dataclass(frozen=True)
class Upstream:
    """A tool of the upstream that takes one string argument, and a value it accepts."""

    tool: str
    argument: str
    good: str


EVERYTHING = Upstream("echo", "message", "hi")
FASTMCP = Upstream("read_note", "note_id", "n1")


def hostile_lines(up: Upstream) -> list[tuple[str, bytes, ErrorKind, str | None]]:
    """(name, line, the kind strictcall answers with, the reason when there is one)."""

    def call(request_id: Any, params: Any) -> bytes:
        return json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        ).encode()

    def tool(request_id: int, arguments: Any) -> bytes:
        return call(request_id, {"name": up.tool, "arguments": arguments})

    def good(request_id: int) -> bytes:
        return tool(request_id, {up.argument: up.good})

    arg = up.argument.encode()
    return [
        ("01-not-json", b"{this is not json", INVALID_JSON, "syntax"),
        ("02-empty-array", b"[]", INVALID_REQUEST, None),
        ("03-array", b"[1]", INVALID_REQUEST, None),
        ("04-string", b'"just a string"', INVALID_REQUEST, None),
        ("05-jsonrpc-1.0", tool(7, {}).replace(b'"2.0"', b'"1.0"'), INVALID_REQUEST, None),
        ("06-nan", tool(8, {up.argument: 0}).replace(b"0}", b"NaN}"), INVALID_JSON, "syntax"),
        (
            "07-duplicate-argument",
            tool(9, {up.argument: "x"}).replace(b'"x"', b'"x","' + arg + b'":"' + b"y" + b'"'),
            INVALID_JSON,
            "duplicate_member",
        ),
        (
            "08-20000-digits",
            tool(10, {up.argument: 0}).replace(b"0}", b"1" * 20000 + b"}"),
            INVALID_JSON,
            "number_out_of_range",
        ),
        ("09-100000-deep", b"[" * 100_000 + b"]" * 100_000, INVALID_JSON, "too_deep"),
        (
            "10-lone-surrogate",
            tool(12, {up.argument: "X"}).replace(b'"X"', b'"\\ud800"'),
            INVALID_JSON,
            None,
        ),
        (
            "11-extra-argument",
            tool(13, {up.argument: up.good, "admin": True}),
            INVALID_ARGUMENTS,
            "unexpected_member",
        ),
        ("12-bool-for-string", tool(14, {up.argument: True}), INVALID_ARGUMENTS, "type"),
        ("13-missing-argument", tool(15, {}), INVALID_ARGUMENTS, "missing_member"),
        ("14-unknown-tool", call(16, {"name": "drop_tables", "arguments": {}}), UNKNOWN_TOOL, None),
        ("15-arguments-string", tool(17, "oops"), INVALID_ARGUMENTS, "type"),
        (
            "16-16-mib-line",
            tool(18, {up.argument: "X"}).replace(b'"X"', b'"' + b"x" * (MAX_SIZE * 16) + b'"'),
            REQUEST_TOO_LARGE,
            "too_large",
        ),
        (
            "17-invalid-utf8",
            tool(19, {up.argument: "X"}).replace(b'"X"', b'"\xff\xfe"'),
            INVALID_JSON,
            None,
        ),
        (
            "18a-bool-id",
            tool(20, {up.argument: up.good}).replace(b"20", b"true"),
            INVALID_REQUEST,
            None,
        ),
        (
            "18b-float-id",
            tool(21, {up.argument: up.good}).replace(b"21", b"1.5"),
            INVALID_REQUEST,
            None,
        ),
        ("19-arguments-null", tool(22, None), INVALID_ARGUMENTS, "type"),
        (
            "20-extra-params-member",
            call(23, {"name": up.tool, "arguments": {up.argument: up.good}, "admin": True}),
            INVALID_ARGUMENTS,
            "unexpected_member",
        ),
        (
            "21-null-id",
            tool(24, {up.argument: up.good}).replace(b"24", b"null"),
            INVALID_REQUEST,
            None,
        ),
        ("22-method-not-a-string", b'{"jsonrpc":"2.0","id":"k","method":5}', INVALID_REQUEST, None),
        (
            "23-params-array",
            b'{"jsonrpc":"2.0","id":"p","method":"tools/call","params":[]}',
            INVALID_ARGUMENTS,
            "type",
        ),
        ("24-batch", b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', INVALID_REQUEST, None),
        (
            "25-trailing-data",
            tool(26, {up.argument: up.good}) + b" {}",
            INVALID_JSON,
            "syntax",
        ),
        ("26-name-not-a-string", call(27, {"name": 5, "arguments": {}}), UNKNOWN_TOOL, None),
        ("27-no-name", call(28, {"arguments": {up.argument: up.good}}), UNKNOWN_TOOL, None),
        ("28-number-for-string", tool(29, {up.argument: 5}), INVALID_ARGUMENTS, "type"),
    ]


def test_there_are_29_hostile_lines_with_distinct_names() -> None:
    for up in (EVERYTHING, FASTMCP):
        names = [name for name, *_ in hostile_lines(up)]
        assert len(names) == len(set(names)) == 29


def structured_error(answer: dict[str, Any]) -> dict[str, Any]:
    """The structured error of an answer: a JSON-RPC error's data, or the JSON in an isError
    result's one text block (it has no structuredContent)."""
    if "error" in answer:
        assert "result" not in answer
        data: dict[str, Any] = answer["error"]["data"]
        assert answer["error"]["code"] == ERROR_CODES[Stage(data["stage"])][0]
        return data
    result = answer["result"]
    assert result["isError"] is True, f"let through: {answer}"
    return wire_error(result)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proxy-hostile")


def _proxy(logs: Path, name: str, upstream_cmd: str) -> Iterator[StdioPeer]:
    with (logs / f"{name}.stderr").open("wb") as stderr:
        peer = StdioPeer(proxy_argv(upstream_cmd, logs / f"{name}.sqlite3"), stderr)
        peer.initialize()
        yield peer
        assert peer.close() == 0


@pytest.fixture(scope="module")
def behind_everything(logs: Path) -> Iterator[StdioPeer]:
    yield from _proxy(logs, "everything", everything_command())


@pytest.fixture(scope="module")
def behind_fastmcp(logs: Path) -> Iterator[StdioPeer]:
    yield from _proxy(logs, "fastmcp", fastmcp_command(logs / "fastmcp-calls.log"))


def _survives(peer: StdioPeer, up: Upstream) -> None:
    result = peer.call(up.tool, {up.argument: up.good})
    assert result["isError"] is False, result


def run_hostile(peer: StdioPeer, up: Upstream) -> dict[str, int]:
    outcomes = {"structured": 0, "silent": 0, "let_through": 0}
    for name, line, kind, reason in hostile_lines(up):
        peer.send(line)
        answer = peer.reply(DEADLINE_S)
        if answer is None:
            outcomes["silent"] += 1
            continue
        error = structured_error(answer)
        assert Stage(error["stage"]) in REFUSED_BEFORE_EXECUTE, (name, error)
        assert (error["code"], error["stage"], error["retryable"]) == (
            kind.code,
            kind.stage.value,
            kind.retryable,
        ), name
        if reason is not None:
            assert error["reason"] == reason, name
        outcomes["structured"] += 1
        _survives(peer, up)
    return outcomes


def test_every_hostile_line_gets_a_structured_answer_in_front_of_server_everything(
    behind_everything: StdioPeer,
) -> None:
    outcomes = run_hostile(behind_everything, EVERYTHING)
    assert outcomes == {"structured": 29, "silent": 0, "let_through": 0}


def test_every_hostile_line_gets_a_structured_answer_in_front_of_fastmcp_and_none_reaches_it(
    behind_fastmcp: StdioPeer, logs: Path
) -> None:
    calls_log = logs / "fastmcp-calls.log"
    before = calls_log.read_text().count("read_note") if calls_log.exists() else 0
    outcomes = run_hostile(behind_fastmcp, FASTMCP)
    assert outcomes == {"structured": 29, "silent": 0, "let_through": 0}
    # the upstream's tool ran for the 29 good calls in between, and for nothing else
    assert calls_log.read_text().count("read_note") - before == 29


def bare_outcomes(peer: StdioPeer, up: Upstream) -> dict[str, Any]:
    """What a bare upstream does with the lines: refused (a JSON-RPC error or an isError
    result), accepted (a result), silent (nothing within `BARE_WAIT_S`, nor before the answer
    to a ping sent then), or died (the process exited: the lines left are not sent)."""
    outcomes: dict[str, Any] = {
        "refused": 0,
        "accepted": 0,
        "silent": 0,
        "died": 0,
        "died_at": None,
    }
    for number, (name, line, _kind, _reason) in enumerate(hostile_lines(up)):
        try:
            peer.send(line)
            answers = _answers_until_ping(peer, f"ping-{number}")
        except (BrokenPipeError, AssertionError):
            peer.process.wait(timeout=DEADLINE_S)  # it is exiting, or this raises
            outcomes["died"] += 1
            outcomes["died_at"] = name
            break
        if not answers:
            outcomes["silent"] += 1
        elif "error" in answers[0] or answers[0]["result"].get("isError") is True:
            outcomes["refused"] += 1
        else:
            outcomes["accepted"] += 1
    return outcomes


def _answers_until_ping(peer: StdioPeer, ping_id: str) -> list[dict[str, Any]]:
    """The answers (not notifications) that come within `BARE_WAIT_S`, then until the answer
    to a ping sent after them (so that a late answer is still counted, in order)."""
    answers = []
    message = peer.reply(BARE_WAIT_S)
    while message is not None and "id" not in message:  # notifications (logs, list_changed)
        message = peer.reply(BARE_WAIT_S)
    if message is not None:
        answers.append(message)
    peer.send(json.dumps({"jsonrpc": "2.0", "id": ping_id, "method": "ping"}).encode())
    while True:
        message = peer.reply(DEADLINE_S)
        assert message is not None, "no answer to a ping"
        if message.get("id") == ping_id:
            return answers
        if "id" in message:
            answers.append(message)


@pytest.mark.parametrize("which", ["everything", "fastmcp"])
def test_the_bare_upstreams_leave_hostile_lines_unanswered(which: str, logs: Path) -> None:
    if which == "everything":
        command, up = everything_command(), EVERYTHING
    else:
        command, up = fastmcp_command(), FASTMCP
    with (logs / f"bare-{which}.stderr").open("wb") as stderr:
        peer = StdioPeer(shlex.split(command), stderr)
        peer.initialize()
        try:
            outcomes = bare_outcomes(peer, up)
        finally:
            peer.kill()
    assert outcomes["silent"] + outcomes["died"] > 0, outcomes
