"""Compiled JSON Schema 2020-12 validators with strictness and located errors.

Every schema a tool declares is made strict before it is compiled, unless it says otherwise:

- an object schema that does not itself say `additionalProperties` or `unevaluatedProperties`
  refuses unknown members, at every depth (`additionalProperties: false`, or
  `unevaluatedProperties: false` where the object is assembled from parts with allOf, $ref,
  anyOf/oneOf beside its own members, if/then/else or dependentSchemas; the parts are left
  open at their own level so that the assembly works, a $def is closed in place only when it
  is never used as a part, and conditions (`if`, `not`) are never closed, since that would
  change what they test);
- "integer" means an integer written as one: 1.0 is refused where an integer is asked for
  (JSON Schema alone would accept it), and by an enum or const of integers; say
  `"type": "number"` to accept it;
- a boolean is never a number (JSON Schema already says so, and jsonschema-rs honours it).

Validation itself is jsonschema-rs, compiled once per schema. The error path is slower and only
taken on failure: the first error is turned into a JSON Pointer, a stable reason and what was
expected, all taken from the schema and the instance's location, never from the instance's values.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple
from urllib.parse import unquote

import jsonschema_rs

from strictcall.errors import JSONValue, StrictcallError

_EXACT_INTEGER: Final = "x-strictcall-exact-integer"

# Where a subschema sits decides how it is tightened. A standalone subschema (a member's value,
# an array's items) is closed like the root. A part (allOf, then/else, $defs, dependentSchemas,
# and anyOf/oneOf under an object schema) is left open at its own level: the schema that
# assembles it is closed with `unevaluatedProperties: false`, which sees every member the parts
# declare. A condition (if, not) is never closed at any depth, since closing it would change
# what it tests (a closed `not` would let everything through). Exact integers apply everywhere.
_STANDALONE_ONE: Final = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "contentSchema",
)
_STANDALONE_LIST: Final = ("prefixItems",)
_STANDALONE_MAP: Final = ("properties", "patternProperties")
_PART_ONE: Final = ("then", "else")
_PART_LIST: Final = ("allOf",)
_PART_MAP: Final = ("$defs", "definitions", "dependentSchemas")
_ALTERNATIVES: Final = ("anyOf", "oneOf")
_CONDITIONS: Final = ("if", "not")
_ASSEMBLING: Final = ("allOf", "$ref", "$dynamicRef", "if", "dependentSchemas")
_OPEN_KEYWORDS: Final = ("additionalProperties", "unevaluatedProperties")


class SchemaDefinitionError(StrictcallError, ValueError):
    """A tool declared a schema that is not a valid JSON Schema 2020-12 document."""


class Violation(NamedTuple):
    """Where an instance broke its schema, why, and what was expected there."""

    path: tuple[str | int, ...]
    reason: str
    expected: JSONValue
    has_expected: bool


class _ExactInteger:
    """jsonschema-rs keyword: a float is never an integer, even 1.0."""

    def __init__(self, parent_schema: object, value: object, schema_path: object) -> None:
        pass

    def validate(self, instance: object) -> None:
        if type(instance) is float:
            raise ValueError("integer")


def make_strict(schema: JSONValue) -> JSONValue:
    """A deep copy of `schema` with the strictness rules of this module applied."""
    strict = copy.deepcopy(schema)
    closed = _closable_defs(strict)
    for node, close, condition in _positions(strict, closed):
        if (
            close
            and not condition
            and not any(key in node for key in _OPEN_KEYWORDS)
            and _may_be_object(node, strict)
        ):
            is_object = _describes_object(node)
            if _assembles(node) or (is_object and any(key in node for key in _ALTERNATIVES)):
                if not _refers_to_closed(node, strict, closed):
                    node["unevaluatedProperties"] = False
            elif is_object:
                node["additionalProperties"] = False
        if _asks_integer(node):
            node[_EXACT_INTEGER] = True
    return strict


_Position = tuple[dict[str, Any], bool, bool]


def _positions(root: JSONValue, closed_defs: set[int]) -> Iterator[_Position]:
    """Every subschema of `root`, parents first, with whether it is closed where it stands
    (standalone, or a $def in `closed_defs`) and whether it sits inside a condition."""
    stack: list[tuple[JSONValue, bool, bool]] = [(root, True, False)]
    while stack:
        node, close, condition = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node, close, condition
        for sub in _subschemas(node, _STANDALONE_ONE, _STANDALONE_LIST, _STANDALONE_MAP):
            stack.append((sub, True, condition))
        for sub in _subschemas(node, _PART_ONE, _PART_LIST, _PART_MAP):
            stack.append((sub, id(sub) in closed_defs, condition))
        # Alternatives under an object schema are parts of it; a bare union's are standalone.
        alternatives_close = close and not (_describes_object(node) or _assembles(node))
        for sub in _subschemas(node, (), _ALTERNATIVES, ()):
            stack.append((sub, alternatives_close, condition))
        for sub in _subschemas(node, _CONDITIONS, (), ()):
            stack.append((sub, False, True))


def _closable_defs(root: JSONValue) -> set[int]:
    """The root's $defs that are only ever referenced as whole values (`{"$ref": ...}` where a
    standalone subschema stands): those are closed in place, which validates faster than
    `unevaluatedProperties` at every reference. A $def that is assembled with anything, or
    referenced from a condition, stays open."""
    if not isinstance(root, dict):
        return set()
    closable = {
        id(sub)
        for key in ("$defs", "definitions")
        if isinstance(root.get(key), dict)
        for sub in root[key].values()
        if isinstance(sub, dict)
    }
    while closable:
        blocked: set[int] = set()
        for node, close, condition in _positions(root, closable):
            if "$dynamicRef" in node or ("$id" in node and node is not root):
                return set()  # references this module does not resolve: keep every $def open
            ref = node.get("$ref")
            if not isinstance(ref, str):
                continue
            if not (ref.startswith("#/") or ref == "#"):
                return set()
            target = id(_resolve_local(root, ref))
            if target in closable and not (close and not condition and _is_bare_ref(node)):
                blocked.add(target)
        if not blocked:
            break
        closable -= blocked
    return closable


def _is_bare_ref(node: dict[str, Any]) -> bool:
    """The subschema is a reference and nothing else that validates."""
    return all(key in _BESIDE_BARE_REF for key in node)


_BESIDE_BARE_REF: Final = frozenset(
    {
        "$ref",
        "$defs",
        "definitions",
        "$comment",
        "description",
        "title",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        _EXACT_INTEGER,
    }
)


def _refers_to_closed(node: dict[str, Any], root: JSONValue, closed_defs: set[int]) -> bool:
    """A bare reference to a schema that is closed where it stands (the root, or a $def
    closed in place) needs no closing of its own."""
    if not _is_bare_ref(node):
        return False
    target = _resolve_local(root, node["$ref"])
    return target is root or id(target) in closed_defs


def _assembles(schema: dict[str, Any]) -> bool:
    return any(key in schema for key in _ASSEMBLING)


def _subschemas(
    schema: dict[str, Any], one: Iterable[str], lists: Iterable[str], maps: Iterable[str]
) -> Iterable[JSONValue]:
    for key in one:
        if key in schema:
            yield schema[key]
    for key in lists:
        value = schema.get(key)
        if isinstance(value, list):
            yield from value
    for key in maps:
        value = schema.get(key)
        if isinstance(value, dict):
            yield from value.values()


def _describes_object(schema: dict[str, Any]) -> bool:
    """The schema declares an object's members (a bare `required` only constrains them)."""
    return _names_type(schema.get("type"), "object") or any(
        key in schema for key in _STANDALONE_MAP
    )


