"""`strictcall lint --diff BASE`: the seed's review of one change. Findings only where a changed
line turned a presence test (`k in d`, `x is None`, `.get(k, default)`, `hasattr`) into a
truth test or an `or` default, with the old line beside the new one and, where both versions
of the function can be run, the input on which they differ."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from strictcall.review.finding import Finding
from strictcall.review.lint import lint_source

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
DIFF_EXAMPLES = 400
"""Inputs `check` tries per changed function: enough for the falsy family, quick in CI."""


class _NotADiff(Exception):
    """The revision or the repository cannot be read with git (caught in run_diff, which
    says why in one line)."""


@dataclass(frozen=True, slots=True)
class Changed:
    """One changed finding: the new line, the old presence test it replaced, the evidence."""

    finding: Finding
    old_line: int
    old_text: str
    new_text: str
    counterexample: str
    """`input → OLD ... ; NEW ...`, or why there is none."""

    def as_text(self) -> str:
        """The finding's line, then old and new side by side, then the counterexample."""
        width = max(len(str(self.old_line)), len(str(self.finding.line)))
        return (
            f"{self.finding.as_text()}\n"
            f"    - old {self.old_line:>{width}} | {self.old_text}\n"
            f"    + new {self.finding.line:>{width}} | {self.new_text}\n"
            f"    {self.counterexample}"
        )

    def as_json(self) -> dict[str, object]:
        """The finding as JSON, with `old`, `new` and `counterexample`."""
        document = self.finding.as_json()
        document["old"] = {"line": self.old_line, "text": self.old_text}
        document["new"] = {"line": self.finding.line, "text": self.new_text}
        document["counterexample"] = self.counterexample
        return document


def run_diff(base: str, paths: list[str], *, output: str, out: TextIO, err: TextIO) -> int:
    """Lint the changes since `base`; the exit status as `lint`'s (2, and one line on `err`,
    when git cannot compare with `base` here)."""
    from strictcall.review.commands import EXIT_DIFFERENT, EXIT_SAME, EXIT_TROUBLE, write_findings

    try:
        changes = changed_lines(base, paths)
    except _NotADiff as exc:
        err.write(f"strictcall lint: --diff {base}: {exc}\n")
        return EXIT_TROUBLE
    changed: list[Changed] = []
    for path, lines in changes.items():
        try:
            new_source = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        old_source = _git(["show", f"{base}:./{path}"], check=False) or ""
        changed.extend(review_change(path, old_source, new_source, lines))
    if output == "json":
        document = {"findings": [c.as_json() for c in changed], "count": len(changed)}
        out.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    elif output in ("sarif", "github"):
        write_findings([c.finding for c in changed], output, out)
    else:
        for one in changed:
            out.write(one.as_text() + "\n")
    return EXIT_DIFFERENT if changed else EXIT_SAME


def changed_lines(base: str, paths: list[str]) -> dict[str, set[int]]:
    """The lines of each changed .py file (paths relative to the current folder) that the
    change since `base` added or modified.

    Raises:
        _NotADiff: git cannot compare with `base` here.
    """
    text = _git(
        ["diff", "--relative", "-U0", "--no-color", "--no-ext-diff", base, "--", *paths],
        check=True,
    )
    assert text is not None
    found: dict[str, set[int]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("+++ "):
            name = line[4:]
            current = name[2:] if name.startswith("b/") else None
            if current is not None and not current.endswith(".py"):
                current = None
        elif current is not None and (match := _HUNK.match(line)):
            start, count = int(match.group(1)), int(match.group(2) or "1")
            found.setdefault(current, set()).update(range(start, start + count))
    return found


def review_change(
    path: str, old_source: str, new_source: str, lines: set[int], *, run: bool = True
) -> list[Changed]:
    """The findings on changed `lines` of the new source whose old function tested the same
    key or attribute for presence; each with the counterexample when `run`."""
    try:
        old_tree = ast.parse(old_source)
        new_findings = lint_source(new_source, path, explore=True)
    except SyntaxError:
        return []
    old_findings = lint_source(old_source, path, explore=True) if old_source else []
    already = {(f.scope, f.subject, f.rule.id) for f in old_findings}
    old_lines = old_source.splitlines()
    new_lines = new_source.splitlines()
    found: list[Changed] = []
    for finding in new_findings:
        if not lines & set(range(finding.line, finding.end_line + 1)) or not finding.subject:
            continue
        if (finding.scope, finding.subject, finding.rule.id) in already:
            continue  # the old code tested it the same way: not this change's doing
        old_line = presence_test(old_tree, finding.scope, finding.subject)
        if old_line is None:
            continue
        counterexample = "counterexample: not run"
        if run:
            counterexample = _counterexample(path, old_source, new_source, finding.scope)
        found.append(
            Changed(
                finding,
                old_line,
                old_lines[old_line - 1].strip(),
                new_lines[finding.line - 1].strip(),
                counterexample,
            )
        )
    return found


def presence_test(tree: ast.AST, scope: str, subject: str) -> int | None:
    """The line of the first presence test of key or attribute `subject` in function `scope`
    of the old module (its top level when `scope` is ""): `"k" in d`, `d.get("k") is None`,
    `x is None` for x read by it, `d.get("k", default)`, `hasattr(o, "k")`, `getattr` with a
    default, or `o.k is None`."""
    body = _function(tree, scope)
    if body is None:
        return None
    read_names = {
        target.id
        for node in ast.walk(body)
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr)
        and node.value is not None
        and _reads(node.value, subject)
        for target in _targets(node)
    }
    lines = [
        getattr(node, "lineno", 0)
        for node in ast.walk(body)
        if _is_presence(node, subject, read_names)
    ]
    return min(lines) if lines else None


