"""kill -9 during a burst of create_note calls, then a restart on the same store (a SQLite file,
then a PostgreSQL database): every
acknowledged write is there, and retrying every call id sent (acknowledged or not) writes
nothing twice. reliability/crash.py runs more rounds of the same."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import crash


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    if request.param == "sqlite":
        return tmp_path / "crash.sqlite3"
    return str(request.getfixturevalue("pg_url"))


def test_kill_9_loses_no_acknowledged_write_and_retries_write_nothing_twice(
    db: Path | str, tmp_path: Path
) -> None:
    for index, kill_after in enumerate((25, 60)):
        result = crash.run_round(db, tmp_path, index, workers=8, kill_after=kill_after)
        assert result.problems == [], crash.round_line(result)
        assert len(result.acked) >= kill_after
        # some calls were never acknowledged: the pipelined ones whose answers went unread,
        # and those in flight at the kill
        assert len(result.sent) > len(result.acked)
        assert result.integrity == "ok"
        assert result.lost == []
        assert result.notes_after == len(result.sent)
        assert result.duplicate_texts == 0
