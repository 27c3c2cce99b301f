"""/mcp's own path (`strictcall.transports.mcp.direct`) answers as the SDK's stateless
JSON-response path does: the same status, content type, JSON and audit record for every
request of a corpus on both wire versions, whichever path took it; and the plain requests do
take the direct path."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from strictcall.core.record import AuditRecord
from strictcall.services.notes import notes_gateway
from strictcall.storage.sqlite import SQLiteStore
from strictcall.transports.asgi import IDENTITY_KEY, Message
from strictcall.transports.mcp.direct import accepts_json, direct_request
from strictcall.transports.mcp.http import McpHttpApp
from strictcall.transports.serving import Serving

DEADLINE_S = 30
MODERN = "2026-07-28"
ENVELOPE = {
    types.PROTOCOL_VERSION_META_KEY: MODERN,
    types.CLIENT_INFO_META_KEY: {"name": "corpus", "version": "1"},
    types.CLIENT_CAPABILITIES_META_KEY: {},
}
ACCEPT = ("accept", "application/json, text/event-stream")
JSON = ("content-type", "application/json")


@dataclass(frozen=True)
class Case:
    name: str
    message: Any
    headers: tuple[tuple[str, str], ...]
    direct: bool
    """Whether the direct path answers it (the rest are the SDK's)."""


def call(name: str, arguments: Any = None, *, request_id: Any = 1, meta: bool = False) -> Any:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if meta:
        params["_meta"] = ENVELOPE
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def modern_headers(method: str, name: str | None = None) -> tuple[tuple[str, str], ...]:
    routing = [("mcp-protocol-version", MODERN), ("mcp-method", method)]
    if name is not None:
        routing.append(("mcp-name", name))
    return (ACCEPT, JSON, *routing)


def corpus(note: str) -> list[Case]:
    plain = (ACCEPT, JSON)
    cases = [
        Case("read own note", call("read_note", {"note_id": note}), plain, True),
        Case("another's note", call("read_note", {"note_id": "nope"}), plain, True),
        Case("count (a falsy 0 or more)", call("count_notes", {}), plain, True),
        Case("list notes", call("list_notes"), plain, True),
        Case("unknown tool", call("no_such_tool", {}), plain, True),
        Case("unknown member", call("read_note", {"note_id": note, "x": 1}), plain, True),
        Case("wrong type", call("read_note", {"note_id": 7}), plain, True),
        Case("string id", call("count_notes", {}, request_id="abc"), plain, True),
        Case("id 0", call("count_notes", {}, request_id=0), plain, True),
        Case("non-ascii note", call("create_note", {"text": "退款窗口为 7 天。"}), plain, True),
        Case("tools/list", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, plain, True),
        Case("ping", {"jsonrpc": "2.0", "id": 3, "method": "ping"}, plain, True),
        Case(
            "tools/list with a cursor",
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "x"}},
            plain,
            False,
        ),
        Case(
            "progress token",
            {
                **call("count_notes", {}),
                "params": {"name": "count_notes", "_meta": {"progressToken": 1}},
            },
            plain,
            True,
        ),
        Case(
            "progress token of the wrong type",
            {
                **call("count_notes", {}),
                "params": {"name": "count_notes", "_meta": {"progressToken": [1]}},
            },
            plain,
            False,
        ),
        Case(
            "another _meta member",
            {**call("count_notes", {}), "params": {"name": "count_notes", "_meta": {"x": 1}}},
            plain,
            False,
        ),
        Case(
            "modern log level and progress token",
            {
                **call("count_notes", {}),
                "params": {
                    "name": "count_notes",
                    "arguments": {},
                    "_meta": {**ENVELOPE, types.LOG_LEVEL_META_KEY: "debug", "progressToken": 1},
                },
            },
            modern_headers("tools/call", "count_notes"),
            True,
        ),
        Case(
            "modern log level of the wrong kind",
            {
                **call("count_notes", {}),
                "params": {
                    "name": "count_notes",
                    "arguments": {},
                    "_meta": {**ENVELOPE, types.LOG_LEVEL_META_KEY: "loud"},
                },
            },
            modern_headers("tools/call", "count_notes"),
            False,
        ),
        Case(
            "handshake-era header",
            call("count_notes", {}),
            (*plain, ("mcp-protocol-version", "2025-06-18")),
            True,
        ),
        Case(
            "charset",
            call("count_notes", {}),
            (ACCEPT, ("content-type", "application/json; charset=utf-8")),
            True,
        ),
        Case("accept any", call("count_notes", {}), (("accept", "*/*"), JSON), True),
        Case(
            "accept json only",
            call("count_notes", {}),
            (("accept", "application/json"), JSON),
            True,
        ),
        Case("no accept", call("count_notes", {}), (JSON,), False),
        Case(
            "accept events only",
            call("count_notes", {}),
            (("accept", "text/event-stream"), JSON),
            False,
        ),
        Case(
            "text/plain", call("count_notes", {}), (ACCEPT, ("content-type", "text/plain")), False
        ),
        Case("accept twice", call("count_notes", {}), (ACCEPT, ACCEPT, JSON), False),
        Case(
            "a header it does not read twice",
            call("count_notes", {}),
            (ACCEPT, ("x-trace", "1"), JSON, ("x-trace", "2")),
            True,
        ),
        Case(
            "content-type twice",
            call("count_notes", {}),
            (ACCEPT, JSON, ("x-trace", "1"), JSON),
            False,
        ),
        Case(
            "unknown version",
            call("count_notes", {}),
            (*plain, ("mcp-protocol-version", "2099-01-01")),
            False,
        ),
        Case(
            "initialize",
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "c", "version": "1"},
                },
            },
            plain,
            False,
        ),
        # 2026-07-28
        Case(
            "modern read",
            call("read_note", {"note_id": note}, meta=True),
            modern_headers("tools/call", "read_note"),
            True,
        ),
        Case(
            "modern count",
            call("count_notes", {}, meta=True),
            modern_headers("tools/call", "count_notes"),
            True,
        ),
        Case(
            "modern unknown tool",
            call("nope", {}, meta=True),
            modern_headers("tools/call", "nope"),
            True,
        ),
        Case(
            "modern shape",
            call("read_note", {"note_id": 1}, meta=True),
            modern_headers("tools/call", "read_note"),
            True,
        ),
        Case(
            "modern tools/list",
            {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": ENVELOPE}},
            modern_headers("tools/list"),
            True,
        ),
        Case(
            "modern ping (no such method on this wire)",
            {"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"_meta": ENVELOPE}},
            modern_headers("ping"),
            False,
        ),
        Case(
            "modern name mismatch",
            call("count_notes", {}, meta=True),
            modern_headers("tools/call", "read_note"),
            False,
        ),
        Case(
            "modern no name header",
            call("count_notes", {}, meta=True),
            modern_headers("tools/call"),
            False,
        ),
        Case(
            "modern method mismatch",
            call("count_notes", {}, meta=True),
            modern_headers("tools/list", "count_notes"),
            False,
        ),
        Case(
            "modern no envelope",
            call("count_notes", {}),
            modern_headers("tools/call", "count_notes"),
            False,
        ),
        Case(
            "modern envelope for another version",
            {
                **call("count_notes", {}),
                "params": {
                    "name": "count_notes",
                    "_meta": {**ENVELOPE, types.PROTOCOL_VERSION_META_KEY: "2025-11-25"},
                },
            },
            modern_headers("tools/call", "count_notes"),
            False,
        ),
        Case(
            "modern client info not an object",
            {
                **call("count_notes", {}),
                "params": {
                    "name": "count_notes",
                    "_meta": {**ENVELOPE, types.CLIENT_INFO_META_KEY: 5},
                },
            },
            modern_headers("tools/call", "count_notes"),
            False,
        ),
        Case(
            "modern Mcp-Method twice",
            call("count_notes", {}, meta=True),
            (*modern_headers("tools/call", "count_notes"), ("mcp-method", "tools/call")),
            False,
        ),
        Case(
            "modern Mcp-Name twice among other repeats",
            call("count_notes", {}, meta=True),
            (
                ("x-a", "1"),
                *modern_headers("tools/call", "count_notes"),
                ("x-a", "2"),
                ("mcp-name", "count_notes"),
            ),
            False,
        ),
        Case(
            "modern Mcp-Param header",
            call("count_notes", {}, meta=True),
            (*modern_headers("tools/call", "count_notes"), ("mcp-param-x", "1")),
            False,
        ),
    ]
    return cases


def scope_of(case: Case, identity: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in case.headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
        IDENTITY_KEY: identity,
    }


@dataclass
class Answer:
    status: int
    content_type: str | None
    body: Any


async def post(app: McpHttpApp, case: Case, identity: str) -> Answer:
    body = json.dumps(case.message).encode()
    delivered = False
    status = 0
    content_type = None
    chunks: list[bytes] = []

    async def receive() -> Message:
        nonlocal delivered
        if delivered:
            await anyio.sleep_forever()  # the client stays until it has its answer
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status, content_type
        if message["type"] == "http.response.start":
            status = message["status"]
            for name, value in message.get("headers", []):
                if name.lower() == b"content-type":
                    content_type = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    with anyio.fail_after(DEADLINE_S):
        await app(scope_of(case, identity), receive, send)
    raw = b"".join(chunks)
    try:
        return Answer(status, content_type, json.loads(raw) if raw else None)
    except ValueError:  # a plain-text refusal of the HTTP layer
        return Answer(status, content_type, raw.decode("latin-1"))


@asynccontextmanager
async def serving(app: McpHttpApp) -> AsyncIterator[McpHttpApp]:
    async with app.lifespan():
        yield app


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(str(tmp_path / "direct.sqlite3"))
    yield store
    store.close()


def comparable(record: AuditRecord) -> tuple[Any, ...]:
    return (record.identity, record.tool, record.outcome, record.code, record.stage, record.reason)


def without_created_id(body: Any) -> Any:
    """A create_note answer with its new note's id left out (each path creates its own)."""
    text = json.dumps(body)
    return json.loads(text.replace(_created_id(body) or "\0", "<id>"))


def _created_id(body: Any) -> str | None:
    try:
        return str(body["result"]["structuredContent"]["note_id"])
    except (KeyError, TypeError):
        return None


def test_the_direct_path_answers_as_the_sdk_on_both_wire_versions(store: SQLiteStore) -> None:
    note = store.add_note("u1", "The refund window is 7 days.").note_id
    cases = corpus(note)
    direct_records: list[AuditRecord] = []
    sdk_records: list[AuditRecord] = []
    gateway = notes_gateway(store)

    async def scenario() -> None:
        direct = McpHttpApp(gateway, Serving(record=direct_records.append))
        sdk = McpHttpApp(gateway, Serving(record=sdk_records.append), direct=False)
        async with serving(direct), serving(sdk):
            for case in cases:
                taken = direct_request(scope_of(case, "u1"), case.message, frozenset())
                assert (taken is not None) is case.direct, case.name
                before = len(direct_records), len(sdk_records)
                ours = await post(direct, case, "u1")
                theirs = await post(sdk, case, "u1")
                assert ours.status == theirs.status, case.name
                assert ours.content_type == theirs.content_type, case.name
                assert without_created_id(ours.body) == without_created_id(theirs.body), case.name
                mine = [comparable(r) for r in direct_records[before[0] :]]
                its = [comparable(r) for r in sdk_records[before[1] :]]
                assert mine == its, case.name

    anyio.run(scenario)
    assert any(case.direct for case in cases) and any(not case.direct for case in cases)


def test_a_tool_declaring_mcp_param_headers_is_left_to_the_sdk() -> None:
    case = Case(
        "declared",
        call("files_read", {"path": "x"}, meta=True),
        modern_headers("tools/call", "files_read"),
        True,
    )
    assert direct_request(scope_of(case, "u1"), case.message, frozenset()) is not None
    assert direct_request(scope_of(case, "u1"), case.message, frozenset({"files_read"})) is None


@pytest.mark.parametrize(
    "accept",
    [
        "",
        "application/json",
        "APPLICATION/JSON",
        "application/json;q=0.9",
        " application/json ; charset=utf-8 ",
        "text/event-stream",
        "text/event-stream, application/json",
        "*/*",
        "application/*",
        "text/*",
        "application/jsonx",
        "application/json-seq",
        ",,",
        "application/json,",
        "image/png, */*;q=0.1",
    ],
)
def test_the_accept_header_is_read_as_the_sdk_reads_it(accept: str) -> None:
    from mcp.server.streamable_http import check_accept_headers
    from starlette.requests import Request

    scope = {"type": "http", "headers": [(b"accept", accept.encode("latin-1"))]}
    has_json, _ = check_accept_headers(Request(scope))
    assert accepts_json(accept.encode("latin-1")) is has_json


def test_plain_requests_are_answered_in_place_as_the_sdk_answers_them(
    store: SQLiteStore,
) -> None:
    note = store.add_note("u1", "The refund window is 7 days.").note_id
    cases = corpus(note)
    gateway = notes_gateway(store)
    in_place: list[str] = []

    async def scenario() -> None:
        direct = McpHttpApp(gateway, Serving(record=lambda record: None))
        sdk = McpHttpApp(gateway, Serving(record=lambda record: None), direct=False)
        async with serving(direct), serving(sdk):
            for case in cases:
                body = json.dumps(case.message).encode()
                now = direct.answer_now(scope_of(case, "u1"), body)
                if not case.direct:
                    assert now is None, case.name
                    continue
                if now is None:
                    continue
                if not isinstance(now, tuple):  # a call whose tool must be awaited, in place
                    now = await now
                in_place.append(case.name)
                status, headers, raw = now
                theirs = await post(sdk, case, "u1")
                assert status == theirs.status, case.name
                assert dict(headers)[b"content-type"].decode() == theirs.content_type, case.name
                mine = json.loads(raw)
                assert without_created_id(mine) == without_created_id(theirs.body), case.name

    anyio.run(scenario)
    assert {"read own note", "tools/list", "ping", "modern read", "modern tools/list"} <= set(
        in_place
    )
