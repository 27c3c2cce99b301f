"""The truthiness finder behind `strictcall lint`: where Python source tests a value read from
a mapping for truth (or for None) where presence of the key may be what is meant."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from strictcall.review.rules import (
    GET_IS_NONE,
    GET_OR_DEFAULT,
    GET_TRUTH_TEST,
    READ_OR_DEFAULT,
    SUPPRESSION_WITHOUT_REASON,
    Rule,
)

_SUPPRESSION = re.compile(
    r"#\s*strictcall:\s*ignore(?:\[(?P<ids>[A-Za-z0-9_,\s]*)\])?(?P<rest>.*)$"
)
_REASON = re.compile(r"^\s*--\s*\S")
_SHOWN = 60


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
            "fixable": self.fix is not None,
        }

    def as_text(self) -> str:
        """The finding as one line: path:line:col: rule message question input."""
        return (
            f"{self.path}:{self.line}:{self.col}: {self.rule.id} {self.message}. "
            f"{self.question} Tells them apart: {self.input}"
        )


def lint_source(source: str, path: str = "<string>") -> list[Finding]:
    """Every unsuppressed finding in one module's source, in order.

    Raises:
        SyntaxError: the source is not Python.
    """
    tree = ast.parse(source, filename=path)
    finder = _Finder(source, path)
    finder.visit(tree)
    return _apply_suppressions(finder.findings, source, path)


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


# --- finding -------------------------------------------------------------------------------


class _Finder(ast.NodeVisitor):
    """Walks one module, keeping each node's parent and each scope's reads from mappings."""

    def __init__(self, source: str, path: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.path = path
        self.findings: list[Finding] = []
        self.parents: dict[ast.AST, ast.AST] = {}
        # name -> (line, the read) of its last assignment from d.get(k) or d["k"], per scope
        self.scopes: list[dict[str, tuple[int, ast.expr]]] = [{}]

    def visit(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            self.parents[child] = node
        super().visit(node)

    def _scoped(self, node: ast.AST) -> None:
        self.scopes.append({})
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scoped

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if _is_get(node.value) or _is_key_read(node.value):
                    self.scopes[-1][target.id] = (node.lineno, node.value)
                else:
                    self.scopes[-1].pop(target.id, None)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        if not _is_get(node):
            return
        parent = self.parents.get(node)
        key = node.args[0]
        if _reads_no_data(node):
            return
        if not (_falsy_matters(key) or (_null_matters(key) and _is_none_test(node, parent))):
            return
        if _in_boolean_context(node, self.parents):
            if _reads_a_flag(node):
                return
            fix = self._certain_fix(node, parent)
            falsy = _falsy_like(node.args[1], node) if len(node.args) == 2 else _falsy_of(node)
            self._add(
                node,
                GET_TRUTH_TEST,
                f"`{self._text(node)}` is tested for truth",
                _input(key, falsy),
                fix,
            )
        elif isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or):
            default = _default_after(node, parent)
            if default is not None and not _is_empty_literal(default):
                self._add(
                    node,
                    GET_OR_DEFAULT,
                    f"`{self._text(node)} or {self._text(default)}` replaces every falsy value",
                    _input(key, _falsy_like(default, node)),
                )
        elif (
            parent is not None
            and _is_none_test(node, parent)
            and len(node.args) == 1  # a default other than None tells null from missing itself
            and _null_matters(key)
            and not self._fills_in(node)
        ):
            self._add(
                node,
                GET_IS_NONE,
                f"`{self._text(parent)}` reads an explicit null as a missing key",
                _input(key, "null"),
            )

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Or) or _in_boolean_context(node, self.parents):
            return
        for value, default in zip(node.values, node.values[1:], strict=False):
            if _is_empty_literal(default):
                continue
            key: ast.expr | None = None
            if _is_key_read(value):
                assert isinstance(value, ast.Subscript)
                key = value.slice
            elif isinstance(value, ast.Name):
                read = self._read_of(value.id, value.lineno)
                if read is not None:
                    key = read.args[0] if isinstance(read, ast.Call) else read.slice  # type: ignore[attr-defined]
            if key is not None and _falsy_matters(key):
                self._add(
                    value,
                    READ_OR_DEFAULT,
                    f"`{self._text(value)} or {self._text(default)}` replaces every "
                    "falsy value read from the mapping",
                    _input(key, _falsy_like(default)),
                )

    def _fills_in(self, node: ast.Call) -> bool:
        """`if d.get(k) is None: d[k] = ...`: null and missing are both filled in, on purpose."""
        test = self.parents.get(node)
        statement = self.parents.get(test) if test is not None else None
        if not (isinstance(statement, ast.If) and statement.test is test):
            return False
        receiver = ast.dump(node.func.value)  # type: ignore[attr-defined]
        key = ast.dump(node.args[0])
        return any(
            isinstance(target, ast.Subscript)
            and ast.dump(target.value) == receiver
            and ast.dump(target.slice) == key
            for child in statement.body
            if isinstance(child, ast.Assign)
            for target in child.targets
        )

    def _read_of(self, name: str, line: int) -> ast.expr | None:
        found = self.scopes[-1].get(name)
        if found is None or found[0] > line:
            return None
        return found[1]

    def _certain_fix(self, node: ast.Call, parent: ast.AST | None) -> Edit | None:
        """`if d.get(k):` whose body reads `d[k]` means `if k in d:`; nowhere else is certain."""
        if not (isinstance(parent, ast.If) and parent.test is node and len(node.args) == 1):
            return None
        key = node.args[0]
        receiver = node.func.value  # type: ignore[attr-defined]
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
        col = _char_col(self.lines, line, node.col_offset)  # type: ignore[attr-defined]
        end_col = _char_col(self.lines, end_line, node.end_col_offset or 0)  # type: ignore[attr-defined]
        return line, col, end_line, end_col

    def _text(self, node: ast.AST) -> str:
        text = " ".join((ast.get_source_segment(self.source, node) or "...").split())
        return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."

    def _add(
        self, node: ast.AST, rule: Rule, message: str, example: str, fix: Edit | None = None
    ) -> None:
        line, col, end_line, end_col = self._span(node)
        self.findings.append(
            Finding(self.path, line, col + 1, end_line, end_col + 1, rule, message, example, fix)
        )


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    """ast counts columns in UTF-8 bytes; editors and SARIF count characters."""
    if line - 1 >= len(lines):
        return byte_col
    return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


def _is_get(node: ast.AST) -> bool:
    """`x.get(k)` or `x.get(k, default)`: a mapping's get, by its shape."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and 1 <= len(node.args) <= 2
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    )


