"""The README's tables say what the code does: the error catalogue and the JSON-RPC codes."""

from __future__ import annotations

import re

from doc_pages import documented
from strictcall.errors import CATALOGUE, PARSE_REASONS, REASON_MEANINGS, Reason
from strictcall.transports.jsonrpc import ERROR_CODES

README = documented()


def _rows(first_header: str) -> list[list[str]]:
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_readme_error_table_is_the_catalogue() -> None:
    rows = {row[0].strip("`"): row for row in _rows("code")}
    assert set(rows) == {kind.code for kind in CATALOGUE}
    for kind in CATALOGUE:
        row = rows[kind.code]
        assert row[1] == kind.stage.value
        assert row[2] == ("true" if kind.retryable else "false")
        assert row[3] == kind.advice


def test_readme_jsonrpc_table_is_the_mapping() -> None:
    rows = {row[0]: row for row in _rows("stage")}
    assert set(rows) == {stage.value for stage in ERROR_CODES}
    for stage, (code, message) in ERROR_CODES.items():
        assert int(rows[stage.value][1]) == code
        assert re.match(re.escape(message), rows[stage.value][2])


def test_readme_reason_table_is_the_reason_catalogue() -> None:
    rows = {row[0].strip("`"): row for row in _rows("reason")}
    assert set(rows) == {reason.value for reason in Reason}
    for reason, meaning in REASON_MEANINGS.items():
        row = rows[reason.value]
        assert row[1] == ("parse" if reason in PARSE_REASONS else "shape")
        assert row[2] == meaning


def test_readme_transport_differences_are_the_equivalence_tests_exceptions() -> None:
    from test_equivalence import EXCEPTIONS

    rows = {row[0].strip("`"): row[1] for row in _rows("difference")}
    assert rows == EXCEPTIONS
