"""No existence leak by timing: a refused read of another owner's note and a read of a missing
note run the same queries and take indistinguishable time (medians of many interleaved samples
within 15% or 3 us, in most of several rounds), through a Gateway on a SQLite file with many
notes. The same comparison tells a slower call apart, so it can fail."""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import timing

from strictcall.core.gateway import Gateway
from strictcall.errors import FORBIDDEN_OR_MISSING
from strictcall.services.notes import notes_gateway
from strictcall.storage.sqlite import SQLiteStore

ROUNDS = 5
SAMPLES = 400


@dataclass
class Timed:
    store: SQLiteStore
    gateway: Gateway
    ids: dict[str, list[str]]


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Timed]:
    db = tmp_path_factory.mktemp("timing") / "notes.sqlite3"
    ids = timing.seed_notes(db, notes_each=600)
    store = SQLiteStore(db)
    gateway = notes_gateway(store)
    yield Timed(store, gateway, ids)
    gateway.close()
    store.close()


def other_note(timed: Timed) -> str:
    return timed.ids[timing.OWNERS[1]][0]


@pytest.mark.parametrize("tool", ["read_note", "delete_note"])
def test_refused_and_missing_notes_get_the_same_answer_by_the_same_queries(
    timed: Timed, tool: str
) -> None:
    statements: list[str] = []
    answers = []
    missing = timing.missing_ids(1)[0]
    # The store's connections (writes, reads), traced: the statements each call runs, with
    # their values.
    connections = (timed.store._conn, timed.store._reader)
    for note_id in (other_note(timed), missing):
        trace: list[str] = []
        for connection in connections:
            connection.set_trace_callback(trace.append)
        try:
            answers.append(
                timed.gateway.call(timing.call_text(tool, {"note_id": note_id}), "reader", "same")
            )
        finally:
            for connection in connections:
                connection.set_trace_callback(None)
        statements.append("\n".join(trace).replace(note_id, "<id>"))
    assert answers[0] == answers[1]
    assert answers[0]["error"]["code"] == FORBIDDEN_OR_MISSING.code
    assert statements[0] == statements[1]
    assert re.search(r"owner = 'reader'", statements[0])


@pytest.mark.parametrize("tool", ["read_note", "delete_note"])
def test_refused_and_missing_notes_take_indistinguishable_time(timed: Timed, tool: str) -> None:
    rng = random.Random(7)
    results = timing.run_rounds(timed.gateway, timed.ids, tool, ROUNDS, SAMPLES, rng)
    assert timing.majority_indistinguishable(results), "\n".join(map(str, results))


def test_the_comparison_tells_a_slower_call_apart(timed: Timed) -> None:
    rng = random.Random(7)
    missing = [timing.call_text("read_note", {"note_id": n}) for n in timing.missing_ids(50)]
    listing = [timing.call_text("list_notes", {})]
    results = [
        timing.compare(timed.gateway, "reader", "control", listing, missing, 40, rng)
        for _ in range(ROUNDS)
    ]
    assert not timing.majority_indistinguishable(results), "\n".join(map(str, results))