_FLAG = re.compile(
    r"(^|_)(is|has|supports?|enabled?|disabled?|use|uses|allow|allows|should|can|needs?|strict"
    r"|validate|include|defer|skip|force|verbose|debug|ignore|requires?)(_|$)"
    r"|_(enabled|disabled|only|flag|allowed)$"
)
_NOT_DATA = frozenset({"__dict__", "environ", "modules"})
_NOT_DATA_CALLS = frozenset({"vars", "globals", "locals", "getenv"})


_WORDS = re.compile(r"[A-Z]?[a-z]+|[0-9]+|[A-Z]+(?![a-z])")
_NUMBER_WORDS = frozenset(
    [
        "timeout",
        "limit",
        "count",
        "size",
        "port",
        "retries",
        "temperature",
        "n",
        "k",
        "p",
        "seed",
        "dimensions",
        "offset",
        "index",
        "page",
        "budget",
        "tokens",
        "ttl",
        "delay",
        "interval",
        "threshold",
        "score",
        "weight",
        "amount",
        "total",
        "number",
        "num",
        "quantity",
        "price",
        "cost",
        "balance",
        "rate",
        "ratio",
        "percent",
        "duration",
        "seconds",
        "ms",
        "attempts",
        "concurrency",
        "workers",
        "capacity",
        "quota",
        "penalty",
    ]
)
"""Last words of keys that name numbers, where 0 is a value: a limit, a timeout, a count."""
_RESULT_WORDS = frozenset({"result", "value"})
"""Last words of keys that name a tool's answer, where false, "", [], {} and null are answers."""


def _key_name(key: ast.AST) -> str | None:
    """The key when it is a string constant; a variable or an attribute says nothing sure."""
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value
    return None


def _last_word(key: ast.AST) -> str:
    name = _key_name(key)
    if name is None or _FLAG.search(name.lower()):
        return ""
    words = _WORDS.findall(name)
    return words[-1].lower() if words else ""


def _falsy_matters(key: ast.AST) -> bool:
    """The key names a number (a count, a limit, a timeout) or a result, for which 0, false,
    "", [] or {} is an answer. Ids, names, texts, flags and settings are left alone: in the
    agent libraries read for docs/LINT.md an empty or false one meant "not set" nearly always."""
    word = _last_word(key)
    return word in _NUMBER_WORDS or word in _RESULT_WORDS


def _null_matters(key: ast.AST) -> bool:
    """The key names a result or a value, for which an explicit null is an answer."""
    return _last_word(key) in _RESULT_WORDS


def _reads_a_flag(get: ast.Call) -> bool:
    """A bool flag: its false and its absence are one answer (`profile.get("supports_x",
    False)`, `opts.get("is_async")`), so a truth test asks nothing."""
    if len(get.args) == 2:
        default = get.args[1]
        if isinstance(default, ast.Constant) and (
            isinstance(default.value, bool) or (default.value is not None and not default.value)
        ):
            return True
    key = get.args[0]
    return (
        isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and _FLAG.search(key.value.lower()) is not None
    )


