"""A short load run (reliability/load.py, `make load` holds 64 connections for 60 s): concurrent
connections with valid, invalid, cross-owner and write calls, on SQLite and on PostgreSQL (one
server process, then two); no transport error, no 5xx, every answer the expected one, and
exactly one audit record per call once the server has stopped."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import load


@pytest.mark.parametrize("client", ["raw", "httpx"])
def test_a_short_load_holds_with_one_audit_record_per_call(tmp_path: Path, client: str) -> None:
    report = load.run(seconds=1.0, connections=16, workdir=tmp_path, client=client)
    assert_held(report)


def test_a_short_load_on_postgresql_holds_with_one_audit_record_per_call(
    tmp_path: Path, pg_url: str
) -> None:
    assert_held(load.run(seconds=1.0, connections=16, workdir=tmp_path, db=pg_url))


def test_a_short_load_on_two_workers_holds_with_one_audit_record_per_call(
    tmp_path: Path, pg_url: str
) -> None:
    assert_held(load.run(seconds=1.0, connections=16, workdir=tmp_path, db=pg_url, workers=2))


def assert_held(report: load.Report) -> None:
    assert report.problems == []
    assert (report.transport_errors, report.server_errors, report.wrong_answers) == (0, 0, 0)
    assert report.calls > report.warmup_calls > 0
    assert report.audit_records == report.calls
    assert set(report.by_operation) == {"read", "invalid", "cross", "write"}
    assert set(report.rss_kib) == {"start", "middle", "end"}