def _may_be_object(schema: dict[str, Any], root: JSONValue) -> bool:
    """False when the schema's own type, or its local $ref target's, rules objects out."""
    if "type" in schema:
        return _names_type(schema["type"], "object")
    ref = schema.get("$ref")
    if isinstance(ref, str) and not any(key in schema for key in ("allOf", "anyOf", "oneOf")):
        target = _resolve_local(root, ref)
        if isinstance(target, dict) and "type" in target:
            return _names_type(target["type"], "object")
    return True


def _names_type(kind: JSONValue, name: str) -> bool:
    return kind == name or (isinstance(kind, list) and name in kind)


def _asks_integer(schema: dict[str, Any]) -> bool:
    """The schema only accepts integers where it accepts numbers: refuse every float there."""
    kind = schema.get("type")
    if kind is not None:
        if _names_type(kind, "number"):
            return False
        if _names_type(kind, "integer"):
            return True
    if "const" in schema:
        values: list[JSONValue] = [schema["const"]]
    elif isinstance(schema.get("enum"), list):
        values = schema["enum"]
    else:
        return False
    # An enum of integers matches 1.0 as 1 in JSON Schema; here 1.0 is not one of them.
    has_int = any(type(value) is int for value in values)
    return has_int and not any(type(value) is float for value in values)


