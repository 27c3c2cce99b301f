"""The serving options: what an MCP server's wires serve beside a gateway's tools, and the
hooks they share, as one value (`Serving`) built once by whoever starts the server and handed
to each wire alike: the tools (`strictcall.transports.mcp.McpTools`), stdio
(`serve_stdio`) and streamable HTTP (`McpHttpApp`).

What belongs to one connection or one request (who is calling, the call ids' scope, a
session's subscriptions) is each wire's own, not an option. This module loads nothing of the
MCP SDK: a server builds the value before its /mcp app is loaded (`strictcall.server.app`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from strictcall.transports.jsonrpc import Recorder
    from strictcall.transports.mcp.content import McpContent

CallContext = Callable[[], AbstractContextManager[None]]
"""What a wire enters around each tools/call it answers (`Serving.call_context`)."""

Lifespan = Callable[[], AbstractAsyncContextManager[None]]
"""Something that must run while the tools are served (a proxy's upstream session)."""

INPUT_ROUND_WAIT_S: Final = 60.0
"""How long a held 2026-07-28 input_required round waits for its caller's answer (`Rounds`)."""

MAX_HELD_ROUNDS: Final = 16
"""The input_required rounds one identity may have held at once (`Rounds`)."""


@dataclass(frozen=True, slots=True)
class Rounds:
    """The budgets of 2026-07-28's input_required rounds: a request an upstream makes during a
    2026-07-28 call goes to its caller as an input_required result, and the upstream's call is
    held until the caller calls again with its answer (`strictcall.transports.mcp.rounds`)."""

    wait_s: float = INPUT_ROUND_WAIT_S
    """How long a held round waits for the caller's answer: past it, the `requestState` is
    unknown and the upstream is answered the error of a caller that did not answer."""

    max_held: int = MAX_HELD_ROUNDS
    """Rounds one identity may have held at once; one more is refused (the upstream is answered
    the error of a client without the capability, audited `too_many_rounds`)."""

    def __post_init__(self) -> None:
        if not (self.wait_s > 0 and self.max_held >= 1):
            raise ValueError("a round's wait is positive and an identity holds at least 1")


@dataclass(frozen=True, slots=True)
class Serving:
    """What an MCP server serves beside its gateway's tools, and how each wire tells of it."""

    record: Recorder | None = None
    """Where each call's audit record goes, and each refusal's before the gateway (None: not
    audited)."""

    content: McpContent | None = None
    """Resources and prompts served beside the tools (a proxy's or a federation's upstreams';
    None: the tools alone)."""

    tools_change: bool = False
    """The tools listed may change while serving (a proxy's upstream lists others): a session
    that can be told is (`tools.listChanged`, `notifications/tools/list_changed`), and its
    tools may ask the host during a call (sampling, elicitation, roots)."""

    call_context: CallContext | None = None
    """Entered around each tools/call, from its settling to its record (a tracer's: the call's
    stage marks and store work kept for its span, on a wire with no request of its own to
    keep them, stdio)."""

    rounds: Rounds = Rounds()
    """The budgets of 2026-07-28's input_required rounds (where tools may ask:
    `tools_change`)."""

    lifespans: tuple[Lifespan, ...] = ()
    """Entered in order before the first message is served and left after the last answer
    (a proxy's upstream session, the audit log's writer): on stdio in its event loop, over
    HTTP by the server the app is mounted in (`/rpc` serves the same tools)."""


DEFAULT_SERVING: Final = Serving()
"""The gateway's tools alone: nothing audited, nothing beside them, nothing that changes."""
