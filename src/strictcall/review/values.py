"""The inputs `strictcall check` tries: JSON-like values built for the truthiness bug class
(what the functions' source says about them is `strictcall.review.hints`).

Dicts have each key present or absent; a value is any of the falsy ones (0, 0.0, False, "",
[], {}, None) beside truthy ones, bool beside int and 1 beside 1.0, nested. Keys and the
values compared against them are read from the two functions' source (as a fuzzer's
dictionary is), and a value drawn once is often drawn again, so that an id in a reply can
match the id a caller expects.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from strictcall.errors import MissingExtra

if TYPE_CHECKING:
    from strictcall.review.hints import Hints

try:
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - the review extra is part of dev
    raise MissingExtra("review", "hypothesis") from None

Key = str | int
T = TypeVar("T")

FALSY: tuple[Callable[[], Any], ...] = (
    lambda: 0,
    lambda: False,
    lambda: None,
    lambda: "",
    lambda: 0.0,
    list,
    dict,
    lambda: -0.0,
)
"""Every falsy JSON value, as factories so that no two inputs share a list or dict (and -0.0,
which is falsy, equal to 0.0 and not the same value)."""

TRUTHY: tuple[Callable[[], Any], ...] = (
    lambda: 1,
    lambda: True,
    lambda: "a",
    lambda: 1.0,
    lambda: -1,
    lambda: [0],
    lambda: {"a": 0},
    lambda: 2.5,
    lambda: " ",
)
"""Truthy values beside them: bool beside int, 1 beside 1.0, containers holding a falsy value."""

WIDE: tuple[Any, ...] = (
    float("nan"),
    float("inf"),
    float("-inf"),
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    "9" * 30,
)
"""Values at the edges: NaN, the infinities, integers where floats and 64-bit ints stop being
exact, a digit string longer than any integer type."""

TYPED: dict[str, tuple[Any, ...]] = {
    "int": (0, 1, -1, 2, 2**53, 2**53 + 1, 2**63 - 1, 2**63, -(2**63)),
    "float": (0.0, -0.0, 1.0, -1.0, 0.5, float("nan"), float("inf"), float("-inf"), 2.0**53),
    "str": ("", "a", " ", "0", "9" * 30, "é"),
    "bool": (False, True),
}
"""Values of a declared scalar type: its zero first."""

MAX_KEYS = 12
MAX_DEPTH = 3

_STRATEGIES: dict[tuple[str, int], st.SearchStrategy[int]] = {}


def _index(size: int) -> st.SearchStrategy[int]:
    """`integers(0, size - 1)`, built once per size."""
    key = ("index", size)
    strategy = _STRATEGIES.get(key)
    if strategy is None:
        strategy = _STRATEGIES[key] = st.integers(0, size - 1)
    return strategy


_SAMPLED: dict[int, tuple[tuple[Any, ...], st.SearchStrategy[Any]]] = {}


class Source:
    """Where an input's choices come from: hypothesis (which shrinks) or a seeded random
    generator (a hundred times cheaper a draw, for the long tail of a run)."""

    def pick(self, choices: tuple[T, ...]) -> T:
        """One of `choices`; hypothesis shrinks towards the first."""
        raise NotImplementedError

    def below(self, size: int) -> int:
        """An int from 0 to size - 1; hypothesis shrinks towards 0."""
        raise NotImplementedError


class HypothesisSource(Source):
    """Choices drawn by hypothesis inside a composite strategy."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def pick(self, choices: tuple[T, ...]) -> T:
        # Strategies are built once per tuple of choices: building costs more than drawing.
        cached = _SAMPLED.get(id(choices))
        if cached is None or cached[0] is not choices:
            if len(_SAMPLED) > 4096:
                _SAMPLED.clear()
            cached = _SAMPLED[id(choices)] = (choices, st.sampled_from(choices))
        value: T = self.draw(cached[1])
        return value

    def below(self, size: int) -> int:
        return self.draw(_index(size))


class RandomSource(Source):
    """Choices from a seeded `random.Random`: the same run each time."""

    def __init__(self, seed: int = 0) -> None:
        self.random = random.Random(seed)

    def pick(self, choices: tuple[T, ...]) -> T:
        return choices[self.random.randrange(len(choices))]

    def below(self, size: int) -> int:
        return self.random.randrange(size)


def split_shape(shape: str) -> tuple[str, str]:
    """A declared shape's kind and its element type ("" when any)."""
    kind, _, element = shape.partition(":")
    return kind, element


def is_scalar(value: object) -> bool:
    return isinstance(value, str | int | float) and not (isinstance(value, str) and len(value) > 40)


def arguments(arity: int, hints: Hints) -> st.SearchStrategy[tuple[Any, ...]]:
    """Argument tuples for a function of `arity` positional parameters."""

    linked = set(hints.links.values())
    # A parameter a key is compared with is drawn first, so that the key can take its value.
    order = sorted(range(arity), key=lambda i: i not in linked)

    @st.composite
    def build(draw: st.DrawFn) -> tuple[Any, ...]:
        return draw_arguments(HypothesisSource(draw), arity, hints, order)

    return build()


