"""A hand-written MCP server on stdio (no SDK) whose tools declare output schemas that leave
objects open, as JSON Schema lets them, and answer structured content within them or not.

    python open_output_upstream.py

Tools (each takes no arguments; `RESULTS` holds what each answers):

    open_object    outputSchema {"type": "object"}: any object
    named_members  names `count`, says nothing of other members; answers one more (`unit`)
    closed         the same, closed by the upstream itself (`additionalProperties: false`),
                   and answers `unit` anyway: it breaks its own schema
    wrong_type     names `count` an integer, answers a string
"""

from __future__ import annotations

import json
from typing import Any

from line_server import serve

COUNT = {"count": {"type": "integer"}}
SCHEMAS: dict[str, dict[str, Any]] = {
    "open_object": {"type": "object"},
    "named_members": {"type": "object", "properties": COUNT, "required": ["count"]},
    "closed": {"type": "object", "properties": COUNT, "additionalProperties": False},
    "wrong_type": {"type": "object", "properties": COUNT},
}
RESULTS: dict[str, dict[str, Any]] = {
    "open_object": {"a": 1, "nested": {"b": [True, None]}},
    "named_members": {"count": 2, "unit": "notes"},
    "closed": {"count": 2, "unit": "notes"},
    "wrong_type": {"count": "two"},
}


def answer(message: dict[str, Any]) -> dict[str, Any]:
    method = message["method"]
    if method == "initialize":
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "open-output", "version": "1"},
        }
    if method == "tools/list":
        tools = [
            {"name": name, "inputSchema": {"type": "object"}, "outputSchema": schema}
            for name, schema in SCHEMAS.items()
        ]
        return {"tools": tools}
    if method == "tools/call":
        value = RESULTS[message["params"]["name"]]
        return {
            "content": [{"type": "text", "text": json.dumps(value)}],
            "structuredContent": value,
        }
    return {}  # ping


serve(answer)
