"""Each stage of a traced call has its own time (issue 29, item 2): a real server, proxy and
federation with an OpenTelemetry SDK and an in-memory exporter, calls on /rpc, /mcp (its direct
path and the MCP SDK's) and through the proxy. Each span's stage events are in order, inside
the span, the execute stage ends after the resource stage where a real SQLite read or an
upstream's answer lies between them, the store's child spans sit inside the stage that did
the work, and a refusal at a stage has events up to that stage and no further."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_peers import fastmcp_command
from ops_calls import mcp_headers
from servers import create_token, start_server
from stdio_peer import DEADLINE_S, StdioPeer
from strictcall.core.gateway import AWAIT, Gateway
from strictcall.core.marks import STAGE_MARKS
from strictcall.core.tools import tool
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    INVALID_ARGUMENTS,
    INVALID_TOOL_RESULT,
    UNKNOWN_TOOL,
    Stage,
)
from strictcall.ops.tracing import STAGES, stage_times
from strictcall.services.notes import notes_gateway
from strictcall.storage.sqlite import SQLiteStore

TRACED = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
from strictcall.cli.parser import main

status = main(sys.argv[sys.argv.index("strictcall") + 1:])
with open(sys.argv[1], "w", encoding="utf-8") as spans:
    for span in exporter.get_finished_spans():
        spans.write(span.to_json(indent=None) + "\\n")
sys.exit(status)
"""

Span = dict[str, Any]
INVENTED = "zq-invented<b>tool-9119"


def traced_prefix(folder: Path) -> tuple[list[str], Path]:
    """The command prefix that runs strictcall with the SDK set, and where its spans go."""
    script = folder / "traced.py"
    script.write_text(TRACED, encoding="utf-8")
    exported = folder / "spans.jsonl"
    return [sys.executable, str(script), str(exported)], exported


def read_spans(exported: Path) -> list[Span]:
    return [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]


def micros(stamp: str) -> int:
    """An exported time (ISO 8601, to the microsecond) as microseconds, comparable."""
    from datetime import datetime

    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def tools_call(name: str, request_id: str, arguments: dict[str, Any], **params: Any) -> Any:
    body = {"name": name, "arguments": arguments, **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def spans_of(spans: list[Span], name: str, transport: str) -> list[Span]:
    return [
        s
        for s in spans
        if s["name"] == name and s["attributes"].get("strictcall.transport") == transport
    ]


def stage_events(span: Span) -> list[tuple[str, str, int]]:
    """(stage, outcome, time in µs) of each of a span's events, in order."""
    return [
        (e["name"], e["attributes"]["strictcall.stage.outcome"], micros(e["timestamp"]))
        for e in span["events"]
    ]


def assert_stage_times(span: Span, failed: str | None) -> dict[str, int]:
    """The span's events are the stages up to `failed` (all six for None), in time order,
    each inside the span; returns each stage's time."""
    events = stage_events(span)
    upto = STAGES if failed is None else STAGES[: STAGES.index(failed) + 1]
    expected = [(s, "failed" if s == failed else "passed") for s in upto]
    assert [(name, outcome) for name, outcome, _ in events] == expected
    times = [at for _, _, at in events]
    assert times == sorted(times)
    assert micros(span["start_time"]) <= times[0] and times[-1] <= micros(span["end_time"])
    return {name: at for name, _, at in events}


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [s for s in spans if s["parent_id"] == parent["context"]["span_id"]]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Span]]:
    """The spans of a notes server that answered reads, writes and refusals on /rpc, on /mcp's
    direct path and on the MCP SDK's path."""
    folder = tmp_path_factory.mktemp("stage-times")
    prefix, exported = traced_prefix(folder)
    db = folder / "t.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db, prefix=prefix)
    try:
        auth = {"Authorization": f"Bearer {token}"}
        rpc = server.base_url + "/rpc"
        created = httpx.post(rpc, json=tools_call("create_note", "1", {"text": "t"}), headers=auth)
        note_id = created.json()["result"]["note_id"]
        headers = mcp_headers(server, token)
        mcp = server.base_url + "/mcp"
        calls: list[tuple[str, dict[str, Any]]] = [
            ("read_note", {"note_id": note_id}),
            ("read_note", {"note_id": "n-none"}),
            ("read_note", {"note_id": 7}),
            ("zq-no-such-tool", {}),
        ]
        for n, (name, arguments) in enumerate(calls):
            httpx.post(rpc, json=tools_call(name, f"r{n}", arguments), headers=auth)
            httpx.post(mcp, json=tools_call(name, f"m{n}", arguments), headers=headers)
            # a `_meta` member the direct path leaves to the SDK: the SDK's path answers it
            sdk = tools_call(name, f"s{n}", arguments, _meta={"zq-other": 1})
            assert httpx.post(mcp, json=sdk, headers=headers).status_code == 200
    finally:
        assert server.stop() == 0
    yield read_spans(exported)


