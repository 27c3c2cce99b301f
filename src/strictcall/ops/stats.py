"""The audit's breakdown over a time window: calls and failures by stage and code, per minute
for the chart, the top failing (tool, code, reason, pointer) and the latest refusals. What
`strictcall stats` prints and the operator page draws, read through the `OpsStore` protocol."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Final

from strictcall.core.record import OPERATOR_COMMANDS
from strictcall.ops.health import cause_of
from strictcall.storage import MINUTE_S, AuditRecord, FailureRow, OpsStore, StoreUnavailable

DEFAULT_SINCE_S: Final = 3600
TOP_FAILURES: Final = 10
RECENT_REFUSALS: Final = 20

_SPAN: Final = re.compile(r"([1-9][0-9]{0,6})([smhd])")
_UNIT_S: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_span(text: str) -> int:
    """Seconds in a span such as "90s", "15m", "1h" or "7d".

    Raises:
        ValueError: not such a span.
    """
    match = _SPAN.fullmatch(text)
    if match is None:
        raise ValueError("a span is a positive number and s, m, h or d (e.g. 1h)")
    return int(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass(frozen=True)
class Minute:
    """One minute of the window: its successes and its failures by stage."""

    start: int
    ok: int
    failed: dict[str, int]

    @property
    def total(self) -> int:
        return self.ok + sum(self.failed.values())


@dataclass(frozen=True)
class Breakdown:
    """The audit over [since, until): what the page shows and `stats` prints."""

    since: float
    until: float
    store_ok: bool
    calls: int = 0
    failed: int = 0
    by_stage_code: list[tuple[str, str, int]] = field(default_factory=list)
    """Failures by (stage, code), most first."""
    by_tool: list[tuple[str, int, int]] = field(default_factory=list)
    """(tool, calls, failures) per tool ("-" for calls naming none), most calls first."""
    minutes: list[Minute] = field(default_factory=list)
    top_failures: list[FailureRow] = field(default_factory=list)
    recent_refusals: list[AuditRecord] = field(default_factory=list)
    commands: list[tuple[str, int, int]] = field(default_factory=list)
    """(command, runs, refused) per operator command kept in the audit (`tokens revoke`...):
    apart from the agents' calls, which no figure above counts them in."""
    cause: str | None = None
    """Why the store could not answer (`strictcall.ops.health.cause_of`), when it could not."""

    def as_json(self) -> dict[str, object]:
        """The breakdown as plain JSON (never a value a model sent: see `AuditRecord`)."""
        return {
            "since": self.since,
            "until": self.until,
            "store": {"ok": self.store_ok},
            "calls": self.calls,
            "failed": self.failed,
            "failures_by_stage_code": [
                {"stage": s, "code": c, "count": n} for s, c, n in self.by_stage_code
            ],
            "by_tool": [{"tool": t, "calls": n, "failed": f} for t, n, f in self.by_tool],
            "operator_commands": [
                {"command": c, "runs": n, "refused": f} for c, n, f in self.commands
            ],
            "minutes": [{"start": m.start, "ok": m.ok, "failed": m.failed} for m in self.minutes],
            "top_failures": [row._asdict() for row in self.top_failures],
            "recent_refusals": [
                {
                    "at": r.at,
                    "identity": r.identity,
                    "tool": r.tool,
                    "stage": r.stage,
                    "code": r.code,
                    "reason": r.reason,
                    "pointer": r.pointer,
                }
                for r in self.recent_refusals
            ],
        }


def breakdown(
    store: OpsStore,
    since_s: float = DEFAULT_SINCE_S,
    *,
    now: float | None = None,
    top: int = TOP_FAILURES,
    recent: int = RECENT_REFUSALS,
) -> Breakdown:
    """The audit of the last `since_s` seconds; a store that cannot answer gives an empty
    breakdown with `store_ok` false, never an exception."""
    until = time.time() if now is None else now
    since = until - since_s
    try:
        rows = store.call_stats(since)
        # the operator's commands are left out below: read enough that `top` and `recent`
        # of the agents' remain (a command's refusals are of a few kinds)
        failures = store.top_failures(since, top + 2 * len(OPERATOR_COMMANDS))
        refusals = store.recent_refusals(2 * recent)
    except StoreUnavailable as exc:
        return Breakdown(since, until, store_ok=False, cause=cause_of(exc))
    first = int(since) // MINUTE_S * MINUTE_S
    minutes: dict[int, tuple[list[int], dict[str, int]]] = {
        start: ([0], {}) for start in range(first, int(until) + 1, MINUTE_S)
    }
    by_stage_code: dict[tuple[str, str], int] = {}
    by_tool: dict[str, list[int]] = {}
    commands: dict[str, list[int]] = {}
    calls = failed = 0
    for row in rows:
        if row.tool in OPERATOR_COMMANDS:  # an operator's, not an agent's call
            command = commands.setdefault(row.tool, [0, 0])
            command[0] += row.calls
            command[1] += 0 if row.outcome == "ok" else row.calls
            continue
        ok, failed_by_stage = minutes.setdefault(row.minute, ([0], {}))
        tool = by_tool.setdefault("-" if row.tool is None else row.tool, [0, 0])
        tool[0] += row.calls
        calls += row.calls
        if row.outcome == "ok":
            ok[0] += row.calls
            continue
        failed += row.calls
        tool[1] += row.calls
        stage = "-" if row.stage is None else row.stage
        failed_by_stage[stage] = failed_by_stage.get(stage, 0) + row.calls
        key = (stage, "-" if row.code is None else row.code)
        by_stage_code[key] = by_stage_code.get(key, 0) + row.calls
    return Breakdown(
        since,
        until,
        store_ok=True,
        calls=calls,
        failed=failed,
        by_stage_code=sorted(
            ((s, c, n) for (s, c), n in by_stage_code.items()), key=lambda x: (-x[2], x[0], x[1])
        ),
        by_tool=sorted(((t, n, f) for t, (n, f) in by_tool.items()), key=lambda x: (-x[1], x[0])),
        minutes=[Minute(start, ok[0], dict(f)) for start, (ok, f) in sorted(minutes.items())],
        top_failures=[row for row in failures if row.tool not in OPERATOR_COMMANDS][:top],
        recent_refusals=[r for r in refusals if r.tool not in OPERATOR_COMMANDS][:recent],
        commands=sorted((c, n, f) for c, (n, f) in commands.items()),
    )
