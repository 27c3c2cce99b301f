"""Store faults under a real server (reliability/faults.py): the database locked, read-only
(immutable: as root, file modes do not bind), on a full disk (a small tmpfs) and deleted. While
a fault lasts every answer is structured and retryable, store_unavailable at stage execute (or
token_store_unavailable, HTTP 503, when the token cannot be checked), /healthz answers; once it
clears the same write, retried with the same call id, succeeds exactly once."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import faults, procs

from strictcall.audit import log as audit_module
from strictcall.audit.log import AuditLog
from strictcall.errors import STORE_UNAVAILABLE, TOKEN_STORE_UNAVAILABLE
from strictcall.storage import AuditRecord, IdempotencyKey
from strictcall.storage.sqlite import SQLiteStore


@dataclass
class Faulty:
    """A running server, a caller and what it owns."""

    server: procs.HttpServer
    rpc: faults.Rpc
    db: Path
    note: str
    workdir: Path


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faulty]:
    workdir = tmp_path_factory.mktemp("faults")
    db, token, note = faults.setup_store(workdir, "faulty")
    server = procs.HttpServer(db, workdir / "stderr.log")
    rpc = faults.Rpc(server.base_url, token)
    # a server that has already served this token, as one in use has: every test then sees
    # the same thing, whatever runs before it (the token cache is warm)
    warm, _ = rpc.call("read_note", {"note_id": note}, "warm-up")
    assert warm.ok
    yield Faulty(server, rpc, db, note, workdir)
    rpc.close()
    assert server.stop() == 0
    assert "Traceback" not in server.stderr_text()


def assert_survived(result: faults.FaultResult) -> None:
    assert result.problems == []
    write = result.during[0]
    assert write.tool == "create_note"
    if not result.must_refuse and write.ok:  # a killed session, replaced at once
        write = replace(write, status=200, code=STORE_UNAVAILABLE.code)
        write = replace(write, stage=STORE_UNAVAILABLE.stage.value, retryable=True)
    refusals = {
        (200, STORE_UNAVAILABLE.code, STORE_UNAVAILABLE.stage.value, STORE_UNAVAILABLE.retryable),
        (
            503,
            TOKEN_STORE_UNAVAILABLE.code,
            TOKEN_STORE_UNAVAILABLE.stage.value,
            TOKEN_STORE_UNAVAILABLE.retryable,
        ),
    }
    assert (write.status, write.code, write.stage, write.retryable) in refusals
    for answer in result.during[1:]:
        assert answer.ok or (answer.status, answer.code, answer.stage, answer.retryable) in (
            refusals
        )
    assert result.healthz_during[0] in result.healthz_expected
    assert result.recovered is not None and result.recovered.ok
    assert result.copies == 1
    assert result.alive


def test_a_locked_database_refuses_writes_as_retryable_and_recovers(faulty: Faulty) -> None:
    result = faults.exercise(
        faulty.rpc, faulty.server, "locked", faults.locked(faulty.db), faulty.note
    )
    assert_survived(result)
    # WAL: a writer's lock does not stop readers
    assert result.during[1].ok


def test_a_write_waiting_on_a_lock_held_elsewhere_stalls_no_other_request(
    faulty: Faulty,
) -> None:
    stall = faults.measure_lock_stall(faulty.rpc, faulty.db, faulty.note, seconds=1.0)
    assert stall.healthz_while_write_waits_s < 0.5, stall
    assert stall.stalled == 0, stall
    assert len(stall.healthz_s) == 10


def test_a_read_only_database_refuses_writes_as_retryable_and_recovers(faulty: Faulty) -> None:
    reason = faults.chattr_unavailable(faulty.workdir)
    if reason is not None:
        pytest.skip(f"read-only fault not injected: {reason}")
    fault = faults.read_only(faulty.db)
    assert_survived(faults.exercise(faulty.rpc, faulty.server, "read-only", fault, faulty.note))


def test_a_deleted_database_refuses_calls_as_retryable_and_recovers_when_put_back(
    faulty: Faulty,
) -> None:
    fault = faults.deleted(faulty.db)
    result = faults.exercise(
        faulty.rpc,
        faulty.server,
        "deleted",
        fault,
        faulty.note,
        lasting_s=faults.READ_RECHECK_S,
        healthz_expected=(503,),  # the store is gone: a load balancer should look elsewhere
    )
    assert_survived(result)
    # reads notice too, once the store checks its file again (or, past the token cache, the
    # token check itself)
    later = result.during[2]
    assert not later.ok and later.retryable_fault
    assert later.code in (STORE_UNAVAILABLE.code, TOKEN_STORE_UNAVAILABLE.code)


def test_audit_records_taken_while_the_database_is_deleted_are_written_once_it_is_back(
    tmp_path: Path,
) -> None:
    db = tmp_path / "audit.sqlite3"
    store = SQLiteStore(db)
    audit = AuditLog(store)
    try:

        def record(call_id: str) -> None:
            audit.record(AuditRecord(time.time(), call_id, "u1", None, "ok", None, None, 1))

        record("before")
        audit.flush()
        with faults.deleted(db):
            record("while-deleted")
            audit.flush()  # the store cannot take it: kept, to be written once it is back
        record("after")
        audit.flush()  # before any other write has reopened the file
        store.create_note("u1", "a note", IdempotencyKey("k", "f"))
        audit.flush()
        audited = {entry.call_id for entry in store.recent_calls(100)}
    finally:
        store.close()
    assert audited == {"before", "while-deleted", "after"}


def test_a_token_that_cannot_be_checked_is_503_token_store_unavailable(faulty: Faulty) -> None:
    token = procs.create_token(faulty.db, "newcomer")
    newcomer = faults.Rpc(faulty.server.base_url, token)
    try:
        with faults.deleted(faulty.db):
            time.sleep(faults.READ_RECHECK_S)  # the fault lasts past the store's next file check
            answer, _ = newcomer.call("count_notes", {}, "newcomer-1")
            assert (answer.status, answer.code, answer.stage, answer.retryable) == (
                503,
                TOKEN_STORE_UNAVAILABLE.code,
                TOKEN_STORE_UNAVAILABLE.stage.value,
                True,
            )
            assert faulty.rpc.healthz()[0] == 503  # and /healthz says the store is down
        answer, result = newcomer.call("count_notes", {}, "newcomer-2")
        assert answer.ok and result == 0
    finally:
        newcomer.close()


def test_a_full_disk_refuses_writes_as_retryable_and_recovers(tmp_path: Path) -> None:
    result = faults.run_disk_full(tmp_path)
    if result.skipped is not None:
        pytest.skip(f"full-disk fault not injected: {result.skipped}")
    assert_survived(result)


def test_records_past_the_cap_are_dropped_oldest_first_and_the_loss_is_logged_twice_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(audit_module, "MAX_KEPT", 3)
    db = tmp_path / "capped.sqlite3"
    store = SQLiteStore(db)
    audit = AuditLog(store)
    try:
        with faults.deleted(db), caplog.at_level(logging.WARNING, logger="strictcall"):
            for n in range(7):
                audit.record(AuditRecord(time.time(), f"c{n}", "u1", None, "ok", None, None, 1))
            audit.flush()  # the store cannot take them: kept
            assert (audit.pending, audit.lost) == (3, 4)
            assert len(caplog.records) == 1  # when the loss began, not once per record
        store.create_note("u1", "a note", IdempotencyKey("k", "f"))  # the file is back
        with caplog.at_level(logging.WARNING, logger="strictcall"):
            audit.flush()
        audited = [entry.call_id for entry in store.recent_calls(100)]
    finally:
        store.close()
    assert audited == ["c6", "c5", "c4"]
    assert (audit.pending, audit.lost) == (0, 0)
    assert len(caplog.records) == 2  # and once more, with the count, when the store took them


def test_postgresql_faults_are_answered_retryable_and_recover_with_each_write_once(
    pg_url: str, tmp_path: Path
) -> None:
    results = faults.run_postgres(tmp_path, pg_url)
    assert [r.fault for r in results] == ["terminated", "refusing", "statement timeout"]
    for result in results:
        assert_survived(result)
    down = results[1]
    assert down.healthz_expected == (503,)  # /healthz says the store is down while it is
    assert "Traceback" not in (tmp_path / "pg-faults-stderr.log").read_text()