def _resolve_local(root: JSONValue, ref: JSONValue) -> JSONValue:
    """The subschema a local reference ("#" or "#/a/b") names, or None."""
    if not isinstance(ref, str):
        return None
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node = root
    for raw in ref[2:].split("/"):
        step = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return None
    return node


# The keywords `admits_numbers` reads. A schema with any other keyword ($ref, allOf, not, ...)
# is taken to admit numbers: the answer may be a needless "yes", never a wrong "no".
_READ_FOR_NUMBERS: Final = frozenset(
    {
        *("type", "enum", "const", "properties", "required", "additionalProperties"),
        *("unevaluatedProperties", "items", "prefixItems", "minItems", "maxItems"),
        *("uniqueItems", "minProperties", "maxProperties", "minLength", "maxLength"),
        *("pattern", "format", "title", "description", "$schema", "$comment", "default"),
        *("examples", "deprecated", "readOnly", "writeOnly"),
    }
)


def admits_numbers(schema: JSONValue) -> bool:
    """Whether a value that satisfies `schema` may hold a number anywhere in it; True when
    the schema says anything this does not read."""
    if schema is False:
        return False
    if type(schema) is not dict or not _READ_FOR_NUMBERS.issuperset(schema):
        return True
    if "const" in schema:
        return _holds_number(schema["const"])
    if "enum" in schema:
        return _holds_number(schema["enum"])
    kind = schema.get("type")
    kinds = {kind} if type(kind) is str else set(kind) if type(kind) is list else None
    if kinds is None or "number" in kinds or "integer" in kinds:
        return True
    members: list[JSONValue] = []
    if "object" in kinds:
        properties = schema.get("properties", {})
        if type(properties) is not dict:
            return True
        members += properties.values()
        # members the schema does not name: additionalProperties decides, else
        # unevaluatedProperties (no other keyword here can evaluate one), else any
        members.append(
            schema.get("additionalProperties", schema.get("unevaluatedProperties", True))
        )
    if "array" in kinds:
        prefix = schema.get("prefixItems", [])
        if type(prefix) is not list:
            return True
        members += prefix
        members.append(schema.get("items", True))
    return any(admits_numbers(member) for member in members)


def _holds_number(value: JSONValue) -> bool:
    if type(value) is int or type(value) is float:
        return True
    if type(value) is dict:
        return any(_holds_number(item) for item in value.values())
    if type(value) is list:
        return any(_holds_number(item) for item in value)
    return False


_ERRORS_SEARCHED: Final = 64
"""How many errors `first_violation` reads looking for an exact-integer fault at the first
error's place."""


