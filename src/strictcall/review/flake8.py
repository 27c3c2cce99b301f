"""The lint as a flake8 plugin (codes SC1xx), for projects that lint with flake8."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from strictcall.review.lint import lint_source


def _own_version() -> str:
    try:
        return _version("strictcall")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


class TruthinessChecker:
    """flake8 calls `run()` once per file; each finding is (line, col, "SCxxx message", type)."""

    name = "strictcall"
    version = _own_version()

    def __init__(self, tree: ast.AST, lines: Sequence[str], filename: str = "<string>") -> None:
        self.tree = tree
        self.lines = lines
        self.filename = filename

    def run(self) -> Iterator[tuple[int, int, str, type[TruthinessChecker]]]:
        """The findings of one file, suppressions applied."""
        for finding in lint_source("".join(self.lines), self.filename):
            text = f"{finding.rule.id} {finding.detail()}"
            yield finding.line, finding.col - 1, text, type(self)
