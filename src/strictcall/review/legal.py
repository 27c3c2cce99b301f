"""What the code declares about a value, for `strictcall lint`: which falsy values its type
admits (0, false, "", [], {}, null), read from annotations, TypedDicts, pydantic models and
dataclasses, and JSON Schemas written in the same file."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Final

ZERO: Final = "0"
FALSE: Final = "false"
EMPTY_TEXT: Final = '""'
EMPTY_LIST: Final = "[]"
EMPTY_OBJECT: Final = "{}"
NULL: Final = "null"
ORDER: Final = (ZERO, FALSE, EMPTY_TEXT, EMPTY_LIST, EMPTY_OBJECT, NULL)
"""Falsy values as JSON text, in the order a finding names them (the plain 0 first)."""
EVERY: Final = frozenset(ORDER)

_BY_NAME: Final[dict[str, frozenset[str]]] = {
    "int": frozenset({ZERO}),
    "float": frozenset({ZERO}),
    "complex": frozenset({ZERO}),
    "Decimal": frozenset({ZERO}),
    "Fraction": frozenset({ZERO}),
    "timedelta": frozenset({ZERO}),
    "bool": frozenset({FALSE}),
    "str": frozenset({EMPTY_TEXT}),
    "bytes": frozenset({EMPTY_TEXT}),
    "list": frozenset({EMPTY_LIST}),
    "List": frozenset({EMPTY_LIST}),
    "Sequence": frozenset({EMPTY_LIST}),
    "tuple": frozenset({EMPTY_LIST}),
    "Tuple": frozenset({EMPTY_LIST}),
    "set": frozenset({EMPTY_LIST}),
    "Set": frozenset({EMPTY_LIST}),
    "frozenset": frozenset({EMPTY_LIST}),
    "Iterable": frozenset({EMPTY_LIST}),
    "dict": frozenset({EMPTY_OBJECT}),
    "Dict": frozenset({EMPTY_OBJECT}),
    "Mapping": frozenset({EMPTY_OBJECT}),
    "MutableMapping": frozenset({EMPTY_OBJECT}),
    "None": frozenset({NULL}),
    "NoneType": frozenset({NULL}),
    "PositiveInt": frozenset(),
    "PositiveFloat": frozenset(),
    "NonNegativeInt": frozenset({ZERO}),
    "NonNegativeFloat": frozenset({ZERO}),
    "Any": EVERY,
    "object": EVERY,
    "JSONValue": EVERY,
    "JsonValue": EVERY,
    "JSON": EVERY,
}
_JSON_TYPES: Final[dict[str, frozenset[str]]] = {
    "integer": frozenset({ZERO}),
    "number": frozenset({ZERO}),
    "boolean": frozenset({FALSE}),
    "string": frozenset({EMPTY_TEXT}),
    "array": frozenset({EMPTY_LIST}),
    "object": frozenset({EMPTY_OBJECT}),
    "null": frozenset({NULL}),
}
_WRAPPERS: Final = frozenset({"Annotated", "Final", "ClassVar", "Required", "NotRequired"})
_MAPPINGS: Final = frozenset({"dict", "Dict", "Mapping", "MutableMapping", "TypedDict"})


@dataclass(frozen=True, slots=True)
class Declared:
    """The falsy values a declared type admits, and where it was declared (for the finding)."""

    kinds: frozenset[str]
    where: str
    exact: bool = True
    """False when matched by field name alone, the receiver's type unknown."""


@dataclass(slots=True)
class Facts:
    """The declarations of one module: class fields, and JSON Schema properties by name."""

    classes: dict[str, dict[str, ast.expr]] = field(default_factory=dict)
    fields: dict[str, list[tuple[str, ast.expr]]] = field(default_factory=dict)
    """Field name -> (class name, annotation) for every annotated class field in the file."""
    schema: dict[str, set[str]] = field(default_factory=dict)
    """Property name -> the JSON types a schema in the file gives it."""
    project: Facts | None = None
    """The declarations of the other files linted with this one, consulted after its own."""

    def class_fields(self, name: str | None) -> dict[str, ast.expr] | None:
        """The annotated fields of class `name`, here or in the project."""
        if name is None:
            return None
        found = self.classes.get(name)
        if found is None and self.project is not None:
            found = self.project.classes.get(name)
        return found

    def declarations(self, name: str) -> list[tuple[str, ast.expr]]:
        """(class, annotation) of every field called `name`, this file's first."""
        found = self.fields.get(name, [])
        if self.project is not None:
            found = found + self.project.fields.get(name, [])
        return found

    def schema_types(self, name: str) -> set[str]:
        """The JSON types schemas give property `name`, here or in the project."""
        found = set(self.schema.get(name, ()))
        if self.project is not None:
            found |= self.project.schema.get(name, set())
        return found