def test_every_call_on_each_path_has_a_span(served: list[Span]) -> None:
    # /rpc and /mcp: each of the four calls on /rpc once, on /mcp twice (direct and SDK)
    assert len(spans_of(served, "call read_note", "rpc")) == 3
    assert len(spans_of(served, "call read_note", "mcp")) == 6
    assert len(spans_of(served, "call", "mcp")) == 2


@pytest.mark.parametrize("transport", ["rpc", "mcp"])
def test_a_read_ends_its_execute_stage_after_its_store_read(
    served: list[Span], transport: str
) -> None:
    reads = [
        s
        for s in spans_of(served, "call read_note", transport)
        if s["attributes"]["strictcall.outcome"] == "ok"
    ]
    assert len(reads) == (1 if transport == "rpc" else 2)
    for span in reads:
        times = assert_stage_times(span, None)
        (store,) = children(served, span)
        assert store["name"] == "store read_note"
        # the read is the execute stage's work: it starts after resource ended, ends before
        # execute did, so the two stages' times are distinct
        assert times[Stage.RESOURCE] <= micros(store["start_time"])
        assert micros(store["end_time"]) <= times[Stage.EXECUTE]
        assert times[Stage.RESOURCE] < times[Stage.EXECUTE]
        assert times[Stage.PARSE] < times[Stage.OUTPUT]


def test_a_write_is_inside_its_execute_stage(served: list[Span]) -> None:
    (span,) = spans_of(served, "call create_note", "rpc")
    times = assert_stage_times(span, None)
    (store,) = children(served, span)
    assert store["name"] == "store create_note"
    assert times[Stage.RESOURCE] <= micros(store["start_time"])
    assert micros(store["end_time"]) <= times[Stage.EXECUTE] < micros(span["end_time"]) + 1


@pytest.mark.parametrize("transport", ["rpc", "mcp"])
def test_a_refusal_has_events_up_to_its_stage_only(served: list[Span], transport: str) -> None:
    refusals = [
        s
        for s in served
        if s["attributes"].get("strictcall.transport") == transport
        and s["attributes"]["strictcall.outcome"] == "error"
    ]
    by_code: dict[str, list[Span]] = {}
    for span in refusals:
        by_code.setdefault(span["attributes"]["strictcall.code"], []).append(span)
    per_path = 1 if transport == "rpc" else 2
    for kind in (INVALID_ARGUMENTS, FORBIDDEN_OR_MISSING, UNKNOWN_TOOL):
        assert len(by_code[kind.code]) == per_path, kind.code
        for span in by_code[kind.code]:
            assert span["attributes"]["strictcall.stage"] == kind.stage
            assert_stage_times(span, kind.stage)
    for span in by_code[FORBIDDEN_OR_MISSING.code]:
        # the tool's own read found nothing: the store's span ends before the stage that
        # decided, which is after the stages before it
        (store,) = children(served, span)
        times = assert_stage_times(span, FORBIDDEN_OR_MISSING.stage)
        assert times[Stage.SHAPE] <= micros(store["start_time"])
        assert micros(store["end_time"]) <= times[Stage.RESOURCE]
        assert times[Stage.SHAPE] < times[Stage.RESOURCE]
    for kind in (INVALID_ARGUMENTS, UNKNOWN_TOOL):
        for span in by_code[kind.code]:
            assert children(served, span) == []  # refused before any store work


