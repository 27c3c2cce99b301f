"""What the code declares about a value, for `strictcall lint`: which falsy values its type
admits (0, false, "", [], {}, null), read from annotations, TypedDicts, pydantic models and
dataclasses, and JSON Schemas written in the same file."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Final

from strictcall.review.meaning import documented

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
    meant: frozenset[str] = frozenset()
    """The falsy values the declaration gives a meaning (a `Literal[0, ...]`, `ge=0`, a
    documented "0 = no limit"): evidence that they are legal there."""
    meaning: str = ""
    """What shows that meaning, for the finding."""


@dataclass(slots=True)
class Facts:
    """The declarations of one module: class fields, and JSON Schema properties by name."""

    classes: dict[str, dict[str, ast.expr]] = field(default_factory=dict)
    fields: dict[str, list[tuple[str, ast.expr]]] = field(default_factory=dict)
    """Field name -> (class name, annotation) for every annotated class field in the file."""
    schema: dict[str, set[str]] = field(default_factory=dict)
    """Property name -> the JSON types a schema in the file gives it."""
    meanings: dict[tuple[str, str], tuple[frozenset[str], str]] = field(default_factory=dict)
    """(class, field) -> the falsy values its comment or docstring gives a meaning, and where."""
    schema_meant: dict[str, tuple[frozenset[str], str]] = field(default_factory=dict)
    """Property name -> the falsy values a schema gives a meaning (`minimum: 0`, an enum)."""
    schema_refuses: dict[str, frozenset[str]] = field(default_factory=dict)
    """Property name -> the falsy values its schema refuses (`minimum: 1`)."""
    bases: dict[str, list[str]] = field(default_factory=dict)
    """Class name -> the names of its base classes."""
    project: Facts | None = None
    """The declarations of the modules this one imports from, consulted after its own."""

    def class_fields(self, name: str | None) -> dict[str, ast.expr] | None:
        """The annotated fields of class `name` and of its known base classes."""
        if name is None:
            return None
        found = self._own_class(name)
        if found is None:
            return None
        merged = dict(found)
        seen = {name}
        todo = list(self._bases(name))
        while todo:
            base = todo.pop(0)
            if base in seen:
                continue
            seen.add(base)
            for key, annotation in (self._own_class(base) or {}).items():
                merged.setdefault(key, annotation)
            todo.extend(self._bases(base))
        return merged

    def owner_of(self, name: str, key: str) -> str:
        """The class among `name` and its bases that declares `key` (for its documentation)."""
        todo, seen = [name], set()
        while todo:
            current = todo.pop(0)
            if current in seen:
                continue
            seen.add(current)
            if key in (self._own_class(current) or {}):
                return current
            todo.extend(self._bases(current))
        return name

    def meaning_of(self, owner: str, key: str) -> tuple[frozenset[str], str] | None:
        """What a field's comment or docstring says its falsy values mean."""
        found = self.meanings.get((owner, key))
        if found is None and self.project is not None:
            found = self.project.meanings.get((owner, key))
        return found

    def _own_class(self, name: str) -> dict[str, ast.expr] | None:
        found = self.classes.get(name)
        if found is None and self.project is not None:
            found = self.project.classes.get(name)
        return found

    def _bases(self, name: str) -> list[str]:
        found = self.bases.get(name)
        if found is None and self.project is not None:
            found = self.project.bases.get(name)
        return found or []


def collect_facts(tree: ast.AST, source: str = "") -> Facts:
    """Class fields (TypedDict, pydantic, dataclass, any annotated class, `self.x = x` from an
    annotated `__init__` parameter), what their comments and docstrings say falsy values mean,
    and JSON Schema properties written as dict literals, anywhere in the module."""
    facts = Facts()
    lines = source.splitlines()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            own: dict[str, ast.expr] = {}
            for name, annotation, doc in _class_fields(node, lines):
                own.setdefault(name, annotation)
                facts.fields.setdefault(name, []).append((node.name, annotation))
                meant = documented(doc)
                if meant and (node.name, name) not in facts.meanings:
                    shown = " ".join(doc.split())
                    shown = shown if len(shown) <= 60 else shown[:57] + "..."
                    facts.meanings[(node.name, name)] = (meant, f'documented "{shown}"')
            facts.classes[node.name] = own
            facts.bases[node.name] = [b for b in map(_name, node.bases) if b is not None]
        elif isinstance(node, ast.Dict):
            _schema_properties(node, facts)
    return facts


