"""The page's in-memory counts (`strictcall.ops.window`) and the store's outages
(`strictcall.ops.health`), on records made here: each wire, tool and identity counted apart,
quantiles from the histogram, the hour and the last 5 minutes told apart, identities bounded;
an outage begins once, counts its refused calls (late ones too) and ends once, each with one
log line."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from strictcall.errors import INVALID_ARGUMENTS, STORE_UNAVAILABLE, TOKEN_STORE_UNAVAILABLE, Stage
from strictcall.ops.drains import MAX_PENDING
from strictcall.ops.health import StoreHealth
from strictcall.ops.window import MAX_IDENTITIES, OTHERS, RecentCalls, quantile_us
from strictcall.storage import AuditRecord


def ok(at: float, identity: str = "u1", latency_us: int = 100) -> AuditRecord:
    return AuditRecord(at, "c", identity, "count_notes", "ok", None, None, latency_us)


def shape(at: float, identity: str = "u2") -> AuditRecord:
    return AuditRecord(
        at, "c", identity, "read_note", "error", INVALID_ARGUMENTS.code, str(Stage.SHAPE), 50
    )


def refused(at: float, code: str = STORE_UNAVAILABLE.code) -> AuditRecord:
    return AuditRecord(at, "c", "u1", "count_notes", "error", code, str(Stage.EXECUTE), 80)


def test_each_wire_tool_and_identity_is_counted_apart() -> None:
    window = RecentCalls()
    now = time.time()
    rpc, mcp = window.observer("rpc"), window.observer("mcp")
    for _ in range(3):
        rpc(ok(now))
    mcp(ok(now, "u2"))
    mcp(shape(now))
    seen = window.snapshot(now)
    assert (seen.hour.calls, seen.hour.failed) == (5, 1)
    wires = {w.wire: (w.hour.calls, w.hour.failed) for w in seen.wires}
    assert wires == {"rpc": (3, 0), "mcp": (2, 1)}
    identities = {r.identity: (r.calls, r.failed, r.top_code) for r in seen.identities}
    assert identities == {"u1": (3, 0, None), "u2": (2, 1, INVALID_ARGUMENTS.code)}
    assert all(r.nearest_quota is None for r in seen.identities)
    assert seen.by_stage_code == [(str(Stage.SHAPE), INVALID_ARGUMENTS.code, 1)]


def test_the_last_5_minutes_are_apart_from_the_hour() -> None:
    window = RecentCalls()
    now = time.time()
    record = window.observer("rpc")
    record(ok(now - 1800))
    record(shape(now - 1800))
    record(ok(now - 10))
    record(ok(now - 7200))  # beyond the hour: forgotten
    seen = window.snapshot(now)
    assert (seen.hour.calls, seen.hour.failed) == (3, 1)
    assert (seen.recent.calls, seen.recent.failed) == (1, 0)
    (latency,) = [r for r in seen.latency if r.tool == "count_notes"]
    assert (latency.calls, latency.recent_calls) == (2, 1)


def test_quantiles_come_from_the_histogram_within_a_bucket() -> None:
    window = RecentCalls()
    now = time.time()
    record = window.observer("rpc")
    for _ in range(98):
        record(ok(now, latency_us=1_000))
    record(ok(now, latency_us=50_000))
    record(ok(now, latency_us=50_000))
    (row,) = window.snapshot(now).latency
    assert row.p50_us is not None and 1_000 <= row.p50_us < 1_260
    assert row.p99_us is not None and 50_000 <= row.p99_us < 63_000
    assert quantile_us([0, 0, 0], 0.5) is None


def test_identities_beyond_the_bound_are_counted_together() -> None:
    window = RecentCalls()
    now = time.time()
    record = window.observer("rpc")
    for n in range(MAX_IDENTITIES + 5):
        record(ok(now, identity=f"u{n}"))
    seen = window.snapshot(now)
    assert len(seen.identities) == MAX_IDENTITIES + 1
    (others,) = [r for r in seen.identities if r.identity == OTHERS]
    assert others.calls == 5
    assert seen.hour.calls == MAX_IDENTITIES + 5


class Lines(logging.Handler):
    """The messages logged to it (the server's own log configuration may stop propagation)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def logged() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("strictcall")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_an_outage_is_two_log_lines_and_counts_its_refused_calls(logged: Lines) -> None:
    health = StoreHealth()
    window = RecentCalls(health)
    record = window.observer("rpc")
    now = time.time()
    record(ok(now - 5))
    window.drain()
    assert health.outage is None
    record(refused(now - 4))
    record(refused(now - 3, TOKEN_STORE_UNAVAILABLE.code))
    window.drain()
    health.failed(now - 2.5)  # an audit batch the store did not take: the same outage
    record(refused(now - 2))
    window.drain()
    outage = health.outage
    assert outage is not None and outage.since == now - 4 and outage.refused == 3
    health.answered(now - 1)
    record(refused(now - 1.5))  # answered in the outage, tallied after it ended
    window.drain()
    assert health.outage is None
    last = health.last_outage
    assert last is not None and (last.since, last.until, last.refused) == (now - 4, now - 1, 4)
    assert health.outages == 1
    lines = logged.lines
    assert sum("store unavailable since" in line for line in lines) == 1
    assert sum("store back" in line for line in lines) == 1
    assert "3 calls refused meanwhile" in next(line for line in lines if "store back" in line)


def test_a_second_outage_is_counted_again() -> None:
    health = StoreHealth()
    now = time.time()
    health.failed(now - 10)
    health.answered(now - 9)
    health.refused(now - 5)
    assert health.outage is not None and health.outages == 2


def test_records_never_drained_by_a_lifespan_stay_bounded() -> None:
    window = RecentCalls()
    record = window.observer("rpc")
    now = time.time()
    for _ in range(MAX_PENDING + 10):
        record(ok(now))
    assert window.drain() < MAX_PENDING  # drained once on the way: all counted
    assert window.snapshot(now).hour.calls == MAX_PENDING + 10


def test_an_outages_cause_is_told_once_on_one_line_without_a_password(
    logged: Lines,
) -> None:
    from strictcall.ops.health import CAUSE_MAX, cause_of
    from strictcall.storage import StoreUnavailable, StoreUnreachable

    fault = StoreUnavailable(
        "connect to postgresql://app:hunter2@db/notes failed\n\x1b[2Jpassword=xyzzy0 " + "z" * 300
    )
    cause = cause_of(fault)
    assert "hunter2" not in cause and "xyzzy0" not in cause
    assert "\n" not in cause and "\x1b" not in cause and len(cause) <= CAUSE_MAX
    reachable = StoreUnreachable("nothing accepts connections at db:5432")
    assert cause_of(reachable) == reachable.for_operator()
    health = StoreHealth()
    now = time.time()
    health.refused(now - 3)  # begun by a refused call: no cause known yet
    health.failed(now - 2, cause_of(reachable))
    health.failed(now - 1, cause)  # the first cause stays
    outage = health.outage
    assert outage is not None and outage.cause == reachable.for_operator()
    told = [line for line in logged.lines if "store unavailable" in line]
    assert len(told) == 2 and reachable.for_operator() in told[1]


def test_one_refused_call_is_said_in_the_singular(logged: Lines) -> None:
    health = StoreHealth()
    now = time.time()
    health.refused(now - 2)
    health.answered(now - 1)
    back = next(line for line in logged.lines if "store back" in line)
    assert "1 call refused" in back and "1 calls" not in back
