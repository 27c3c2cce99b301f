"""The operator's commands: `stats` (the page's breakdown, as text or JSON), `audit --follow`
(new calls as they are recorded, stopped cleanly by Ctrl-C), `tokens create --operator`."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from servers import ctrl_c_as_at_a_terminal, strictcall
from strictcall.errors import FORBIDDEN_OR_MISSING, INVALID_ARGUMENTS, Reason, Stage
from strictcall.storage import AuditRecord, open_store

DEADLINE_S = 20.0


@pytest.fixture(params=["sqlite", "postgres"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store of each kind in turn: a SQLite file's path, then a fresh PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "s.sqlite3")
    return str(request.getfixturevalue("pg_url"))


def record(db: Path | str, *records: AuditRecord) -> None:
    store = open_store(str(db))
    try:
        store.record_calls(records)
    finally:
        store.close()


def ok(at: float) -> AuditRecord:
    return AuditRecord(at, "c1", "u1", "count_notes", "ok", None, None, 40)


def shape(at: float) -> AuditRecord:
    return AuditRecord(
        at, "c2", "u1", "read_note", "error", INVALID_ARGUMENTS.code, str(Stage.SHAPE), 50,
        str(Reason.TYPE), "/arguments/note_id",
    )  # fmt: skip


def missing(at: float) -> AuditRecord:
    return AuditRecord(
        at, "c3", "u2", "read_note", "error", FORBIDDEN_OR_MISSING.code, str(Stage.RESOURCE), 60
    )


def test_stats_json_is_the_breakdown_of_the_window(any_db: str) -> None:
    db = any_db
    now = time.time()
    record(db, ok(now - 10), ok(now - 20), shape(now - 5), shape(now - 6), missing(now - 7))
    record(db, shape(now - 7200))  # two hours ago: outside the default hour
    done = strictcall("stats", "--json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["calls"] == 5
    assert stats["failed"] == 3
    assert stats["failures_by_stage_code"] == [
        {"stage": str(Stage.SHAPE), "code": INVALID_ARGUMENTS.code, "count": 2},
        {"stage": str(Stage.RESOURCE), "code": FORBIDDEN_OR_MISSING.code, "count": 1},
    ]
    assert stats["top_failures"][0] == {
        "tool": "read_note",
        "code": INVALID_ARGUMENTS.code,
        "reason": str(Reason.TYPE),
        "pointer": "/arguments/note_id",
        "calls": 2,
    }
    # the most recent refusals, newest recorded first, whatever the window
    stages = [r["stage"] for r in stats["recent_refusals"]]
    assert stages == ["shape", "resource", "shape", "shape"]
    assert sum(m["ok"] for m in stats["minutes"]) == 2
    wider = json.loads(strictcall("stats", "--json", "--since", "3h", "--db", str(db)).stdout)
    assert wider["calls"] == 6


def test_operator_commands_are_counted_apart_from_the_agents_calls(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    now = time.time()
    record(db, ok(now - 10), shape(now - 5))
    for _ in range(3):  # a token id nobody has: refused, audited as the operator's command
        assert strictcall("tokens", "revoke", "0123456789ab", "--db", str(db)).returncode == 1
    assert strictcall("tokens", "list", "--db", str(db)).returncode == 0
    stats = json.loads(strictcall("stats", "--json", "--db", str(db)).stdout)
    assert (stats["calls"], stats["failed"]) == (2, 1)
    assert stats["failures_by_stage_code"] == [
        {"stage": str(Stage.SHAPE), "code": INVALID_ARGUMENTS.code, "count": 1}
    ]
    assert [t["tool"] for t in stats["by_tool"]] == ["count_notes", "read_note"]
    assert sum(m["ok"] + sum(m["failed"].values()) for m in stats["minutes"]) == 2
    assert all(r["tool"] == "read_note" for r in stats["recent_refusals"])
    assert all(r["tool"] == "read_note" for r in stats["top_failures"])
    assert stats["operator_commands"] == [
        {"command": "tokens list", "runs": 1, "refused": 0},
        {"command": "tokens revoke", "runs": 3, "refused": 3},
    ]


def test_stats_as_text_names_the_failures(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    record(db, shape(time.time()))
    done = strictcall("stats", "--since", "15m", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "calls in the last 15m: 1, failed 1" in done.stdout
    assert "/arguments/note_id" in done.stdout


@pytest.mark.parametrize("since", ["0h", "1 h", "h", "-1h", "1w", ""])
def test_stats_refuses_a_window_it_cannot_read(tmp_path: Path, since: str) -> None:
    done = strictcall("stats", "--since", since, "--db", str(tmp_path / "s.sqlite3"))
    assert done.returncode == 2
    assert "--since" in done.stderr


def test_an_operator_token_is_printed_alone_on_the_last_line(any_db: str) -> None:
    db = any_db
    done = strictcall("tokens", "create", "--operator", "--identity", "ops", "--db", db)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    store = open_store(db)
    try:
        assert store.operator_for_token(token) == "ops"
        assert store.identity_for_token(token) is None
    finally:
        store.close()


def test_audit_follow_prints_new_calls_as_they_come_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    record(db, ok(1.0))
    command = [sys.executable, "-m", "strictcall", "audit", "--follow", "--limit", "5"]
    with subprocess.Popen(
        [*command, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=ctrl_c_as_at_a_terminal,
    ) as process:
        stdout, stderr = process.stdout, process.stderr
        assert stdout is not None and stderr is not None
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            for line in stdout:
                lines.put(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            assert "outcome" in lines.get(timeout=DEADLINE_S)  # the columns' headers
            assert "count_notes" in lines.get(timeout=DEADLINE_S)  # the last calls first
            record(db, shape(2.0))
            assert "/arguments/note_id" in lines.get(timeout=DEADLINE_S)
            record(db, missing(3.0), ok(4.0))
            assert "forbidden_or_missing" in lines.get(timeout=DEADLINE_S)
            assert "count_notes" in lines.get(timeout=DEADLINE_S)
        finally:
            process.send_signal(signal.SIGINT)
            try:
                status = process.wait(timeout=DEADLINE_S)
            finally:  # the deadline ends the child too: `with Popen` would wait on it for ever
                if process.poll() is None:
                    process.kill()
                    process.wait()
            reader.join(timeout=DEADLINE_S)
        assert status == 0
        assert "Traceback" not in stderr.read()
