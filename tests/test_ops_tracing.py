"""OpenTelemetry spans of calls: one per call, named by its tool, the stages as events and
code/stage/tool as attributes, never an identity, a call id or a value; none at all while no
SDK has set a tracer provider."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from strictcall.audit.log import AuditLog
from strictcall.errors import FORBIDDEN_OR_MISSING, INVALID_ARGUMENTS, UNKNOWN_TOOL, Stage
from strictcall.ops.tracing import STAGES, CallTracer, stages_of
from strictcall.server.app import observed
from strictcall.services.notes import notes_gateway
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.jsonrpc import RpcService

SECRET = "zq-traced-secret-31337"
IDENTITY = "zq-traced-identity-77"


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[RpcService, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = SQLiteStore(tmp_path / "t.sqlite3")
    audit = AuditLog(store)
    gateway = notes_gateway(store)
    yield RpcService(gateway, observed(audit.record, None, CallTracer(provider))), exporter
    gateway.close()
    store.close()


def call(service: RpcService, name: str, arguments: object, call_id: str) -> None:
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": call_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
    )
    assert asyncio.run(service.answer(body, IDENTITY)) is not None


def events(span: ReadableSpan) -> list[tuple[str, object]]:
    return [(e.name, (e.attributes or {})["strictcall.stage.outcome"]) for e in span.events]


def test_a_success_is_one_span_with_every_stage_passed(
    traced: tuple[RpcService, InMemorySpanExporter],
) -> None:
    service, exporter = traced
    call(service, "count_notes", {}, "c-ok")
    (span,) = exporter.get_finished_spans()
    assert span.name == "call count_notes"
    assert dict(span.attributes or {}) == {
        "strictcall.outcome": "ok",
        "strictcall.tool": "count_notes",
        "strictcall.transport": "rpc",
    }
    assert events(span) == [(stage, "passed") for stage in STAGES]
    assert span.status.status_code is not StatusCode.ERROR
    assert span.start_time is not None and span.end_time is not None
    assert span.start_time <= span.end_time


def test_a_refusal_has_its_code_stage_reason_and_safe_pointer_and_no_value(
    traced: tuple[RpcService, InMemorySpanExporter],
) -> None:
    service, exporter = traced
    call(service, "read_note", {"note_id": "n1", SECRET: SECRET}, "c-shape-" + SECRET)
    call(service, "read_note", {"note_id": SECRET}, "c-missing")
    call(service, SECRET, {}, "c-route")
    shape, missing, route = exporter.get_finished_spans()
    assert dict(shape.attributes or {}) == {
        "strictcall.outcome": "error",
        "strictcall.tool": "read_note",
        "strictcall.stage": str(Stage.SHAPE),
        "strictcall.code": INVALID_ARGUMENTS.code,
        "strictcall.reason": "unexpected_member",
        "strictcall.pointer": "/arguments/*",
        "strictcall.transport": "rpc",
    }
    assert events(shape) == [("parse", "passed"), ("route", "passed"), ("shape", "failed")]
    assert shape.status.status_code is StatusCode.ERROR
    assert (missing.attributes or {})["strictcall.code"] == FORBIDDEN_OR_MISSING.code
    assert events(missing)[-1] == (str(Stage.RESOURCE), "failed")
    assert route.name == "call"
    assert (route.attributes or {})["strictcall.code"] == UNKNOWN_TOOL.code
    for span in (shape, missing, route):
        text = span.to_json()
        assert SECRET not in text
        assert IDENTITY not in text


@pytest.mark.parametrize(
    ("failed", "expected"),
    [
        (None, [(s, "passed") for s in STAGES]),
        ("parse", [("parse", "failed")]),
        ("output", [*((s, "passed") for s in STAGES[:-1]), ("output", "failed")]),
        ("auth", [("auth", "failed")]),
        ("protocol", [("protocol", "failed")]),
    ],
)
def test_the_stages_of_a_call_are_those_it_went_through(
    failed: str | None, expected: list[tuple[str, str]]
) -> None:
    assert stages_of(failed) == expected


def test_no_span_is_made_while_no_sdk_has_set_a_provider() -> None:
    assert CallTracer().enabled is False  # this process never sets the global provider


SERVER_WITH_SDK = """
import asyncio, json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from strictcall.server.app import build_app
from strictcall.storage.sqlite import SQLiteStore

exporter = InMemorySpanExporter()
store = SQLiteStore(sys.argv[1])
app = build_app(store)  # built before the SDK is set: spans begin when it is
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
token = store.create_token("u1")
body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_notes"}}'

async def main():
    sent = []
    received = [{"type": "http.request", "body": body, "more_body": False}]
    scope = {"type": "http", "method": "POST", "path": "/rpc",
             "headers": [(b"authorization", b"Bearer " + token.encode())]}
    async def receive():
        return received.pop(0)
    async def send(message):
        sent.append(message)
    await app(scope, receive, send)
    return sent

sent = asyncio.run(main())
print(json.dumps([s.name for s in exporter.get_finished_spans()]))
"""


def test_a_server_traces_its_calls_once_an_sdk_sets_the_global_provider(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVER_WITH_SDK, str(tmp_path / "g.sqlite3")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # the call's span, after its child: the store's work for it
    assert orjson.loads(done.stdout) == ["store count_notes", "call count_notes"]