@pytest.fixture(scope="module", params=["proxy", "federate"])
def proxied(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[Span], str]]:
    """The spans of `strictcall proxy`, then of `strictcall federate` (its tools prefixed
    `notes_`), over HTTP in front of the FastMCP notes server; and the tools' prefix."""
    folder = tmp_path_factory.mktemp("stage-times-" + request.param)
    prefix, exported = traced_prefix(folder)
    db = folder / "p.sqlite3"
    token = create_token(db, "u1")
    if request.param == "proxy":
        upstream, named = ["--upstream-cmd", fastmcp_command()], ""
    else:
        config = folder / "federation.toml"
        config.write_text(
            f"[upstreams.notes]\ncommand = {json.dumps(fastmcp_command())}\n", encoding="utf-8"
        )
        upstream, named = ["--config", str(config)], "notes_"
    argv = ["-m", "strictcall", request.param, *upstream]
    process = subprocess.Popen(
        [*prefix, sys.executable, *argv, "--port", "0", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    match = re.search(r"listening on (http://[0-9.]+:\d+)", first)
    try:
        assert match is not None, first
        rpc, auth = match.group(1) + "/rpc", {"Authorization": f"Bearer {token}"}
        calls: list[tuple[str, dict[str, Any]]] = [
            ("add", {"a": 2, "b": 3}),
            ("add", {"a": "x", "b": 3}),
            ("broken_count", {}),
        ]
        for n, (name, arguments) in enumerate(calls):
            answer = httpx.post(
                rpc,
                json=tools_call(named + name, f"p{n}", arguments),
                headers=auth,
                timeout=DEADLINE_S,
            )
            assert answer.status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.stdout.close()
        assert process.wait(timeout=DEADLINE_S) == 0
    yield read_spans(exported), named


def test_a_proxied_call_ends_execute_after_the_upstream_answered(
    proxied: tuple[list[Span], str],
) -> None:
    spans, named = proxied
    (ok,) = [
        s
        for s in spans_of(spans, f"call {named}add", "rpc")
        if "strictcall.code" not in s["attributes"]
    ]
    times = assert_stage_times(ok, None)
    assert times[Stage.RESOURCE] < times[Stage.EXECUTE]  # the upstream's round trip


def test_a_proxied_refusal_has_events_up_to_its_stage(proxied: tuple[list[Span], str]) -> None:
    spans, named = proxied
    (shape,) = [
        s
        for s in spans_of(spans, f"call {named}add", "rpc")
        if s["attributes"].get("strictcall.code") == INVALID_ARGUMENTS.code
    ]
    assert_stage_times(shape, INVALID_ARGUMENTS.stage)
    (output,) = spans_of(spans, f"call {named}broken_count", "rpc")
    assert output["attributes"]["strictcall.code"] == INVALID_TOOL_RESULT.code
    times = assert_stage_times(output, INVALID_TOOL_RESULT.stage)
    assert times[Stage.RESOURCE] < times[Stage.EXECUTE]


def settled_marks(gateway: Gateway, call: dict[str, Any]) -> list[int]:
    """The marks `settle` leaves in a traced request's list for `call`."""
    marks: list[int] = []
    kept = STAGE_MARKS.set(marks)
    try:
        gateway.settle(call, "u1", "c1")
    finally:
        STAGE_MARKS.reset(kept)
    return marks


@pytest.fixture
def notes(tmp_path: Path) -> Iterator[Gateway]:
    store = SQLiteStore(tmp_path / "n.sqlite3")
    with notes_gateway(store) as gateway:
        yield gateway
    store.close()


def test_a_gateway_no_server_traces_reads_no_clock_for_stages(notes: Gateway) -> None:
    assert settled_marks(notes, {"name": "count_notes", "arguments": {}}) == []


@pytest.mark.parametrize(
    ("call", "count"),
    [
        ({"name": "count_notes", "arguments": {}}, len(STAGES)),
        ({"name": "read_note", "arguments": {"note_id": 7}}, 3),  # parse, route, shape
        ({"name": "zq-none", "arguments": {}}, 2),  # parse, route
    ],
)
def test_a_traced_call_has_a_mark_per_stage_it_reached_in_order(
    notes: Gateway, call: dict[str, Any], count: int
) -> None:
    notes.marks_stages = True
    marks = settled_marks(notes, call)
    assert len(marks) == count
    assert marks == sorted(marks)


@pytest.mark.parametrize(
    ("count", "marks", "expected"),
    [
        (6, [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]),
        (3, [1, 2, 9], [1, 2, 9]),
        (4, [1, 2, 3, 4, 9], [1, 2, 3, 9]),  # the tool decided resource while it ran
        (1, [], [50]),  # refused before the ladder
        (2, None, [50, 50]),  # not traced
    ],
)
def test_stage_times_are_the_marks_or_the_end(
    count: int, marks: list[int] | None, expected: list[int]
) -> None:
    assert stage_times(count, marks, 50) == expected


@pytest.fixture(scope="module")
def over_stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Span]]:
    """The spans of `strictcall serve --mcp-stdio`: a write, reads on the direct path and the
    SDK's (a `_meta` member it leaves to the SDK), and two refusals."""
    folder = tmp_path_factory.mktemp("stage-times-stdio")
    prefix, exported = traced_prefix(folder)
    argv = [*prefix, sys.executable, "-m", "strictcall", "serve", "--mcp-stdio"]
    db = folder / "s.sqlite3"
    peer = StdioPeer([*argv, "--identity", "u1", "--db", str(db)], subprocess.DEVNULL)
    try:
        peer.initialize()
        note_id = peer.call("create_note", {"text": "t"})["structuredContent"]["note_id"]
        peer.call("read_note", {"note_id": note_id})
        sdk = {"name": "read_note", "arguments": {"note_id": note_id}, "_meta": {"zq-other": 1}}
        assert "result" in peer.request("tools/call", sdk)
        peer.call("read_note", {"note_id": 7})
        peer.call("read_note", {"note_id": "n-none"})
        peer.call(INVENTED, {})
    finally:
        assert peer.close() == 0
    yield read_spans(exported)


