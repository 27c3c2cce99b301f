"""OpenTelemetry spans of the calls, from their audit records, when `opentelemetry-api` is
installed (the extra `strictcall[otel]`) and an SDK has set a tracer provider.

One span per call, named "call <tool>" (or "call" when it names no registered tool), with the
attributes strictcall.tool, .outcome, .stage, .code, .reason, .pointer (the audit's safe
pointer), .transport (rpc, mcp, http, stdio) and the stages it went through as events, in
order, each with its outcome (passed, or failed for the one that decided) at the time that
stage ended (`stage_times`, from the gateway's marks: `strictcall.core.marks`). Never an
identity, a call id, an argument or a note. Without an SDK (the API's default proxy provider)
no span is made at all.

Its parent is the caller's W3C `traceparent` header on /rpc and /mcp (`request_context`), and
its children are the store's work for it (`TracedStore`): one span per store operation,
"store <operation>", with its own start and end. On stdio, which has no request per call,
`traced_stdio` keeps each call's marks and store work in a context of its own. The MCP SDK's
own server spans (named by the model's tool name, carrying its request id) are not made:
strictcall's span replaces them (`strictcall.transports.mcp.adapter`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, Final

from strictcall.core.gateway import Gateway
from strictcall.core.marks import STAGE_MARKS, StageMarks
from strictcall.core.record import AuditRecord

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
except ImportError:  # the extra is optional: without it there are no spans, and no cost
    trace = None  # type: ignore[assignment]

StoreWork = list[tuple[str, int, int]]
"""The store's operations during a call: (operation, start, end), nanoseconds since the epoch."""

STORE_WORK: Final[ContextVar[StoreWork | None]] = ContextVar("strictcall_store_work", default=None)
"""The store's work in the request being answered, kept while its calls are traced."""

STAGES: Final = ("parse", "route", "shape", "resource", "execute", "output")
"""The gateway's stages in order: a call passed those before the one that failed it."""


RECHECK_S: Final = 1.0


def available() -> bool:
    """Whether the OpenTelemetry API is installed."""
    return trace is not None


class CallTracer:
    """Makes one span per call while a real tracer provider is set."""

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        """`provider`: the tracer provider to use; by default the global one, whenever an SDK
        has set it."""
        assert trace is not None, "CallTracer needs opentelemetry-api"
        self._tracer = trace.get_tracer("strictcall", tracer_provider=provider)
        self._own = provider is not None
        self._off_types = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self._on = self._own
        self._recheck_at = 0.0
        self._active = self._own
        self._active_until = 0.0

    def active(self) -> bool:
        """`enabled`, looked up again at most every `RECHECK_S` (a lookup costs ~1.5 µs: the
        API reads the environment): what a request asks before it keeps a trace context."""
        now = time.monotonic()
        if now >= self._active_until:
            self._active = self.enabled
            self._active_until = now + RECHECK_S
        return self._active

    @property
    def enabled(self) -> bool:
        """Whether spans are made: with a provider of its own, or once an SDK has set the
        global one (it may be set after the app is built)."""
        assert trace is not None
        return self._own or not isinstance(trace.get_tracer_provider(), self._off_types)

    def observe(self, entry: AuditRecord, wire: str | None = None) -> None:
        """The span of one call, if spans are made. Whether they are is looked up again at
        most every `RECHECK_S` of the records' own clock: a lookup per call would cost
        more than everything else tracing does while it is off."""
        if entry.at >= self._recheck_at:
            self._on = self.enabled
            self._recheck_at = entry.at + RECHECK_S
        if self._on:
            self.trace(entry, wire)

    def trace(self, entry: AuditRecord, wire: str | None = None) -> None:
        """The span of one call that ended at `entry.at` after `entry.latency_us`, a child of
        the current context (the caller's `traceparent`), with the store's work for it."""
        assert trace is not None
        end_ns = int(entry.at * 1e9)
        attributes: dict[str, str] = {"strictcall.outcome": entry.outcome}
        if wire is not None:
            attributes["strictcall.transport"] = wire
        for name, value in (
            ("tool", entry.tool),
            ("stage", entry.stage),
            ("code", entry.code),
            ("reason", entry.reason),
            ("pointer", entry.pointer),
        ):
            if value is not None:
                attributes["strictcall." + name] = value
        stages = stages_of(entry.stage)
        marks = STAGE_MARKS.get()
        times = stage_times(len(stages), marks, end_ns)
        if marks:
            marks.clear()  # this call's: a refusal made after it in the request has none
        start_ns = min(times[0], end_ns - entry.latency_us * 1000)
        end_ns = max(times[-1], end_ns)
        span = self._tracer.start_span(
            "call" if entry.tool is None else f"call {entry.tool}",
            start_time=start_ns,
            attributes=attributes,
        )
        for (stage, outcome), at in zip(stages, times, strict=True):
            span.add_event(stage, {"strictcall.stage.outcome": outcome}, timestamp=at)
        if entry.outcome != "ok":
            span.set_status(trace.Status(trace.StatusCode.ERROR))
        work = STORE_WORK.get()
        if work:
            parent = trace.set_span_in_context(span)
            for operation, started, ended in work:
                child = self._tracer.start_span(
                    f"store {operation}",
                    context=parent,
                    kind=trace.SpanKind.CLIENT,
                    start_time=started,
                    attributes={"strictcall.store.operation": operation},
                )
                child.end(end_time=ended)
            work.clear()
        span.end(end_time=end_ns)


