"""The audit record: one call as the operator sees it, never argument values or note text.

The gateway's answers and the wires' refusals become records here; the audit log batches them
into the store, and operations (metrics, spans, the page) read them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, NamedTuple


class AuditRecord(NamedTuple):
    """One call, as the operator sees it: never argument values or note text."""

    at: float
    call_id: str | None
    identity: str | None
    tool: str | None
    outcome: str
    code: str | None
    stage: str | None
    latency_us: int
    reason: str | None = None
    """The catalogue's reason of a parse or shape error (`strictcall.errors.Reason`)."""
    pointer: str | None = None
    """Where a shape error is, as the gateway's `audit_pointer` shows it: member names the
    tool's schema declares, any other name as "*" (a name the model made up is its text)."""

    @classmethod
    def of_call(
        cls,
        call_id: str | int | None,
        identity: str | None,
        tool: str | None,
        error: Mapping[str, Any] | None,
        latency_us: int,
        *,
        pointer: str | None = None,
    ) -> AuditRecord:
        """The record of one call, now: a success when `error` is None, else its code, stage
        and reason. `pointer` is given by the caller, already made safe to keep
        (`Gateway.audit_pointer`): the error's own may hold a name the model made up."""
        reason = None if error is None else error.get("reason")
        return cls(
            time.time(),
            None if call_id is None else str(call_id),
            identity,
            tool,
            "ok" if error is None else "error",
            None if error is None else error["code"],
            None if error is None else error["stage"],
            latency_us,
            reason if type(reason) is str else None,
            pointer,
        )