def collect_facts(tree: ast.AST) -> Facts:
    """Class fields (TypedDict, pydantic, dataclass, any annotated class) and JSON Schema
    properties written as dict literals, anywhere in the module."""
    facts = Facts()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            own: dict[str, ast.expr] = {}
            for name, annotation in _class_fields(node):
                own.setdefault(name, annotation)
                facts.fields.setdefault(name, []).append((node.name, annotation))
            facts.classes[node.name] = own
        elif isinstance(node, ast.Dict):
            _schema_properties(node, facts.schema)
    return facts


def _class_fields(node: ast.ClassDef) -> list[tuple[str, ast.expr]]:
    """`x: T` in the class body, and `self.x: T = ...` in its methods."""
    found: list[tuple[str, ast.expr]] = []
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            annotation = statement.annotation
            if statement.value is not None and _excludes_zero(statement.value):
                # `x: int = Field(gt=0)` reads as `Annotated[int, Field(gt=0)]`
                annotation = ast.Subscript(
                    ast.Name("Annotated", ast.Load()),
                    ast.Tuple([annotation, statement.value], ast.Load()),
                    ast.Load(),
                )
            found.append((statement.target.id, annotation))
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(statement):
                if (
                    isinstance(inner, ast.AnnAssign)
                    and isinstance(inner.target, ast.Attribute)
                    and isinstance(inner.target.value, ast.Name)
                    and inner.target.value.id == "self"
                ):
                    found.append((inner.target.attr, inner.annotation))
    return found


def _excludes_zero(node: ast.expr) -> bool:
    """A constraint that refuses 0: `Field(gt=0)`, `Field(ge=1)`, `Gt(0)`, `Ge(1)`."""
    if not isinstance(node, ast.Call):
        return False
    name = _name(node.func)
    bounds = [(k.arg, k.value) for k in node.keywords if k.arg in ("gt", "ge")]
    if name in ("Gt", "Ge") and node.args:
        bounds.append(("gt" if name == "Gt" else "ge", node.args[0]))
    for kind, value in bounds:
        bound = value.value if isinstance(value, ast.Constant) else None
        if not isinstance(bound, int | float) or isinstance(bound, bool):
            continue
        if (kind == "gt" and bound >= 0) or (kind == "ge" and bound > 0):
            return True
    return False


def merge_facts(own: Facts, project: Facts | None) -> Facts:
    """A module's own declarations, then those of the other files linted with it."""
    own.project = project
    return own


def _schema_properties(node: ast.Dict, schema: dict[str, set[str]]) -> None:
    for key, value in zip(node.keys, node.values, strict=True):
        if not (_is_str(key, "properties") and isinstance(value, ast.Dict)):
            continue
        for name, spec in zip(value.keys, value.values, strict=True):
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                continue
            if not isinstance(spec, ast.Dict):
                continue
            for k, v in zip(spec.keys, spec.values, strict=True):
                if _is_str(k, "type"):
                    types = [v] if isinstance(v, ast.Constant) else getattr(v, "elts", [])
                    for t in types:
                        if isinstance(t, ast.Constant) and isinstance(t.value, str):
                            schema.setdefault(name.value, set()).add(t.value)


