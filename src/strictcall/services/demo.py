"""The demo's read_note handler over its two demo notes, built on a Gateway.

`handle` answers exactly as the seed does: {"ok": true, "call_id", "result"} or {"ok": false,
"call_id", "error": {"code", "stage", "retryable"}} with no other members. Unlike the seed it
reads its text strictly (duplicate names, NaN, deep nesting and oversized text are invalid_json
or request_too_large at stage parse) and never raises for any str or bytes.

The gateway is any other with the seed's one tool, answering as the seed does: errors without
their details (`details=False`) and members besides "name" and "arguments" left alone
(`envelope=False`, the seed reads only those two).
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Final

from strictcall.core.gateway import Gateway
from strictcall.core.tools import Arguments, Tool, ToolContext
from strictcall.errors import JSONValue

NOTES: Final[dict[str, dict[str, str]]] = {
    "u1": {"n1": "退款窗口为 7 天。"},
    "u2": {"n2": "另一份私人笔记。"},
}
"""The seed's fixed notes, by owner, then by note id."""

# Python's str.strip() whitespace, exactly (the seed refuses a note_id that strips to ""):
# a note_id must hold one character outside this class. ECMA-262's \s differs (\x1c-\x1f,
# \x85, \ufeff), so the class is spelled out; a test checks it against every code point.
_PY_WHITESPACE: Final = (
    "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000"
)
NOT_BLANK: Final = f"[^{_PY_WHITESPACE}]"
"""A JSON Schema pattern that matches exactly the strings for which `s.strip()` is non-empty."""

READ_NOTE_INPUT: Final = {
    "type": "object",
    "properties": {"note_id": {"type": "string", "pattern": NOT_BLANK}},
    "required": ["note_id"],
    "additionalProperties": False,
}
READ_NOTE_OUTPUT: Final = {
    "type": "object",
    "properties": {"note_id": {"type": "string"}, "text": {"type": "string"}},
    "required": ["note_id", "text"],
    "additionalProperties": False,
}


def _owns(ctx: ToolContext, arguments: Arguments) -> bool:
    return arguments["note_id"] in NOTES.get(ctx.identity, {})


_NO_OVERRIDE: Final = object()
_OVERRIDE: ContextVar[object] = ContextVar("strictcall_demo_override", default=_NO_OVERRIDE)
"""The seed's `result_override` of the call being answered in this context, if one was given."""


def _read(ctx: ToolContext, arguments: Arguments) -> JSONValue:
    override = _OVERRIDE.get()
    if override is not _NO_OVERRIDE:
        return override  # the seed's hook: any value, checked at output like the note
    note_id = arguments["note_id"]
    return {"note_id": note_id, "text": NOTES[ctx.identity][note_id]}


def same_note(arguments: Arguments, result: JSONValue) -> bool:
    """read_note's check at stage output: the note returned is the note asked for."""
    return bool(result["note_id"] == arguments["note_id"])


READ_NOTE: Final = Tool(
    name="read_note",
    description="Read one of the caller's notes by its id.",
    input_schema=READ_NOTE_INPUT,
    output_schema=READ_NOTE_OUTPUT,
    handler=_read,
    authorize=_owns,
    result_matches=same_note,
)
"""The seed's one tool, declared like any other."""

_GATEWAY: list[Gateway] = []
"""The seed's gateway, made on the first call (not by `import strictcall`: it loads the
validator)."""

_STAND_IN: Final = "call-1"
"""The call id the gateway is given for a call id it refuses as a caller's mistake (""): the
seed takes any, and the answer carries the caller's own."""


def handle(
    raw: str | bytes,
    identity: str,
    call_id: str = "call-1",
    result_override: dict[str, JSONValue] | None = None,
) -> dict[str, JSONValue]:
    """Check a read_note call in stages (parse, route, shape, resource, output) and answer.

    `result_override`, when not None, replaces the note the tool would return, so that the
    output stage can be exercised (the demo's own hook).
    """
    if not _GATEWAY:
        _GATEWAY.append(Gateway([READ_NOTE], details=False, envelope=False))
    gateway = _GATEWAY[0]
    identity = identity if type(identity) is str else ""
    stand_in = type(call_id) is not str or not call_id
    given = _STAND_IN if stand_in else call_id
    if result_override is None:
        answer = gateway.call(raw, identity, given)
    else:
        token = _OVERRIDE.set(result_override)
        try:
            answer = gateway.call(raw, identity, given)
        finally:
            _OVERRIDE.reset(token)
    if stand_in:
        answer["call_id"] = call_id  # the member keeps its place: the seed's order
    return answer


DEMO_CASES: Final = (
    ("valid", '{"name":"read_note","arguments":{"note_id":"n1"}}', "u1"),
    ("invalid_json", '{"name":', "u1"),
    ("extra_field", '{"name":"read_note","arguments":{"note_id":"n1","admin":true}}', "u1"),
    ("wrong_owner", '{"name":"read_note","arguments":{"note_id":"n1"}}', "u2"),
)
"""The seed's four demo inputs: (label, raw, identity)."""


def demo_lines() -> list[str]:
    """The seed's demo output, one JSON line per case, exactly as the seed prints it."""
    return [
        json.dumps({"case": label, **handle(raw, identity)}, ensure_ascii=False)
        for label, raw, identity in DEMO_CASES
    ]
