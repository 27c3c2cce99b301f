"""Prometheus metrics of the calls, from their audit records (`prometheus_client`, the extra
`strictcall[metrics]`).

    strictcall_calls_total{tool, outcome, stage, code, transport}   every call, by how it ended
    strictcall_call_duration_seconds{tool, outcome, transport}      latency of calls naming a tool
    strictcall_store_faults_total{where}       call, auth: calls refused; audit: audit outages
    strictcall_store_available                 1 while the store answers, 0 in an outage
    strictcall_store_outages_total             outages seen (one each, however many retries)
    strictcall_http_responses_total{path, code} HTTP responses by path group and status
    strictcall_audit_backlog_records           audit records waiting to be written
    strictcall_audit_records_lost_total        audit records dropped (the store down too long)
    strictcall_requests_in_flight              HTTP requests being answered
    strictcall_policy_refusals_total{rule, code} calls the policy refused, by its rule
    strictcall_tool_changes_total              pinned tools seen changed upstream (a federation)
    strictcall_redactions_total{upstream,kind} secrets redacted in proxied answers
    strictcall_upstream_budget_refusals_total{upstream,budget}  listings refused past a budget
    strictcall_upstream_instances{upstream}    per-identity instances running now
    strictcall_upstream_instance_starts_total{upstream}  per-identity instances started
    strictcall_upstream_instance_idle_stops_total{upstream}  stopped for being idle
    strictcall_build_info{version, python}     1
    process_*, python_*                        prometheus_client's process and runtime collectors

No label holds an identity, an argument or a note: `tool` is a registered tool's name,
"unknown" for a call naming none that reached routing (an unregistered name: the model's text),
or "unrouted" for a call refused before routing (auth, protocol, parse: it named no tool yet);
a federation's resources/read and prompts/get count as calls whose `tool` is their method
("resources/read", "prompts/get": never the URI or name, which may be the caller's text);
`stage`/`code` come from the catalogue ("none" for a success); `transport` is rpc, mcp or stdio.
At most `MAX_TOOL_LABELS` tools of one upstream (or of the server's own) get a `tool` label of
their own, the first to be called; the calls of the rest are counted as `OTHER_TOOLS`.

A call costs one list append (its wire's list): the records are counted in plain dicts when
/metrics is read and while the server runs (`strictcall.ops.drains`) (prometheus_client's
own metric objects cost microseconds per update, which at 15,000 calls/s would be several per
cent of the server). With `PROMETHEUS_MULTIPROC_DIR` set before the server starts (several
worker processes), the counts go into prometheus_client's metric objects instead, which write
them to that directory, and /metrics sums every worker's (its multiprocess mode; the gauges are
then sampled at each drain, summed over the live workers; the store's outages and the shared
quota state's faults go through at each drain as what is new since the last; the process
collector is the answering worker's). The upstreams' families (tools changed, redactions,
budget refusals, per-identity instances) are the answering process's own in either mode: a
proxy or federation serves from one process, and its /metrics keeps them with the directory
set.
"""

from __future__ import annotations

import bisect
import os
import platform
from collections import Counter as Counter_
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from functools import partial
from operator import itemgetter
from typing import Final

from strictcall.errors import MissingExtra