def _is_str(node: ast.expr | None, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def schema_kinds(types: set[str]) -> frozenset[str] | None:
    """The falsy values a JSON Schema `type` admits; None when it names no known type."""
    found = [_JSON_TYPES[t] for t in types if t in _JSON_TYPES]
    return frozenset().union(*found) if found else None


def kinds_of(annotation: ast.expr | None, facts: Facts) -> frozenset[str] | None:
    """The falsy values an annotation admits; None when it cannot be read (a class the file
    does not define is taken as an object, which is never falsy)."""
    if annotation is None:
        return None
    if isinstance(annotation, ast.Constant):
        if annotation.value is None:
            return frozenset({NULL})
        if isinstance(annotation.value, str):
            try:
                parsed = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
            return kinds_of(parsed, facts)
        return None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _union([annotation.left, annotation.right], facts)
    name = _name(annotation)
    if isinstance(annotation, ast.Subscript):
        outer = _name(annotation.value)
        inner = annotation.slice
        parts = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if outer == "Optional":
            found = kinds_of(parts[0], facts)
            return None if found is None else found | {NULL}
        if outer == "Union":
            return _union(parts, facts)
        if outer in _WRAPPERS:
            found = kinds_of(parts[0], facts)
            if found is not None and any(_excludes_zero(part) for part in parts[1:]):
                found -= {ZERO}  # `Annotated[int, Field(gt=0)]`: 0 is refused, not a value
            return found
        if outer == "Literal":
            return frozenset(
                kind
                for part in parts
                if isinstance(part, ast.Constant) and not part.value
                for kind in (_literal_kind(part.value),)
            )
        name = outer
    if name is None:
        return None
    if name in _BY_NAME:
        return _BY_NAME[name]
    return frozenset()  # an object (a TypedDict with a required key too): never falsy


def _literal_kind(value: object) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return FALSE
    if isinstance(value, int | float):
        return ZERO
    return EMPTY_TEXT


def _union(parts: list[ast.expr], facts: Facts) -> frozenset[str] | None:
    found = [kinds_of(part, facts) for part in parts]
    if any(kinds is None for kinds in found):
        return None
    return frozenset().union(*(k for k in found if k is not None))


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def value_annotation(mapping: ast.expr | None, facts: Facts) -> tuple[str, ast.expr] | None:
    """For a mapping annotated `dict[str, T]` (or Mapping), T; for a TypedDict or model class
    of the file, the class's name and nothing else (its fields are looked up by key)."""
    if mapping is None:
        return None
    if isinstance(mapping, ast.Constant) and isinstance(mapping.value, str):
        try:
            mapping = ast.parse(mapping.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(mapping, ast.BinOp):  # X | None: the mapping part
        left = value_annotation(mapping.left, facts)
        return left if left is not None else value_annotation(mapping.right, facts)
    if isinstance(mapping, ast.Subscript):
        outer = _name(mapping.value)
        inner = mapping.slice
        parts = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if outer in _MAPPINGS and len(parts) == 2:
            return "", parts[1]
        if outer in ("Optional", *_WRAPPERS):
            return value_annotation(parts[0], facts)
    name = _name(mapping)
    if name in ("Any", "object", "JSONValue", "JsonValue"):
        return "", mapping  # a JSON value: its members may hold anything
    if facts.class_fields(name) is not None:
        assert name is not None
        return name, mapping
    return None


def declared_field(owner: str | None, key: str, facts: Facts, *, anywhere: bool) -> Declared | None:
    """What the file declares about field or key `key`: in class `owner` when known, else (when
    `anywhere`) in the one type every class field of that name agrees on, or in a JSON Schema."""
    fields = facts.class_fields(owner)
    if fields is not None:
        annotation = fields.get(key)
        if annotation is not None:
            kinds = kinds_of(annotation, facts)
            if kinds is not None:
                return Declared(kinds, f"`{owner}.{key}` is declared `{_shown(annotation)}`")
    if not anywhere:
        return None
    declared = facts.declarations(key)
    kinds_seen = [kinds_of(annotation, facts) for _, annotation in declared]
    known = [k for k in kinds_seen if k is not None]
    agreed = len(set(known)) == 1 or not any(ZERO in k or FALSE in k for k in known)
    if known and agreed:
        kinds = frozenset().union(*known)
        owner_name, annotation = next(
            d for d, k in zip(declared, kinds_seen, strict=True) if k is not None
        )
        more = f" (and {len(declared) - 1} more)" if len(declared) > 1 else ""
        where = f"`{owner_name}.{key}` is declared `{_shown(annotation)}`{more}"
        return Declared(kinds, where, exact=False)
    types = facts.schema_types(key)
    if types:
        kinds = schema_kinds(types)
        if kinds is not None:
            shown = "|".join(sorted(types))
            return Declared(kinds, f"a JSON Schema in this file gives `{key}` the type {shown}")
    return None


def _shown(annotation: ast.expr) -> str:
    text = ast.unparse(annotation)
    return text if len(text) <= 40 else text[:37] + "..."


def shown_type(annotation: ast.expr) -> str:
    """An annotation as source text, shortened for a message."""
    return _shown(annotation)
