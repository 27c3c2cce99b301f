"""This server process's own counts of its calls over the last hour, per minute, kept in
memory: what the page shows beside the audit's breakdown (latency per tool, calls per identity
and per wire, the last 5 minutes) and in its place while the store is down.

A call costs one list append (the wire's own list); the records are tallied when the page
reads them and while the server runs (`strictcall.ops.drains`), grouped by C-level counting
(~0.3 µs a record). Identities are the callers' (from their
tokens, or the one a stdio server runs as); at most `MAX_IDENTITIES` are told apart per
minute, the rest counted as `OTHERS`. Tools are registered names, or "-" for a call that named
none (a made-up name is never kept).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import Final

from strictcall.core.record import AuditRecord, content_method
from strictcall.ops.drains import appender, draining, taken
from strictcall.ops.health import REFUSED_CODES, StoreHealth

WINDOW_S: Final = 3600
RECENT_S: Final = 300
MINUTE_S: Final = 60
MAX_IDENTITIES: Final = 1000
OTHERS: Final = "(others)"
NO_TOOL: Final = "-"
WIRES: Final = ("rpc", "mcp", "stdio")
"""JSON-RPC at /rpc, MCP over HTTP at /mcp, MCP on stdio."""

_KEY_OF: Final[
    Callable[[AuditRecord], tuple[str | None, str, str | None, str | None, str | None]]
] = itemgetter(3, 4, 6, 5, 2)
"""(tool, outcome, stage, code, identity) of a record."""
_TOOL_OF: Final[Callable[[AuditRecord], str | None]] = itemgetter(3)
_LATENCY_OF: Final[Callable[[AuditRecord], int]] = itemgetter(7)

# latency buckets, in µs: 10 per decade from 10 µs to 100 s (a quantile is shown as its
# bucket's upper bound: at most 26 % above the true value)
_BOUNDS_US: Final = tuple(round(10 ** (1 + i / 10)) for i in range(71))


@dataclass
class _Minute:
    calls: Counter[tuple[str, str, str | None, str | None]] = field(default_factory=Counter)
    """(wire, tool, stage, code) -> calls; stage None for a success."""
    identities: dict[str, Counter[str | None]] = field(default_factory=dict)
    """identity -> code (None for a success) -> calls."""
    latency: dict[str, list[int]] = field(default_factory=dict)
    """tool -> calls per latency bucket (the last: above every bound)."""


@dataclass(frozen=True, slots=True)
class Totals:
    """Calls and failures over a span."""

    calls: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class ToolLatency:
    """A tool's calls and latency quantiles (µs) over the hour and the last 5 minutes."""

    tool: str
    calls: int
    p50_us: int | None
    p99_us: int | None
    recent_calls: int
    recent_p50_us: int | None
    recent_p99_us: int | None


@dataclass(frozen=True, slots=True)
class IdentityRow:
    """One caller over the hour: calls, failures, its commonest failure code."""

    identity: str
    calls: int
    failed: int
    top_code: str | None
    recent_calls: int
    nearest_quota: str | None = None
    """How close the caller is to its nearest quota ("per-caller: 20 % left"), None when no
    quota of this process holds any of its calls now."""


