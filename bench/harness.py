"""What every in-process bench shares: the notes, the calls, the stdlib floor and the timer.

Standard library only: this module is imported both by the project's venv (strictcall) and by
bench/.venv-peers (mcp, fastmcp), so that both processes time the same floor the same way.

Timing: each (target, case) is calibrated once to a batch of about `batch_s` seconds; then every
round times, for each case and each target, `PAIRS` pairs of sub-batches of the floor and the
target, interleaved floor-target, target-floor, ... so that both see the same moments of a
shared machine. Time is the process's CPU time (`time.process_time`, every thread of it): on a
machine shared with other work, wall time counts the other processes' turns, which have
nothing to do with either side. A row's figure is the median over rounds of its µs per call,
and its ratio is the median over rounds of (its time ÷ the floor's time in the same
interleaved sub-batches), so every ratio is within one process and one round. Before any
timing, each target's answer is checked; a wrong one is never timed.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

NOTES: dict[str, dict[str, str]] = {
    "u1": {"n1": "退款窗口为 7 天。"},
    "u2": {"n2": "另一份私人笔记。"},
}
"""The seed's notes, by owner then note id."""

N1_TEXT = NOTES["u1"]["n1"]

VALID = '{"name":"read_note","arguments":{"note_id":"n1"}}'
"""u1 reads its own note n1."""
INVALID = '{"name":"read_note","arguments":{"note_id":123}}'
"""A wrong-typed note_id: every target must refuse it."""

CALL_ID = "call-1"

# (case label, raw call text, identity). "cross_owner" (u2 reads u1's n1) is only for targets
# that know who is calling; the peers' in-process APIs have no per-call identity.
CASES: tuple[tuple[str, str, str], ...] = (
    ("valid", VALID, "u1"),
    ("invalid", INVALID, "u1"),
    ("cross_owner", VALID, "u2"),
)


def floor(raw: str, identity: str, call_id: str) -> str:
    """The physical floor: stdlib json.loads, dict lookups, json.dumps of the answer; no checks.

    A missed lookup (a wrong type, another owner's note) answers a fixed refusal, which is what
    the cheapest possible program would do; it checks nothing else.
    """
    call = json.loads(raw)
    note_id = call["arguments"]["note_id"]
    text = NOTES.get(identity, {}).get(note_id)
    if text is None:
        return json.dumps({"ok": False, "call_id": call_id, "error": {"code": "not_found"}})
    return json.dumps(
        {"ok": True, "call_id": call_id, "result": {"note_id": note_id, "text": text}}
    )


def floor_is_right(case: str, out: str) -> str | None:
    """None when the floor's answer is the expected one for `case`, else why not."""
    answer = json.loads(out)
    if case == "valid":
        expected = {"note_id": "n1", "text": N1_TEXT}
        return None if answer.get("result") == expected else f"not the note: {out[:200]}"
    return None if answer.get("ok") is False else f"not a refusal: {out[:200]}"


SyncCall = Callable[[], Any]
AsyncCall = Callable[[], Awaitable[Any]]


@dataclass
class Target:
    """A system under test: a zero-argument call per case, and a check of its answer."""

    name: str
    what: str
    calls: dict[str, SyncCall | AsyncCall]
    check: Callable[[str, Any], str | None]
    is_async: bool = False
    wrong: dict[str, str] = field(default_factory=dict)
    unavailable: str | None = None


@dataclass
class _Slot:
    target: Target
    case: str
    n: int = 1
    us: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)


