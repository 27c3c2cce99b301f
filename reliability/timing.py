"""Existence by timing: `python reliability/timing.py`.

Through a Gateway with the notes tools on a SQLite file holding many notes of several owners,
times read_note (and delete_note) of another owner's note against the same call naming a note
that does not exist, interleaved in random order, many samples per round, and compares the
medians. Two medians are indistinguishable when they are within `RELATIVE` of each other or
within `ABSOLUTE_NS`, whichever is larger. As a check that the comparison can tell calls apart,
it also compares list_notes of a thousand notes against the missing read.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from strictcall.core.gateway import Gateway
from strictcall.storage import new_note_id
from strictcall.storage.sqlite import SQLiteStore

RELATIVE = 0.15
ABSOLUTE_NS = 3_000
OWNERS = ("reader", "owner-1", "owner-2", "owner-3", "owner-4")


@dataclass(frozen=True)
class Comparison:
    """Two medians of call latency, in nanoseconds."""

    label: str
    median_a_ns: float
    median_b_ns: float
    samples: int

    @property
    def difference_ns(self) -> float:
        return abs(self.median_a_ns - self.median_b_ns)

    @property
    def relative(self) -> float:
        return self.difference_ns / min(self.median_a_ns, self.median_b_ns)

    @property
    def indistinguishable(self) -> bool:
        tolerance = max(RELATIVE * min(self.median_a_ns, self.median_b_ns), ABSOLUTE_NS)
        return self.difference_ns <= tolerance

    def __str__(self) -> str:
        verdict = "indistinguishable" if self.indistinguishable else "DISTINGUISHABLE"
        signed = (self.median_a_ns - self.median_b_ns) / self.median_b_ns
        return (
            f"{self.label}: medians {self.median_a_ns / 1000:.2f} us vs"
            f" {self.median_b_ns / 1000:.2f} us ({signed:+.1%}, {self.samples}"
            f" samples each): {verdict}"
        )


def seed_notes(db: Path, notes_each: int = 1000) -> dict[str, list[str]]:
    """`notes_each` notes for each of OWNERS; their ids by owner."""
    store = SQLiteStore(db)
    try:
        return {
            owner: [
                store.add_note(owner, f"note {i} of {owner}").note_id for i in range(notes_each)
            ]
            for owner in OWNERS
        }
    finally:
        store.close()


def missing_ids(count: int) -> list[str]:
    """Ids that no note has, from the server's own generator: the same length and alphabet as
    real ids, so that both take the same path through the intake."""
    return [new_note_id() for _ in range(count)]


def call_text(tool: str, arguments: dict[str, str]) -> bytes:
    return orjson.dumps({"name": tool, "arguments": arguments})


def compare(
    gateway: Gateway,
    identity: str,
    label: str,
    calls_a: Sequence[bytes],
    calls_b: Sequence[bytes],
    samples: int,
    rng: random.Random,
) -> Comparison:
    """Median latency of `calls_a` against `calls_b`, one of each per sample in random order.

    The call id is fixed, so a refused delete records nothing and the two kinds run alike.
    """
    times_a: list[int] = []
    times_b: list[int] = []
    for index in range(samples):
        pair = [(calls_a[index % len(calls_a)], times_a), (calls_b[index % len(calls_b)], times_b)]
        rng.shuffle(pair)
        for raw, times in pair:
            started = time.perf_counter_ns()
            gateway.call(raw, identity, "timing")
            times.append(time.perf_counter_ns() - started)
    return Comparison(label, statistics.median(times_a), statistics.median(times_b), samples)


def run_rounds(
    gateway: Gateway,
    ids: dict[str, list[str]],
    tool: str,
    rounds: int,
    samples: int,
    rng: random.Random,
) -> list[Comparison]:
    """`rounds` comparisons of `tool` on other owners' notes against missing ones."""
    others = [note_id for owner in OWNERS[1:] for note_id in ids[owner]]
    results = []
    for _ in range(rounds):
        refused = [call_text(tool, {"note_id": n}) for n in rng.sample(others, 200)]
        missing = [call_text(tool, {"note_id": n}) for n in missing_ids(200)]
        label = f"{tool}: another owner's note vs a missing one"
        results.append(compare(gateway, OWNERS[0], label, refused, missing, samples, rng))
    return results


def majority_indistinguishable(results: Sequence[Comparison]) -> bool:
    return sum(r.indistinguishable for r in results) * 2 > len(results)


def main() -> int:
    from strictcall.services.notes import notes_gateway

    rng = random.Random(7)
    failed = False
    with tempfile.TemporaryDirectory(prefix="strictcall-timing-") as tmp:
        db = Path(tmp) / "timing.sqlite3"
        ids = seed_notes(db)
        store = SQLiteStore(db)
        try:
            with notes_gateway(store) as gateway:
                print(
                    f"{len(OWNERS)} owners x {len(ids[OWNERS[0]])} notes; tolerance"
                    f" {RELATIVE:.0%} or {ABSOLUTE_NS / 1000:.0f} us, whichever is larger"
                )
                for tool in ("read_note", "delete_note"):
                    results = run_rounds(gateway, ids, tool, 5, 2000, rng)
                    for result in results:
                        print(result)
                    failed |= not majority_indistinguishable(results)
                listing = [call_text("list_notes", {})]
                missing = [call_text("read_note", {"note_id": n}) for n in missing_ids(200)]
                control = compare(
                    gateway,
                    OWNERS[0],
                    "control: list_notes (1000 notes) vs a missing read",
                    listing,
                    missing,
                    200,
                    rng,
                )
                print(control)
                failed |= control.indistinguishable
        finally:
            store.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
