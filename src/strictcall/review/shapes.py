"""The shapes of Python expressions `strictcall lint` recognises: a mapping's `.get`, a
namespace, the places where only a value's truth is used, and the uses that tell what a value
is (a number, a container, data passed on unchanged)."""

from __future__ import annotations

import ast
import re
from typing import Final

FLAG: Final = re.compile(
    r"(^|_)(is|has|supports?|enabled?|disabled?|use|uses|allow|allows|should|can|needs?|strict"
    r"|validate|include|defer|skip|force|verbose|debug|ignore|requires?)(_|$)"
    r"|_(enabled|disabled|only|flag|allowed)$"
)
"""Names of bool flags: their false and their absence are one answer."""
_NAMESPACES: Final = frozenset({"__dict__", "environ", "modules", "headers", "env"})
_NAMESPACE_CALLS: Final = frozenset({"vars", "globals", "locals", "getenv"})
EMPTY_CALLS: Final = frozenset({"list", "dict", "set", "tuple", "str", "frozenset", "bytes"})
_NUMBER_CALLS: Final = frozenset({"range", "sleep", "min", "max", "round", "abs", "wait_for"})
_CONTAINER_CALLS: Final = frozenset({"len", "sorted", "enumerate", "zip", "iter", "next"})


def truth_context(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """How only the truth of the node's value is used, or None when more than its truth is."""
    parent = parents.get(node)
    if isinstance(parent, ast.If):
        return "if" if parent.test is node else None
    if isinstance(parent, ast.While):
        return "while" if parent.test is node else None
    if isinstance(parent, ast.Assert):
        return "assert" if parent.test is node else None
    if isinstance(parent, ast.IfExp):
        return "a ternary's test" if parent.test is node else None
    if isinstance(parent, ast.comprehension):
        return "a comprehension's condition" if node in parent.ifs else None
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
        return "not"
    if (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id == "bool"
        and parent.args == [node]
    ):
        return "bool()"
    if isinstance(parent, ast.GeneratorExp | ast.ListComp | ast.SetComp) and parent.elt is node:
        call = parents.get(parent)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            if call.func.id in ("all", "any") and call.args == [parent]:
                return f"{call.func.id}()"
            if (
                call.func.id == "filter"
                and len(call.args) == 2
                and isinstance(call.args[0], ast.Constant)
                and call.args[0].value is None
                and call.args[1] is parent
            ):
                return "filter(None, ...)"
    if isinstance(parent, ast.BoolOp):
        if node is not parent.values[-1]:
            if isinstance(parent.op, ast.And):
                return "and"
            if truth_context(parent, parents) is not None:
                return "or"
            return None
        return truth_context(parent, parents)
    return None


def is_get(node: ast.AST) -> bool:
    """`x.get(k)` or `x.get(k, default)`: a mapping's get, by its shape."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and 1 <= len(node.args) <= 2
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    )


def is_namespace(receiver: ast.expr) -> bool:
    """`cls.__dict__`, `os.environ`, `env`, `sys.modules`, `request.headers`, `vars(x)`: an
    empty entry there is not a value someone sent (an empty variable is unset by convention)."""
    if isinstance(receiver, ast.Attribute):
        return receiver.attr in _NAMESPACES
    if isinstance(receiver, ast.Name):
        name = receiver.id.lower()
        return receiver.id in _NAMESPACES or name in ("os", "sys") or name.startswith("env")
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name):
        return receiver.func.id in _NAMESPACE_CALLS
    return False


def constant_key(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int):
        return str(node.value)
    return None


def subject(node: ast.AST) -> str:
    """What a node reads, comparable across the scope: a name, or receiver and key."""
    if isinstance(node, ast.Name):
        return "name:" + node.id
    if is_get(node):
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        return "key:" + ast.dump(node.func.value) + ast.dump(node.args[0])
    if isinstance(node, ast.Subscript):
        return "key:" + ast.dump(node.value) + ast.dump(node.slice)
    return "expr:" + ast.dump(node)


def type_name(annotation: ast.expr) -> str | None:
    if isinstance(annotation, ast.Name):
        return annotation.id
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value
    return None


def is_none_test(compare: ast.Compare) -> bool:
    return (
        len(compare.ops) == 1
        and isinstance(compare.ops[0], ast.Is | ast.IsNot)
        and any(
            isinstance(side, ast.Constant) and side.value is None
            for side in (compare.left, *compare.comparators)
        )
    )


def is_number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    if isinstance(node, ast.BinOp):
        return is_number(node.left) and is_number(node.right)
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
        and node.value != 0
    )


def is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def is_answer(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The value is (part of) what the function returns or yields, unchanged: the value
    itself, a member of a returned dict, list or tuple, a branch of a returned ternary, the
    element of a returned comprehension."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Return | ast.Yield):
            return True
        if isinstance(parent, ast.Dict):
            if child not in parent.values:
                return False
        elif isinstance(parent, ast.IfExp):
            if parent.test is child:
                return False
        elif isinstance(parent, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            if parent.elt is not child:
                return False
        elif not isinstance(parent, ast.List | ast.Tuple | ast.Set):
            return False
        child, parent = parent, parents.get(parent)
    return False


def decides_answer(test: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """The truth test chooses what the function answers: it is part of a `return`, or the
    `if` it heads returns or raises in one of its branches."""
    node: ast.AST | None = test
    while node is not None and not isinstance(node, ast.stmt):
        node = parents.get(node)
    if isinstance(node, ast.Return):
        return True
    if isinstance(node, ast.If):
        return any(
            isinstance(statement, ast.Return | ast.Raise)
            for statement in (*node.body, *node.orelse)
        )
    return False


def as_container(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Iterated, measured, indexed or asked a method: a container or a text, where empty
    usually means none."""
    parent = parents.get(node)
    if isinstance(parent, ast.For | ast.comprehension) and parent.iter is node:
        return True
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name):
        return parent.func.id in _CONTAINER_CALLS and node in parent.args
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return True
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return True
    if isinstance(parent, ast.Compare) and any(
        isinstance(op, ast.In | ast.NotIn) for op in parent.ops
    ):
        return node in parent.comparators
    return isinstance(parent, ast.Starred | ast.JoinedStr | ast.FormattedValue)