def _class_fields(node: ast.ClassDef, lines: list[str]) -> list[tuple[str, ast.expr, str]]:
    """`x: T` in the class body, `self.x: T = ...` in its methods and `self.x = x` where `x`
    is an annotated `__init__` parameter, each with the text that documents it."""
    found: list[tuple[str, ast.expr, str]] = []
    body = node.body
    for index, statement in enumerate(body):
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            annotation = statement.annotation
            if isinstance(statement.value, ast.Call) and _name(statement.value.func) == "Field":
                # `x: int = Field(gt=0)` reads as `Annotated[int, Field(gt=0)]`
                annotation = ast.Subscript(
                    ast.Name("Annotated", ast.Load()),
                    ast.Tuple([annotation, statement.value], ast.Load()),
                    ast.Load(),
                )
            doc = _comment(lines, statement) + " " + _docstring_after(body, index)
            found.append((statement.target.id, annotation, doc))
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            parameters = {
                a.arg: a.annotation
                for a in (*statement.args.args, *statement.args.kwonlyargs)
                if a.annotation is not None
            }
            docstring = (ast.get_docstring(statement) or "") + "\n"
            docstring += ast.get_docstring(node) or ""
            for inner in ast.walk(statement):
                if (
                    isinstance(inner, ast.AnnAssign)
                    and isinstance(inner.target, ast.Attribute)
                    and isinstance(inner.target.value, ast.Name)
                    and inner.target.value.id == "self"
                ):
                    found.append((inner.target.attr, inner.annotation, _comment(lines, inner)))
                elif (
                    statement.name == "__init__"
                    and isinstance(inner, ast.Assign)
                    and len(inner.targets) == 1
                    and isinstance(target := inner.targets[0], ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and isinstance(inner.value, ast.Name)
                    and inner.value.id in parameters
                ):
                    parameter = inner.value.id
                    doc = _comment(lines, inner) + " " + _parameter_doc(docstring, parameter)
                    found.append((target.attr, parameters[parameter], doc))
    return found


def _comment(lines: list[str], node: ast.stmt) -> str:
    """The `#` comment at the end of the statement's last line, if any."""
    end = (node.end_lineno or node.lineno) - 1
    if not 0 <= end < len(lines):
        return ""
    line = lines[end]
    return line[line.index("#") + 1 :] if "#" in line else ""


def _docstring_after(body: list[ast.stmt], index: int) -> str:
    """An attribute docstring: the string statement right after a field."""
    if index + 1 < len(body):
        after = body[index + 1]
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            return after.value.value
    return ""


def _parameter_doc(docstring: str, name: str) -> str:
    """The lines a docstring gives parameter `name` (Google, NumPy or reST style)."""
    lines = docstring.splitlines()
    heading = re.compile(rf"^\s*(?::param\s+(?:\w+\s+)?)?\*{{0,2}}{re.escape(name)}\b")
    for i, line in enumerate(lines):
        if heading.match(line):
            indent = len(line) - len(line.lstrip())
            taken = [line]
            for more in lines[i + 1 :]:
                if more.strip() and len(more) - len(more.lstrip()) <= indent:
                    break
                taken.append(more)
            return " ".join(taken)
    return ""


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
    """A module's own declarations, then those of the classes it imports by name."""
    own.project = project
    return own


def _schema_properties(node: ast.Dict, facts: Facts) -> None:
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
                            facts.schema.setdefault(name.value, set()).add(t.value)
                meant = _schema_meaning(k, v)
                if meant is not None:
                    facts.schema_meant.setdefault(name.value, meant)
                if (
                    (_is_str(k, "minimum") or _is_str(k, "exclusiveMinimum"))
                    and isinstance(v, ast.Constant)
                    and isinstance(v.value, int | float)
                    and (v.value > 0 or (_is_str(k, "exclusiveMinimum") and v.value == 0))
                ):
                    facts.schema_refuses[name.value] = frozenset({ZERO})


def _schema_meaning(key: ast.expr | None, value: ast.expr) -> tuple[frozenset[str], str] | None:
    """`"minimum": 0`, an `enum` holding a falsy value, a description giving 0 a meaning."""
    if _is_str(key, "minimum") and isinstance(value, ast.Constant) and value.value == 0:
        return frozenset({ZERO}), "its JSON Schema says `minimum: 0`"
    if _is_str(key, "enum") and isinstance(value, ast.List | ast.Tuple):
        falsy = [e.value for e in value.elts if isinstance(e, ast.Constant) and not e.value]
        if falsy:
            kinds = frozenset(_literal_kind(v) for v in falsy)
            return kinds, f"its JSON Schema's enum holds {ast.unparse(value)[:40]}"
    if _is_str(key, "description") and isinstance(value, ast.Constant):
        text = value.value if isinstance(value.value, str) else ""
        meant = documented(text)
        if meant:
            return meant, f'its JSON Schema documents "{" ".join(text.split())[:60]}"'
    return None


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


def declared_field(owner: str | None, key: str, facts: Facts) -> Declared | None:
    """What the code declares about field `key` of class `owner` (or of its bases): its type,
    and what gives its falsy values a meaning; never a same-named field of another class."""
    fields = facts.class_fields(owner)
    if owner is None or fields is None:
        return None
    annotation = fields.get(key)
    if annotation is None:
        return None
    kinds = kinds_of(annotation, facts)
    if kinds is None:
        return None
    where = f"`{owner}.{key}` is declared `{_shown(annotation)}`"
    meant, meaning = frozenset[str](), ""
    found = annotation_meaning(annotation)
    documented_here = facts.meaning_of(facts.owner_of(owner, key), key)
    if found is not None:
        meant, meaning = found
        meaning = f"`{owner}.{key}` is declared `{_shown(annotation)}`: {meaning}"
    elif documented_here is not None:
        meant, meaning = documented_here
        meaning = f"`{owner}.{key}` is {meaning}"
    return Declared(kinds, where, meant=meant & kinds, meaning=meaning)


def schema_field(key: str, facts: Facts) -> Declared | None:
    """What a JSON Schema written in this module says of property `key`: a tool's arguments are
    read against it, so a number or boolean it admits is a value a caller may send."""
    types = facts.schema.get(key, set())
    kinds = schema_kinds(types) if types else None
    if kinds is None:
        return None
    shown = "|".join(sorted(types))
    where = f"a JSON Schema in this file gives `{key}` the type {shown}"
    refused = facts.schema_refuses.get(key, frozenset())
    meant = (kinds & {ZERO, FALSE}) - refused
    meaning = f"{where}, so a caller may send {' or '.join(sorted(meant))}" if meant else ""
    explicit = facts.schema_meant.get(key)
    if explicit is not None:
        meant, meaning = explicit[0] - refused, f"`{key}`: {explicit[1]}"
    return Declared(kinds - refused, where, meant=meant, meaning=meaning)


def annotation_meaning(annotation: ast.expr) -> tuple[frozenset[str], str] | None:
    """The falsy values an annotation itself gives a meaning: a `Literal` holding them,
    `NonNegativeInt`, `Field(ge=0)`, `conint(ge=0)`, a `Field` description documenting 0."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return annotation_meaning(annotation.left) or annotation_meaning(annotation.right)
    name = _name(annotation)
    if name in ("NonNegativeInt", "NonNegativeFloat"):
        return frozenset({ZERO}), "0 is allowed on purpose"
    if isinstance(annotation, ast.Call) and name in ("conint", "confloat"):
        return _bound_meaning(annotation)
    if not isinstance(annotation, ast.Subscript):
        return None
    outer = _name(annotation.value)
    inner = annotation.slice
    parts = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
    if outer == "Literal":
        falsy = [p.value for p in parts if isinstance(p, ast.Constant) and not p.value]
        falsy = [v for v in falsy if v is not None]
        if falsy:
            shown = ", ".join(repr(v) for v in falsy)
            return frozenset(_literal_kind(v) for v in falsy), f"{shown} is one of its values"
        return None
    if outer in ("Optional", "Union"):
        for part in parts:
            found = annotation_meaning(part)
            if found is not None:
                return found
        return None
    if outer in _WRAPPERS:
        for part in parts[1:]:
            if isinstance(part, ast.Call):
                found = _bound_meaning(part)
                if found is not None:
                    return found
        return annotation_meaning(parts[0])
    return None


def _bound_meaning(call: ast.Call) -> tuple[frozenset[str], str] | None:
    """`Field(ge=0)`, `Ge(0)`, `conint(ge=0)`, or a `Field(description=...)` documenting 0."""
    for keyword in call.keywords:
        value = keyword.value
        if keyword.arg in ("ge", "le") and isinstance(value, ast.Constant) and value.value == 0:
            return frozenset({ZERO}), f"`{keyword.arg}=0` allows 0 on purpose"
        if keyword.arg == "description" and isinstance(value, ast.Constant):
            text = value.value if isinstance(value.value, str) else ""
            meant = documented(text)
            if meant:
                return meant, f'documented "{" ".join(text.split())[:60]}"'
    if _name(call.func) == "Ge" and call.args:
        first = call.args[0]
        if isinstance(first, ast.Constant) and first.value == 0:
            return frozenset({ZERO}), "`Ge(0)` allows 0 on purpose"
    return None


def _shown(annotation: ast.expr) -> str:
    text = ast.unparse(annotation)
    return text if len(text) <= 40 else text[:37] + "..."


def shown_type(annotation: ast.expr) -> str:
    """An annotation as source text, shortened for a message."""
    return _shown(annotation)
