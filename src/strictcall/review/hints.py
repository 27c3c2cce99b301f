"""What the source of the functions under `strictcall check` says about their inputs: the
keys they read, the constants they compare with, the parameters they use as mappings, and the
types their annotations declare (`Hints`, read by `mine_hints`)."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from strictcall.review.values import MAX_KEYS, TYPED, Key, is_scalar, split_shape


@dataclass(frozen=True, slots=True)
class Hints:
    """What the source of the functions under check says about their inputs."""

    keys: tuple[Key, ...] = ()
    """Keys the functions read (`.get(k)`, `d[k]`, `k in d`), in order of appearance."""
    constants: tuple[Any, ...] = ()
    """Other str and number constants in the functions."""
    values_for: Mapping[Key, tuple[Any, ...]] = field(default_factory=dict)
    """Constants a key's value is compared with (`d.get("jsonrpc") != "2.0"`)."""
    mappings: frozenset[int] = frozenset()
    """Positions of parameters used only as mappings (never type-checked): dicts only."""
    dictish: frozenset[int] = frozenset()
    """Positions of parameters used as mappings somewhere: mostly dicts."""
    links: Mapping[Key, int] = field(default_factory=dict)
    """Keys whose value is compared with a parameter (`d.get("id") != expected_id`)."""
    declared: Mapping[int, str] = field(default_factory=dict)
    """Parameters whose annotation says what they hold: "mapping", "mappings" (a list of
    mappings), "list", or a scalar type in TYPED; inputs are drawn in that type."""


def mine_hints(functions: list[Callable[..., Any]], arity: int) -> Hints:
    """Read keys, constants and mapping parameters from the functions' source."""
    keys: dict[Key, None] = {}
    constants: dict[tuple[type, Any], Any] = {}
    values_for: dict[Key, dict[tuple[type, Any], Any]] = {}
    links: dict[Key, int] = {}
    used_as_mapping: set[int] = set()
    type_checked: set[int] = set()
    for function in functions:
        tree = _tree_of(function)
        if tree is None:
            continue
        names = _positional_names(function)[:arity]
        for node in ast.walk(tree):
            key = _read_key(node)
            if key is not None:
                keys.setdefault(key[1])
                receiver = key[0]
                if isinstance(receiver, ast.Name) and receiver.id in names:
                    used_as_mapping.add(names.index(receiver.id))
            if isinstance(node, ast.Compare):
                _compared(node, values_for, links, names)
            if isinstance(node, ast.Call) and _is_type_check(node):
                for arg in node.args[:1]:
                    if isinstance(arg, ast.Name) and arg.id in names:
                        type_checked.add(names.index(arg.id))
            if isinstance(node, ast.Constant) and is_scalar(node.value):
                constants.setdefault((type(node.value), node.value), node.value)
            if isinstance(node, ast.Name):
                value = getattr(function, "__globals__", {}).get(node.id)
                if is_scalar(value) and not isinstance(value, bool):
                    constants.setdefault((type(value), value), value)
    declared = declared_shapes(functions[0], arity) if functions else {}
    return Hints(
        declared=declared,
        keys=tuple(keys)[:MAX_KEYS],
        constants=tuple(constants.values())[:64],
        values_for={k: tuple(v.values()) for k, v in values_for.items()},
        mappings=frozenset(
            (used_as_mapping - type_checked)
            | {i for i, shape in declared.items() if split_shape(shape)[0] == "mapping"}
        ),
        dictish=frozenset(
            used_as_mapping | {i for i, shape in declared.items() if "mapping" in shape}
        ),
        links=links,
    )


def declared_shapes(function: Callable[..., Any], arity: int) -> dict[int, str]:
    """What each positional parameter's annotation says it holds (see Hints.declared)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())[:arity]
    except (TypeError, ValueError):
        return {}
    shapes: dict[int, str] = {}
    for i, parameter in enumerate(parameters):
        annotation = parameter.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if not isinstance(annotation, str) and getattr(annotation, "__args__", None):
            text = repr(annotation).replace("typing.", "")
        shape = _shape_of(text.replace(" ", ""))
        if shape:
            shapes[i] = shape
    return shapes


def _shape_of(text: str) -> str:
    """`list[dict[str, int]]` reads "mappings:int", `dict[str, Any]` "mapping", `int` "int"."""
    for prefix in ("list[", "List[", "Sequence[", "Iterable["):
        if text.startswith(prefix):
            inner = _shape_of(text[len(prefix) : -1])
            if inner.startswith("mapping"):
                return "mappings" + inner[len("mapping") :]
            return "list:" + inner if inner in TYPED else "list"
    for prefix in ("dict[", "Dict[", "Mapping[", "MutableMapping["):
        if text.startswith(prefix):
            value = text[len(prefix) : -1].split(",", 1)[-1]
            return "mapping:" + value if value in TYPED else "mapping"
    if text in ("dict", "Dict", "Mapping", "MutableMapping"):
        return "mapping"
    return text if text in TYPED else ""


def _tree_of(function: Callable[..., Any]) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None


def _positional_names(function: Callable[..., Any]) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _read_key(node: ast.AST) -> tuple[ast.expr, Key] | None:
    """The receiver and key of `d.get(k)`, `d[k]`, `d.pop(k)` or `k in d` with a constant k."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("get", "pop", "setdefault")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str | int)
    ):
        return node.func.value, node.args[0].value
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.value, node.slice.value
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.In | ast.NotIn)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str | int)
    ):
        return node.comparators[0], node.left.value
    return None


def _compared(
    node: ast.Compare,
    values_for: dict[Key, dict[tuple[type, Any], Any]],
    links: dict[Key, int],
    names: list[str],
) -> None:
    operands = [node.left, *node.comparators]
    for a, b in itertools.pairwise(operands):
        for read, other in ((a, b), (b, a)):
            key = _read_key(read)
            if key is not None and isinstance(other, ast.Name) and other.id in names:
                links.setdefault(key[1], names.index(other.id))
            if key is not None and isinstance(other, ast.Constant) and is_scalar(other.value):
                values_for.setdefault(key[1], {}).setdefault(
                    (type(other.value), other.value), other.value
                )


def _is_type_check(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "type")
