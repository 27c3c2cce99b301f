"""Prometheus metrics of the calls, from their audit records (`prometheus_client`, the extra
`strictcall[metrics]`).

    strictcall_calls_total{tool, outcome, stage, code}     every call, by how it ended
    strictcall_call_duration_seconds{tool}                 latency of calls naming a tool
    strictcall_store_faults_total{where}                   call, auth or audit: the store failed
    strictcall_requests_in_flight                          HTTP requests being answered
    strictcall_tool_changes_total                          pinned tools seen changed upstream

No label holds an identity, an argument or a note: `tool` is a registered tool's name or
"unknown", `stage`/`code` come from the catalogue ("none" for a success).

A call costs one list append: the records are counted in plain dicts when /metrics is read and
every `DRAIN_EVERY_S`, `BUSY_DRAIN_EVERY_S` under load (prometheus_client's own metric objects
cost microseconds per update, which at 15,000 calls/s would be several per cent of the
server). With
`PROMETHEUS_MULTIPROC_DIR` set before the server starts (several worker processes), the counts
go into prometheus_client's metric objects instead, which write them to that directory, and
/metrics sums every worker's (its multiprocess mode; requests in flight are then sampled at
each drain, summed over the live workers).
"""

from __future__ import annotations

import asyncio
import bisect
import os
from collections import Counter as Counter_
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from operator import itemgetter
from typing import Final

from strictcall.errors import MissingExtra

try:
    from prometheus_client import (
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        generate_latest,
        multiprocess,
    )
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.exposition import CONTENT_TYPE_LATEST
    from prometheus_client.registry import Collector
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    raise MissingExtra("metrics", "prometheus-client") from None

from strictcall.core.record import AuditRecord

UNKNOWN_TOOL: Final = "unknown"
"""The tool label of a call that names no registered tool (its name is the model's text)."""
NONE: Final = "none"
"""The stage and code labels of a success."""
CONTENT_TYPE: Final = CONTENT_TYPE_LATEST

# From a cached read (~5 µs) to a slow write or a tool's timeout.
LATENCY_BUCKETS_S: Final = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

_STORE_FAULT_CODES: Final = {"store_unavailable": "call", "auth_unavailable": "auth"}
_WHERE: Final = ("call", "auth", "audit")

DRAIN_EVERY_S: Final = 1.0
BUSY_DRAIN_EVERY_S: Final = 0.05
BUSY_DRAIN: Final = 500
"""After a drain of this many records or more, the next comes after `BUSY_DRAIN_EVERY_S`: a
second's records at 20,000 calls/s took the loop ~15 ms in one go (every request waiting
then), a twentieth of them under a millisecond, for the same work in all."""
MAX_PENDING: Final = 50_000
"""Records kept uncounted at most (a server without its lifespan, never scraped)."""


def drain_interval_after(drained: int) -> float:
    """How long the next drain waits after one of `drained` records: less under load."""
    return BUSY_DRAIN_EVERY_S if drained >= BUSY_DRAIN else DRAIN_EVERY_S


_CALLS: Final = ("strictcall_calls", "Calls, by registered tool, outcome, stage and code.")
_LATENCY: Final = (
    "strictcall_call_duration_seconds",
    "Time from a call's text to its answer, for calls naming a registered tool.",
)
_FAULTS: Final = (
    "strictcall_store_faults",
    "Store faults: a call answered store_unavailable (call), a token not checked (auth), an"
    " audit batch not written (audit).",
)
_IN_FLIGHT: Final = ("strictcall_requests_in_flight", "HTTP requests being answered.")
_TOOL_CHANGES: Final = (
    "strictcall_tool_changes",
    "Pinned tools seen changed upstream (each new definition once), held until approved.",
)

_Key = tuple[str | None, str, str | None, str | None]
"""(tool, outcome, stage, code) of a record."""
_KEY_OF: Final[Callable[[AuditRecord], _Key]] = itemgetter(3, 4, 6, 5)
_TOOL_OF: Final[Callable[[AuditRecord], str | None]] = itemgetter(3)
_LATENCY_OF: Final[Callable[[AuditRecord], int]] = itemgetter(7)
LATENCY_BUCKETS_US: Final = tuple(round(b * 1_000_000) for b in LATENCY_BUCKETS_S)


def multiprocess_dir() -> str | None:
    """The directory of prometheus_client's multiprocess mode, when it is on."""
    # prometheus_client reads both spellings (the lower-case one is deprecated)
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get(
        "prometheus_multiproc_dir"  # noqa: SIM112
    )


