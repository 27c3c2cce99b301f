"""The declarations a module ties itself to by importing them, for `strictcall lint`: the
classes named in its `from X import Name` lines, read from X's file on disk. They depend on
the module alone, never on which other files are linted with it."""

from __future__ import annotations

import ast
from pathlib import Path

from strictcall.review.legal import Facts, collect_facts

_MAX_SOURCE = 2_000_000
"""Characters of an imported module read at most (a generated file is not worth parsing)."""


class ImportedFacts:
    """Reads the imported modules of each linted file once, however many files import them."""

    def __init__(self) -> None:
        self._parsed: dict[Path, Facts | None] = {}

    def for_module(self, path: Path, tree: ast.Module) -> Facts:
        """The classes `path` imports by name, under the names it imports them as (imports at
        its top level and in `if` blocks there, such as `if TYPE_CHECKING:`)."""
        merged = Facts()
        statements = [
            inner
            for statement in tree.body
            for inner in (statement.body if isinstance(statement, ast.If) else [statement])
        ]
        for node in statements:
            if not isinstance(node, ast.ImportFrom):
                continue
            found = _module_file(path, node.module, node.level)
            facts = self._facts(found) if found is not None else None
            if facts is None:
                continue
            for alias in node.names:
                if alias.name not in facts.classes:
                    continue
                shown = alias.asname or alias.name
                merged.classes.setdefault(shown, facts.classes[alias.name])
                merged.bases.setdefault(shown, facts.bases.get(alias.name, []))
                for base in _ancestors(facts, alias.name):
                    merged.classes.setdefault(base, facts.classes[base])
                    merged.bases.setdefault(base, facts.bases.get(base, []))
                for (owner, key), meaning in facts.meanings.items():
                    if owner == alias.name:
                        merged.meanings.setdefault((shown, key), meaning)
                    elif owner in _ancestors(facts, alias.name):
                        merged.meanings.setdefault((owner, key), meaning)
        return merged

    def _facts(self, path: Path) -> Facts | None:
        if path not in self._parsed:
            try:
                source = path.read_text(encoding="utf-8")[:_MAX_SOURCE]
                self._parsed[path] = collect_facts(ast.parse(source), source)
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                self._parsed[path] = None
        return self._parsed[path]


def _ancestors(facts: Facts, name: str) -> list[str]:
    """The base classes of `name` that the same module defines, nearest first."""
    found: list[str] = []
    todo = list(facts.bases.get(name, []))
    while todo:
        base = todo.pop(0)
        if base in found or base not in facts.classes:
            continue
        found.append(base)
        todo.extend(facts.bases.get(base, []))
    return found


def _module_file(path: Path, module: str | None, level: int) -> Path | None:
    """The file of the module a `from ... import` names, relative to the importing file."""
    parts = module.split(".") if module else []
    roots: list[Path] = []
    folder = path.resolve().parent
    if level:
        base = folder
        for _ in range(level - 1):
            base = base.parent
        roots.append(base)
    else:
        roots.append(folder)  # a sibling, as when the file runs as a script
        top = folder
        while (top / "__init__.py").is_file() and top.parent != top:
            top = top.parent
        roots.append(top)  # the folder holding the top package
    for root in roots:
        target = root.joinpath(*parts)
        for candidate in (target.with_suffix(".py"), target / "__init__.py"):
            if parts and candidate.is_file():
                return candidate
        if not parts and (root / "__init__.py").is_file():
            return root / "__init__.py"
    return None