try:
    from prometheus_client import (
        GC_COLLECTOR,
        PLATFORM_COLLECTOR,
        PROCESS_COLLECTOR,
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

from strictcall.core.policy import DEFAULT_DENY
from strictcall.core.record import POLICY_CODES, AuditRecord, content_method
from strictcall.ops.drains import (
    MAX_PENDING,
    appender,
    draining,
    taken,
)

UNKNOWN_TOOL: Final = "unknown"
"""The tool label of a call that reached routing naming no registered tool (its name is the
model's text)."""
MAX_TOOL_LABELS: Final = 1_000
"""The most tools of one upstream (or of the server's own) labelled by name in the families
labelled by tool: an upstream that relists new names cannot grow /metrics without end."""
OTHER_TOOLS: Final = "(other)"
"""The tool label of the calls of an upstream's tools past `MAX_TOOL_LABELS` (no host takes it
for a tool's name)."""
UNROUTED: Final = "unrouted"
"""The tool label of a call refused before routing (auth, protocol, parse): it named none."""
_BEFORE_ROUTING: Final = frozenset({"auth", "protocol", "parse"})
WIRES: Final = ("rpc", "mcp", "stdio")
PATH_GROUPS: Final = {"/rpc": "rpc", "/healthz": "healthz", "/": "ops", "/ops/stats.json": "ops"}
"""The `path` label of an HTTP response (/mcp and below: mcp; /metrics: metrics; else other)."""
NONE: Final = "none"
"""The stage and code labels of a success."""
CONTENT_TYPE: Final = CONTENT_TYPE_LATEST

# From a cached read (~5 µs) to a slow write or a tool's timeout.
LATENCY_BUCKETS_S: Final = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

_STORE_FAULT_CODES: Final = {"store_unavailable": "call", "token_store_unavailable": "auth"}
"""The codes counted as store faults (an identity provider's `auth_unavailable` is not one: it
is counted in `strictcall_calls_total` by its code, and alerted on apart)."""
_LABELS: Final = ["tool", "outcome", "stage", "code", "transport"]
_LATENCY_LABELS: Final = ["tool", "outcome", "transport"]
_WHERE: Final = ("call", "auth", "audit", "quota")
_POLICY_CODES: Final = POLICY_CODES | {"unknown_tool"}

_CALLS: Final = ("strictcall_calls", "Calls, by registered tool, outcome, stage and code.")
_LATENCY: Final = (
    "strictcall_call_duration_seconds",
    "Time from a call's text to its answer, for calls naming a registered tool.",
)
_FAULTS: Final = (
    "strictcall_store_faults",
    "Store faults: a call answered store_unavailable (call), a token the store could not check"
    " (auth: token_store_unavailable), an"
    " outage of the audit's writes (audit: once, however many retries), a call whose quota the"
    " shared state could not count (quota).",
)
_REFUSALS: Final = (
    "strictcall_policy_refusals",
    "Calls the policy refused, by the rule's name (default-deny: no rule grants the tool) and"
    " code.",
)
_IN_FLIGHT: Final = ("strictcall_requests_in_flight", "HTTP requests being answered.")
_TOOL_CHANGES: Final = (
    "strictcall_tool_changes",
    "Pinned tools seen changed upstream (each new definition once), held until approved.",
)
_HTTP: Final = ("strictcall_http_responses", "HTTP responses, by path group and status code.")
_BACKLOG: Final = ("strictcall_audit_backlog_records", "Audit records waiting to be written.")
_LOST: Final = (
    "strictcall_audit_records_lost",
    "Audit records dropped: the store could not take them for too long.",
)
_AVAILABLE: Final = ("strictcall_store_available", "1 while the store answers, 0 in an outage.")
_OUTAGES: Final = ("strictcall_store_outages", "Store outages seen by this server.")
_REDACTIONS: Final = (
    "strictcall_redactions",
    "Secrets replaced by a marker in proxied answers, by upstream and kind (never what).",
)
_INSTANCES: Final = (
    "strictcall_upstream_instances",
    "Per-identity instances of an upstream running now.",
)
_INSTANCE_STARTS: Final = (
    "strictcall_upstream_instance_starts",
    "Per-identity instances of an upstream started.",
)
_INSTANCE_STOPS: Final = (
    "strictcall_upstream_instance_idle_stops",
    "Per-identity instances of an upstream stopped for being idle.",
)
_BUDGET_REFUSALS: Final = (
    "strictcall_upstream_budget_refusals",
    "An upstream's listings refused past one of its budgets (each relisting again), and its"
    " tools left out for their names (budget: names).",
)
_BUILD: Final = ("strictcall_build_info", "The running strictcall's version, and Python's.")

_Key = tuple[str | None, str, str | None, str | None]
"""(tool, outcome, stage, code) of a record."""
_KEY_OF: Final[Callable[[AuditRecord], _Key]] = itemgetter(3, 4, 6, 5)
_TOOL_OF: Final[Callable[[AuditRecord], str | None]] = itemgetter(3)
_OUTCOME_OF: Final[Callable[[AuditRecord], str]] = itemgetter(4)
_TOOL_OUTCOME_OF: Final[Callable[[AuditRecord], tuple[str | None, str]]] = itemgetter(3, 4)
_LATENCY_OF: Final[Callable[[AuditRecord], int]] = itemgetter(7)
_REFUSED_OF: Final[Callable[[AuditRecord], tuple[str | None, str | None]]] = itemgetter(8, 5)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("strictcall")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


def path_group(path: str) -> str:
    """The `path` label of a request's path: a fixed set, never the caller's text."""
    group = PATH_GROUPS.get(path)
    if group is not None:
        return group
    if path == "/metrics":
        return "metrics"
    return "mcp" if path == "/mcp" or path.startswith("/mcp/") else "other"


LATENCY_BUCKETS_US: Final = tuple(round(b * 1_000_000) for b in LATENCY_BUCKETS_S)


def multiprocess_dir() -> str | None:
    """The directory of prometheus_client's multiprocess mode, when it is on."""
    # prometheus_client reads both spellings (the lower-case one is deprecated)
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.environ.get(
        "prometheus_multiproc_dir"  # noqa: SIM112
    )


_LabelValues = tuple[str, str, str, str, str]
"""(tool, outcome, stage, code, transport) as labelled."""
_LatencyKey = tuple[str, str, str]
"""(tool, outcome, transport) of a latency histogram."""


class Metrics(Collector):
    """The server's metrics: its calls counted from their audit records."""

    def __init__(
        self,
        tools: Iterable[str] | Container[str],
        *,
        source_of: Callable[[str], str | None] = lambda name: None,
    ) -> None:
        """`tools`: the registered tools' names; `source_of`: the upstream a tool forwards to
        (None: one of the server's own), whose tools share `MAX_TOOL_LABELS`."""
        # a container, not copied, for tools that change while serving (a proxy's, listed
        # after the app is built): its names count as they come
        self._tools: Final = tools if isinstance(tools, Container) else frozenset(tools)
        self._source_of = source_of
        self._labelled: dict[str | None, set[str]] = {}
        """Each upstream's tools labelled by name (at most `MAX_TOOL_LABELS` each)."""
        self._pending: dict[str, list[AuditRecord]] = {wire: [] for wire in WIRES}
        self._calls: dict[tuple[_Key, str], int] = {}
        self._labels: dict[tuple[_Key, str], _LabelValues] = {}
        self._buckets: dict[_LatencyKey, list[int]] = {}  # per bucket, the last is +Inf
        self._sums: dict[_LatencyKey, int] = {}  # microseconds
        self._faults: dict[str, int] = dict.fromkeys(_WHERE, 0)
        self._http: dict[tuple[str, int], int] = {}
        self._audit_lost = 0
        self.requests_in_flight: Callable[[], int] = lambda: 0
        """How many HTTP requests are being answered now (set by whoever counts them)."""
        self.tool_changes: Callable[[], int] | None = None
        """How many pinned tools were seen changed (a federation's; None: no pinning)."""
        self.redactions: Callable[[], Mapping[tuple[str, str], int]] | None = None
        """How many secrets were redacted, by (upstream, kind) (a proxy's; None: none)."""
        self.budget_refusals: Callable[[], Mapping[tuple[str, str], int]] | None = None
        """How many listings were refused past a budget, by (upstream, budget) (a proxy's or
        a federation's; None: no upstream)."""
        self.instances: Callable[[], Mapping[str, tuple[int, int, int]]] | None = None
        """Each per-identity upstream's instances: (running now, started, stopped for being
        idle) (None: no upstream has them)."""
        self.audit_backlog: Callable[[], int] = lambda: 0
        """How many audit records wait to be written (set by whoever keeps them)."""
        self.audit_lost: Callable[[], int] = lambda: 0
        """How many audit records were dropped since the server started."""
        self.store_available: Callable[[], bool] = lambda: True
        """Whether the store answers now (`strictcall.ops.health`)."""
        self.store_outages: Callable[[], int] = lambda: 0
        """How many outages of the store were seen."""
        self.quota_faults: Callable[[], int] = lambda: 0
        """Calls whose shared quota state could not be read (set by whoever holds it)."""
        self._refusals: dict[tuple[str, str], int] = {}
        self.registry: Final = CollectorRegistry()
        self._shared = multiprocess_dir() is not None
        if self._shared:
            # the objects write every update to the directory, for /metrics in any worker
            self._calls_shared = Counter(*_CALLS, _LABELS)
            self._latency_shared = Histogram(*_LATENCY, _LATENCY_LABELS, buckets=LATENCY_BUCKETS_S)
            self._faults_shared = Counter(*_FAULTS, ["where"])
            self._refusals_shared = Counter(*_REFUSALS, ["rule", "code"])
            self._http_shared = Counter(*_HTTP, ["path", "code"])
            self._in_flight_shared = Gauge(*_IN_FLIGHT, multiprocess_mode="livesum")
            self._backlog_shared = Gauge(*_BACKLOG, multiprocess_mode="livesum")
            self._lost_shared = Counter(*_LOST)
            self._outages_shared = Counter(*_OUTAGES)
            self._outages_told = 0
            self._quota_faults_told = 0
            self._available_shared = Gauge(*_AVAILABLE, multiprocess_mode="livemin")
            for where in _WHERE:
                self._faults_shared.labels(where)
        else:
            self.registry.register(self)
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                self.registry.register(collector)

    def observer(self, wire: str) -> Callable[[AuditRecord], None]:
        """What a wire calls with each record (`strictcall.ops.drains.appender`)."""
        return appender(self._pending.setdefault(wire, []), self.drain)

    def observe(self, entry: AuditRecord, wire: str = "rpc") -> None:
        """Count one call from its audit record (later: see the module's docstring)."""
        pending = self._pending.setdefault(wire, [])
        pending.append(entry)
        if len(pending) >= MAX_PENDING:
            self.drain()

    def audit_fault(self) -> None:
        """Count an outage of the audit's writes (told once per outage, not per retry)."""
        self._fault("audit")

    def http_response(self, path: str, status: int) -> None:
        """Count one HTTP response to a request for `path`."""
        key = (path_group(path), status)
        self._http[key] = self._http.get(key, 0) + 1
        if self._shared:
            self._http_shared.labels(key[0], str(status)).inc()

    def drain(self) -> int:
        """Count the records observed since the last drain (grouped by C-level counting: a
        drain costs a fraction of a microsecond per record); how many there were."""
        drained = 0
        for wire, pending in self._pending.items():
            batch = taken(pending)
            if batch:
                self._count(wire, batch)
                drained += len(batch)
        if self._shared:
            self._in_flight_shared.set(self.requests_in_flight())
            self._backlog_shared.set(self.audit_backlog())
            self._available_shared.set(1 if self.store_available() else 0)
            lost = self.audit_lost()
            if lost > self._audit_lost:
                self._lost_shared.inc(lost - self._audit_lost)
                self._audit_lost = lost
            # counted by their owners, not from the records: what is new since the last drain
            outages = self.store_outages()
            if outages > self._outages_told:
                self._outages_shared.inc(outages - self._outages_told)
                self._outages_told = outages
            quota_faults = self.quota_faults()
            if quota_faults > self._quota_faults_told:
                self._faults_shared.labels("quota").inc(quota_faults - self._quota_faults_told)
                self._quota_faults_told = quota_faults
        return drained

    def _count(self, wire: str, batch: list[AuditRecord]) -> None:
        refused = False
        for key, n in Counter_(map(_KEY_OF, batch)).items():
            wired = (key, wire)
            self._calls[wired] = self._calls.get(wired, 0) + n
            labels = self._labels.get(wired)
            if labels is None:
                labels = self._labels[wired] = self._label_values(key, wire)
            if self._shared:
                self._calls_shared.labels(*labels).inc(n)
            code = key[3]
            if code is not None and code in _STORE_FAULT_CODES:
                self._fault(_STORE_FAULT_CODES[code], n)
            elif code is not None and code in _POLICY_CODES:
                refused = True
        if refused:
            self._count_refusals(batch)
        tools = self._tools
        places = map(partial(bisect.bisect_left, LATENCY_BUCKETS_US), map(_LATENCY_OF, batch))
        keys = zip(map(_TOOL_OF, batch), map(_OUTCOME_OF, batch), places, strict=True)
        for (tool, outcome, place), n in Counter_(keys).items():
            if tool is not None and tool in tools:
                histogram = (self._tool_label(tool), outcome, wire)
                buckets = self._buckets.get(histogram)
                if buckets is None:
                    buckets = self._buckets[histogram] = [0] * (len(LATENCY_BUCKETS_US) + 1)
                    self._sums[histogram] = 0
                buckets[place] += n
        # the latencies' sums per (tool, outcome): keys made in C, one dict lookup a record
        local: dict[tuple[str | None, str], int] = {}
        latencies = zip(map(_TOOL_OUTCOME_OF, batch), map(_LATENCY_OF, batch), strict=True)
        for pair, latency_us in latencies:
            if pair in local:
                local[pair] += latency_us
            elif pair[0] is not None and pair[0] in tools:
                local[pair] = latency_us
        for (tool, outcome), total in local.items():
            assert tool is not None
            self._sums[(self._tool_label(tool), outcome, wire)] += total
        if self._shared:
            for entry in batch:
                if entry.tool is not None and entry.tool in tools:
                    label = self._tool_label(entry.tool)
                    self._latency_shared.labels(label, entry.outcome, wire).observe(
                        entry.latency_us / 1e6
                    )

    def _count_refusals(self, batch: list[AuditRecord]) -> None:
        """Count the batch's refusals by the policy, by rule and code."""
        for (rule, code), n in Counter_(map(_REFUSED_OF, batch)).items():
            if rule is None or code is None or code not in _POLICY_CODES:
                continue
            if code == "unknown_tool" and rule != DEFAULT_DENY:
                continue
            self._refusals[(rule, code)] = self._refusals.get((rule, code), 0) + n
            if self._shared:
                self._refusals_shared.labels(rule, code).inc(n)

    def _fault(self, where: str, n: int = 1) -> None:
        self._faults[where] += n
        if self._shared:
            self._faults_shared.labels(where).inc(n)

    def _tool_label(self, tool: str) -> str:
        """A registered tool's label: its name, or `OTHER_TOOLS` past its upstream's
        `MAX_TOOL_LABELS`."""
        labelled = self._labelled.setdefault(self._source_of(tool), set())
        if tool in labelled:
            return tool
        if len(labelled) < MAX_TOOL_LABELS:
            labelled.add(tool)
            return tool
        return OTHER_TOOLS

    def _label_values(self, key: _Key, wire: str) -> _LabelValues:
        tool, outcome, stage, code = key
        if tool is not None and tool in self._tools:
            label = self._tool_label(tool)
        else:
            method = content_method(tool)
            if method is not None:
                label = method
            else:
                label = UNROUTED if stage in _BEFORE_ROUTING else UNKNOWN_TOOL
        return (
            label,
            outcome,
            NONE if stage is None else stage,
            NONE if code is None else code,
            wire,
        )

    def collect(self) -> Iterator[Metric]:
        """The metrics as prometheus_client's families (the single-process registry)."""
        calls = CounterMetricFamily(*_CALLS, labels=_LABELS)
        merged: dict[_LabelValues, int] = {}
        for key, n in self._calls.items():
            labels = self._labels[key]
            merged[labels] = merged.get(labels, 0) + n
        for labels, n in sorted(merged.items()):
            calls.add_metric(list(labels), n)
        yield calls
        latency = HistogramMetricFamily(*_LATENCY, labels=_LATENCY_LABELS)
        bounds = [*(repr(float(b)) for b in LATENCY_BUCKETS_S), "+Inf"]
        for histogram, buckets in sorted(self._buckets.items()):
            cumulative, running = [], 0
            for bound, n in zip(bounds, buckets, strict=True):
                running += n
                cumulative.append((bound, float(running)))
            latency.add_metric(list(histogram), cumulative, self._sums[histogram] / 1_000_000)
        yield latency
        faults = CounterMetricFamily(*_FAULTS, labels=["where"])
        self._faults["quota"] = self.quota_faults()
        for where in _WHERE:
            faults.add_metric([where], self._faults[where])
        yield faults
        refusals = CounterMetricFamily(*_REFUSALS, labels=["rule", "code"])
        for (rule, code), n in sorted(self._refusals.items()):
            refusals.add_metric([rule, code], n)
        yield refusals
        yield GaugeMetricFamily(*_AVAILABLE, value=1 if self.store_available() else 0)
        yield CounterMetricFamily(*_OUTAGES, value=self.store_outages())
        http = CounterMetricFamily(*_HTTP, labels=["path", "code"])
        for (path, status), n in sorted(self._http.items()):
            http.add_metric([path, str(status)], n)
        yield http
        yield GaugeMetricFamily(*_BACKLOG, value=self.audit_backlog())
        yield CounterMetricFamily(*_LOST, value=self.audit_lost())
        yield GaugeMetricFamily(*_IN_FLIGHT, value=self.requests_in_flight())
        yield from self.upstream_families()
        yield _build_info()

    def upstream_families(self) -> Iterator[Metric]:
        """The families of a proxy's or federation's upstreams (tools changed, redactions,
        budget refusals, instances): this process's, as they are counted by its upstreams."""
        if self.tool_changes is not None:
            yield CounterMetricFamily(*_TOOL_CHANGES, value=self.tool_changes())
        if self.redactions is not None:
            redacted = CounterMetricFamily(*_REDACTIONS, labels=["upstream", "kind"])
            for (source, kind), n in sorted(self.redactions().items()):
                redacted.add_metric([source, kind], n)
            yield redacted
        if self.budget_refusals is not None:
            refused = CounterMetricFamily(*_BUDGET_REFUSALS, labels=["upstream", "budget"])
            for (source, budget), n in sorted(self.budget_refusals().items()):
                refused.add_metric([source, budget], n)
            yield refused
        if self.instances is not None:
            yield from _instance_families(self.instances())

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format: this process's, or in multiprocess mode
        every worker's, summed."""
        self.drain()
        if not self._shared:
            return bytes(generate_latest(self.registry))
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(_BuildInfo())
        registry.register(_Families(self.upstream_families))
        registry.register(PROCESS_COLLECTOR)
        return bytes(generate_latest(registry))

    def running(self) -> AbstractAsyncContextManager[None]:
        """Drain every `DRAIN_EVERY_S` while the server runs, every `BUSY_DRAIN_EVERY_S`
        while it is busy."""
        return draining(self.drain)


def _instance_families(counts: Mapping[str, tuple[int, int, int]]) -> Iterator[Metric]:
    running = GaugeMetricFamily(*_INSTANCES, labels=["upstream"])
    starts = CounterMetricFamily(*_INSTANCE_STARTS, labels=["upstream"])
    stops = CounterMetricFamily(*_INSTANCE_STOPS, labels=["upstream"])
    for upstream, (now, started, idle_stops) in sorted(counts.items()):
        running.add_metric([upstream], now)
        starts.add_metric([upstream], started)
        stops.add_metric([upstream], idle_stops)
    yield from (running, starts, stops)


def _build_info() -> GaugeMetricFamily:
    info = GaugeMetricFamily(*_BUILD, labels=["version", "python"])
    info.add_metric([_version(), platform.python_version()], 1)
    return info


class _Families(Collector):
    """Families a callable yields (multiprocess mode's registry: a process's own upstreams)."""

    def __init__(self, families: Callable[[], Iterator[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families()


class _BuildInfo(Collector):
    """`strictcall_build_info` alone (multiprocess mode's registry)."""

    def collect(self) -> Iterator[Metric]:
        yield _build_info()
