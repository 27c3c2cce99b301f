"""What `strictcall lint` reports: a finding (where, which rule, the falsy values it mishandles,
why they are legal there, how sure, the fix) and the certain edit some findings carry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from strictcall.review.rules import Rule

Confidence = Literal["high", "medium", "low"]
CONFIDENCES: Final[tuple[Confidence, ...]] = ("high", "medium", "low")
"""From surest to least sure: a declared type says it; the code implies it; nothing says."""


def at_least(confidence: Confidence, floor: Confidence) -> bool:
    """True when `confidence` is `floor` or surer."""
    return CONFIDENCES.index(confidence) <= CONFIDENCES.index(floor)


@dataclass(frozen=True, slots=True)
class Edit:
    """A replacement of one span of source text (lines 1-based, columns 0-based characters)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One place to ask a question; columns are 1-based characters."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    rule: Rule
    message: str
    input: str
    """The input that tells the two readings apart, as JSON text (`{"result": 0}`)."""
    fix: Edit | None = None
    """The certain fix, where there is one."""
    falsy: tuple[str, ...] = ()
    """The falsy values the line mishandles, as JSON text (`0`, `false`, `""`, `[]`)."""
    why: str = ""
    """Why those values are legal there, or that nothing in the code says."""
    remedy: str = ""
    """The fix to make, in words and code."""
    confidence: Confidence = "medium"
    subject: str = ""
    """The key or attribute the value was read by (`result`, `timeout`), when constant."""
    scope: str = ""
    """The function the line is in, or "" at a module's top level."""

    @property
    def question(self) -> str:
        """What to ask at this line."""
        return self.rule.question

    def as_json(self) -> dict[str, object]:
        """The finding as a JSON object for `lint --format json`."""
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "rule": self.rule.id,
            "name": self.rule.name,
            "message": self.message,
            "question": self.question,
            "input": self.input,
            "falsy": list(self.falsy),
            "why": self.why,
            "remedy": self.remedy,
            "confidence": self.confidence,
            "fixable": self.fix is not None,
        }

    def detail(self) -> str:
        """Message, falsy values, why, fix and the distinguishing input, in one sentence run."""
        parts = [f"{self.message}."]
        if self.falsy:
            parts.append(f"Mishandles {', '.join(self.falsy)}.")
        if self.why:
            parts.append(f"Legal? {self.why}.")
        if self.remedy:
            parts.append(f"Fix: {self.remedy}.")
        if self.input and self.input != "(none)":
            parts.append(f"Tells them apart: {self.input}")
        else:
            parts.append(self.question)
        return " ".join(parts)

    def as_github(self) -> str:
        """The finding as a GitHub Actions workflow command: an annotation on its line."""
        level = "notice" if self.confidence == "low" else "warning"
        detail = self.detail().replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return (
            f"::{level} file={self.path},line={self.line},col={self.col},"
            f"endLine={self.end_line},endColumn={self.end_col},"
            f"title={self.rule.id} {self.rule.name}::{detail}"
        )

    def as_text(self) -> str:
        """The finding as one line (the CI form): path:line:col: rule [confidence] detail."""
        return f"{self.path}:{self.line}:{self.col}: {self.rule.id} [{self.confidence}] " + (
            self.detail()
        )