class Timer:
    """Runs every batch, sync or async, in one persistent event loop (no loop start-up cost in
    any figure: an async target is awaited in a loop that is already running)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def once(self, target: Target, case: str) -> Any:
        fn = target.calls[case]
        if target.is_async:
            return self.loop.run_until_complete(fn())  # type: ignore[arg-type]
        return fn()

    def batch(self, target: Target, case: str, n: int) -> float:
        """Seconds for n calls, gc paused as timeit does."""
        fn = target.calls[case]
        gc.collect()
        gc.disable()
        try:
            if target.is_async:
                return self.loop.run_until_complete(_async_batch(fn, n))  # type: ignore[arg-type]
            start = CLOCK()
            for _ in range(n):
                fn()
            return CLOCK() - start
        finally:
            gc.enable()

    def close(self) -> None:
        self.loop.close()


async def _async_batch(fn: AsyncCall, n: int) -> float:
    start = CLOCK()
    for _ in range(n):
        await fn()
    return CLOCK() - start


CLOCK: Final = time.process_time
"""CPU time of the whole process, in seconds (see the module's docstring)."""

PAIRS: Final = 4
"""Interleaved floor/target sub-batch pairs per target, case and round."""


def run_rounds(
    targets: list[Target], cases: list[str], rounds: int, batch_s: float
) -> list[dict[str, Any]]:
    """Check, calibrate and time every target against the floor; rows ready for JSON."""
    timer = Timer()
    floor_target = Target(
        "floor",
        "stdlib json.loads + dict lookups + json.dumps, no checks",
        {label: _floor_call(raw, ident) for label, raw, ident in CASES if label in cases},
        floor_is_right,
    )
    try:
        for target in [floor_target, *targets]:
            if target.unavailable is not None:
                continue
            for case in list(target.calls):
                try:
                    why = target.check(case, timer.once(target, case))
                except Exception as exc:  # a target that raises where it should answer
                    why = f"raised {type(exc).__name__}: {str(exc)[:200]}"
                if why is not None:
                    target.wrong[case] = why
        slots: dict[str, list[_Slot]] = {case: [] for case in cases}
        floors: dict[str, _Slot] = {}
        for case in cases:
            if case in floor_target.calls and case not in floor_target.wrong:
                floors[case] = _Slot(floor_target, case)
            for target in targets:
                usable = target.unavailable is None and case not in target.wrong
                if usable and case in target.calls:
                    slots[case].append(_Slot(target, case))
        everything = [*floors.values(), *(s for per in slots.values() for s in per)]
        for slot in everything:
            slot.n = _calibrate(timer, slot.target, slot.case, batch_s)
        for _ in range(rounds):
            for case in cases:
                base = floors.get(case)
                if base is None:
                    continue
                floor_n = max(1, base.n // PAIRS)
                floor_times: list[float] = []
                for slot in slots[case]:
                    n = max(1, slot.n // PAIRS)
                    floor_s = target_s = 0.0
                    for pair in range(PAIRS):
                        if pair % 2:
                            target_s += timer.batch(slot.target, case, n)
                            floor_s += timer.batch(base.target, case, floor_n)
                        else:
                            floor_s += timer.batch(base.target, case, floor_n)
                            target_s += timer.batch(slot.target, case, n)
                    per_floor = floor_s / (floor_n * PAIRS)
                    per_call = target_s / (n * PAIRS)
                    floor_times.append(per_floor)
                    slot.us.append(per_call * 1e6)
                    slot.ratios.append(per_call / per_floor)
                if not floor_times:
                    floor_times.append(timer.batch(base.target, case, base.n) / base.n)
                base.us.append(statistics.median(floor_times) * 1e6)
                base.ratios.append(1.0)
    finally:
        timer.close()
    rows: list[dict[str, Any]] = []
    for target in [floor_target, *targets]:
        for case in cases:
            if case not in target.calls and target.unavailable is None:
                continue
            row: dict[str, Any] = {"target": target.name, "what": target.what, "case": case}
            if target.unavailable is not None:
                row["status"] = "not available"
                row["note"] = target.unavailable
            elif case in target.wrong:
                row["status"] = "WRONG"
                row["note"] = target.wrong[case]
            else:
                slot = floors[case] if target is floor_target else _find(slots[case], target)
                row.update(
                    status="ok",
                    us=statistics.median(slot.us),
                    us_min=min(slot.us),
                    us_max=max(slot.us),
                    ratio=statistics.median(slot.ratios),
                    calls_per_batch=slot.n,
                    rounds=len(slot.us),
                )
            rows.append(row)
    return rows


def _find(slots: list[_Slot], target: Target) -> _Slot:
    for slot in slots:
        if slot.target is target:
            return slot
    raise LookupError(target.name)


def _floor_call(raw: str, identity: str) -> SyncCall:
    return lambda: floor(raw, identity, CALL_ID)


def _calibrate(timer: Timer, target: Target, case: str, batch_s: float) -> int:
    """Calls per batch so that a batch lasts about batch_s (bounded: at most 24 doublings)."""
    n = 1
    timer.batch(target, case, 50)  # warm-up
    for _ in range(24):
        took = timer.batch(target, case, n)
        if took >= batch_s / 8 or n >= 1 << 22:
            break
        n *= 2
    per_call = max(took / n, 1e-9)
    return max(1, int(batch_s / per_call))


def emit(payload: dict[str, Any]) -> None:
    """Print the results as one JSON document on stdout (the orchestrator reads it)."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def python_version() -> str:
    return sys.version.split()[0]