def _reads_no_data(get: ast.Call) -> bool:
    """Reads from a namespace, not from data: `cls.__dict__`, `os.environ` (or `env`),
    `sys.modules`, `vars(x)`, `globals()`: an empty entry there is not a value someone sent (an
    empty environment variable is unset by long convention)."""
    receiver = get.func.value  # type: ignore[attr-defined]
    if isinstance(receiver, ast.Attribute):
        return receiver.attr in _NOT_DATA
    if isinstance(receiver, ast.Name):
        return receiver.id in ("env", "environ")
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name):
        return receiver.func.id in _NOT_DATA_CALLS
    return False


def _is_key_read(node: ast.AST) -> bool:
    """`d["k"]`: a read from a mapping by a string key (an index would be a sequence)."""
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    )


def _is_plain_reference(node: ast.AST) -> bool:
    """A name or a chain of attributes on a name: the same object each time it is read."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _in_boolean_context(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True when only the truth of the node's value is used."""
    parent = parents.get(node)
    if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert):
        return parent.test is node
    if isinstance(parent, ast.comprehension):
        return node in parent.ifs
    if isinstance(parent, ast.UnaryOp):
        return isinstance(parent.op, ast.Not)
    if isinstance(parent, ast.Call):
        return (
            isinstance(parent.func, ast.Name) and parent.func.id == "bool" and parent.args == [node]
        )
    if isinstance(parent, ast.BoolOp):
        if node is not parent.values[-1] and isinstance(parent.op, ast.And):
            return True
        return _in_boolean_context(parent, parents)
    return False


def _default_after(node: ast.AST, parent: ast.BoolOp) -> ast.expr | None:
    index = next(i for i, value in enumerate(parent.values) if value is node)
    return parent.values[index + 1] if index + 1 < len(parent.values) else None


def _is_none_test(node: ast.AST, parent: ast.AST | None) -> bool:
    return (
        isinstance(parent, ast.Compare)
        and len(parent.ops) == 1
        and isinstance(parent.ops[0], ast.Is | ast.IsNot)
        and any(
            isinstance(side, ast.Constant) and side.value is None
            for side in (parent.left, *parent.comparators)
        )
    )


_EMPTY_CALLS = frozenset({"list", "dict", "set", "tuple", "str", "frozenset", "bytes"})


def _is_empty_literal(node: ast.AST) -> bool:
    """A default that is itself falsy (`or []`, `or ""`, `or 0`, `or None`, `or Limits()`), or
    another key read (`d.get("a") or d.get("b")`, one name and its alias): a missing key and a
    falsy value read the same there, which is what such a line means."""
    if _is_get(node) or _is_key_read(node):
        return True
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id[:1].isupper()
        and not node.args
        and not node.keywords
    ):
        return True
    if isinstance(node, ast.Constant):
        return not node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return not node.elts
    if isinstance(node, ast.Dict):
        return not node.keys
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _EMPTY_CALLS
        and not node.args
        and not node.keywords
    )


def _falsy_of(get: ast.Call) -> str:
    """The falsy value to show for a get with no default: "" for the environment, else 0."""
    receiver = get.func.value  # type: ignore[attr-defined]
    if isinstance(receiver, ast.Attribute | ast.Name):
        name = receiver.attr if isinstance(receiver, ast.Attribute) else receiver.id
        if name in ("environ", "env", "headers", "query_params", "params", "cookies"):
            return '""'
    return "0"


def _falsy_like(default: ast.AST, get: ast.Call | None = None) -> str:
    """The falsy JSON value of the default's type: the one the default would replace."""
    if get is not None and _falsy_of(get) == '""':
        return '""'
    if isinstance(default, ast.Constant):
        if isinstance(default.value, bool):
            return "false"
        if isinstance(default.value, str):
            return '""'
    if isinstance(default, ast.List | ast.ListComp):
        return "[]"
    if isinstance(default, ast.Dict | ast.DictComp):
        return "{}"
    if isinstance(default, ast.JoinedStr):
        return '""'
    return "0"


def _input(key: ast.AST, falsy: str) -> str:
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return "{" + json.dumps(key.value, ensure_ascii=False) + ": " + falsy + "}"
    if isinstance(key, ast.Constant) and isinstance(key.value, int | float | bool):
        return "{" + json.dumps(str(key.value)) + ": " + falsy + "}"
    name = ast.unparse(key) if isinstance(key, ast.AST) else "k"
    if len(name) > 30:
        name = "key"
    return "{<" + name + ">: " + falsy + "}"


# --- suppressions --------------------------------------------------------------------------


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


def _apply_suppressions(findings: list[Finding], source: str, path: str) -> list[Finding]:
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
                )
            )
    return sorted(kept, key=lambda f: (f.line, f.col, f.rule.id))