def draw_arguments(
    source: Source, arity: int, hints: Hints, order: list[int] | None = None
) -> tuple[Any, ...]:
    """One argument tuple from `source`, as `arguments` draws it."""
    if order is None:
        linked = set(hints.links.values())
        order = sorted(range(arity), key=lambda i: i not in linked)
    builder = _Builder(source, hints)
    for i in order:
        shape, element = split_shape(hints.declared.get(i, ""))
        if shape == "mappings":
            builder.args[i] = [builder.mapping(1, element) for _ in range(source.below(4))]
        elif shape == "list" and element:
            builder.args[i] = [source.pick(TYPED[element]) for _ in range(source.below(4))]
        elif shape == "list":
            builder.args[i] = [builder.value(1) for _ in range(source.below(4))]
        elif shape == "mapping" and element:
            builder.args[i] = builder.mapping(0, element)
        elif shape in TYPED:
            builder.args[i] = source.pick(TYPED[shape])
        elif i in hints.mappings or (i in hints.dictish and source.below(5) < 4):
            builder.args[i] = builder.mapping(0)
        else:
            builder.args[i] = builder.value(0, top=True)
    return tuple(builder.args[i] for i in range(arity))


def base_arguments(arity: int, hints: Hints) -> tuple[Any, ...]:
    """One input that gets past the checks the source makes plain: each compared key holds
    the constant or the parameter it is compared with (the seed's envelope for its id)."""
    args: list[Any] = ["a"] * arity
    for i in hints.dictish:
        args[i] = {}
    for i, shape in hints.declared.items():
        if shape in TYPED:
            args[i] = TYPED[shape][1]
    for key, position in hints.links.items():
        for i in hints.dictish:
            if i != position and position < arity:
                args[i][key] = args[position]
    for key, choices in hints.values_for.items():
        for i in hints.dictish:
            args[i].setdefault(key, choices[0])
    for i, shape in hints.declared.items():
        if split_shape(shape)[0] == "mappings":
            args[i] = [args[i] if isinstance(args[i], dict) else {}]
    return tuple(args)


class _Builder:
    """Draws one input; remembers its scalars so that later ones may repeat them.

    Each value is one draw from a table of choices (a draw costs more than building the
    table, which is kept per hints): the falsy values first, so that shrinking reaches them.
    """

    def __init__(self, source: Source, hints: Hints) -> None:
        self.source = source
        self.hints = hints
        self.seen: list[Any] = []
        self.args: dict[int, Any] = {}

    def value(self, depth: int, key: Key | None = None, *, top: bool = False) -> Any:
        linked = key is not None and self.hints.links.get(key) in self.args
        table = _choices(self.hints, key, top, depth < MAX_DEPTH, linked)
        kind, payload = self.source.pick(table)
        if kind == "linked":
            return self.args[self.hints.links[key]]  # type: ignore[index]
        if kind == "dict":
            return self.mapping(depth + 1)
        if kind == "list":
            return [self.value(depth + 1) for _ in range(self.source.below(4))]
        if kind == "again" and self.seen:
            value = self.seen[self.source.below(len(self.seen))]
        elif kind == "make":
            value = payload()
        elif kind == "constant":
            value = payload
        else:
            value = 0
        if is_scalar(value) or isinstance(value, bool):
            self.seen.append(value)
        return value

    def mapping(self, depth: int, element: str = "") -> dict[Any, Any]:
        """A dict of the keys the code reads, each present or not; values of type `element`
        (a key of TYPED) when the annotation gives one."""
        keys = self.hints.keys or ("a",)
        present = self.source.below(1 << len(keys))  # one draw for all keys: bit i, key i
        result: dict[Any, Any] = {}
        for bit, key in enumerate(keys):
            if present >> bit & 1:
                result[key] = self._member(depth, key, element)
        if self.source.below(6) == 5:  # now and then a key the code never names
            result["extra"] = self._member(depth, None, element)
        return result

    def _member(self, depth: int, key: Key | None, element: str) -> Any:
        if element:
            return self.source.pick(TYPED[element])
        return self.value(depth, key)


_TABLES: dict[tuple[int, Any, bool, bool, bool], tuple[tuple[str, Any], ...]] = {}


