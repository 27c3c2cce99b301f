"""The audit as `strictcall audit` shows it: which records an operator asked for (identity,
tool, since, errors only), found by paging through the store's log, and each printed the same
way in every mode (a line of columns, or one JSON object a line), every caller-chosen field
escaped (`strictcall.core.terminal`)."""

from __future__ import annotations

import json
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Final

from strictcall.core.terminal import shown
from strictcall.storage import AuditRecord, Store

PAGE: Final = 1000
"""Records read from the store at a time."""


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """What an operator asks of the audit; None (or false) asks nothing of that column."""

    identity: str | None = None
    tool: str | None = None
    since: float | None = None
    """Records at or after this moment (seconds since the epoch)."""
    errors: bool = False
    """Failures only."""

    @property
    def filters(self) -> bool:
        """Whether anything is asked (else every record matches)."""
        return (
            self.identity is not None
            or self.tool is not None
            or self.since is not None
            or self.errors
        )

    def matches(self, r: AuditRecord) -> bool:
        """Whether `r` is one of the records asked for."""
        return (
            (self.identity is None or r.identity == self.identity)
            and (self.tool is None or r.tool == self.tool)
            and (self.since is None or r.at >= self.since)
            and (not self.errors or r.outcome != "ok")
        )


def first_cursor_at(store: Store, since: float) -> int:
    """A cursor before the first record at or after `since` (records are kept in the order
    they were written, their times rising): found by bisection, a few reads."""
    newest, _ = store.calls_after(None, 0)
    low, high = 0, newest  # the answer lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        _, records = store.calls_after(middle, 1)
        if records and records[0].at < since:
            low = middle + 1
        else:
            high = middle
    return low


def find_calls(
    store: Store, query: AuditQuery, limit: int
) -> tuple[list[AuditRecord], list[tuple[str, str | None, str | None, int]]]:
    """The newest `limit` records that match `query`, newest first, and the counts by
    (outcome, stage, code) of every match, most first."""
    cursor = 0 if query.since is None else first_cursor_at(store, query.since)
    newest: deque[AuditRecord] = deque(maxlen=limit)
    counts: Counter[tuple[str, str | None, str | None]] = Counter()
    while True:
        cursor, records = store.calls_after(cursor, PAGE)
        for r in records:
            if query.matches(r):
                newest.append(r)
                counts[(r.outcome, r.stage, r.code)] += 1
        if len(records) < PAGE:
            break
    ordered = sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    return list(reversed(newest)), [(o, s, c, n) for (o, s, c), n in ordered]


def audit_line(r: AuditRecord) -> str:
    """One record as a line of columns: time, outcome, stage, code, tool, identity, latency,
    call id, reason, pointer; every field escaped."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r.at))
    return (
        f"  {at}  {r.outcome:7}  {shown(r.stage):8}  {shown(r.code):22}"
        f"  {shown(r.tool):12}  {shown(r.identity):10}  {r.latency_us:>7} us"
        f"  call {shown(r.call_id)}  {shown(r.reason)}  {shown(r.pointer)}\n"
    )


AUDIT_HEADER: Final = (
    f"  {'time':20}  {'outcome':7}  {'stage':8}  {'code':22}  {'tool':12}  {'identity':10}"
    f"  {'latency':>10}  call id  reason  pointer\n"
)
"""The column headers of `audit_line`'s lines, printed above them."""


def audit_json(r: AuditRecord) -> str:
    """One record as one line of JSON (ASCII: every control character escaped)."""
    document = {
        "at": r.at,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r.at)),
        "outcome": r.outcome,
        "stage": r.stage,
        "code": r.code,
        "tool": r.tool,
        "identity": r.identity,
        "latency_us": r.latency_us,
        "call_id": r.call_id,
        "reason": r.reason,
        "pointer": r.pointer,
    }
    return json.dumps(document, ensure_ascii=True) + "\n"
