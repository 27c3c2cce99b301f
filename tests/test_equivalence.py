"""The same call gets the same answer on every transport.

A corpus of calls (every error code and reason the notes tools can give, valid calls with
falsy results, odd ids, oversize and deep texts) goes through `Gateway.call`, POST /rpc, MCP
over stdio and MCP over HTTP (/mcp), on one SQLite file. The structured error (code, stage,
retryable, pointer, reason, expected, available, limit) must be identical on all four, and
valid results equal.

Where a wire cannot carry the same thing, the difference is named in `EXCEPTIONS` below (the
README shows the same table); every case that differs must fall under one of them.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from servers import RunningServer, create_token, start_server
from stdio_peer import StdioPeer
from strictcall import errors
from strictcall.core.gateway import Gateway
from strictcall.core.jsontext import MAX_DEPTH, MAX_SIZE
from strictcall.errors import MAX_CALL_ID_LENGTH
from strictcall.services.notes import MAX_NOTE_LENGTH, notes_gateway
from strictcall.storage.sqlite import SQLiteStore

DEADLINE_S = 30.0
COMPARED = ("code", "stage", "retryable", "pointer", "reason", "expected", "available", "limit")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

EXCEPTIONS: dict[str, str] = {
    "position": (
        "A parse error's line and column are positions in the text each transport received: "
        "the call itself for Gateway.call, the JSON-RPC message around it on the wires."
    ),
    "wire_id": (
        "An id the wire refuses (a bool, a float, null, an empty str, an int beyond 64 bits, "
        "a str longer than MAX_CALL_ID_LENGTH) makes the message an invalid_request (id null) "
        "on JSON-RPC and MCP. Gateway.call takes its call id from its caller: a bool, float, "
        "None or empty str is the caller's TypeError/ValueError there, and any int or longer "
        "str is a call id."
    ),
    "params_not_object": (
        "A call that is not a JSON object is unknown_tool (route) through Gateway.call; on the "
        "wires the call is the request's params, which every method here takes by name: params "
        'by position (an array) are invalid_arguments (shape, -32602, pointer ""), and '
        "params that are neither an array nor an object make the message not a request "
        "(invalid_request, protocol)."
    ),
}
"""Where a transport cannot give the same answer, and why; pinned by the README."""


# --- the corpus --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One call: its text, who sends it, with which id, and which exception applies, if any."""

    name: str
    text: bytes
    identity: str = "u1"
    request_id: Any = 7
    exception: str | None = None


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def call_text(name: Any, arguments: Any = ..., **members: Any) -> bytes:
    call: dict[str, Any] = {} if name is ... else {"name": name}
    if arguments is not ...:
        call["arguments"] = arguments
    call.update(members)
    return dumps(call)


NOTE_OF_U1 = "nu1note"  # replaced by the fixture's real ids
NOTE_OF_U2 = "nu2note"
NOTES = ["read_note", "list_notes", "count_notes", "create_note", "delete_note"]
ODD_VALUES: list[Any] = [0, -1, 1.0, 1.5, 1e3, True, False, None, [], {}, [1], {"a": 1}]


