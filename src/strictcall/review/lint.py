"""`strictcall lint`: where Python source lets a legal falsy value (0, false, "", [], {}, null)
read as a missing one: a value that may be missing, tested for truth or defaulted with `or`.

The values are followed by `flow`; what they may legally hold is read by `legal`; this module
turns each use into a finding a reviewer can act on (the values, why, the fix)."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

from strictcall.review.finding import Edit, Finding
from strictcall.review.flow import Hit, Read, Scope, scopes
from strictcall.review.legal import NULL, Facts, collect_facts, merge_facts
from strictcall.review.rules import (
    GET_IS_NONE,
    GET_OR_DEFAULT,
    GET_TRUTH_TEST,
    READ_OR_DEFAULT,
    Rule,
)
from strictcall.review.suppress import apply_suppressions

__all__ = ["Edit", "Finding", "lint_source", "python_files"]

_SHOWN = 60


def lint_source(
    source: str,
    path: str = "<string>",
    *,
    explore: bool = False,
    imported: Facts | None = None,
    tree: ast.Module | None = None,
) -> list[Finding]:
    """Every unsuppressed finding the code shows in one module's source, in order; with
    `explore`, the guesses too. Evidence is the module's own (and, in `imported`, that of the
    modules it imports from), so a file gives the same findings alone or in its package;
    `tree` is the source already parsed.

    Raises:
        SyntaxError: the source is not Python.
    """
    if tree is None:
        tree = ast.parse(source, filename=path)
    writer = _Writer(source, path)
    facts = merge_facts(collect_facts(tree, source), imported)
    seen: set[tuple[int, int, str]] = set()
    findings: list[Finding] = []
    for scope in scopes(tree, facts, source):
        for hit in scope.run():
            if hit.confidence == "guess" and not explore:
                continue
            finding = writer.finding(hit, scope)
            place = (finding.line, finding.col, finding.rule.id)
            if place not in seen:
                seen.add(place)
                findings.append(finding)
    return apply_suppressions(findings, source, path)


def python_files(paths: list[str]) -> Iterator[Path]:
    """The .py files under each path (a file is itself), skipping hidden and cache folders.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    for name in paths:
        path = Path(name)
        if path.is_file():
            yield path
        elif path.is_dir():
            for found in sorted(path.rglob("*.py")):
                parts = found.relative_to(path).parts[:-1]
                if not any(p.startswith(".") or p == "__pycache__" for p in parts):
                    yield found
        else:
            raise FileNotFoundError(name)


