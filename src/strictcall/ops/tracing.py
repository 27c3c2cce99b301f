"""OpenTelemetry spans of the calls, from their audit records, when `opentelemetry-api` is
installed (the extra `strictcall[otel]`) and an SDK has set a tracer provider.

One span per call, named "call <tool>" (or "call" when it names no registered tool), with the
attributes strictcall.tool, .outcome, .stage, .code, .reason, .pointer (the audit's safe
pointer) and the stages it went through as events, in order, each with its outcome: passed, or
failed for the one that decided. Never an identity, a call id, an argument or a note. Without an
SDK (the API's default proxy provider) no span is made at all.
"""

from __future__ import annotations

from typing import Final

from strictcall.core.record import AuditRecord

try:
    from opentelemetry import trace
except ImportError:  # the extra is optional: without it there are no spans, and no cost
    trace = None  # type: ignore[assignment]

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

    @property
    def enabled(self) -> bool:
        """Whether spans are made: with a provider of its own, or once an SDK has set the
        global one (it may be set after the app is built)."""
        assert trace is not None
        return self._own or not isinstance(trace.get_tracer_provider(), self._off_types)

    def observe(self, entry: AuditRecord) -> None:
        """The span of one call, if spans are made. Whether they are is looked up again at
        most every `RECHECK_S` of the records' own clock: a lookup per call would cost
        more than everything else tracing does while it is off."""
        if entry.at >= self._recheck_at:
            self._on = self.enabled
            self._recheck_at = entry.at + RECHECK_S
        if self._on:
            self.trace(entry)

    def trace(self, entry: AuditRecord) -> None:
        """The span of one call that ended at `entry.at` after `entry.latency_us`."""
        assert trace is not None
        end_ns = int(entry.at * 1e9)
        attributes: dict[str, str] = {"strictcall.outcome": entry.outcome}
        for name, value in (
            ("tool", entry.tool),
            ("stage", entry.stage),
            ("code", entry.code),
            ("reason", entry.reason),
            ("pointer", entry.pointer),
        ):
            if value is not None:
                attributes["strictcall." + name] = value
        span = self._tracer.start_span(
            "call" if entry.tool is None else f"call {entry.tool}",
            start_time=end_ns - entry.latency_us * 1000,
            attributes=attributes,
        )
        for stage, outcome in stages_of(entry.stage):
            span.add_event(stage, {"strictcall.stage.outcome": outcome}, timestamp=end_ns)
        if entry.outcome != "ok":
            span.set_status(trace.Status(trace.StatusCode.ERROR))
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
