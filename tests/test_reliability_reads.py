"""The reliability harnesses fail when a read they check with fails: a failed list_notes is
never read as "no notes", which would let the duplicate and loss checks pass with nothing to
check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import crash, faults

from strictcall.errors import STORE_UNAVAILABLE


def store_unavailable_reply(request_id: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32603, "message": "Tool failed", "data": STORE_UNAVAILABLE.as_error()},
    }


def test_a_failed_list_read_fails_the_crash_round() -> None:
    round_ = crash.CrashRound(identity="crash-x")
    assert crash.read_result(round_, store_unavailable_reply("list-x"), "list-x") is None
    assert round_.failed_reads == ["list-x: error"]
    assert any("failed" in problem for problem in round_.problems)


def test_a_reply_that_is_not_a_reply_to_the_read_fails_the_crash_round() -> None:
    round_ = crash.CrashRound(identity="crash-x")
    replies: list[Any] = [{"jsonrpc": "2.0", "id": "other", "result": []}, {"result": []}, None]
    for reply in replies:
        assert crash.read_result(round_, reply, "list-x") is None
    assert len(round_.failed_reads) == 3


def test_an_empty_list_is_a_successful_read_not_a_failure() -> None:
    round_ = crash.CrashRound(identity="crash-x")
    values: list[Any] = [[], 0]
    for value in values:
        reply = {"jsonrpc": "2.0", "id": "list-x", "result": value}
        assert crash.read_result(round_, reply, "list-x") == value
    assert round_.failed_reads == []


def test_a_fault_whose_list_after_failed_is_a_problem_not_zero_copies() -> None:
    result = faults.FaultResult("locked")
    assert result.copies == -1  # never counted
    assert any("list after the fault failed" in problem for problem in result.problems)
