"""The uses of a value that show `strictcall lint` a falsy value is data there: a comparison
with the falsy value itself, with 0 as a bound, or with a caller's parameter."""

from __future__ import annotations

import ast

from strictcall.review.legal import EMPTY_TEXT, FALSE, ZERO
from strictcall.review.shapes import constant_key, is_get

_ORDER_OPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_EQUALITY_OPS = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)


def compared_as_data(
    use: ast.AST,
    parents: dict[ast.AST, ast.AST],
    scope: ast.AST,
    falsy: frozenset[str],
    source: str = "",
) -> tuple[frozenset[str], str] | None:
    """The falsy values a comparison of `use` treats as values of their own, and what shows
    it: `x == 0`, `x is False`, `x == ""`, `x > 0` or `x < 0`, `x == expected_id` (a
    parameter, so whatever a caller passes)."""
    compare = parents.get(use)
    if not isinstance(compare, ast.Compare):
        return None
    text = shown_code(compare, source)
    line = compare.lineno
    sides = [compare.left, *compare.comparators]
    parameter = _parameter(sides, use, compare, scope)
    if parameter is not None:
        why = (
            f"line {line} compares it with the parameter `{parameter}` (`{text}`), so whatever "
            "a caller passes, a falsy value included, is a value"
        )
        return falsy, why
    for side in sides:
        if side is use or not isinstance(side, ast.Constant) or side.value:
            continue
        kind = _kind(side.value)
        if kind is None or kind not in falsy:
            continue
        equality = all(isinstance(op, _EQUALITY_OPS) for op in compare.ops)
        order = kind == ZERO and all(isinstance(op, _ORDER_OPS) for op in compare.ops)
        if equality or order:
            shown = ast.unparse(side)
            why = f"line {line} compares it with {shown} (`{text}`), so {shown} is a value there"
            return frozenset({kind}), why
    return None


def _kind(value: object) -> str | None:
    if isinstance(value, bool):
        return FALSE
    if isinstance(value, int | float):
        return ZERO
    if isinstance(value, str):
        return EMPTY_TEXT
    return None


def _parameter(
    sides: list[ast.expr], use: ast.AST, compare: ast.Compare, scope: ast.AST
) -> str | None:
    arguments = getattr(scope, "args", None)
    if not isinstance(arguments, ast.arguments):
        return None
    if not all(isinstance(op, ast.Eq | ast.NotEq) for op in compare.ops):
        return None
    names = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    names.discard("self")
    for side in sides:
        if side is not use and isinstance(side, ast.Name) and side.id in names:
            return side.id
    return None


def answer_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST:
    """The `return` or `yield` a value is part of (the value itself when there is none)."""
    current: ast.AST | None = node
    while current is not None and not isinstance(current, ast.Return | ast.Yield):
        current = parents.get(current)
    return current if current is not None else node


def shown_code(node: ast.AST, source: str) -> str:
    """A node's source text on one line, shortened for a message."""
    text = (ast.get_source_segment(source, node) if source else None) or ast.unparse(node)
    text = " ".join(text.split())
    return text if len(text) <= 50 else text[:47] + "..."


def keys_read(nodes: list[ast.AST], receiver: str) -> frozenset[str]:
    """The constant keys (and attributes) `nodes` read from the receiver dumped as `receiver`."""
    keys: set[str | None] = set()
    for node in nodes:
        if is_get(node):
            assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if ast.dump(node.func.value) == receiver:
                keys.add(constant_key(node.args[0]))
        elif isinstance(node, ast.Subscript) and ast.dump(node.value) == receiver:
            keys.add(constant_key(node.slice))
        elif isinstance(node, ast.Attribute) and ast.dump(node.value) == receiver:
            keys.add(node.attr)
        elif (
            isinstance(node, ast.Compare)
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and ast.dump(node.comparators[0]) == receiver
        ):
            keys.add(constant_key(node.left))
    return frozenset(key for key in keys if key is not None)


def or_operand(node: ast.expr, parents: dict[ast.AST, ast.AST]) -> bool:
    """The node is an operand of an `or` with something after it: `node or default`."""
    parent = parents.get(node)
    return (
        isinstance(parent, ast.BoolOp)
        and isinstance(parent.op, ast.Or)
        and node is not parent.values[-1]
    )


def names_after_or(
    node: ast.expr, parents: dict[ast.AST, ast.AST], nodes: list[ast.AST]
) -> list[ast.expr]:
    """For `x = node or default`: the reads of `x` after the assignment."""
    boolop = parents.get(node)
    statement = parents.get(boolop) if boolop is not None else None
    if not isinstance(statement, ast.Assign | ast.AnnAssign) or statement.value is not boolop:
        return []
    if isinstance(statement, ast.AnnAssign):
        target: ast.expr | None = statement.target
    else:
        target = statement.targets[0] if len(statement.targets) == 1 else None
    if not isinstance(target, ast.Name):
        return []
    after = (statement.lineno, statement.col_offset)
    return [
        use
        for use in nodes
        if isinstance(use, ast.Name)
        and isinstance(use.ctx, ast.Load)
        and use.id == target.id
        and (use.lineno, use.col_offset) > after
    ]
