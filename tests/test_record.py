"""One place makes audit records (`strictcall.core.record`): the command line's row of a call
equals the server's row of the same call (tool, outcome, code, stage, reason, scrubbed
pointer), for a success and for refusals at every early stage; a real server and the real
command line on one real SQLite file."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import RunningServer, create_token, recent_audit, start_server, strictcall
from strictcall import Gateway, Tool, ToolContext
from strictcall.core.gateway import Outcome
from strictcall.core.record import AuditRecord, record_of, refusal_record
from strictcall.errors import (
    FORBIDDEN_OR_MISSING,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    UNKNOWN_TOOL,
    JSONValue,
    Reason,
    Stage,
)

INVENTED = "made_up_by_the_model"

# (label, the call's text, code expected, stage expected, pointer expected)
CALLS: list[tuple[str, str, str | None, str | None, str | None]] = [
    ("success", '{"name":"list_notes","arguments":{}}', None, None, None),
    ("parse", '{"name":', INVALID_JSON.code, Stage.PARSE, None),
    ("unknown_tool", '{"name":"read_notes","arguments":{}}', UNKNOWN_TOOL.code, Stage.ROUTE, None),
    (
        "invented_member",
        json.dumps({"name": "read_note", "arguments": {"note_id": "n1", INVENTED: True}}),
        INVALID_ARGUMENTS.code,
        Stage.SHAPE,
        "/arguments/*",
    ),
    (
        "declared_member",
        '{"name":"read_note","arguments":{"note_id":5}}',
        INVALID_ARGUMENTS.code,
        Stage.SHAPE,
        "/arguments/note_id",
    ),
    (
        "invented_envelope_member",
        json.dumps({"name": "read_note", "arguments": {"note_id": "n1"}, INVENTED: 1}),
        INVALID_ARGUMENTS.code,
        Stage.SHAPE,
        "/*",
    ),
    (
        "resource",
        '{"name":"read_note","arguments":{"note_id":"no-such-note"}}',
        FORBIDDEN_OR_MISSING.code,
        Stage.RESOURCE,
        None,
    ),
]


def seen(record: AuditRecord) -> tuple[Any, ...]:
    """What a row says of a call, apart from its call id, time and latency."""
    return (
        record.identity,
        record.tool,
        record.outcome,
        record.code,
        record.stage,
        record.reason,
        record.pointer,
    )


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, AuditRecord]]:
    """Each call made once on the server's /rpc and once with `strictcall call --db`, on one
    store: the rows by call id."""
    db = tmp_path_factory.mktemp("record-seam") / "notes.sqlite3"
    token = create_token(db, "u1")
    server: RunningServer = start_server(db)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        for label, raw, _, _, _ in CALLS:
            # the JSON-RPC request carries the call's text as its params, byte for byte
            body = f'{{"jsonrpc":"2.0","id":"srv-{label}","method":"tools/call","params":{raw}}}'
            if label == "parse":  # a call that is not JSON is a body that is not JSON
                body = raw
            httpx.post(server.base_url + "/rpc", content=body, headers=headers, timeout=30)
            done = strictcall(
                "call", "--db", str(db), "--identity", "u1", "--call-id", f"cli-{label}", raw
            )
            assert done.returncode in (0, 1), done.stderr  # answered, or refused
        wanted = {f"cli-{label}" for label, *_ in CALLS} | {
            f"srv-{label}" for label, *_ in CALLS if label != "parse"
        }

        def all_there(recent: list[AuditRecord]) -> bool:
            return wanted <= {r.call_id for r in recent} and any(
                r.call_id is None and r.code == INVALID_JSON.code for r in recent
            )

        recent = recent_audit(db, 50, all_there)
    finally:
        assert server.stop() == 0
    by_id = {r.call_id: r for r in recent if r.call_id is not None}
    # the server's refusal of a body that is not JSON has no call id to carry
    by_id["srv-parse"] = next(r for r in recent if r.call_id is None)
    yield by_id


@pytest.mark.parametrize(
    ("label", "code", "stage", "pointer"),
    [(label, code, stage, pointer) for label, _, code, stage, pointer in CALLS],
    ids=[label for label, *_ in CALLS],
)
def test_the_command_lines_audit_row_equals_the_servers(
    rows: dict[str, AuditRecord],
    label: str,
    code: str | None,
    stage: str | None,
    pointer: str | None,
) -> None:
    cli, server = rows[f"cli-{label}"], rows[f"srv-{label}"]
    assert seen(cli) == seen(server)
    assert (cli.code, cli.stage, cli.pointer) == (code, stage, pointer)
    assert (cli.outcome == "ok") is (code is None)


def test_a_row_never_holds_a_member_name_the_model_invented(
    rows: dict[str, AuditRecord],
) -> None:
    for record in rows.values():
        assert INVENTED not in repr(record)


def test_the_rows_name_the_tool_once_it_is_read(rows: dict[str, AuditRecord]) -> None:
    assert rows["cli-parse"].tool is None
    assert rows["cli-unknown_tool"].tool is None
    assert rows["cli-invented_member"].tool == "read_note"
    assert rows["cli-success"].tool == "list_notes"
    assert rows["cli-parse"].reason == Reason.SYNTAX


# --- the functions themselves, on a gateway in this process ------------------------------------


def _echo(ctx: ToolContext, arguments: dict[str, JSONValue]) -> JSONValue:
    return {"n": arguments["n"]}


ECHO = Tool(
    name="echo",
    description="Echo n.",
    input_schema={
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    },
    handler=_echo,
)


def test_record_of_a_settled_call_keeps_its_integer_call_id_as_text() -> None:
    with Gateway([ECHO]) as gateway:
        outcome = gateway.settle({"name": "echo", "arguments": {"n": 0}}, "u1", 0)
    assert isinstance(outcome, Outcome)
    record = record_of(outcome, "u1")
    assert (record.call_id, record.tool, record.outcome, record.code) == ("0", "echo", "ok", None)
    assert record.latency_us == outcome.latency_us >= 0


def test_record_of_a_refusal_carries_the_scrubbed_pointer_not_the_errors_own() -> None:
    with Gateway([ECHO]) as gateway:
        call = {"name": "echo", "arguments": {"n": 1, INVENTED: 2}}
        outcome = gateway.settle(call, "u1", "c1")
    error = outcome.answer["error"]
    assert isinstance(error, dict)
    assert error["pointer"] == f"/arguments/{INVENTED}"  # the answer tells the model
    record = record_of(outcome, "u1")
    assert (record.code, record.stage, record.pointer) == (
        INVALID_ARGUMENTS.code,
        Stage.SHAPE,
        "/arguments/*",
    )
    assert record.reason == error["reason"]


def test_a_refusal_record_before_the_ladder_has_no_latency_and_what_could_be_read() -> None:
    record = refusal_record(INVALID_JSON.as_error(), "u1")
    assert (record.call_id, record.tool, record.latency_us) == (None, None, 0)
    assert (record.code, record.stage) == (INVALID_JSON.code, Stage.PARSE)
    named = refusal_record(UNKNOWN_TOOL.as_error(), None, 7, "echo")
    assert (named.call_id, named.identity, named.tool) == ("7", None, "echo")


def test_a_request_of_an_upstreams_record_keeps_its_kind_upstream_caller_and_outcome() -> None:
    from strictcall.core.record import (
        SERVER_REQUEST_OUTCOMES,
        content_method,
        server_request_record,
    )

    record = server_request_record("roots", "files", "u1", 7, "no_capability", 0)
    assert (record.tool, record.identity, record.call_id) == (
        "server-request:roots:files",
        "u1",
        "7",
    )
    assert (record.outcome, record.code, record.stage, record.reason) == (
        "error",
        None,
        None,
        "no_capability",
    )
    assert content_method(record.tool) == "roots/list"
    assert server_request_record("roots", "files", None, None, "answered", 5).outcome == "ok"
    assert "answered" in SERVER_REQUEST_OUTCOMES
    with pytest.raises(ValueError):
        server_request_record("roots", "files", "u1", 7, "fine", 0)