class CompiledSchema:
    """A strict schema compiled twice: a fast validator, and an exact-integer one for floats."""

    __slots__ = (
        "_exact",
        "_fast",
        "_flat",
        "admits_numbers",
        "advertised",
        "declared",
        "is_valid_when",
        "strict",
    )

    def __init__(self, schema: JSONValue) -> None:
        if not isinstance(schema, dict | bool):
            raise SchemaDefinitionError("a schema is an object or a boolean")
        try:
            jsonschema_rs.meta.validate(schema)
        except (jsonschema_rs.ValidationError, ValueError) as exc:
            raise SchemaDefinitionError(str(exc)) from None
        self.declared: Final = copy.deepcopy(schema)
        self.strict: Final = make_strict(schema)
        plain = _without_key(self.strict, _EXACT_INTEGER)
        self.advertised: Final = plain
        try:
            self._fast = jsonschema_rs.Draft202012Validator(plain, validate_formats=True)
            self._exact = jsonschema_rs.Draft202012Validator(
                self.strict, validate_formats=True, keywords={_EXACT_INTEGER: _ExactInteger}
            )
        except (jsonschema_rs.ValidationError, ValueError) as exc:
            raise SchemaDefinitionError(str(exc)) from None
        self._flat = FlatObject.of(self.strict)
        self.admits_numbers: Final = admits_numbers(self.strict)
        """Whether a value it accepts may hold a number anywhere (True when in doubt)."""
        self.is_valid_when: Final[tuple[Callable[[JSONValue], bool], ...]] = (
            self._fast.is_valid,
            self._exact.is_valid,
        )
        """The validators' own checks, indexed by whether the instance may hold a float:
        `is_valid_when[has_float](instance)`, the hot path's one Python call less."""

    def is_valid(self, instance: JSONValue, *, has_float: bool) -> bool:
        """True when `instance` (a JSON value) satisfies the strict schema."""
        return bool(self.is_valid_when[has_float](instance))

    def first_violation(self, instance: JSONValue) -> Violation | None:
        """The first place where `instance` breaks the strict schema, or None.

        A float where an integer is asked for is a type error even when the validator first
        finds another fault at that place (2.0 against multipleOf 5 is told "integer").
        """
        if self._flat is not None:
            quick = self._flat.first_violation(instance)
            if quick is not None:
                return quick
        first = None
        for count, error in enumerate(self._exact.iter_errors(instance)):
            if first is None:
                first = error
                if type(first.kind).__name__ == "Custom":
                    break
            elif (
                type(error.kind).__name__ == "Custom" and error.instance_path == first.instance_path
            ):
                first = error
                break
            if count >= _ERRORS_SEARCHED:
                break
        return None if first is None else _describe(first, self.strict)


_FLAT_OBJECT_KEYWORDS: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "title", "description", "$schema"}
)
_FLAT_MEMBER_KEYWORDS: Final = frozenset(
    {
        "type",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "pattern",
        "title",
        "description",
        "default",
        "examples",
        _EXACT_INTEGER,
    }
)
_JSON_TYPES: Final[Mapping[str, Any]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}
_LENGTH_BOUNDS: Final = (
    ("minLength", "min_length", lambda v, n: len(v) < n),
    ("maxLength", "max_length", lambda v, n: len(v) > n),
)
_NUMBER_BOUNDS: Final = (
    ("minimum", "minimum", lambda v, n: v < n),
    ("maximum", "maximum", lambda v, n: v > n),
    ("exclusiveMinimum", "exclusive_minimum", lambda v, n: v <= n),
    ("exclusiveMaximum", "exclusive_maximum", lambda v, n: v >= n),
)
# Bounds apply to their own kind of value only, as in JSON Schema.
_BOUNDS_OF: Final[Mapping[str, tuple[tuple[str, str, Any], ...]]] = {
    "string": _LENGTH_BOUNDS,
    "integer": _NUMBER_BOUNDS,
    "number": _NUMBER_BOUNDS,
}


