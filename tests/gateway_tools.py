"""Tools shared by the gateway tests, each exercising different schema features.

- `create_event`: nested object, array (minItems, maxItems, uniqueItems), enum, pattern,
  integer bounds (minimum, maximum, exclusiveMaximum), string lengths, an optional member.
- `convert`: numbers with bounds (exclusiveMinimum, exclusiveMaximum, multipleOf), const,
  integers, an optional boolean.
- `search`: oneOf alternatives of objects, anyOf with null, an array-of-objects result.
- `update_profile`: an object assembled with allOf from $defs parts through $ref.
- `tag_bag`: a schema that opens itself (additionalProperties: true, and a schema for extras).
- `read_doc`: ownership checked at stage resource; a document that vanished is raised by the
  handler as ForbiddenOrMissing.
- `whoami`: declares an "identity" member; its handler reports the real identity from ctx.
"""

from __future__ import annotations

import json
from typing import Any, Final

from strictcall import ForbiddenOrMissing, Gateway, Tool, ToolContext
from strictcall.errors import JSONValue

SENTINEL: Final = "SENTINEL-VALUE-123"
"""A value tests put in calls; no answer may ever contain it."""

CREATE_EVENT_INPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 40},
        "room": {"type": "string", "pattern": "^[A-Z]-[0-9]{3}$"},
        "priority": {"enum": ["low", "normal", "high"]},
        "attendees": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "maxItems": 4,
            "uniqueItems": True,
        },
        "when": {
            "type": "object",
            "properties": {
                "day": {"type": "integer", "minimum": 1, "maximum": 31},
                "hour": {"type": "integer", "minimum": 0, "exclusiveMaximum": 24},
            },
            "required": ["day", "hour"],
        },
        "notes": {"type": "string"},
    },
    "required": ["title", "room", "priority", "attendees", "when"],
}
CREATE_EVENT_OUTPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "event_id": {"type": "string"},
        "attendees": {"type": "integer", "minimum": 0},
    },
    "required": ["event_id", "attendees"],
}


def _create_event(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    return {"event_id": f"ev-{args['when']['day']}", "attendees": len(args["attendees"])}


CREATE_EVENT: Final = Tool(
    name="create_event",
    description="Book a room for an event.",
    input_schema=CREATE_EVENT_INPUT,
    output_schema=CREATE_EVENT_OUTPUT,
    handler=_create_event,
)

VALID_EVENT: Final[dict[str, Any]] = {
    "title": "Planning",
    "room": "B-204",
    "priority": "high",
    "attendees": ["ana", "bo"],
    "when": {"day": 3, "hour": 14},
}

CONVERT_INPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "amount": {
            "type": "number",
            "exclusiveMinimum": 0,
            "exclusiveMaximum": 1000000,
            "multipleOf": 0.25,
        },
        "currency": {"const": "EUR"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
        "step": {"type": "integer", "multipleOf": 5},
        "round": {"type": "boolean"},
    },
    "required": ["amount", "currency", "quantity"],
}


def _convert(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    return float(args["amount"]) * int(args["quantity"]) * 1.5


CONVERT: Final = Tool(
    name="convert",
    description="Convert an amount of euros.",
    input_schema=CONVERT_INPUT,
    output_schema={"type": "number", "minimum": 0},
    handler=_convert,
)

VALID_CONVERT: Final[dict[str, Any]] = {"amount": 12.5, "currency": "EUR", "quantity": 2}

SEARCH_INPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "filter": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "tag"}, "tag": {"type": "string"}},
                    "required": ["kind", "tag"],
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "date"}, "after": {"type": "integer"}},
                    "required": ["kind", "after"],
                },
            ]
        },
        "limit": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 50}, {"type": "null"}]},
    },
    "required": ["query"],
}
SEARCH_OUTPUT: Final[dict[str, Any]] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "score": {"type": "number"}},
        "required": ["id", "score"],
    },
}