def test_a_stdio_call_has_its_stages_timed_and_its_store_work_inside(
    over_stdio: list[Span],
) -> None:
    (write,) = spans_of(over_stdio, "call create_note", "stdio")
    reads = spans_of(over_stdio, "call read_note", "stdio")
    assert len(reads) == 4
    ok = [s for s in reads if s["attributes"]["strictcall.outcome"] == "ok"]
    assert len(ok) == 2  # the direct path's and the SDK's
    for span in [write, *ok]:
        times = assert_stage_times(span, None)
        (store,) = children(over_stdio, span)
        assert times[Stage.RESOURCE] <= micros(store["start_time"])
        assert micros(store["end_time"]) <= times[Stage.EXECUTE]
        assert times[Stage.RESOURCE] < times[Stage.EXECUTE]
    codes = {s["attributes"].get("strictcall.code"): s for s in reads}
    assert_stage_times(codes[INVALID_ARGUMENTS.code], INVALID_ARGUMENTS.stage)
    assert_stage_times(codes[FORBIDDEN_OR_MISSING.code], FORBIDDEN_OR_MISSING.stage)
    (invented,) = spans_of(over_stdio, "call", "stdio")
    assert_stage_times(invented, UNKNOWN_TOOL.stage)


def test_stdio_makes_strictcalls_spans_only_and_none_names_an_invented_tool(
    over_stdio: list[Span],
) -> None:
    assert {span["name"].split(" ")[0] for span in over_stdio} == {"call", "store"}
    assert INVENTED not in json.dumps(over_stdio)


def test_a_call_awaited_after_its_in_place_try_has_its_own_marks_only() -> None:
    @tool()
    async def later(a: int) -> int:
        """Answer `a` after a turn of the loop."""
        await asyncio.sleep(0)
        return a

    gateway = Gateway([later])
    gateway.marks_stages = True
    call: dict[str, Any] = {"name": "later", "arguments": {"a": 1}}

    async def settled() -> list[int]:
        marks: list[int] = []
        kept = STAGE_MARKS.set(marks)
        try:
            assert gateway.settle(call, "u1", "c1", in_place=True) is AWAIT
            outcome = await gateway.settle_async(call, "u1", "c1")
        finally:
            STAGE_MARKS.reset(kept)
        assert outcome.answer["ok"] is True
        return marks

    marks = asyncio.run(settled())
    assert len(marks) == len(STAGES)
    assert marks == sorted(marks)
