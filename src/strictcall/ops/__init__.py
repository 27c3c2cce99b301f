"""For operators: Prometheus metrics, OpenTelemetry spans, the operator page and the audit's
breakdown by time window (what `strictcall stats` prints and the page draws)."""
