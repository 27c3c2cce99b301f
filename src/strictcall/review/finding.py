"""What `strictcall lint` reports: a finding (where, which rule, the falsy values it mishandles,
why they are legal there, how sure, the fix) and the certain edit some findings carry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from strictcall.review.rules import Rule

Confidence = Literal["shown", "guess"]
"""`shown`: the code shows that a falsy value has a meaning there (the finding says what shows
it); `guess`: nothing does, and only `lint --explore` reports it."""
CONFIDENCES: Final[tuple[Confidence, ...]] = ("shown", "guess")


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
    """What shows those values are legal there (the evidence), or, for a guess, what little
    the code says."""
    remedy: str = ""
    """The fix to make, in words and code."""
    confidence: Confidence = "shown"
    subject: str = ""
    """The key or attribute the value was read by (`result`, `timeout`), when constant."""
    scope: str = ""
    """The function the line is in, or "" at a module's top level."""
    counterexample: str = ""
    """The falsy input and the two readings of it (the line's, and presence's)."""

    @property
    def evidence(self) -> str:
        """What shows the falsy values are legal there; "" for a guess."""
        return self.why if self.confidence == "shown" else ""

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
            "evidence": self.evidence or None,
            "counterexample": self.counterexample or None,
            "remedy": self.remedy,
            "confidence": self.confidence,
            "fixable": self.fix is not None,
        }

    def detail(self) -> str:
        """Message, falsy values, evidence (or what the guess rests on), counterexample and
        fix, in one sentence run."""
        parts = [f"{self.message}."]
        if self.falsy:
            parts.append(f"Mishandles {', '.join(self.falsy)}.")
        if self.why and self.confidence == "shown":
            parts.append(f"Evidence: {self.why}.")
        elif self.why:
            parts.append(f"Guessing: {self.why}.")
        if self.counterexample:
            parts.append(f"Counterexample: {self.counterexample}.")
        elif self.input and self.input != "(none)":
            parts.append(f"Tells them apart: {self.input}.")
        else:
            parts.append(self.question)
        if self.remedy:
            parts.append(f"Fix: {self.remedy}.")
        return " ".join(parts)

    def as_github(self) -> str:
        """The finding as a GitHub Actions workflow command: an annotation on its line."""
        level = "notice" if self.confidence == "guess" else "warning"
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