def _function(tree: ast.AST, scope: str) -> ast.AST | None:
    if not scope:
        return tree
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == scope:
            return node
    return None


def _targets(node: ast.Assign | ast.AnnAssign | ast.NamedExpr) -> list[ast.Name]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [t for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)]


def _reads(node: ast.AST, subject: str) -> bool:
    """The expression reads key or attribute `subject` somewhere."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Attribute) and inner.attr == subject:
            return True
        if isinstance(inner, ast.Subscript) and _is_key(inner.slice, subject):
            return True
        if (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr == "get"
            and inner.args
            and _is_key(inner.args[0], subject)
        ):
            return True
    return False


def _is_key(node: ast.AST, subject: str) -> bool:
    return isinstance(node, ast.Constant) and str(node.value) == subject


def _is_presence(node: ast.AST, subject: str, names: set[str]) -> bool:
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        op, left, right = node.ops[0], node.left, node.comparators[0]
        if isinstance(op, ast.In | ast.NotIn):
            return _is_key(left, subject)
        if isinstance(op, ast.Is | ast.IsNot):
            for side, other in ((left, right), (right, left)):
                if isinstance(other, ast.Constant) and other.value is None:
                    if isinstance(side, ast.Name) and side.id in names:
                        return True
                    if _reads(side, subject):
                        return True
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "hasattr" and len(node.args) == 2:
            return _is_key(node.args[1], subject)
        if node.func.id == "getattr" and len(node.args) == 3:
            return _is_key(node.args[1], subject)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and len(node.args) == 2
        and _is_key(node.args[0], subject)
        and not (isinstance(node.args[1], ast.Constant) and node.args[1].value is None)
    )


def _counterexample(path: str, old_source: str, new_source: str, scope: str) -> str:
    """Run `check` on the old and new versions of function `scope`: the first input on which
    they differ, or why there is none."""
    if not scope:
        return "counterexample: none (the line is not in a function)"
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        return "counterexample: not run (install strictcall[review] for hypothesis)"
    from strictcall.review.check import compare_functions
    from strictcall.review.commands import _arity, render_input
    from strictcall.review.load import Loaded, load_function

    with tempfile.TemporaryDirectory(prefix="strictcall-diff-") as folder:
        loaded: list[Any] = []
        for label, source in (("OLD", old_source), ("NEW", new_source)):
            file = Path(folder) / label.lower() / Path(path).name
            file.parent.mkdir()
            file.write_text(source, encoding="utf-8")
            loaded.append(load_function(f"{file}:{scope}", label=label))
        old, new = loaded
        if not (isinstance(old, Loaded) and isinstance(new, Loaded)):
            why = next(one.message for one in loaded if not isinstance(one, Loaded))
            return f"counterexample: not run ({why.split(': ', 1)[-1]})"
        arity = _arity(old.function)
        if arity != _arity(new.function) or arity < 1:
            return "counterexample: not run (the two versions take different arguments)"
        report = compare_functions(old.function, new.function, arity, max_examples=DIFF_EXAMPLES)
    if not report.counterexamples:
        return f"counterexample: none found in {report.inputs_run} inputs"
    first = report.counterexamples[0]
    names = [f"arg{i}" for i in range(arity)]
    return (
        f"counterexample: {render_input(first.args, names)}: OLD {_said(first.old)}; "
        f"NEW {_said(first.new)}"
    )


def _said(outcome: Any) -> str:
    from strictcall.review.commands import render

    if outcome.kind == "returned":
        text = render(outcome.value)
        return "returned " + (text if len(text) <= 80 else text[:77] + "...")
    if outcome.kind == "raised":
        return f"raised {outcome.exception}"
    return "did not return in time"


def _git(arguments: list[str], *, check: bool) -> str | None:
    try:
        done = subprocess.run(
            ["git", *arguments], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _NotADiff(f"git did not run ({type(exc).__name__})") from None
    if done.returncode != 0:
        if check:
            last = (done.stderr.strip().splitlines() or ["git failed"])[-1]
            raise _NotADiff(last)
        return None
    return done.stdout


__all__ = ["Changed", "changed_lines", "review_change", "run_diff"]