class FlatObject:
    """The error path's quick describer for the most common input schema: one closed object of
    members with a single type and, at most, length, pattern or numeric bounds.

    It runs only after the validator said "invalid", and only reports what is certainly a
    violation (an unknown member, a missing one, a wrong type, a bound broken); when it finds
    none of those, the validator's own error iterator describes the fault. It saves that
    iterator's cost (~2-4 µs) on the mistakes models make most. Every violation but an
    unexpected member's (whose expected list is handed out) is made once, here: they are
    immutable, so one serves every call.
    """

    __slots__ = ("members", "missing", "names")

    def __init__(
        self,
        members: dict[str, tuple[str, tuple[tuple[str, Any, JSONValue], ...]]],
        required: tuple[str, ...],
    ) -> None:
        # name -> (type check, its violation, ((broken, its violation), ...))
        self.members: Final = {
            name: (
                _JSON_TYPES[kind],
                Violation((name,), "type", kind, True),
                tuple(
                    (broken, Violation((name,), reason, expected, True))
                    for reason, broken, expected in bounds
                ),
            )
            for name, (kind, bounds) in members.items()
        }
        self.missing: Final = tuple(
            (name, Violation((), "missing_member", name, True)) for name in required
        )
        self.names: Final = sorted(members)

    @classmethod
    def of(cls, schema: JSONValue) -> FlatObject | None:
        """A describer for `schema` if it is a flat closed object, else None."""
        if not isinstance(schema, dict) or not _FLAT_OBJECT_KEYWORDS.issuperset(schema):
            return None
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if (
            schema.get("type") != "object"
            or schema.get("additionalProperties") is not False
            or not isinstance(properties, dict)
            or not isinstance(required, list)
            or not all(isinstance(name, str) and name in properties for name in required)
        ):
            return None
        members = {}
        for name, member in properties.items():
            if not isinstance(member, dict) or not _FLAT_MEMBER_KEYWORDS.issuperset(member):
                return None
            kind = member.get("type")
            if not isinstance(kind, str) or kind not in _JSON_TYPES:
                return None
            bounds = [
                (reason, functools.partial(check, n=member[keyword]), member[keyword])
                for keyword, reason, check in _BOUNDS_OF.get(kind, ())
                if keyword in member
            ]
            if not all(
                isinstance(limit, int | float) and not isinstance(limit, bool)
                for _, _, limit in bounds
            ):
                return None
            if "pattern" in member and kind == "string":
                # ECMA-262 semantics, exactly: the validator's own regex engine decides
                pattern = jsonschema_rs.Draft202012Validator({"pattern": member["pattern"]})
                bounds.append(("pattern", _not_valid(pattern), member["pattern"]))
            members[name] = (kind, tuple(bounds))
        return cls(members, tuple(required))

    def first_violation(self, instance: JSONValue) -> Violation | None:
        """A certain violation in `instance`, or None when the fault lies elsewhere."""
        if not isinstance(instance, dict):
            return _NOT_AN_OBJECT
        members = self.members
        for name in instance:
            if name not in members:
                return Violation((name,), "unexpected_member", list(self.names), True)
        for name, missing in self.missing:
            if name not in instance:
                return missing
        for name, value in instance.items():
            is_kind, wrong_type, bounds = members[name]
            if not is_kind(value):
                return wrong_type
            for broken, violation in bounds:
                if broken(value):
                    return violation
        return None


_NOT_AN_OBJECT: Final = Violation((), "type", "object", True)


def _not_valid(validator: Any) -> Any:
    return lambda value: not validator.is_valid(value)


def _without_key(schema: JSONValue, name: str) -> JSONValue:
    if isinstance(schema, dict):
        return {k: _without_key(v, name) for k, v in schema.items() if k != name}
    if isinstance(schema, list):
        return [_without_key(v, name) for v in schema]
    return schema


# jsonschema-rs error kind -> (stable reason, the member of kind.as_dict() that says what was
# expected). Members that could hold the instance's own values are never read.
_REASONS: Final[Mapping[str, tuple[str, str | None]]] = {
    "AdditionalItems": ("unexpected_item", "limit"),
    "AdditionalProperties": ("unexpected_member", None),
    "UnevaluatedProperties": ("unexpected_member", None),
    "UnevaluatedItems": ("unexpected_item", None),
    "Required": ("missing_member", "property"),
    "Type": ("type", "types"),
    "MinLength": ("min_length", "limit"),
    "MaxLength": ("max_length", "limit"),
    "Pattern": ("pattern", "pattern"),
    "Enum": ("enum", "options"),
    "Constant": ("const", "expected_value"),
    "Minimum": ("minimum", "limit"),
    "Maximum": ("maximum", "limit"),
    "ExclusiveMinimum": ("exclusive_minimum", "limit"),
    "ExclusiveMaximum": ("exclusive_maximum", "limit"),
    "MultipleOf": ("multiple_of", "multiple_of"),
    "MinItems": ("min_items", "limit"),
    "MaxItems": ("max_items", "limit"),
    "UniqueItems": ("unique_items", None),
    "MinProperties": ("min_properties", "limit"),
    "MaxProperties": ("max_properties", "limit"),
    "Format": ("format", "format"),
    "AnyOf": ("any_of", None),
    "OneOfNotValid": ("one_of", None),
    "OneOfMultipleValid": ("one_of", None),
    "Not": ("not", None),
    "Contains": ("contains", None),
    "MinContains": ("min_contains", "min_contains"),
    "MaxContains": ("max_contains", "max_contains"),
    "FalseSchema": ("not_allowed", None),
    "PropertyNames": ("property_names", None),
    "DependentRequired": ("missing_member", None),
    "ContentEncoding": ("content_encoding", "content_encoding"),
    "ContentMediaType": ("content_media_type", "content_media_type"),
}


