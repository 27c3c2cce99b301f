"""One caller's conversation with an upstream during a call, and the upstream's notifications
routed to it: progress by the token strictcall gave the upstream, messages to the one caller
with calls in flight, and nowhere else.

- Progress: the upstream is given a token of strictcall's own (`strictcall-progress-N`), never
  the caller's; each `notifications/progress` naming it is checked as the protocol's and goes
  to that call's caller with the caller's own token in its place. One naming no call is dropped.
- `notifications/message`: MCP does not say which call a message belongs to, except on an HTTP
  upstream's answer stream (`deliver_of_call`). Otherwise a message goes to the caller when
  exactly one downstream session has calls in flight on the upstream, filtered by that caller's
  level; with none, or several (it could be any one's), it goes to strictcall's log instead,
  prefixed with the upstream's name, escaped and rate-limited (`LOG_RATE`, `LOG_BURST`).
- What one call may be sent is bounded (`MAX_PENDING` notifications waiting to be written); the
  answer is written after the notifications that came before it (`Conversation.settled`).
- Requests of the upstream's during a call (sampling, elicitation, roots: `Conversations.ask`)
  go to the one caller with calls in flight and nowhere else, when the policy's rule of its
  call allows the kind and its client offers it, else are refused at once; its answer bounded
  in time and size by the upstream's budgets. Calls without a way back (`blind`) count as
  callers too: with one in flight beside another, nobody is asked. Each request is one audit
  record (`strictcall.core.record.server_request_record`, to `record`) and one line of the
  log, never its content.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, TypeVar

import anyio
import mcp_types as types
import orjson
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from strictcall.core.record import AuditRecord, server_request_record
from strictcall.core.terminal import one_line
from strictcall.core.tools import ToolContext
from strictcall.errors import JSONValue
from strictcall.services.proxy.budgets import DEFAULT_BUDGETS, Budgets
from strictcall.transports.mcp.peer import CallPeer, NotAsked

MAX_PENDING: Final = 256
"""Notifications of one call waiting to be written to its caller; more are dropped (counted)."""

SETTLE_S: Final = 2.0
"""How long a call's answer waits for the notifications before it to be written."""

LOG_RATE: Final = 5.0
"""Upstream messages per second written to strictcall's log (outside any call), on average."""

LOG_BURST: Final = 20
"""Upstream messages written to strictcall's log at once before `LOG_RATE` holds them back."""

NOT_OFFERED: Final = {
    "sampling": "Sampling not supported",
    "elicitation": "Elicitation not supported",
    "roots": "List roots not supported",
}
"""The error the upstream gets, at once, for a request its caller cannot answer: the MCP SDK's
words for a client without the capability."""

LOG_TEXT_MAX: Final = 500
"""The most characters of one upstream message's data written to strictcall's log."""

_TOKENS: Final = itertools.count(1)

ResultT = TypeVar("ResultT", bound=BaseModel)


class Conversation:
    """One call with a downstream peer: its upstream progress token and its ordered outbox;
    `call` whose call it is (its identity, its id, the requests its rule allows)."""

    def __init__(self, peer: CallPeer, call: ToolContext | None = None) -> None:
        self.peer: Final = peer
        self.call: Final = call
        self.token: Final = f"strictcall-progress-{next(_TOKENS)}"
        """The progress token the upstream is given for this call."""
        self._pending: deque[types.ServerNotification] = deque()
        self._writer: asyncio.Task[None] | None = None
        self.dropped = 0
        """Notifications dropped: more than `MAX_PENDING` were waiting."""

    def meta(self) -> dict[str, JSONValue]:
        """The `_meta` of the upstream request: strictcall's progress token, when the caller
        asked for progress."""
        if self.peer.progress_token is None:
            return {}
        return {"progressToken": self.token}

    def deliver(self, notification: types.ServerNotification) -> None:
        """Queue a notification for the caller, written in order by one task."""
        if len(self._pending) >= MAX_PENDING:
            self.dropped += 1
            return
        self._pending.append(notification)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while self._pending:
            notification = self._pending.popleft()
            try:
                await self.peer.notify(notification)
            except Exception:  # the caller's stream is gone: the rest goes nowhere either
                self._pending.clear()
                return

    async def settled(self) -> None:
        """Return once the notifications queued so far are written (within `SETTLE_S`)."""
        writer = self._writer
        if writer is not None and not writer.done():
            try:
                await asyncio.wait_for(asyncio.shield(writer), SETTLE_S)
            except TimeoutError:
                writer.cancel()

    def close(self) -> None:
        """The call is over: what is still queued is not written."""
        self._pending.clear()
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()


