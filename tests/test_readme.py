"""The README's tables say what the code does: the error catalogue and the JSON-RPC codes; and
what a user reads speaks in words a user knows."""

from __future__ import annotations

import argparse
import re

import pytest

from doc_pages import documented, every_page
from strictcall.cli.parser import build_parser
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


# Words from the project's own history that a user cannot know: its tracker's issue numbers and
# the bug reports it started from ("seed 000", "the seed's adapter"). A random seed is a user's
# word (`--seed 7`, "seeded notes") and passes.
_INSIDE_WORDS = re.compile(
    r"\bissues? ?#?\d+\b|\bseed document|\bseed 0\d\d\b|\bthe seed(?:'s|\b(?! \d))",
    re.IGNORECASE,
)


@pytest.mark.parametrize("path", sorted(every_page()))
def test_a_page_has_no_words_from_the_projects_own_history(path: str) -> None:
    found = [m.group(0) for m in _INSIDE_WORDS.finditer(every_page()[path])]
    assert found == [], path


def _help_texts(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.description or "", parser.epilog or ""]
    for action in parser._actions:
        texts.append(action.help or "")
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                texts.append(choice.help or "")
            for sub in action.choices.values():
                texts.extend(_help_texts(sub))
    return texts


def test_the_command_lines_help_has_no_words_from_the_projects_own_history() -> None:
    texts = _help_texts(build_parser())
    found = [m.group(0) for text in texts for m in _INSIDE_WORDS.finditer(text)]
    assert found == []


@pytest.mark.parametrize(
    ("text", "inside"),
    [
        ("as seed 000 tells", True),
        ("the seed's adapter", True),
        ("since issue 13", True),
        ("(issue #29)", True),
        ("issues 28", True),
        ("the seed document", True),
        ("`--seed 7`, seed 7 by default", False),
        ("every identity's seeded notes", False),
        ("the run's seed", False),
        ("the seed 7 run", False),
        ("an issue with the store", False),
    ],
)
def test_the_history_words_pattern_is_precise(text: str, inside: bool) -> None:
    assert bool(_INSIDE_WORDS.search(text)) is inside
