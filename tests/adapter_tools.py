"""The gateway the adapter tests run provider turns through, and helpers to read its answers.

- `echo`: returns its `value` (any JSON value), so a test chooses the result, falsy ones too;
- `add`: two integers; `b` optional;
- `ping`: no arguments;
- `whoami`: reports the identity and call id the gateway gave it;
- `explode`: raises an exception whose text must never reach the model;
- `free`: takes any object (its schema opens itself), for the intake properties;
- `meet_a` / `meet_b`: async; each waits for the other, so only concurrent runs finish.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final, get_type_hints

from pydantic import TypeAdapter

from strictcall import Gateway, Tool, ToolContext, tool
from strictcall.errors import ErrorKind, JSONValue

SECRET: Final = "SECRET-TEXT-42"
"""Text a tool's exception holds; no result may ever contain it."""


@tool()
def echo(value: Any) -> Any:
    """Return the value."""
    return value


@tool()
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool()
def whoami(ctx: ToolContext) -> dict[str, str]:
    """The caller's identity and the call's id, as the gateway gave them."""
    return {"identity": ctx.identity, "call_id": str(ctx.call_id)}


@tool()
def explode() -> int:
    """Always fails."""
    raise ValueError(SECRET)


FREE: Final = Tool(
    name="free",
    description="Take any object.",
    input_schema={"type": "object", "additionalProperties": True},
    output_schema={"type": "boolean"},
    handler=lambda ctx, args: True,
)


class Meeting:
    """Two events, one per async tool: each tool sets its own and waits for the other's."""

    def __init__(self) -> None:
        self.a = asyncio.Event()
        self.b = asyncio.Event()


MEETING: dict[str, Meeting] = {}


def _meet_tool(mine: str) -> Tool:
    async def meet(ctx: ToolContext, args: dict[str, JSONValue]) -> JSONValue:
        meeting = MEETING["now"]
        own, other = (meeting.a, meeting.b) if mine == "a" else (meeting.b, meeting.a)
        own.set()
        await other.wait()
        return mine

    return Tool(
        name=f"meet_{mine}",
        description="Wait for the other meet tool.",
        input_schema={"type": "object", "properties": {}},
        output_schema={"type": "string"},
        handler=meet,
    )


def adapter_gateway() -> Gateway:
    """A fresh gateway over the test tools."""
    return Gateway([echo, add, ping, whoami, explode, FREE, _meet_tool("a"), _meet_tool("b")])


def error_of(content: str) -> dict[str, JSONValue]:
    """The structured error a refusal's content holds."""
    error: dict[str, JSONValue] = json.loads(content)
    assert set(error) >= {"code", "stage", "retryable"}
    return error


def is_kind(error: dict[str, JSONValue], kind: ErrorKind) -> bool:
    """Whether a structured error is of the catalogue's `kind`."""
    return (error["code"], error["stage"], error["retryable"]) == (
        kind.code,
        kind.stage.value,
        kind.retryable,
    )


def conforms(param_type: Any, value: dict[str, JSONValue]) -> bool:
    """Whether `value` is a valid instance of an SDK's request TypedDict: strict validation,
    and no member the type does not declare."""
    TypeAdapter(param_type).validate_python(value, strict=True)
    return set(value) <= set(get_type_hints(param_type))