def stages_of(failed: str | None) -> list[tuple[str, str]]:
    """The stages a call went through and how each went: all passed for a success; for a
    failure, those before the failing stage passed and it failed (a transport's own stage,
    auth or protocol, comes before them all)."""
    if failed is None:
        return [(stage, "passed") for stage in STAGES]
    if failed not in STAGES:
        return [(failed, "failed")]
    index = STAGES.index(failed)
    return [(stage, "passed") for stage in STAGES[:index]] + [(failed, "failed")]


def stage_times(count: int, marks: StageMarks | None, end_ns: int) -> list[int]:
    """When each of a call's `count` stages ended, from its `marks` (`strictcall.core.marks`):
    parse at the ladder's start (it had ended by then), each stage passed at its own mark, the
    one that decided at the last mark (a tool that finds its resource missing decides while it
    runs, and says resource). Without marks (a refusal before the ladder), all at `end_ns`."""
    if not marks:
        return [end_ns] * count
    passed = marks[: count - 1]
    return passed + [passed[-1] if passed else end_ns] * (count - 1 - len(passed)) + [marks[-1]]


def incoming_context(headers: Iterable[tuple[bytes, bytes]]) -> Any:
    """The trace context of a request's W3C `traceparent` (and `tracestate`) headers, or None
    without a valid one."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in (b"traceparent", b"tracestate") and name.decode() not in carrier:
            carrier[name.decode()] = value.decode("latin-1")
    if "traceparent" not in carrier or trace is None:
        return None
    found = propagate.extract(carrier)
    return found if trace.get_current_span(found).get_span_context().is_valid else None


@contextmanager
def request_context(headers: Iterable[tuple[bytes, bytes]]) -> Iterator[None]:
    """While a request is answered: its caller's trace context is the current one, and the
    store's work is kept for the spans of its calls."""
    assert trace is not None
    parent = incoming_context(headers)
    attached = None if parent is None else otel_context.attach(parent)
    kept = STORE_WORK.set([])
    marked = STAGE_MARKS.set([])
    try:
        yield
    finally:
        STAGE_MARKS.reset(marked)
        STORE_WORK.reset(kept)
        if attached is not None:
            otel_context.detach(attached)


def call_context(tracer: CallTracer) -> Callable[[], AbstractContextManager[None]]:
    """What a transport with no request per call (stdio) enters around each call while
    `tracer` makes spans: the call's own stage marks and store work, kept for its span."""

    @contextmanager
    def per_call() -> Iterator[None]:
        if not tracer.active():
            yield
            return
        kept = STORE_WORK.set([])
        marked = STAGE_MARKS.set([])
        try:
            yield
        finally:
            STAGE_MARKS.reset(marked)
            STORE_WORK.reset(kept)

    return per_call


Record = Callable[[AuditRecord], None]


def traced_stdio(
    gateway: Gateway, record: Record | None
) -> tuple[Record | None, Callable[[], AbstractContextManager[None]] | None]:
    """`record`, and what to enter around each call (`call_context`), for `gateway` served on
    stdio: with the OpenTelemetry API installed, each call's record also makes its span
    (transport "stdio") once an SDK is set, its stages timed; without it, `record` as it is
    and nothing."""
    if trace is None:
        return record, None
    tracer = CallTracer()
    gateway.marks_stages = True

    def traced(entry: AuditRecord) -> None:
        tracer.observe(entry, "stdio")
        if record is not None:
            record(entry)

    return traced, call_context(tracer)


class TracedStore:
    """A store whose operations are timed for the spans of the call they serve (while a
    request is traced: `request_context`); otherwise each costs one context variable read.
    Any other attribute is the store's own."""

    def __init__(self, store: object) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if name.startswith("_") or not callable(value):
            return value
        timed = (
            _timed_async(name, value) if inspect.iscoroutinefunction(value) else _timed(name, value)
        )
        self.__dict__[name] = timed  # found directly from now on
        return timed


def _timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        work = STORE_WORK.get()
        if work is None:
            return method(*args, **kwargs)
        started = time.time_ns()
        try:
            return method(*args, **kwargs)
        finally:
            work.append((name, started, time.time_ns()))

    return timed


def _timed_async(name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    async def timed(*args: Any, **kwargs: Any) -> Any:
        work = STORE_WORK.get()
        if work is None:
            return await method(*args, **kwargs)
        started = time.time_ns()
        try:
            return await method(*args, **kwargs)
        finally:
            work.append((name, started, time.time_ns()))

    return timed
