"""`# strictcall: ignore[SC101] -- reason` comments: which findings they suppress, and the
finding a suppression without a reason is itself."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from strictcall.review.finding import Finding
from strictcall.review.rules import SUPPRESSION_WITHOUT_REASON

_SUPPRESSION = re.compile(
    r"#\s*strictcall:\s*ignore(?:\[(?P<ids>[A-Za-z0-9_,\s]*)\])?(?P<rest>.*)$"
)
_REASON = re.compile(r"^\s*--\s*\S")


@dataclass(frozen=True, slots=True)
class _Suppression:
    line: int
    """Where the comment is."""
    target: int
    """The line it covers: its own, or the next line of code for a comment on a line alone."""
    col: int
    ids: frozenset[str] | None
    reasoned: bool


def _suppressions(source: str) -> list[_Suppression]:
    lines = source.splitlines()
    found: list[_Suppression] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:
                continue
            match = _SUPPRESSION.search(token.string)
            if match is None:
                continue
            ids = match.group("ids")
            names = None
            if ids is not None:
                names = frozenset(i.strip() for i in ids.split(",") if i.strip())
            line = token.start[0]
            target = line
            if not token.line[: token.start[1]].strip():  # a comment alone covers the next line
                target = next(
                    (
                        n
                        for n in range(line + 1, len(lines) + 1)
                        if lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#")
                    ),
                    line,
                )
            found.append(
                _Suppression(
                    line,
                    target,
                    token.start[1] + match.start(),
                    names,
                    bool(_REASON.match(match.group("rest"))),
                )
            )
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def apply_suppressions(findings: list[Finding], source: str, path: str) -> list[Finding]:
    """A finding is suppressed by `# strictcall: ignore[SC101] -- reason` on one of its lines
    (or alone on the line above); a suppression without a reason is a finding itself."""
    suppressions = _suppressions(source)
    by_line: dict[int, list[_Suppression]] = {}
    for suppression in suppressions:
        by_line.setdefault(suppression.target, []).append(suppression)
    kept = [
        finding
        for finding in findings
        if not any(
            s.ids is None or finding.rule.id in s.ids
            for line in range(finding.line, finding.end_line + 1)
            for s in by_line.get(line, ())
        )
    ]
    for s in suppressions:
        if not s.reasoned:
            kept.append(
                Finding(
                    path,
                    s.line,
                    s.col + 1,
                    s.line,
                    s.col + 1,
                    SUPPRESSION_WITHOUT_REASON,
                    "this suppression gives no reason",
                    "(none)",
                    confidence="shown",
                )
            )
    return sorted(kept, key=lambda f: (f.line, f.col, f.rule.id))