def corpus() -> list[Case]:
    cases: list[Case] = []

    def add(name: str, text: bytes, **extra: Any) -> None:
        cases.append(Case(name, text, **extra))

    # valid calls, falsy results among them (u3 has no notes)
    for identity in ("u1", "u3"):
        for tool in ("list_notes", "count_notes"):
            add(f"{tool}-{identity}", call_text(tool, {}), identity=identity)
            add(f"{tool}-no-arguments-{identity}", call_text(tool), identity=identity)
    add("read-own", call_text("read_note", {"note_id": NOTE_OF_U1}))
    add("read-foreign", call_text("read_note", {"note_id": NOTE_OF_U2}))
    add("read-foreign-as-u3", call_text("read_note", {"note_id": NOTE_OF_U2}), identity="u3")
    add("read-missing", call_text("read_note", {"note_id": "n0000000000000000"}))
    add("delete-foreign", call_text("delete_note", {"note_id": NOTE_OF_U2}))
    add("delete-missing", call_text("delete_note", {"note_id": "nxyz"}), identity="u3")
    add("read-odd-id-text", call_text("read_note", {"note_id": "\u00e9\U0001f600 \\/"}))
    # odd request ids that every wire carries
    ids: list[Any] = [
        0,
        -1,
        "0",
        "x" * MAX_CALL_ID_LENGTH,
        2**63 - 1,
        -(2**63),
        "\u00e9",
        2**53 + 1,
    ]
    for number, request_id in enumerate(ids):
        add(f"id-{number}", call_text("count_notes", {}), identity="u3", request_id=request_id)
        add(f"id-{number}-refused", call_text("read_note", {}), request_id=request_id)
    # ids the wires refuse
    too_long = "x" * (MAX_CALL_ID_LENGTH + 1)  # refused at intake, never stored
    for number, request_id in enumerate([True, 1.0, None, "", 2**63, -(2**63) - 1, too_long]):
        add(
            f"wire-id-{number}",
            call_text("count_notes", {}),
            request_id=request_id,
            exception="wire_id",
        )
    # route: names that name no tool, before any shape error
    names: list[Any] = ["nope", "", "READ_NOTE", "read_note ", 5, None, True, [], {}]
    for number, name in enumerate(names):
        add(f"route-{number}", call_text(name, {}))
        add(f"route-{number}-bad-arguments", call_text(name, [1]))
        add(f"route-{number}-no-arguments", call_text(name))
    add("route-no-name", call_text(..., {}))
    add("route-no-name-bad-arguments", call_text(..., "x"))
    # shape: the envelope
    add("envelope-extra", call_text("count_notes", {}, extra=1))
    add("envelope-extra-falsy", call_text("count_notes", {}, admin=False))
    add("envelope-extra-null", call_text("read_note", {"note_id": NOTE_OF_U1}, owner=None))
    # shape: arguments that are not an object
    for tool in NOTES:
        for number, arguments in enumerate(["s", "", 1, 0, [], [1], None, True, False]):
            add(f"arguments-{tool}-{number}", call_text(tool, arguments))
    # shape: members
    for tool in ("read_note", "delete_note"):
        add(f"{tool}-missing", call_text(tool, {}))
        add(f"{tool}-extra", call_text(tool, {"note_id": NOTE_OF_U1, "admin": True}))
        add(f"{tool}-only-extra", call_text(tool, {"admin": 0}))
        add(f"{tool}-empty-id", call_text(tool, {"note_id": ""}))
        add(f"{tool}-long-id", call_text(tool, {"note_id": "n" * 5000}))
        for number, value in enumerate(ODD_VALUES):
            add(f"{tool}-note-id-{number}", call_text(tool, {"note_id": value}))
    for tool in ("list_notes", "count_notes"):
        for number, value in enumerate([0, "", None, False, [], {}]):
            add(f"{tool}-extra-{number}", call_text(tool, {"x": value}))
    add("create-missing", call_text("create_note", {}))
    add("create-extra", call_text("create_note", {"text": "a", "owner": "u2"}))
    add("create-too-long", call_text("create_note", {"text": "x" * (MAX_NOTE_LENGTH + 1)}))
    for number, value in enumerate(ODD_VALUES):
        add(f"create-text-{number}", call_text("create_note", {"text": value}))
    # parse: texts that are not strict JSON
    broken = {
        "truncated": b'{"name":',
        "trailing": b'{"name":"count_notes","arguments":{}} x',
        "nan": b'{"name":"count_notes","arguments":{"x":NaN}}',
        "infinity": b'{"name":"count_notes","arguments":{"x":-Infinity}}',
        "duplicate-top": b'{"name":"count_notes","name":"list_notes","arguments":{}}',
        "duplicate-arguments": b'{"name":"read_note","arguments":{"note_id":"a","note_id":"b"}}',
        "comment": b'{"name":"count_notes",/* c */"arguments":{}}',
        "single-quotes": b"{'name':'count_notes'}",
        "lone-surrogate": b'{"name":"read_note","arguments":{"note_id":"\\ud800"}}',
        "invalid-utf8": b'{"name":"read_note","arguments":{"note_id":"\xff\xfe"}}',
        "control-char": b'{"name":"read_note","arguments":{"note_id":"a\x01b"}}',
        "huge-number": b'{"name":"count_notes","arguments":{"x":1e400}}',
        "leading-zero": b'{"name":"count_notes","arguments":{"x":01}}',
        "bare-minus": b'{"name":"count_notes","arguments":{"x":-}}',
        "empty": b"",
    }
    for label, text in broken.items():
        add(f"parse-{label}", text, exception="position")
    # size and depth
    add("too-large-text", call_text("create_note", {"text": "x" * MAX_SIZE}))
    add("too-large-name", call_text("n" * (MAX_SIZE + 10), {}))
    for depth in (20, MAX_DEPTH // 2):
        nested = b"[" * depth + b"]" * depth
        add(f"nested-{depth}", b'{"name":"read_note","arguments":{"note_id":' + nested + b"}}")
    for depth in (MAX_DEPTH * 2, 1000):
        nested = b"[" * depth + b"]" * depth
        add(
            f"too-deep-{depth}",
            b'{"name":"read_note","arguments":{"note_id":' + nested + b"}}",
            exception="position",
        )
    # calls that are not objects
    for number, text in enumerate([b"[]", b"[1]", b'"read_note"', b"5", b"null", b"true"]):
        add(f"not-object-{number}", text, exception="params_not_object")
    return cases


CASES = corpus()


def test_the_corpus_is_large_and_covers_every_code_the_notes_tools_can_give() -> None:
    assert len(CASES) >= 200
    assert len({case.name for case in CASES}) == len(CASES)


# --- the four transports -----------------------------------------------------------------------


@dataclass
class Outcome:
    """What a transport answered: a value, a structured error, or the caller's own error."""

    kind: str  # "ok", "error" or "raised"
    value: Any = None

    def compared(self) -> Any:
        if self.kind == "error":
            return {key: self.value[key] for key in COMPARED if key in self.value}
        return self.value


def from_answer(answer: dict[str, Any]) -> Outcome:
    if answer["ok"] is True:
        return Outcome("ok", answer["result"])
    return Outcome("error", answer["error"])


def from_json_rpc(reply: dict[str, Any]) -> Outcome:
    if "error" in reply:
        return Outcome("error", reply["error"]["data"])
    return Outcome("ok", reply["result"])


def from_mcp(reply: dict[str, Any]) -> Outcome:
    """A tool result's value or error, read from its one text block (which every MCP client
    shows the model), or a JSON-RPC error's structured data."""
    if "error" in reply:
        data = reply["error"].get("data")
        return Outcome("error", data if isinstance(data, dict) else {"jsonrpc": reply["error"]})
    result = reply["result"]
    [block] = result["content"]
    value = json.loads(block["text"])
    return Outcome("error" if result.get("isError") else "ok", value)


def envelope(case: Case) -> bytes:
    """The case's call as the params of a tools/call request, composed as text so that the
    call reaches the wire exactly as written (broken texts stay broken)."""
    head = b'{"jsonrpc":"2.0","id":' + dumps(case.request_id) + b',"method":"tools/call"'
    return head + b',"params":' + case.text + b"}"


def stdio_args(identity: str, db: Path) -> list[str]:
    return ["--identity", identity, "--db", str(db)]


def stdio(db: Path, identity: str, stderr: IO[bytes]) -> StdioPeer:
    """A `strictcall serve --mcp-stdio` process for `identity`, after its handshake."""
    peer = StdioPeer(
        [sys.executable, "-m", "strictcall", "serve", "--mcp-stdio", *stdio_args(identity, db)],
        stderr,
    )
    peer.initialize("equivalence")
    return peer


@dataclass
class Transports:
    gateway: Gateway
    server: RunningServer
    http: httpx.Client
    tokens: dict[str, str]
    stdio: dict[str, StdioPeer]
    notes: dict[str, str]


@pytest.fixture(scope="module")
def transports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Transports]:
    folder = tmp_path_factory.mktemp("equivalence")
    db = folder / "notes.sqlite3"
    store = SQLiteStore(db)
    notes = {
        NOTE_OF_U1: store.add_note("u1", "refund window: 7 days").note_id,
        NOTE_OF_U2: store.add_note("u2", "private").note_id,
    }
    tokens = {identity: create_token(db, identity) for identity in ("u1", "u3")}
    server = start_server(db)
    stderr = (folder / "stdio.log").open("wb")
    processes = {identity: stdio(db, identity, stderr) for identity in ("u1", "u3")}
    with notes_gateway(store) as gateway, httpx.Client(timeout=DEADLINE_S) as http:
        try:
            yield Transports(gateway, server, http, tokens, processes, notes)
        finally:
            for process in processes.values():
                process.close()
            stderr.close()
            assert server.stop() == 0
            store.close()