class Metrics(Collector):
    """The server's metrics: its calls counted from their audit records."""

    def __init__(self, tools: Iterable[str]) -> None:
        self._tools: Final = frozenset(tools)
        self._pending: list[AuditRecord] = []
        self._calls: dict[_Key, int] = {}
        self._labels: dict[_Key, tuple[str, str, str, str]] = {}
        self._buckets: dict[str, list[int]] = {}  # per tool: per bucket, the last is +Inf
        self._sums: dict[str, int] = {}  # microseconds
        self._faults: dict[str, int] = dict.fromkeys(_WHERE, 0)
        self.requests_in_flight: Callable[[], int] = lambda: 0
        """How many HTTP requests are being answered now (set by whoever counts them)."""
        self.tool_changes: Callable[[], int] | None = None
        """How many pinned tools were seen changed (a federation's; None: no pinning)."""
        self.registry: Final = CollectorRegistry()
        self._shared = multiprocess_dir() is not None
        if self._shared:
            # the objects write every update to the directory, for /metrics in any worker
            self._calls_shared = Counter(*_CALLS, ["tool", "outcome", "stage", "code"])
            self._latency_shared = Histogram(*_LATENCY, ["tool"], buckets=LATENCY_BUCKETS_S)
            self._faults_shared = Counter(*_FAULTS, ["where"])
            self._in_flight_shared = Gauge(*_IN_FLIGHT, multiprocess_mode="livesum")
            for where in _WHERE:
                self._faults_shared.labels(where)
        else:
            self.registry.register(self)

    def observe(self, entry: AuditRecord) -> None:
        """Count one call from its audit record (later: see the module's docstring)."""
        self._pending.append(entry)
        if len(self._pending) >= MAX_PENDING:
            self.drain()

    def audit_fault(self) -> None:
        """Count an audit batch the store could not take."""
        self._fault("audit")

    def drain(self) -> int:
        """Count the records observed since the last drain (grouped by C-level counting: a
        drain costs a fraction of a microsecond per record); how many there were."""
        batch, self._pending = self._pending, []
        if not batch:
            if self._shared:
                self._in_flight_shared.set(self.requests_in_flight())
            return 0
        for key, n in Counter_(map(_KEY_OF, batch)).items():
            self._calls[key] = self._calls.get(key, 0) + n
            labels = self._labels.get(key)
            if labels is None:
                labels = self._labels[key] = self._label_values(key)
            if self._shared:
                self._calls_shared.labels(*labels).inc(n)
            code = key[3]
            if code is not None and code in _STORE_FAULT_CODES:
                self._fault(_STORE_FAULT_CODES[code], n)
        tools = self._tools
        places = map(partial(bisect.bisect_left, LATENCY_BUCKETS_US), map(_LATENCY_OF, batch))
        for (tool, place), n in Counter_(zip(map(_TOOL_OF, batch), places, strict=True)).items():
            if tool is not None and tool in tools:
                buckets = self._buckets.get(tool)
                if buckets is None:
                    buckets = self._buckets[tool] = [0] * (len(LATENCY_BUCKETS_US) + 1)
                    self._sums[tool] = 0
                buckets[place] += n
        sums = self._sums
        for tool, latency_us in zip(map(_TOOL_OF, batch), map(_LATENCY_OF, batch), strict=True):
            if tool in sums:
                sums[tool] += latency_us
        if self._shared:
            for entry in batch:
                if entry.tool is not None and entry.tool in tools:
                    self._latency_shared.labels(entry.tool).observe(entry.latency_us / 1e6)
            self._in_flight_shared.set(self.requests_in_flight())
        return len(batch)

    def _fault(self, where: str, n: int = 1) -> None:
        self._faults[where] += n
        if self._shared:
            self._faults_shared.labels(where).inc(n)

    def _label_values(self, key: _Key) -> tuple[str, str, str, str]:
        tool, outcome, stage, code = key
        return (
            tool if tool is not None and tool in self._tools else UNKNOWN_TOOL,
            outcome,
            NONE if stage is None else stage,
            NONE if code is None else code,
        )

    def collect(self) -> Iterator[Metric]:
        """The metrics as prometheus_client's families (the single-process registry)."""
        calls = CounterMetricFamily(*_CALLS, labels=["tool", "outcome", "stage", "code"])
        merged: dict[tuple[str, str, str, str], int] = {}
        for key, n in self._calls.items():
            labels = self._labels[key]
            merged[labels] = merged.get(labels, 0) + n
        for labels, n in sorted(merged.items()):
            calls.add_metric(list(labels), n)
        yield calls
        latency = HistogramMetricFamily(*_LATENCY, labels=["tool"])
        bounds = [*(repr(float(b)) for b in LATENCY_BUCKETS_S), "+Inf"]
        for tool, buckets in sorted(self._buckets.items()):
            cumulative, running = [], 0
            for bound, n in zip(bounds, buckets, strict=True):
                running += n
                cumulative.append((bound, float(running)))
            latency.add_metric([tool], cumulative, self._sums[tool] / 1_000_000)
        yield latency
        faults = CounterMetricFamily(*_FAULTS, labels=["where"])
        for where in _WHERE:
            faults.add_metric([where], self._faults[where])
        yield faults
        yield GaugeMetricFamily(*_IN_FLIGHT, value=self.requests_in_flight())
        if self.tool_changes is not None:
            yield CounterMetricFamily(*_TOOL_CHANGES, value=self.tool_changes())

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format: this process's, or in multiprocess mode
        every worker's, summed."""
        self.drain()
        if not self._shared:
            return bytes(generate_latest(self.registry))
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return bytes(generate_latest(registry))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Drain every `DRAIN_EVERY_S` while the server runs, every `BUSY_DRAIN_EVERY_S`
        while it is busy."""

        async def drain_every_interval() -> None:
            interval = DRAIN_EVERY_S
            while True:
                await asyncio.sleep(interval)
                interval = drain_interval_after(self.drain())

        task = asyncio.get_running_loop().create_task(drain_every_interval())
        try:
            yield
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
            self.drain()
