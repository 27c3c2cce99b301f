"""strictcall: the tool boundary for LLM agents, strict at both ends.

- `Gateway` checks a model's tool call in stages (parse, route, shape, resource, execute,
  output) and answers with the value or a located structured error {code, stage, retryable}.
- `handle` is seed 002's read_note handler on the same pipeline; `interpret_tool_reply` is
  seed 000's strict reader of a JSON-RPC 2.0 reply.
- `loads_strict` is the strict JSON intake every entry point uses.
"""

from strictcall.errors import ErrorKind, Rejection, Stage
from strictcall.gateway import Gateway
from strictcall.jsontext import JSONTextError, loads_strict
from strictcall.pipeline import Limits
from strictcall.reply import interpret_tool_reply
from strictcall.seed import handle
from strictcall.tools import ForbiddenOrMissing, Tool, ToolContext, ToolFailure, tool

__all__ = [
    "ErrorKind",
    "ForbiddenOrMissing",
    "Gateway",
    "JSONTextError",
    "Limits",
    "Rejection",
    "Stage",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "handle",
    "interpret_tool_reply",
    "loads_strict",
    "tool",
]