def real_text(case: Case, notes: dict[str, str]) -> Case:
    text = case.text
    for placeholder, note_id in notes.items():
        text = text.replace(placeholder.encode(), note_id.encode())
    return Case(case.name, text, case.identity, case.request_id, case.exception)


def through_gateway(t: Transports, case: Case) -> Outcome:
    try:
        return from_answer(t.gateway.call(case.text, case.identity, case.request_id))
    except (TypeError, ValueError) as exc:
        return Outcome("raised", type(exc).__name__)


def through_rpc(t: Transports, case: Case) -> Outcome:
    response = t.http.post(
        t.server.base_url + "/rpc",
        content=envelope(case),
        headers={"Authorization": f"Bearer {t.tokens[case.identity]}"},
    )
    assert response.status_code == 200
    return from_json_rpc(response.json())


def through_mcp_http(t: Transports, case: Case) -> Outcome:
    response = t.http.post(
        t.server.base_url + "/mcp",
        content=envelope(case),
        headers={**MCP_HEADERS, "Authorization": f"Bearer {t.tokens[case.identity]}"},
    )
    assert response.status_code in (200, 400, 413)
    return from_mcp(response.json())


def through_mcp_stdio(t: Transports, case: Case) -> Outcome:
    process = t.stdio[case.identity]
    process.send(envelope(case))
    return from_mcp(process.message())


