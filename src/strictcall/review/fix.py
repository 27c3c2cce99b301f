"""`strictcall lint --fix`: the fixes that are certain, applied to the source text."""

from __future__ import annotations

from collections.abc import Sequence

from strictcall.review.lint import Edit, Finding


def apply_fixes(source: str, findings: Sequence[Finding]) -> tuple[str, int]:
    """The source with every finding's certain fix applied, and how many were applied."""
    edits = sorted(
        (f.fix for f in findings if f.fix is not None),
        key=lambda e: (e.line, e.col),
        reverse=True,  # from the end, so that earlier positions stay valid
    )
    lines = source.splitlines(keepends=True)
    applied = 0
    previous: Edit | None = None
    for edit in edits:
        if previous is not None and (edit.end_line, edit.end_col) > (previous.line, previous.col):
            continue  # overlapping edits: keep the later one only
        start = _offset(lines, edit.line, edit.col)
        end = _offset(lines, edit.end_line, edit.end_col)
        source = source[:start] + edit.text + source[end:]
        lines = source.splitlines(keepends=True)
        previous = edit
        applied += 1
    return source, applied


def _offset(lines: list[str], line: int, col: int) -> int:
    return sum(len(text) for text in lines[: line - 1]) + col
