"""Requests refused for want of a valid token, audited as a sample: at most
`UNAUTHENTICATED_ROWS_PER_S` rows a second, the rest written as one row a second whose
`reason` counts them (`unsampled:N`), so that a flood of tokenless requests costs the audit
table a few rows a second, not a row each. /metrics counts every one (it is told before this).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final

from strictcall.errors import AUTH_THROTTLED, UNAUTHENTICATED, Stage
from strictcall.storage import AuditRecord

UNAUTHENTICATED_ROWS_PER_S: Final = 10
"""The refusals without a valid token audited one row each, per second (per process)."""
UNSAMPLED: Final = "unsampled:"
"""The `reason` of the row that counts the refusals of one second that were not written."""

_SAMPLED_CODES: Final = frozenset({UNAUTHENTICATED.code, AUTH_THROTTLED.code})

Recorder = Callable[[AuditRecord], None]


def sampled(
    record: Recorder,
    per_second: int = UNAUTHENTICATED_ROWS_PER_S,
    *,
    clock: Callable[[], float] = time.time,
) -> Recorder:
    """`record`, writing at most `per_second` rows a second of the refusals made without a
    known caller for want of a token; the others of that second are one row, written with the
    first record of a later second (any record, so that a flood that stops is counted)."""
    second = -math.inf
    written = 0
    unsampled: dict[str, int] = {}

    def settle(now_second: float) -> None:
        nonlocal second, written
        if now_second == second:
            return
        for code, count in unsampled.items():
            record(
                AuditRecord(
                    second,
                    None,
                    None,
                    None,
                    "error",
                    code,
                    Stage.AUTH.value,
                    0,
                    UNSAMPLED + str(count),
                )
            )
        unsampled.clear()
        second, written = now_second, 0

    def sample(entry: AuditRecord) -> None:
        nonlocal written
        settle(math.floor(clock()))
        if entry.identity is None and entry.code in _SAMPLED_CODES:
            if written >= per_second:
                code = entry.code
                unsampled[code] = unsampled.get(code, 0) + 1
                return
            written += 1
        record(entry)

    return sample