def _describe(error: Any, schema: JSONValue) -> Violation:
    kind_name = type(error.kind).__name__
    path: tuple[str | int, ...] = tuple(error.instance_path)
    if kind_name == "Custom":  # only our exact-integer keyword is registered
        node = _schema_at(schema, tuple(error.schema_path)[:-1])
        if isinstance(node, dict) and "const" in node and "type" not in node:
            return Violation(path, "const", copy.deepcopy(node["const"]), True)
        if isinstance(node, dict) and "enum" in node and "type" not in node:
            return Violation(path, "enum", copy.deepcopy(node["enum"]), True)
        return Violation(path, "type", "integer", True)
    reason, member = _REASONS.get(kind_name, (_snake(kind_name), None))
    details = _kind_details(error)
    if reason == "unexpected_member":
        unexpected = details.get("unexpected")
        if isinstance(unexpected, list) and unexpected:
            path = (*path, str(unexpected[0]))
        allowed = _declared_members(schema, tuple(error.schema_path)[:-1])
        return Violation(path, reason, allowed, allowed is not None)
    if member is None or member not in details:
        return Violation(path, reason, None, False)
    expected = details[member]
    if reason == "type" and isinstance(expected, list) and len(expected) == 1:
        expected = expected[0]
    return Violation(path, reason, expected, True)


def _kind_details(error: Any) -> dict[str, JSONValue]:
    try:
        details = error.kind.as_dict()
    except (AttributeError, TypeError, ValueError):
        return {}
    return details if isinstance(details, dict) else {}


def _schema_at(root: JSONValue, schema_path: tuple[str | int, ...]) -> JSONValue:
    """The subschema at a validator's keyword path (following local $refs), or None."""
    node = root
    for step in schema_path:
        if isinstance(node, dict) and step == "$ref" and isinstance(node.get("$ref"), str):
            node = _resolve_local(root, node["$ref"])
            continue
        if isinstance(node, dict) and isinstance(step, str) and step in node:
            node = node[step]
            continue
        if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
            continue
        return None
    return node


def _declared_members(root: JSONValue, schema_path: tuple[str | int, ...]) -> JSONValue:
    """The member names the object schema at `schema_path` declares, with those of the parts
    it assembles (allOf, $ref, anyOf/oneOf, then/else, ...), or None if it declares none."""
    names: set[str] = set()
    seen: set[int] = set()
    stack = [_schema_at(root, schema_path)]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node.get("properties"), dict):
            names.update(node["properties"])
        if isinstance(node.get("$ref"), str):
            stack.append(_resolve_local(root, node["$ref"]))
        stack.extend(
            _subschemas(node, _PART_ONE, (*_PART_LIST, *_ALTERNATIVES), ("dependentSchemas",))
        )
    return sorted(names) if names else None


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def to_pointer(path: Iterable[str | int]) -> str:
    """A JSON Pointer (RFC 6901) for a path of member names and array indexes."""
    pointer = ""
    for step in path:
        text = str(step)
        if "~" in text or "/" in text:
            text = text.replace("~", "~0").replace("/", "~1")
        pointer += "/" + text
    return pointer
