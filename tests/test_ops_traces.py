"""Traces from a real server with an OpenTelemetry SDK and an in-memory exporter (issue 29):
no span name or attribute holds a tool name the model made up, a call id or a JSON-RPC
request id (the MCP SDK's own server spans are not made); a W3C `traceparent` header on /rpc
and /mcp makes the call's span a child of the caller's; the store's work for a call is its
child spans, each with its own time."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ops_calls import mcp_headers
from servers import RunningServer, create_token, start_server

SERVE_TRACED = """
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

argv = sys.argv[2:]
status = main(argv[argv.index("serve"):])
with open(sys.argv[1], "w", encoding="utf-8") as spans:
    for span in exporter.get_finished_spans():
        spans.write(span.to_json(indent=None) + "\\n")
sys.exit(status)
"""
INVENTED = "zq-invented<b>tool-8118"
CALL_IDS = ("zq-call-id-rpc-4242", "zq-call-id-rpc-4343", "zq-call-id-mcp-5151", "zq-mcp-6262")
TRACE_ID = secrets.token_hex(16)
RPC_PARENT = secrets.token_hex(8)
MCP_PARENT = secrets.token_hex(8)


def call(name: str, request_id: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params = {"name": name, "arguments": {} if arguments is None else arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def traceparent(parent: str) -> dict[str, str]:
    return {"traceparent": f"00-{TRACE_ID}-{parent}-01"}


@pytest.fixture(scope="module")
def spans(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[dict[str, Any]]]:
    """The spans of a server that answered good calls and invented names on both wires."""
    folder = tmp_path_factory.mktemp("traces")
    script = folder / "serve_traced.py"
    script.write_text(SERVE_TRACED, encoding="utf-8")
    exported = folder / "spans.jsonl"
    db = folder / "t.sqlite3"
    token = create_token(db, "u1")
    server = start_server(db, prefix=[sys.executable, str(script), str(exported)])
    try:
        answer_both_wires(server, token)
    finally:
        assert server.stop() == 0
    yield [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]


def answer_both_wires(server: RunningServer, token: str) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    rpc = server.base_url + "/rpc"
    traced = {**auth, **traceparent(RPC_PARENT)}
    created = httpx.post(rpc, json=call("create_note", CALL_IDS[0], {"text": "t"}), headers=traced)
    assert "result" in created.json()
    invented = httpx.post(rpc, json=call(INVENTED, CALL_IDS[1]), headers=traced)
    assert invented.json()["error"]["data"]["code"] == "unknown_tool"
    headers = mcp_headers(server, token, **traceparent(MCP_PARENT))
    mcp = server.base_url + "/mcp"
    assert httpx.post(mcp, json=call("count_notes", CALL_IDS[2]), headers=headers).is_success
    httpx.post(mcp, json=call(INVENTED, CALL_IDS[3]), headers=headers)


def texts(span: dict[str, Any]) -> list[str]:
    """Every name, attribute key and attribute value of a span and its events."""
    found = [span["name"]]
    for attributes in [span.get("attributes") or {}] + [
        e.get("attributes") or {} for e in span.get("events", [])
    ]:
        found += [str(key) for key in attributes] + [str(v) for v in attributes.values()]
    found += [e["name"] for e in span.get("events", [])]
    return found


def test_no_span_holds_an_invented_tool_name_or_a_call_id(spans: list[dict[str, Any]]) -> None:
    assert spans
    for span in spans:
        for text in texts(span):
            assert "zq-invented" not in text and "tool-8118" not in text, span["name"]
            assert not any(call_id in text for call_id in CALL_IDS), span["name"]
            assert "init-1" not in text
            assert "jsonrpc.request.id" not in text
            assert not text.startswith("tools/call")


def test_only_strictcalls_spans_are_made(spans: list[dict[str, Any]]) -> None:
    assert {span["name"].split(" ")[0] for span in spans} <= {"call", "store"}


def by_name(spans: list[dict[str, Any]], name: str, transport: str) -> dict[str, Any]:
    (found,) = [
        s
        for s in spans
        if s["name"] == name and s["attributes"].get("strictcall.transport") == transport
    ]
    return found


def test_a_traceparent_header_parents_the_calls_span_on_rpc_and_mcp(
    spans: list[dict[str, Any]],
) -> None:
    for name, transport, parent in (
        ("call create_note", "rpc", RPC_PARENT),
        ("call", "rpc", RPC_PARENT),
        ("call count_notes", "mcp", MCP_PARENT),
        ("call", "mcp", MCP_PARENT),
    ):
        span = by_name(spans, name, transport)
        assert span["context"]["trace_id"] == "0x" + TRACE_ID, name
        assert span["parent_id"] == "0x" + MCP_PARENT if parent == MCP_PARENT else "0x" + parent


def test_the_stores_work_is_the_calls_child_spans_with_their_own_times(
    spans: list[dict[str, Any]],
) -> None:
    created = by_name(spans, "call create_note", "rpc")
    children = [s for s in spans if s["parent_id"] == created["context"]["span_id"]]
    assert children and all(s["name"].startswith("store ") for s in children)
    assert any(s["name"] == "store create_note" for s in children)
    for child in children:
        assert child["context"]["trace_id"] == created["context"]["trace_id"]
        assert created["start_time"] <= child["start_time"] <= child["end_time"]
        assert child["end_time"] <= created["end_time"]
