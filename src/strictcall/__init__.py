"""strictcall: the tool boundary for LLM agents, strict at both ends.

- `Gateway` checks a model's tool call in stages (parse, route, shape, resource, execute,
  output) and answers with the value or a located structured error {code, stage, retryable}.
- `handle` is the demo's read_note handler on the same pipeline; `interpret_tool_reply` is
  the strict reader of a JSON-RPC 2.0 reply.
- `loads_strict` is the strict JSON intake every entry point uses.
"""

# first: a Ctrl-C while the command line loads ends it quietly
from strictcall import _starting  # noqa: F401

# isort: split
from typing import TYPE_CHECKING

from strictcall.client.reply import interpret_tool_reply
from strictcall.core.content import (
    Content,
    audio_block,
    image_block,
    resource_block,
    resource_link_block,
    text_block,
)
from strictcall.core.display import Annotations, Display, Icon
from strictcall.core.gateway import Gateway
from strictcall.core.jsontext import JSONTextError, loads_strict
from strictcall.core.pipeline import Limits
from strictcall.core.tools import (
    ForbiddenOrMissing,
    Tool,
    ToolContext,
    ToolFailure,
    WouldWait,
    running_inline,
    tool,
)
from strictcall.errors import ErrorKind, Rejection, Stage
from strictcall.services.demo import handle

if TYPE_CHECKING:
    from strictcall.client.http import Client, ProtocolError, ToolError, UncorrelatedError

_LAZY = frozenset({"Client", "ProtocolError", "ToolError", "UncorrelatedError"})


def __getattr__(name: str) -> object:
    """The HTTP client's names and `__version__`, found on first use so that `import strictcall`
    stays fast."""
    if name == "__version__":
        return _version()
    if name in _LAZY:
        from strictcall.client import http

        return getattr(http, name)
    raise AttributeError(f"module 'strictcall' has no attribute {name!r}")


def _version() -> str:
    """The installed distribution's version, from its metadata (one source: pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("strictcall")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


__all__ = [
    "Annotations",
    "Client",
    "Content",
    "Display",
    "ErrorKind",
    "ForbiddenOrMissing",
    "Gateway",
    "Icon",
    "JSONTextError",
    "Limits",
    "ProtocolError",
    "Rejection",
    "Stage",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFailure",
    "UncorrelatedError",
    "WouldWait",
    "audio_block",
    "handle",
    "image_block",
    "interpret_tool_reply",
    "loads_strict",
    "resource_block",
    "resource_link_block",
    "running_inline",
    "text_block",
    "tool",
]