def _search(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    return [{"id": "d1", "score": 0.5}, {"id": "d2", "score": 0}]


SEARCH: Final = Tool(
    name="search",
    description="Search the caller's documents.",
    input_schema=SEARCH_INPUT,
    output_schema=SEARCH_OUTPUT,
    handler=_search,
)

PROFILE_INPUT: Final[dict[str, Any]] = {
    "$defs": {
        "named": {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1}},
            "required": ["name"],
        },
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            },
            "required": ["city"],
        },
    },
    "allOf": [
        {"$ref": "#/$defs/named"},
        {
            "properties": {
                "age": {"type": "integer", "minimum": 0},
                "home": {"$ref": "#/$defs/address"},
            }
        },
    ],
}


def _update_profile(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    return {"updated": True}


UPDATE_PROFILE: Final = Tool(
    name="update_profile",
    description="Update the caller's profile.",
    input_schema=PROFILE_INPUT,
    output_schema={
        "type": "object",
        "properties": {"updated": {"type": "boolean"}},
        "required": ["updated"],
    },
    handler=_update_profile,
)

TAG_BAG_INPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["id"],
    "additionalProperties": True,
}


def _tag_bag(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    return sorted(args)


TAG_BAG: Final = Tool(
    name="tag_bag",
    description="Store any tags.",
    input_schema=TAG_BAG_INPUT,
    output_schema={"type": "array", "items": {"type": "string"}},
    handler=_tag_bag,
)

OWNERS: Final[dict[str, frozenset[str]]] = {
    "u1": frozenset({"d1", "d-vanished"}),
    "u2": frozenset({"d2"}),
}
"""Which documents each identity owns (stage resource reads this)."""
DOCS: Final[dict[str, str]] = {"d1": "first", "d2": "second"}
"""The documents that exist (d-vanished is owned but gone: the handler finds it missing)."""


def _owns_doc(ctx: ToolContext, args: dict[str, JSONValue]) -> bool:
    return args["doc_id"] in OWNERS.get(ctx.identity, frozenset())


def _read_doc(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    text = DOCS.get(args["doc_id"])
    if text is None:
        raise ForbiddenOrMissing
    return {"doc_id": args["doc_id"], "text": text}


READ_DOC_INPUT: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"doc_id": {"type": "string", "minLength": 1}},
    "required": ["doc_id"],
}

READ_DOC: Final = Tool(
    name="read_doc",
    description="Read one of the caller's documents.",
    input_schema=READ_DOC_INPUT,
    output_schema={
        "type": "object",
        "properties": {"doc_id": {"type": "string"}, "text": {"type": "string"}},
        "required": ["doc_id", "text"],
    },
    handler=_read_doc,
    authorize=_owns_doc,
)


def _whoami(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
    return {"ctx_identity": ctx.identity, "claimed": args.get("identity")}


WHOAMI: Final = Tool(
    name="whoami",
    description="Say who is calling.",
    input_schema={"type": "object", "properties": {"identity": {"type": "string"}}},
    output_schema={
        "type": "object",
        "properties": {
            "ctx_identity": {"type": "string"},
            "claimed": {"type": ["string", "null"]},
        },
        "required": ["ctx_identity", "claimed"],
    },
    handler=_whoami,
)

ALL_TOOLS: Final = (CREATE_EVENT, CONVERT, SEARCH, UPDATE_PROFILE, TAG_BAG, READ_DOC, WHOAMI)


def make_gateway(*extra: Tool) -> Gateway:
    """A gateway with every shared tool and `extra`."""
    return Gateway((*ALL_TOOLS, *extra))


def call_text(name: JSONValue, arguments: JSONValue) -> str:
    """The JSON text of a call to `name` with `arguments`."""
    return json.dumps({"name": name, "arguments": arguments})


def answer_text(answer: dict[str, JSONValue]) -> str:
    """An answer as the agent would read it, for checks on what it contains."""
    return json.dumps(answer, ensure_ascii=False)


def resolve_pointer(document: JSONValue, pointer: str) -> JSONValue:
    """The value at a JSON Pointer (RFC 6901) in `document`.

    Raises:
        LookupError: the pointer names no place in the document.
    """
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise LookupError(pointer)
    node = document
    for raw in pointer[1:].split("/"):
        step = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif (
            isinstance(node, list)
            and step.isdigit()
            and (step == "0" or not step.startswith("0"))
            and int(step) < len(node)
        ):
            node = node[int(step)]
        else:
            raise LookupError(pointer)
    return node
