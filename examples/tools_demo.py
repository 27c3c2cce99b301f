"""Four tools behind one strictcall Gateway, and what an agent gets back for a few calls.

Run it from the repository with the virtualenv's python (`make install` made .venv):

    .venv/bin/python examples/tools_demo.py

Each line printed is one call's answer as JSON: {"case": ..., "ok": true, "result": ...} or
{"case": ..., "ok": false, "error": {"code", "stage", "retryable", ...}}.
"""

from __future__ import annotations

import json
from typing import Literal

from strictcall import (
    ForbiddenOrMissing,
    Gateway,
    Tool,
    ToolContext,
    ToolFailure,
    errors,
    tool,
)
from strictcall.errors import JSONValue

Arguments = dict[str, JSONValue]

# 1. A tool declared with explicit JSON Schemas. Strictness is added by the gateway: unknown
#    members are refused at every depth, true/"1"/1.0 are not integers.

TICKETS: dict[str, list[str]] = {}


def open_ticket(ctx: ToolContext, args: Arguments) -> JSONValue:
    """Open a support ticket for the caller (who comes from ctx, never from the arguments)."""
    tickets = TICKETS.setdefault(ctx.identity, [])
    ticket_id = f"T-{len(tickets) + 1:04d}"
    tickets.append(ticket_id)
    return {"ticket_id": ticket_id, "priority": args["priority"]}


OPEN_TICKET = Tool(
    name="open_ticket",
    description="Open a support ticket.",
    input_schema={
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 3, "maxLength": 80},
            "priority": {"enum": ["low", "normal", "urgent"]},
            "order": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
                    "items": {"type": "integer", "minimum": 1},
                },
                "required": ["id"],
            },
        },
        "required": ["title", "priority"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "ticket_id": {"type": "string", "pattern": "^T-[0-9]{4}$"},
            "priority": {"type": "string"},
        },
        "required": ["ticket_id", "priority"],
    },
    handler=open_ticket,
)


# 2. A tool whose schemas come from its type hints.


@tool()
def convert_temperature(celsius: float, to: Literal["F", "K"] = "F") -> float:
    """Convert a temperature from degrees Celsius."""
    return celsius * 9 / 5 + 32 if to == "F" else celsius + 273.15


# 3. A tool that checks ownership at stage resource and declares a retryable failure.

REPORT_OWNERS: dict[str, str] = {"r-1": "alice", "r-2": "bob", "r-busy": "alice"}


def owns_report(ctx: ToolContext, args: Arguments) -> bool:
    """Stage resource: only the owner may export; a stranger and a missing report look alike."""
    return REPORT_OWNERS.get(str(args["report_id"])) == ctx.identity


def export_report(ctx: ToolContext, args: Arguments) -> JSONValue:
    if args["report_id"] == "r-busy":
        raise ToolFailure(errors.BUSY, retry_after_ms=2000)
    return {"report_id": args["report_id"], "url": f"https://reports.example/{args['report_id']}"}


EXPORT_REPORT = Tool(
    name="export_report",
    description="Export one of the caller's reports as a download link.",
    input_schema={
        "type": "object",
        "properties": {"report_id": {"type": "string", "minLength": 1}},
        "required": ["report_id"],
    },
    output_schema={
        "type": "object",
        "properties": {"report_id": {"type": "string"}, "url": {"type": "string"}},
        "required": ["report_id", "url"],
    },
    handler=export_report,
    authorize=owns_report,
    failures=(errors.BUSY,),
    timeout=5.0,
)


# 4. A tool with a bug: its result breaks its own output schema, so the gateway withholds it.


@tool()
def count_open_tickets(ctx: ToolContext) -> int:
    """Count the caller's open tickets."""
    if ctx.identity not in TICKETS:
        raise ForbiddenOrMissing
    return str(len(TICKETS[ctx.identity]))  # type: ignore[return-value]  # the bug


CASES: list[tuple[str, str, str]] = [
    (
        "valid",
        '{"name": "open_ticket", "arguments": {"title": "Refund", "priority": "urgent",'
        ' "order": {"id": "ORD-004211", "items": 2}}}',
        "alice",
    ),
    (
        "shape_unknown_member",
        '{"name": "open_ticket", "arguments": {"title": "Refund", "priority": "low",'
        ' "order": {"id": "ORD-004211", "admin": true}}}',
        "alice",
    ),
    (
        "shape_integer",
        '{"name": "open_ticket", "arguments": {"title": "Refund", "priority": "low",'
        ' "order": {"id": "ORD-004211", "items": 1.0}}}',
        "alice",
    ),
    ("decorated_valid", '{"name": "convert_temperature", "arguments": {"celsius": 21.5}}', "alice"),
    (
        "decorated_enum",
        '{"name": "convert_temperature", "arguments": {"celsius": 21.5, "to": "C"}}',
        "alice",
    ),
    ("forbidden", '{"name": "export_report", "arguments": {"report_id": "r-2"}}', "alice"),
    ("missing", '{"name": "export_report", "arguments": {"report_id": "r-404"}}', "alice"),
    ("busy", '{"name": "export_report", "arguments": {"report_id": "r-busy"}}', "alice"),
    ("output_withheld", '{"name": "count_open_tickets", "arguments": {}}', "alice"),
    ("unknown_tool", '{"name": "delete_everything", "arguments": {}}', "alice"),
    ("invalid_json", '{"name": "open_ticket", "arguments": {', "alice"),
]
"""(label, the model's call text, the caller's identity)."""


def main() -> None:
    with Gateway([OPEN_TICKET, convert_temperature, EXPORT_REPORT, count_open_tickets]) as gw:
        for number, (label, raw, identity) in enumerate(CASES, start=1):
            answer = gw.call(raw, identity, f"call-{number}")
            print(json.dumps({"case": label, **answer}, ensure_ascii=False))


if __name__ == "__main__":
    main()
