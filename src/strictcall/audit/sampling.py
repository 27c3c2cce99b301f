"""Requests refused for want of a valid token, audited as a sample: at most
`UNAUTHENTICATED_ROWS_PER_S` rows a second, the rest written as one row a second whose
`reason` counts them (`unsampled:N`), so that a flood of tokenless requests costs the audit
table a few rows a second, not a row each. /metrics counts every one (it is told before this).
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final

from strictcall.errors import AUTH_THROTTLED, UNAUTHENTICATED, Stage
from strictcall.storage import AuditRecord

UNAUTHENTICATED_ROWS_PER_S: Final = 10
"""The refusals without a valid token audited one row each, per second (per process)."""
UNSAMPLED: Final = "unsampled:"
"""The `reason` of the row that counts the refusals of one second that were not written."""

_SAMPLED_CODES: Final = frozenset({UNAUTHENTICATED.code, AUTH_THROTTLED.code})

Recorder = Callable[[AuditRecord], None]


class Sampled:
    """`record`, writing at most `per_second` rows a second of the refusals made without a
    known caller for want of a token; the others of that second are one row, written with the
    first record of a later second (any record, so that a flood that stops is counted), or when
    the server stops (`running`)."""

    def __init__(
        self,
        record: Recorder,
        per_second: int = UNAUTHENTICATED_ROWS_PER_S,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._record = record
        self._per_second = per_second
        self._clock = clock
        self._second = -math.inf
        self._written = 0
        self._unsampled: dict[str, int] = {}

    def __call__(self, entry: AuditRecord) -> None:
        self._settle(math.floor(self._clock()))
        if entry.identity is None and entry.code in _SAMPLED_CODES:
            if self._written >= self._per_second:
                self._unsampled[entry.code] = self._unsampled.get(entry.code, 0) + 1
                return
            self._written += 1
        self._record(entry)

    def flush(self) -> None:
        """Write the count rows still waiting (at a stop: none is lost)."""
        self._settle(math.inf)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """While the server runs; on the way out, the waiting count rows are written."""
        try:
            yield
        finally:
            self.flush()

    def _settle(self, now_second: float) -> None:
        if now_second == self._second:
            return
        for code, count in self._unsampled.items():
            self._record(
                AuditRecord(
                    float(self._second),  # `at` is a float in every record: a store's batch
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
        self._unsampled.clear()
        self._second, self._written = now_second, 0


def sampled(
    record: Recorder,
    per_second: int = UNAUTHENTICATED_ROWS_PER_S,
    *,
    clock: Callable[[], float] = time.time,
) -> Sampled:
    """`record` behind a `Sampled` (its docstring says how it samples)."""
    return Sampled(record, per_second, clock=clock)
