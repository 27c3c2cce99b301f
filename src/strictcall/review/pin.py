"""`strictcall check --write-tests`: the counterexamples as a pytest file that pins the old
behaviour, the regression test a review keeps."""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from strictcall.review.check import Counterexample
from strictcall.review.load import Loaded
from strictcall.review.outcome import Outcome, same_value

_HEADER = '''"""Regression tests written by `strictcall check`.

    OLD  {old}
    NEW  {new}

TARGET must keep OLD's behaviour on the inputs where NEW differed: the same value (0, 0.0 and
False are different values here), the same exception type, the input unchanged or changed the
same way. To test another version, change TARGET or set STRICTCALL_TARGET.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import pytest

TARGET = os.environ.get("STRICTCALL_TARGET", {target!r})
"""module:function, or path.py:function (a relative path is relative to this file)."""

UNCHANGED = "unchanged"


def load(spec: str) -> Any:
    where, _, attribute = spec.rpartition(":")
    if where.endswith(".py") or "/" in where or "\\\\" in where:
        path = Path(__file__).resolve().parent / where
        module_spec = importlib.util.spec_from_file_location("_pinned_" + path.stem, path)
        assert module_spec is not None and module_spec.loader is not None
        module: Any = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    for part in attribute.split("."):
        module = getattr(module, part)
    return module


def same(a: Any, b: Any) -> bool:
    """Equality that tells 0, 0.0 and False apart, at every depth."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def exception_name(exc: BaseException) -> str:
    kind = type(exc)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{{kind.__module__}}.{{kind.__qualname__}}"


CASES = [
{cases}]


@pytest.mark.parametrize(("args", "kind", "expected", "after"), CASES)
def test_keeps_the_old_behaviour(
    args: tuple[Any, ...], kind: str, expected: Any, after: Any
) -> None:
    function = load(TARGET)
    mine = copy.deepcopy(args)
    if kind == "raised":
        with pytest.raises(BaseException) as caught:
            function(*mine)
        assert exception_name(caught.value) == expected
    else:
        assert same(function(*mine), expected)
    assert same(mine, args if after == UNCHANGED else after)
'''


def write_regression_tests(
    path: Path,
    target: Loaded,
    counterexamples: Sequence[Counterexample],
    names: Sequence[str],
    old_spec: str,
    new_spec: str,
) -> int:
    """Write the pytest file; returns how many cases it holds. A case whose expected side ran
    out of time, or whose values are not Python literals, is left out."""
    lines = []
    for number, example in enumerate(counterexamples, start=1):
        case = _case(example.args, example.old)
        if case is not None:
            shown = ", ".join(
                f"{n}={_literal(a)}" for n, a in zip(names, example.args, strict=True)
            )
            if len(shown) > 60:
                shown = shown[:57] + "..."
            label = f"{number}: {shown}"
            lines.append(f"    pytest.param({case}, id={label!r}),\n")
    text = _HEADER.format(
        old=old_spec,
        new=new_spec,
        target=_target_spec(target, path),
        cases="".join(lines),
    )
    path.write_text(text, encoding="utf-8")
    return len(lines)


def _target_spec(target: Loaded, test_file: Path) -> str:
    if target.path is None:
        return target.spec
    relative = os.path.relpath(target.path, test_file.resolve().parent)
    return f"{Path(relative).as_posix()}:{target.attribute}"


def _literal(value: Any) -> str:
    return repr(value)


def _is_literal(value: Any) -> bool:
    try:
        return same_value(ast.literal_eval(repr(value)), value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _case(args: tuple[Any, ...], outcome: Outcome) -> str | None:
    if outcome.kind == "timeout" or not _is_literal(args):
        return None
    after = "UNCHANGED"
    if outcome.mutated:
        if not _is_literal(outcome.input_after):
            return None
        after = repr(outcome.input_after)
    if outcome.kind == "raised":
        return f"{args!r}, 'raised', {outcome.exception!r}, {after}"
    if not _is_literal(outcome.value):
        return None
    return f"{args!r}, 'returned', {outcome.value!r}, {after}"