def as_number(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    if isinstance(parent, ast.BinOp) and not isinstance(parent.op, ast.Mod):
        other = parent.right if parent.left is node else parent.left
        return isinstance(other, ast.Constant) and type(other.value) in (int, float)
    if isinstance(parent, ast.AugAssign):
        return True
    if isinstance(parent, ast.Compare) and any(
        isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in parent.ops
    ):
        return any(  # beside a numeric constant: a timestamp or a set compares too
            isinstance(side, ast.Constant) and type(side.value) in (int, float)
            for side in (parent.left, *parent.comparators)
        )
    if isinstance(parent, ast.Call):
        func = parent.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        return name in _NUMBER_CALLS
    return False


def as_union(node: ast.expr) -> ast.expr:
    """`isinstance`'s second argument as an annotation: `(int, float)` reads `int | float`."""
    if isinstance(node, ast.Tuple) and node.elts:
        union = node.elts[0]
        for element in node.elts[1:]:
            union = ast.BinOp(union, ast.BitOr(), element)
        return union
    return node


def asks_nothing(default: ast.expr, kind: str, key: str | None, receiver: ast.expr) -> bool:
    """A default that is itself falsy (`or []`, `or ""`, `or 0`, `or None`, `or Limits()`), or
    another read of the same kind (`d.get("a") or d.get("b")`: a name and its alias)."""
    if is_get(default) or isinstance(default, ast.Subscript):
        return True
    if (
        kind == "attribute"
        and isinstance(default, ast.Attribute)
        and (default.attr == key or ast.dump(default.value) == ast.dump(receiver))
    ):
        return True  # `options.timeout or settings.timeout`, `self.a or self.b`: aliases
    if isinstance(default, ast.Compare | ast.BoolOp | ast.UnaryOp):
        return not is_number(default)  # a boolean expression, not a default
    if isinstance(default, ast.Constant):
        return not default.value
    if isinstance(default, ast.List | ast.Tuple | ast.Set):
        return not default.elts
    if isinstance(default, ast.Dict):
        return not default.keys
    if (
        isinstance(default, ast.Call)
        and len(default.args) == 1
        and isinstance(default.args[0], ast.Constant)
        and not default.args[0].value
    ):
        return True  # `Decimal(0)`: a falsy default written as a call
    if isinstance(default, ast.Call) and not default.args and not default.keywords:
        func = default.func
        name = func.id if isinstance(func, ast.Name) else None
        return name is not None and (name in EMPTY_CALLS or name[:1].isupper())
    return False


def own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of one scope, not those of the functions and classes inside it."""
    found: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            # its defaults and decorators run here; its body is its own scope
            stack.extend(getattr(node.args, "defaults", []))
            continue
        if isinstance(node, ast.ClassDef):
            stack.extend(
                s for s in node.body if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)
            )
            continue
        found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found