TRANSPORTS = {
    "gateway": through_gateway,
    "rpc": through_rpc,
    "mcp-stdio": through_mcp_stdio,
    "mcp-http": through_mcp_http,
}
_request_ids = itertools.count()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_every_transport_gives_the_same_answer(transports: Transports, case: Case) -> None:
    case = real_text(case, transports.notes)
    outcomes = {name: through(transports, case) for name, through in TRANSPORTS.items()}
    if case.exception is None:
        first = outcomes["gateway"]
        assert first.kind in ("ok", "error")
        for name, outcome in outcomes.items():
            assert (outcome.kind, outcome.compared()) == (first.kind, first.compared()), name
        return
    wires = [outcomes[name] for name in ("rpc", "mcp-stdio", "mcp-http")]
    if case.exception == "position":
        for outcome in outcomes.values():
            assert outcome.kind == "error"
            assert outcome.compared() == outcomes["gateway"].compared()
    elif case.exception == "wire_id":
        raised = outcomes["gateway"].kind == "raised"
        long_str = type(case.request_id) is str and len(case.request_id) > MAX_CALL_ID_LENGTH
        assert raised or type(case.request_id) is int or long_str
        for outcome in wires:
            assert outcome.kind == "error"
            assert outcome.value["code"] == errors.INVALID_REQUEST.code
    elif case.exception == "params_not_object":
        assert outcomes["gateway"].kind == "error"
        assert outcomes["gateway"].value["code"] == errors.UNKNOWN_TOOL.code
        positional = case.text.startswith(b"[")
        for outcome in wires:
            assert outcome.kind == "error"
            if positional:
                assert outcome.value["code"] == errors.INVALID_ARGUMENTS.code
                assert outcome.value["pointer"] == ""
            else:
                assert outcome.value["code"] == errors.INVALID_REQUEST.code
    else:  # pragma: no cover - a case names an exception the table does not have
        raise AssertionError(case.exception)


def test_every_code_of_the_catalogue_a_call_can_get_is_in_the_corpus(
    transports: Transports,
) -> None:
    seen = set()
    for case in CASES:
        outcome = through_gateway(transports, real_text(case, transports.notes))
        if outcome.kind == "error":
            seen.add(outcome.value["code"])
            if "reason" in outcome.value:
                seen.add("reason:" + outcome.value["reason"])
    wanted = {
        kind.code
        for kind in (
            errors.INVALID_JSON,
            errors.REQUEST_TOO_LARGE,
            errors.UNKNOWN_TOOL,
            errors.INVALID_ARGUMENTS,
            errors.FORBIDDEN_OR_MISSING,
        )
    }
    reasons = {
        errors.Reason.SYNTAX,
        errors.Reason.DUPLICATE_MEMBER,
        errors.Reason.TOO_DEEP,
        errors.Reason.NUMBER_OUT_OF_RANGE,
        errors.Reason.TOO_LARGE,
        errors.Reason.UNEXPECTED_MEMBER,
        errors.Reason.MISSING_MEMBER,
        errors.Reason.TYPE,
        errors.Reason.MIN_LENGTH,
        errors.Reason.MAX_LENGTH,
    }
    assert wanted | {"reason:" + reason for reason in reasons} <= seen
