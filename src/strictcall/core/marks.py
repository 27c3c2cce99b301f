"""The times the stages of a traced call ended (its marks), for its span's events.

While a request is traced (`strictcall.ops.tracing.request_context`), `STAGE_MARKS` holds a
list for it: `Gateway.settle` and `settle_async` fill it with the call's marks, and the span of
the call's record reads and empties it. Otherwise it holds None, and the ladder reads no clock.

A call's marks, nanoseconds since the epoch (`time.time_ns`, the spans' clock):

    [ladder started (parse had ended), route ended, shape ended, ..., last stage ended]

one per stage from route on that the call passed, then the end of the stage that decided it
(output for a success, else the one that refused it).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Final

StageMarks = list[int]
"""A call's stage marks, as the module says."""

STAGE_MARKS: Final[ContextVar[StageMarks | None]] = ContextVar(
    "strictcall_stage_marks", default=None
)
"""The marks of the call being settled in the request being traced; None: not traced."""
