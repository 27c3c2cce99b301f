"""The gateway's tools as the OpenAI Agents SDK's function tools (extra `agents`).

    agent = Agent(name="notes", tools=agents_function_tools(gateway))
    await Runner.run(agent, "...", context=Caller(identity="u1"))

The SDK hands each tool the model's arguments as raw JSON text: it is read with the strict
intake, then checked by the gateway under the SDK's call id. The identity comes from the run
context (`context.identity`, or `context["identity"]`, or what `identity(run_context)` returns),
never from the arguments. A refusal is returned to the model as the structured error, as JSON
text; a value as its JSON text. The SDK is imported only when the tools are made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from strictcall.core.gateway import Gateway
from strictcall.core.refusals import malformed_call
from strictcall.errors import MissingExtra, Reason
from strictcall.transports.providers._fields import ABSENT, read_field
from strictcall.transports.providers._run import arun_planned, from_text, refused

if TYPE_CHECKING:
    from agents import FunctionTool, RunContextWrapper
    from agents.tool_context import ToolContext

IdentityOf = Callable[["RunContextWrapper[Any]"], str]
"""Given the SDK's run context (a `ToolContext`), the caller's identity."""


def agents_function_tools(
    gateway: Gateway, *, identity: IdentityOf | None = None, strict: bool | None = None
) -> list[FunctionTool]:
    """One `agents.FunctionTool` per registered tool, with the strict schema the gateway
    enforces.

    `strict` is the SDK's strict mode (OpenAI's constrained decoding) for the tools: True for
    all of them, False for none, None (the default) for each tool `list_tools("openai")` marks
    strict, i.e. whose schema is in OpenAI's strict subset as it stands (the SDK would make
    other schemas strict by rewriting them, optional members made required, which changes what
    the model may send). The gateway checks every call against its schema either way; strict
    decoding only helps the model get a call right the first time.

    Raises:
        MissingExtra: the `agents` package (extra `agents`) is not installed.
        agents.exceptions.UserError: `strict=True` and a schema the SDK cannot make strict.
    """
    try:
        from agents import FunctionTool
    except ImportError:
        raise MissingExtra("agents", "agents") from None
    identity_of = identity if identity is not None else context_identity
    tools = []
    for entry in gateway.list_tools("openai"):
        function = entry["function"]

        def make(strict_schema: bool, function: dict[str, Any] = function) -> FunctionTool:
            return FunctionTool(
                name=function["name"],
                description=function["description"],
                params_json_schema=function["parameters"],
                on_invoke_tool=_invoker(gateway, function["name"], identity_of),
                strict_json_schema=strict_schema,
            )

        tools.append(make(function["strict"] if strict is None else strict))
    return tools


def context_identity(run_context: RunContextWrapper[Any]) -> str:
    """The identity a run's context carries: its `identity` attribute or member.

    Raises:
        TypeError: the context carries no str identity (a host's mistake, not the model's).
    """
    context = run_context.context
    found = context.get("identity") if isinstance(context, Mapping) else None
    if found is None:
        found = getattr(context, "identity", None)
    if type(found) is not str:
        raise TypeError("the run context carries no str `identity` for strictcall")
    return found


def _invoker(
    gateway: Gateway, name: str, identity_of: IdentityOf
) -> Callable[[ToolContext[Any], str], Any]:
    async def on_invoke_tool(ctx: ToolContext[Any], input_json: str) -> str:
        identity = identity_of(ctx)
        if type(identity) is not str:
            raise TypeError("identity is a str")
        call_id = read_field(ctx, "tool_call_id")
        if type(call_id) is not str or not call_id:
            reason = Reason.MISSING_MEMBER if call_id is ABSENT else Reason.TYPE
            planned = refused("", malformed_call("", reason, "tool_call_id"))
        elif not isinstance(input_json, str):
            planned = refused(call_id, malformed_call("/arguments", Reason.TYPE, "string"))
        else:
            planned = from_text(gateway, call_id, name, input_json)
        (text,) = await arun_planned(gateway, [planned], identity, _text)
        return text

    return on_invoke_tool


def _text(call_id: str, content: str, refusal: bool) -> str:
    return content