@dataclass(frozen=True, slots=True)
class WireRow:
    """One wire: the hour's and the last 5 minutes' calls and failures."""

    wire: str
    hour: Totals
    recent: Totals


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What this process counted over the hour to `until`."""

    until: float
    started: float
    hour: Totals
    recent: Totals
    by_stage_code: list[tuple[str, str, int]]
    wires: list[WireRow]
    latency: list[ToolLatency]
    identities: list[IdentityRow]


class RecentCalls:
    """The last hour of this process's calls, per minute (see the module's docstring)."""

    def __init__(self, health: StoreHealth | None = None) -> None:
        self._pending: dict[str, list[AuditRecord]] = {wire: [] for wire in WIRES}
        self._minutes: dict[int, _Minute] = {}
        self._health = health
        self._lock = threading.Lock()  # the page reads on a worker thread, the loop drains
        self.started: Final = time.time()
        self.nearest_quotas: Callable[[], Mapping[str, str]] = dict
        """Each identity's nearest quota, as the page shows it (set by whoever holds the
        policy: `PolicyHolder.nearest_by_identity`); none without a policy."""

    def observer(self, wire: str) -> Callable[[AuditRecord], None]:
        """What a wire calls with each record (`strictcall.ops.drains.appender`)."""
        return appender(self._pending.setdefault(wire, []), self.drain)

    def drain(self) -> int:
        """Tally the records observed since the last drain; how many there were."""
        with self._lock:
            return self._drain()

    def _drain(self) -> int:
        drained = 0
        for wire, pending in self._pending.items():
            batch = taken(pending)
            drained += len(batch)
            if batch:
                self._tally_batch(wire, batch)
        self._forget(time.time() - WINDOW_S - MINUTE_S)
        return drained

    def _tally_batch(self, wire: str, batch: list[AuditRecord]) -> None:
        """Tally a wire's records, grouped by C-level counting per minute (a drain's records
        are nearly always of one minute: they are appended as they are made)."""
        first, last = int(batch[0].at) // MINUTE_S, int(batch[-1].at) // MINUTE_S
        if first == last:
            self._tally_minute(first * MINUTE_S, wire, batch)
            return
        by_minute: dict[int, list[AuditRecord]] = {}
        for r in batch:
            by_minute.setdefault(int(r.at) // MINUTE_S * MINUTE_S, []).append(r)
        for start, records in by_minute.items():
            self._tally_minute(start, wire, records)

    def _tally_minute(self, start: int, wire: str, records: list[AuditRecord]) -> None:
        minute = self._minutes.get(start)
        if minute is None:
            minute = self._minutes[start] = _Minute()
        refused = 0
        for (tool, outcome, stage, code, identity), n in Counter(map(_KEY_OF, records)).items():
            failed = outcome != "ok"
            shown_tool = NO_TOOL if tool is None else content_method(tool) or tool
            minute.calls[
                (wire, shown_tool, stage if failed else None, code if failed else None)
            ] += n
            who = "-" if identity is None else identity
            codes = minute.identities.get(who)
            if codes is None:
                if len(minute.identities) >= MAX_IDENTITIES:
                    who = OTHERS
                codes = minute.identities.setdefault(who, Counter())
            codes[code if failed else None] += n
            if code is not None and code in REFUSED_CODES:
                refused += n
        places = map(partial(bisect.bisect_left, _BOUNDS_US), map(_LATENCY_OF, records))
        for (tool, place), n in Counter(zip(map(_TOOL_OF, records), places, strict=True)).items():
            if tool is not None:
                tool = content_method(tool) or tool  # a read's URI: one key per method
                buckets = minute.latency.get(tool)
                if buckets is None:
                    buckets = minute.latency[tool] = [0] * (len(_BOUNDS_US) + 1)
                buckets[place] += n
        if refused and self._health is not None:  # an outage: rare enough to look at each
            at = [r.at for r in records if r.code is not None and r.code in REFUSED_CODES]
            self._health.refused(min(at), refused, max(at))

    def _forget(self, before: float) -> None:
        for start in [s for s in self._minutes if s < before]:
            del self._minutes[start]

    def snapshot(self, now: float | None = None) -> Snapshot:
        """The hour to `now` (default: now), freshly drained."""
        with self._lock:
            self._drain()
            until = time.time() if now is None else now
            return self._snapshot(until)

    def _snapshot(self, until: float) -> Snapshot:
        hour = [m for s, m in self._minutes.items() if until - WINDOW_S <= s + MINUTE_S]
        recent = [m for s, m in self._minutes.items() if until - RECENT_S <= s + MINUTE_S]
        return Snapshot(
            until=until,
            started=self.started,
            hour=_totals(hour),
            recent=_totals(recent),
            by_stage_code=_by_stage_code(hour),
            wires=_wires(hour, recent),
            latency=_latency(hour, recent),
            identities=_identities(hour, recent, self.nearest_quotas()),
        )

    def running(self) -> AbstractAsyncContextManager[None]:
        """Tally while the server runs (`strictcall.ops.drains.draining`): the store's outages
        are seen within a second of the first refused call."""
        return draining(self.drain)


def _totals(minutes: Iterable[_Minute]) -> Totals:
    calls = failed = 0
    for minute in minutes:
        for (_, _, stage, _), n in minute.calls.items():
            calls += n
            if stage is not None:
                failed += n
    return Totals(calls, failed)


def _by_stage_code(minutes: Iterable[_Minute]) -> list[tuple[str, str, int]]:
    counts: Counter[tuple[str, str]] = Counter()
    for minute in minutes:
        for (_, _, stage, code), n in minute.calls.items():
            if stage is not None:
                counts[(stage, "-" if code is None else code)] += n
    return sorted(((s, c, n) for (s, c), n in counts.items()), key=lambda x: (-x[2], x[0], x[1]))


def _wires(hour: list[_Minute], recent: list[_Minute]) -> list[WireRow]:
    def per_wire(minutes: list[_Minute]) -> dict[str, list[int]]:
        found: dict[str, list[int]] = {}
        for minute in minutes:
            for (wire, _, stage, _), n in minute.calls.items():
                row = found.setdefault(wire, [0, 0])
                row[0] += n
                row[1] += n if stage is not None else 0
        return found

    in_hour, in_recent = per_wire(hour), per_wire(recent)
    return [
        WireRow(wire, Totals(*in_hour.get(wire, [0, 0])), Totals(*in_recent.get(wire, [0, 0])))
        for wire in sorted(in_hour, key=lambda w: (-in_hour[w][0], w))
    ]


def _merged(minutes: Iterable[_Minute]) -> dict[str, list[int]]:
    merged: dict[str, list[int]] = {}
    for minute in minutes:
        for tool, buckets in minute.latency.items():
            into = merged.setdefault(tool, [0] * len(buckets))
            for i, n in enumerate(buckets):
                into[i] += n
    return merged


def quantile_us(buckets: list[int], q: float) -> int | None:
    """The `q` quantile of a latency histogram, as its bucket's upper bound (µs); None for no
    calls."""
    total = sum(buckets)
    if not total:
        return None
    rank = q * total
    running = 0
    for i, n in enumerate(buckets):
        running += n
        if running >= rank:
            return _BOUNDS_US[i] if i < len(_BOUNDS_US) else _BOUNDS_US[-1]
    return _BOUNDS_US[-1]


def _latency(hour: list[_Minute], recent: list[_Minute]) -> list[ToolLatency]:
    in_hour, in_recent = _merged(hour), _merged(recent)
    rows = []
    for tool, buckets in in_hour.items():
        near = in_recent.get(tool, [0])
        rows.append(
            ToolLatency(
                tool,
                sum(buckets),
                quantile_us(buckets, 0.5),
                quantile_us(buckets, 0.99),
                sum(near),
                quantile_us(near, 0.5),
                quantile_us(near, 0.99),
            )
        )
    return sorted(rows, key=lambda r: (-r.calls, r.tool))


def _identities(
    hour: list[_Minute], recent: list[_Minute], quotas: Mapping[str, str]
) -> list[IdentityRow]:
    def per_identity(minutes: list[_Minute]) -> dict[str, Counter[str | None]]:
        found: dict[str, Counter[str | None]] = {}
        for minute in minutes:
            for identity, codes in minute.identities.items():
                found.setdefault(identity, Counter()).update(codes)
        return found

    in_hour, in_recent = per_identity(hour), per_identity(recent)
    rows = []
    for identity, codes in in_hour.items():
        failures = Counter({code: n for code, n in codes.items() if code is not None})
        top = min(failures.items(), key=lambda item: (-item[1], str(item[0])), default=None)
        rows.append(
            IdentityRow(
                identity,
                sum(codes.values()),
                sum(failures.values()),
                None if top is None else top[0],
                sum(in_recent.get(identity, Counter()).values()),
                quotas.get(identity),  # absent: no bucket of this caller holds a call now
            )
        )
    return sorted(rows, key=lambda r: (-r.calls, r.identity))
