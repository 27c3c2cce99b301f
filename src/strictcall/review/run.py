"""`strictcall lint --run`: each finding in a function whose module imports cleanly is checked
by running the function as written beside the same function reading the value by presence;
a finding no input tells apart is dropped, the others carry the input that does."""

from __future__ import annotations

import ast
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from strictcall.review.finding import Finding

RUN_EXAMPLES: Final = 400
"""Inputs `lint --run` tries per finding."""


def run_findings(path: Path, source: str, findings: list[Finding]) -> list[Finding]:
    """The findings `check` shows, each with its counterexample; those it could not run are
    kept and say why; those no input tells apart are dropped."""
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        return [_note(f, "not run: install strictcall[review] for hypothesis") for f in findings]
    kept: list[Finding] = []
    for finding in findings:
        if finding.rule.id == "SC100":
            kept.append(finding)
            continue
        if not finding.scope:
            kept.append(_note(finding, "not run: the line is not in a function"))
            continue
        shown = _run_one(path, source, finding)
        if shown is not None:
            kept.append(replace(finding, counterexample=shown))
    return kept


def _note(finding: Finding, why: str) -> Finding:
    base = finding.counterexample or finding.input
    return replace(finding, counterexample=f"{base} ({why})")


def _run_one(path: Path, source: str, finding: Finding) -> str | None:
    """check's counterexample for one finding, a note when it cannot run, None when none."""
    from strictcall.review.check import compare_functions
    from strictcall.review.commands import _arity, render_input
    from strictcall.review.diff import _said
    from strictcall.review.load import Loaded, load_function

    base = finding.counterexample or finding.input
    variant = presence_variant(source, finding)
    if variant is None:
        return f"{base} (not run: no presence reading to compare with)"
    old = load_function(f"{path}:{finding.scope}", label="AS-WRITTEN")
    if not isinstance(old, Loaded):
        return f"{base} (not run: {old.message.split(': ', 1)[-1]})"
    with tempfile.TemporaryDirectory(prefix="strictcall-run-") as folder:
        file = Path(folder) / path.name
        file.write_text(variant, encoding="utf-8")
        sys.path.insert(0, str(path.resolve().parent))  # its siblings import as the original's
        try:
            new: Any = load_function(f"{file}:{finding.scope}", label="BY-PRESENCE")
        finally:
            sys.path.remove(str(path.resolve().parent))
        if not isinstance(new, Loaded):
            return f"{base} (not run: {new.message.split(': ', 1)[-1]})"
        arity = _arity(old.function)
        if arity < 1 or arity != _arity(new.function):
            return f"{base} (not run: the function takes no positional argument)"
        report = compare_functions(old.function, new.function, arity, max_examples=RUN_EXAMPLES)
    if not report.counterexamples:
        return None
    first = report.counterexamples[0]
    names = [f"arg{i}" for i in range(arity)]
    return (
        f"check ran it: {render_input(first.args, names)}: as written it {_said(first.old)}; "
        f"read by presence it {_said(first.new)}"
    )


def presence_variant(source: str, finding: Finding) -> str | None:
    """The module's source with the finding's expression read by presence: `"k" in d` for a
    `.get(k)` tested for truth, `d.get(k, default)` or `default if x is None else x` for an
    `or`, `x is not None` for another truth test, `"k" in d` for `d.get(k) is not None`."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    target = _node_at(tree, lines, finding)
    if target is None:
        return None
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    parent = parents.get(target)
    if finding.rule.id in ("SC102", "SC103"):
        if not isinstance(parent, ast.BoolOp):
            return None
        index = next(i for i, v in enumerate(parent.values) if v is target)
        default = parent.values[index + 1]
        read = _get_parts(target)
        presence: ast.expr
        if read is not None and len(read[2]) == 1:
            receiver, key, _ = read
            presence = ast.Call(ast.Attribute(receiver, "get", ast.Load()), [key, default], [])
        else:
            test = ast.Compare(target, [ast.Is()], [ast.Constant(None)])
            presence = ast.IfExp(test, default, target)
        rest = [*parent.values[:index], presence, *parent.values[index + 2 :]]
        replacement: ast.expr = rest[0] if len(rest) == 1 else ast.BoolOp(ast.Or(), rest)
        _swap(parents, parent, replacement)
    elif finding.rule.id == "SC104":
        read = _get_parts(target)
        if not isinstance(parent, ast.Compare) or read is None:
            return None
        op: ast.cmpop = ast.In() if isinstance(parent.ops[0], ast.IsNot) else ast.NotIn()
        _swap(parents, parent, ast.Compare(read[1], [op], [read[0]]))
    else:
        read = _get_parts(target)
        if read is not None:
            presence = ast.Compare(read[1], [ast.In()], [read[0]])
        else:
            presence = ast.Compare(target, [ast.IsNot()], [ast.Constant(None)])
        _swap(parents, target, presence)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _get_parts(node: ast.expr) -> tuple[ast.expr, ast.expr, list[ast.expr]] | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and 1 <= len(node.args) <= 2
        and not node.keywords
    ):
        return node.func.value, node.args[0], node.args
    return None


def _node_at(tree: ast.AST, lines: list[str], finding: Finding) -> ast.expr | None:
    from strictcall.review.lint import char_col

    for node in ast.walk(tree):
        if not isinstance(node, ast.expr) or node.lineno != finding.line:
            continue
        if node.end_lineno != finding.end_line:
            continue
        col = char_col(lines, node.lineno, node.col_offset) + 1
        end = char_col(lines, node.end_lineno or node.lineno, node.end_col_offset or 0) + 1
        if (col, end) == (finding.col, finding.end_col):
            return node
    return None


def _swap(parents: dict[ast.AST, ast.AST], old: ast.AST, new: ast.expr) -> None:
    """Put `new` where `old` is in its parent."""
    holder = parents[old]
    for name, value in ast.iter_fields(holder):
        if value is old:
            setattr(holder, name, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