class Conversations:
    """An upstream's calls in flight that have a downstream peer, and where its notifications
    go (see the module's docstring); `note` writes one line of strictcall's log."""

    def __init__(
        self,
        note: Callable[[str], None],
        budgets: Budgets = DEFAULT_BUDGETS,
        upstream: Callable[[], str] = lambda: "upstream",
    ) -> None:
        """`budgets`: how long and how large a caller's answer may be; `upstream`: the
        upstream's name, as its audit records keep it."""
        self._note = note
        self._budgets = budgets
        self._upstream = upstream
        self._by_token: dict[str, Conversation] = {}
        self._callers: dict[str, int] = {}
        self._blind: dict[int, ToolContext | None] = {}
        """Calls in flight that have no way back to their caller, each by a key of its own."""
        self.record: Callable[[AuditRecord], None] | None = None
        """Where the audit records of its requests go (the server's audit log; None: none)."""
        self._allowance = float(LOG_BURST)
        self._at = time.monotonic()
        self._held_back = 0

    @contextmanager
    def open(self, peer: CallPeer, call: ToolContext | None = None) -> Iterator[Conversation]:
        """A conversation for one call of `peer`'s (`call`: the gateway's context of it),
        routed to while the block runs."""
        conversation = Conversation(peer, call)
        self._by_token[conversation.token] = conversation
        self._callers[peer.caller] = self._callers.get(peer.caller, 0) + 1
        try:
            yield conversation
        finally:
            del self._by_token[conversation.token]
            left = self._callers[peer.caller] - 1
            if left:
                self._callers[peer.caller] = left
            else:
                del self._callers[peer.caller]
            conversation.close()

    @contextmanager
    def blind(self, call: ToolContext | None) -> Iterator[None]:
        """A call without a way back to its caller in flight while the block runs: a request
        then could be its own, and is never asked of another caller."""
        key = next(_TOKENS)
        self._blind[key] = call
        try:
            yield
        finally:
            del self._blind[key]

    def take(self, method: str, params: object) -> bool:
        """Route a notification the upstream sent outside any one call's stream; whether it
        was one of those routed here (progress, message), else the session's to handle."""
        if method == "notifications/progress":
            self._progress(params)
            return True
        if method == "notifications/message":
            message = _message(params)
            if message is None:
                self._note("upstream sent a notifications/message of another shape; dropped")
                return True
            conversation = self._only_caller()
            if conversation is None:
                self._log(message)
            else:
                self._to(conversation, message)
            return True
        return False

    def take_of_call(self, conversation: Conversation, method: str, params: object) -> bool:
        """Route a notification that came on one call's own answer stream (an HTTP
        upstream's): its messages are that call's alone."""
        if method == "notifications/message":
            message = _message(params)
            if message is not None:
                self._to(conversation, message)
            return True
        return self.take(method, params)

    async def ask(
        self, kind: str, request: types.ServerRequest, result_type: type[ResultT]
    ) -> ResultT | types.ErrorData:
        """A request the upstream made during a call (`kind` one of `peer.ASKS`), sent to the
        caller with calls in flight when exactly one has, its call's rule allows `kind` and its
        client offers it, else refused at once (the MCP SDK's error for a client without the
        capability); its answer bounded by the budgets' `server_request_timeout_s` and
        `max_server_answer_bytes`. Each is audited and said in the log: its kind, the caller
        and the outcome, never its content."""
        method = request.method
        conversation = None if self._blind else self._only_caller()
        call = conversation.call if conversation is not None else self._only_blind()
        if conversation is None and call is None:
            self._note(f"upstream {method} refused (not one caller's call in flight)")
            self._audit(kind, None, "no_caller", None)
            return types.ErrorData(code=types.INVALID_REQUEST, message=NOT_OFFERED[kind])
        allowed = None if call is None else call.server_requests
        if allowed is not None and kind not in allowed:
            self._note(f"upstream {method} refused (the policy forbids it to the caller)")
            self._audit(kind, call, "refused_by_policy", None)
            return types.ErrorData(code=types.INVALID_REQUEST, message=NOT_OFFERED[kind])
        peer = None if conversation is None else conversation.peer
        if peer is None or peer.ask is None or kind not in peer.offers:
            self._note(f"upstream {method} refused (the caller cannot be asked it)")
            self._audit(kind, call, "no_capability", None)
            return types.ErrorData(code=types.INVALID_REQUEST, message=NOT_OFFERED[kind])
        said = f"upstream {method} to caller {peer.caller}"
        limit_s = self._budgets.server_request_timeout_s
        started = time.monotonic()
        try:
            with anyio.fail_after(limit_s):
                result = await peer.ask(request, result_type)
        except NotAsked as exc:  # a 2026-07-28 caller's round that could not be held
            self._note(f"{said}: not asked ({exc.outcome})")
            self._audit(kind, call, exc.outcome, None)
            return types.ErrorData(code=types.INVALID_REQUEST, message=NOT_OFFERED[kind])
        except TimeoutError:
            self._note(f"{said}: no answer in {limit_s:g} s")
            self._audit(kind, call, "timed_out", started)
            return types.ErrorData(code=types.INTERNAL_ERROR, message="The caller did not answer")
        except MCPError as exc:  # the caller's own error answer goes back as it is
            self._note(f"{said}: declined")
            self._audit(kind, call, "caller_error", started)
            return exc.error
        except Exception as exc:  # its kind is said, never its text
            self._note(f"{said}: failed ({type(exc).__name__})")
            self._audit(kind, call, "caller_error", started)
            return types.ErrorData(code=types.INTERNAL_ERROR, message="The caller was not asked")
        limit = self._budgets.max_server_answer_bytes
        if len(result.model_dump_json(by_alias=True)) > limit:
            self._note(f"{said}: answer over {limit} bytes")
            self._audit(kind, call, "too_large", started)
            return types.ErrorData(code=types.INTERNAL_ERROR, message="The answer is too large")
        self._note(f"{said}: answered")
        self._audit(kind, call, "answered", started)
        return result  # type: ignore[no-any-return]

    def _audit(
        self, kind: str, call: ToolContext | None, outcome: str, started: float | None
    ) -> None:
        """One request's audit record: the caller whose call it came during (None: none could
        be told)."""
        record = self.record
        if record is None:
            return
        identity = None if call is None else call.identity
        call_id = None if call is None else call.call_id
        latency_us = 0 if started is None else int((time.monotonic() - started) * 1e6)
        upstream = self._upstream()
        record(server_request_record(kind, upstream, identity, call_id, outcome, latency_us))

    def _only_blind(self) -> ToolContext | None:
        """The call a request is of when one call alone is in flight and it has no way back
        to its caller (it cannot be asked), else None."""
        if self._callers or len(self._blind) != 1:
            return None
        (call,) = self._blind.values()
        return call

    def _progress(self, params: object) -> None:
        if not isinstance(params, dict):
            return
        conversation = self._by_token.get(params.get("progressToken"))  # type: ignore[arg-type]
        caller_token = None if conversation is None else conversation.peer.progress_token
        if conversation is None or caller_token is None:
            return  # naming no call in flight (or one ended): nobody to tell
        try:
            checked = types.ProgressNotificationParams.model_validate(
                {**params, "progressToken": caller_token}, by_name=False
            )
        except ValidationError:
            self._note("upstream sent a notifications/progress of another shape; dropped")
            return
        conversation.deliver(types.ProgressNotification(params=checked))

    def _only_caller(self) -> Conversation | None:
        """The conversation a message outside any stream may go to: the latest of the one
        downstream session with calls in flight, if exactly one has."""
        if len(self._callers) != 1:
            return None
        (caller,) = self._callers
        for conversation in reversed(self._by_token.values()):
            if conversation.peer.caller == caller:
                return conversation
        return None  # pragma: no cover - a caller counted has a conversation

    def _to(
        self, conversation: Conversation, message: types.LoggingMessageNotificationParams
    ) -> None:
        if conversation.peer.takes_log(message.level):
            conversation.deliver(types.LoggingMessageNotification(params=message))

    def _log(self, message: types.LoggingMessageNotificationParams) -> None:
        """An upstream's message outside any call, in strictcall's log: escaped, cut, and
        held back beyond `LOG_RATE` (how many were is said with the next one written)."""
        now = time.monotonic()
        self._allowance = min(float(LOG_BURST), self._allowance + (now - self._at) * LOG_RATE)
        self._at = now
        if self._allowance < 1.0:
            self._held_back += 1
            return
        self._allowance -= 1.0
        data = message.data if isinstance(message.data, str) else _json(message.data)
        text = one_line(data[:LOG_TEXT_MAX])
        source = "" if message.logger is None else f" {one_line(message.logger[:64])}"
        held = ""
        if self._held_back:
            held = f" ({self._held_back} more held back)"
            self._held_back = 0
        self._note(f"upstream log {message.level}{source}: {text}{held}")


def _message(params: object) -> types.LoggingMessageNotificationParams | None:
    """A notifications/message's params, checked as the protocol's, or None."""
    try:
        return types.LoggingMessageNotificationParams.model_validate(params, by_name=False)
    except ValidationError:
        return None


def _json(value: object) -> str:
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:
        return "?"