def _choices(
    hints: Hints, key: Key | None, top: bool, nested: bool, linked: bool
) -> tuple[tuple[str, Any], ...]:
    cache_key = (id(hints), key, top, nested, linked)
    table = _TABLES.get(cache_key)
    if table is not None:
        return table
    choices: list[tuple[str, Any]] = [("make", make) for make in FALSY]
    choices += [("make", make) for make in TRUTHY]
    choices += [("constant", value) for value in WIDE]
    hinted = hints.values_for.get(key, ()) if key is not None else ()
    if hinted:
        choices += [("constant", value) for value in hinted] * max(1, 8 // len(hinted))
    else:
        choices += [("constant", value) for value in hints.constants[:8]]
    choices += [("again", None)] * 2
    if linked:
        choices += [("linked", None)] * 8
    if top:
        choices += [("dict", None)] * 6 + [("list", None)] * 2
    elif nested:
        choices += [("dict", None), ("list", None)]
    if len(_TABLES) > 4096:  # hints of past checks: let them go
        _TABLES.clear()
    table = _TABLES[cache_key] = tuple(choices)
    return table


def neighbours(
    args: tuple[Any, ...], keep: frozenset[int], keys: tuple[Key, ...] = ()
) -> Iterator[tuple[Any, ...]]:
    """Inputs one step from `args`: one leaf replaced by each falsy and truthy value, one key
    left out, or one of `keys` added to a dict argument (an argument in `keep` is never
    replaced whole)."""
    palette = [make() for make in (*FALSY, *TRUTHY)] + list(WIDE)
    for i, arg in enumerate(args):
        if isinstance(arg, dict):
            for key in keys:
                if key not in arg:
                    for value in palette:
                        yield (*args[:i], {**arg, key: value}, *args[i + 1 :])
    for path, parent in _paths(args, ()):
        if len(path) == 1 and path[0] in keep:
            continue
        if isinstance(parent, dict):
            yield _replaced(args, path, _ABSENT)
        for value in palette:
            yield _replaced(args, path, value)


_ABSENT = object()


def _paths(value: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, container) of a leaf or subtree below `value`."""
    items: list[tuple[Any, Any]]
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = list(enumerate(value))
    else:
        return
    for key, item in items:
        yield (*path, key), value
        yield from _paths(item, (*path, key))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        copy = dict(value)
        replaced = _replaced(value[head], rest, new)
        if replaced is _ABSENT:
            del copy[head]
        else:
            copy[head] = replaced
        return copy
    items = list(value)
    replaced = _replaced(value[head], rest, new)
    if replaced is _ABSENT:
        del items[head]
    else:
        items[head] = replaced
    return tuple(items) if isinstance(value, tuple) else items


def size(value: Any) -> int:
    """A size measure for sorting counterexamples, smallest first."""
    if isinstance(value, dict):
        return 1 + sum(size(k) + size(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 1 + sum(size(item) for item in value)
    if isinstance(value, str):
        return 1 + len(value)
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int):
        return len(str(abs(value)))
    if isinstance(value, float):
        return 2 if value.is_integer() else 3
    return 5


_RANK = {int: "0", float: "1", bool: "2", type(None): "3", str: "4", list: "5", tuple: "5"}


def order_key(value: Any) -> str:
    """A tie-break between inputs of one size: 0 before 0.0, False, None, "" and containers."""
    if isinstance(value, dict):
        return "6{" + ",".join(order_key(k) + ":" + order_key(v) for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "5[" + ",".join(order_key(item) for item in value) + "]"
    return _RANK.get(type(value), "7") + repr(value)


def drop_key_paths(args: tuple[Any, ...], keep: frozenset[int]) -> Iterator[tuple[Any, ...]]:
    """`args` with one dict key or one list item (at any depth) left out, the deepest first."""
    paths = [path for path, parent in _paths(args, ()) if isinstance(parent, dict | list) and path]
    for path in sorted(paths, key=len, reverse=True):
        if len(path) == 1:
            continue  # an argument itself is never left out
        yield _replaced(args, path, _ABSENT)


def shape_of(value: Any) -> str:
    """A value with its leaves erased: its dicts' keys, its lists' lengths."""
    if isinstance(value, dict) and value:
        return "{" + ",".join(f"{k!r}:{shape_of(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple) and value:
        return "[" + ",".join(shape_of(item) for item in value) + "]"
    return "."  # a scalar, or an empty container: one of the falsy family


def conforms(args: tuple[Any, ...], declared: Mapping[int, str]) -> bool:
    """True when each argument with a declared shape has it, element types included (a bool
    is not an int here, as the annotations mean; an int is a float, as in Python's typing)."""
    for i, shape in declared.items():
        kind, element = split_shape(shape)
        value = args[i] if i < len(args) else None
        if kind == "mappings":
            if not isinstance(value, list) or not all(
                isinstance(row, dict) and _all_of(row.values(), element) for row in value
            ):
                return False
        elif kind == "mapping":
            if not isinstance(value, dict) or not _all_of(value.values(), element):
                return False
        elif kind == "list":
            if not isinstance(value, list) or not _all_of(value, element):
                return False
        elif not _is_a(value, kind):
            return False
    return True


def _all_of(values: Iterable[Any], element: str) -> bool:
    return not element or all(_is_a(value, element) for value in values)


def _is_a(value: Any, kind: str) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    return True