class _Writer:
    """Turns a hit into a finding: the rule, the words, the input and the fix."""

    def __init__(self, source: str, path: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.path = path

    def finding(self, hit: Hit, scope: Scope) -> Finding:
        read = hit.read
        shown = self._text(hit.node)
        origin = ""
        if hit.name is not None:
            origin = f" (read by `{self._text(read.node)}` on line {read.node.lineno})"
        rule: Rule
        fix: Edit | None = None
        if hit.use == "truth":
            rule = GET_TRUTH_TEST
            message = f"`{shown}`{origin} is tested for truth ({hit.context})"
            remedy = self._presence(read, hit)
            fix = self._certain_fix(hit, scope)
        elif hit.use == "or":
            assert hit.default is not None
            default = self._text(hit.default)
            rule = GET_OR_DEFAULT if hit.name is None and read.kind == "get" else READ_OR_DEFAULT
            message = f"`{shown} or {default}`{origin} replaces every falsy value"
            remedy = self._default_remedy(read, hit, default)
        else:
            rule = GET_IS_NONE
            compare = scope.parents.get(hit.node)
            message = f"`{self._text(compare or hit.node)}` reads an explicit null as missing"
            remedy = f"`{self._key_text(read)} in {self._text(read.receiver)}` tells them apart"
        line, col, end_line, end_col = self._span(hit.node)
        return Finding(
            self.path,
            line,
            col + 1,
            end_line,
            end_col + 1,
            rule,
            message,
            _input(read, hit.falsy[0] if hit.falsy else "0"),
            fix,
            hit.falsy,
            hit.why,
            remedy,
            hit.confidence,
            read.key or "",
            getattr(scope.node, "name", ""),
            _counterexample(read, hit, self._text(hit.default) if hit.default else ""),
        )

    def _key_text(self, read: Read) -> str:
        return self._text(read.key_node) if read.key_node is not None else repr(read.key)

    def _presence(self, read: Read, hit: Hit) -> str:
        subject = hit.name or self._text(read.node)
        if read.kind == "attribute":
            return f"test `{subject} is None` (or compare with what is meant)"
        if read.kind == "subscript":
            return f"compare `{subject}` with what is meant (`is None`, `== 0`, `len(...) == 0`)"
        nulls = NULL in hit.falsy
        key = f"`{self._key_text(read)} in {self._text(read.receiver)}`"
        also = "" if nulls else f", or `{subject} is not None` where null means missing"
        return f"test presence: {key}{also}"

    def _default_remedy(self, read: Read, hit: Hit, default: str) -> str:
        subject = hit.name or self._text(read.node)
        if read.kind == "get" and hit.name is None:
            receiver = self._text(read.receiver)
            return (
                f"`{receiver}.get({self._key_text(read)}, {default})` for a missing key only, "
                f"or `{default} if {subject} is None else {subject}`"
            )
        return f"`{default} if {subject} is None else {subject}`"

    def _certain_fix(self, hit: Hit, scope: Scope) -> Edit | None:
        """`if d.get(k):` whose body reads `d[k]` means `if k in d:`; nowhere else is certain."""
        node = hit.node
        parent = scope.parents.get(node)
        if not (
            hit.name is None
            and hit.read.kind == "get"
            and isinstance(parent, ast.If)
            and parent.test is node
            and isinstance(node, ast.Call)
            and len(node.args) == 1
        ):
            return None
        key = node.args[0]
        receiver = hit.read.receiver
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str | int)):
            return None
        if not _is_plain_reference(receiver):
            return None
        wanted = ast.dump(receiver)
        reads = any(
            isinstance(sub, ast.Subscript)
            and isinstance(sub.ctx, ast.Load)
            and ast.dump(sub.value) == wanted
            and isinstance(sub.slice, ast.Constant)
            and type(sub.slice.value) is type(key.value)
            and sub.slice.value == key.value
            for statement in parent.body
            for sub in ast.walk(statement)
        )
        if not reads:
            return None
        line, col, end_line, end_col = self._span(node)
        return Edit(line, col, end_line, end_col, f"{self._text(key)} in {self._text(receiver)}")

    def _span(self, node: ast.AST) -> tuple[int, int, int, int]:
        line, end_line = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
        col = char_col(self.lines, line, node.col_offset)  # type: ignore[attr-defined]
        end_col = char_col(self.lines, end_line, node.end_col_offset or 0)  # type: ignore[attr-defined]
        return line, col, end_line, end_col

    def _text(self, node: ast.AST) -> str:
        text = " ".join((ast.get_source_segment(self.source, node) or "...").split())
        return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def char_col(lines: list[str], line: int, byte_col: int) -> int:
    """ast counts columns in UTF-8 bytes; editors and SARIF count characters."""
    if line - 1 >= len(lines):
        return byte_col
    return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


def _is_plain_reference(node: ast.AST) -> bool:
    """A name or a chain of attributes on a name: the same object each time it is read."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _input(read: Read, falsy: str) -> str:
    """The input that tells the readings apart: the key (or attribute) holding the falsy value."""
    if read.kind == "attribute":
        return f"{read.key}={falsy}"
    if read.key is not None:
        return "{" + json.dumps(read.key, ensure_ascii=False) + ": " + falsy + "}"
    name = ast.unparse(read.key_node) if read.key_node is not None else "k"
    if len(name) > 30:
        name = "key"
    return "{<" + name + ">: " + falsy + "}"


def _counterexample(read: Read, hit: Hit, default: str) -> str:
    """The falsy input and its two readings: this line's, and presence's."""
    falsy = hit.falsy[0] if hit.falsy else "0"
    given = _input(read, falsy)
    if hit.use == "or":
        return f"with {given} this line gives {default}, where the value given is {falsy}"
    if hit.use == "none":
        return f"with {given} this line reads no value, where a present {falsy} is one"
    if hit.context in ("all()", "any()", "filter(None, ...)"):
        return f"with {given} {hit.context} counts it as missing, where {falsy} is present"
    return f"with {given} the {hit.context} reads no value, where {falsy} is present"
