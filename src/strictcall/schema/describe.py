"""Describing a failure: where an instance broke its strict schema, why, and what was expected.

The error path is slower and only taken on failure: the first error is turned into a path, a
stable reason (`strictcall.errors.Reason`) and what was expected, all taken from the schema and
the instance's location, never from the instance's values. `FlatObject` describes the most
common input schema's failures without the validator's error iterator; both paths give the
same answer for the same failure.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

import jsonschema_rs

from strictcall.errors import JSONValue, Reason
from strictcall.schema.strict import (
    ALTERNATIVES,
    EXACT_INTEGER,
    PART_LIST,
    PART_ONE,
    resolve_local,
    subschemas,
)


class Violation(NamedTuple):
    """Where an instance broke its schema, why, and what was expected there."""

    path: tuple[str | int, ...]
    reason: Reason
    expected: JSONValue
    has_expected: bool


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
        EXACT_INTEGER,
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
    ("minLength", Reason.MIN_LENGTH, lambda v, n: len(v) < n),
    ("maxLength", Reason.MAX_LENGTH, lambda v, n: len(v) > n),
)
_NUMBER_BOUNDS: Final = (
    ("minimum", Reason.MINIMUM, lambda v, n: v < n),
    ("maximum", Reason.MAXIMUM, lambda v, n: v > n),
    ("exclusiveMinimum", Reason.EXCLUSIVE_MINIMUM, lambda v, n: v <= n),
    ("exclusiveMaximum", Reason.EXCLUSIVE_MAXIMUM, lambda v, n: v >= n),
)
# Bounds apply to their own kind of value only, as in JSON Schema.
_BOUNDS_OF: Final[Mapping[str, tuple[tuple[str, Reason, Any], ...]]] = {
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
        members: dict[str, tuple[str, tuple[tuple[Reason, Any, JSONValue], ...]]],
        required: tuple[str, ...],
    ) -> None:
        # name -> (type check, its violation, ((broken, its violation), ...))
        self.members: Final = {
            name: (
                _JSON_TYPES[kind],
                Violation((name,), Reason.TYPE, kind, True),
                tuple(
                    (broken, Violation((name,), reason, expected, True))
                    for reason, broken, expected in bounds
                ),
            )
            for name, (kind, bounds) in members.items()
        }
        self.missing: Final = tuple(
            (name, Violation((), Reason.MISSING_MEMBER, name, True)) for name in required
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
                bounds.append((Reason.PATTERN, _not_valid(pattern), member["pattern"]))
            members[name] = (kind, tuple(bounds))
        return cls(members, tuple(required))

    def first_violation(self, instance: JSONValue) -> Violation | None:
        """A certain violation in `instance`, or None when the fault lies elsewhere."""
        if not isinstance(instance, dict):
            return _NOT_AN_OBJECT
        members = self.members
        for name in instance:
            if name not in members:
                return Violation((name,), Reason.UNEXPECTED_MEMBER, list(self.names), True)
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


_NOT_AN_OBJECT: Final = Violation((), Reason.TYPE, "object", True)


def _not_valid(validator: Any) -> Any:
    return lambda value: not validator.is_valid(value)


# jsonschema-rs error kind -> (stable reason, the member of kind.as_dict() that says what was
# expected). Members that could hold the instance's own values are never read.
_REASONS: Final[Mapping[str, tuple[Reason, str | None]]] = {
    "AdditionalItems": (Reason.UNEXPECTED_ITEM, "limit"),
    "AdditionalProperties": (Reason.UNEXPECTED_MEMBER, None),
    "UnevaluatedProperties": (Reason.UNEXPECTED_MEMBER, None),
    "UnevaluatedItems": (Reason.UNEXPECTED_ITEM, None),
    "Required": (Reason.MISSING_MEMBER, "property"),
    "Type": (Reason.TYPE, "types"),
    "MinLength": (Reason.MIN_LENGTH, "limit"),
    "MaxLength": (Reason.MAX_LENGTH, "limit"),
    "Pattern": (Reason.PATTERN, "pattern"),
    "Enum": (Reason.ENUM, "options"),
    "Constant": (Reason.CONST, "expected_value"),
    "Minimum": (Reason.MINIMUM, "limit"),
    "Maximum": (Reason.MAXIMUM, "limit"),
    "ExclusiveMinimum": (Reason.EXCLUSIVE_MINIMUM, "limit"),
    "ExclusiveMaximum": (Reason.EXCLUSIVE_MAXIMUM, "limit"),
    "MultipleOf": (Reason.MULTIPLE_OF, "multiple_of"),
    "MinItems": (Reason.MIN_ITEMS, "limit"),
    "MaxItems": (Reason.MAX_ITEMS, "limit"),
    "UniqueItems": (Reason.UNIQUE_ITEMS, None),
    "MinProperties": (Reason.MIN_PROPERTIES, "limit"),
    "MaxProperties": (Reason.MAX_PROPERTIES, "limit"),
    "Format": (Reason.FORMAT, "format"),
    "AnyOf": (Reason.ANY_OF, None),
    "OneOfNotValid": (Reason.ONE_OF, None),
    "OneOfMultipleValid": (Reason.ONE_OF, None),
    "Not": (Reason.NOT, None),
    "Contains": (Reason.CONTAINS, None),
    "MinContains": (Reason.CONTAINS, "min_contains"),
    "MaxContains": (Reason.CONTAINS, "max_contains"),
    "FalseSchema": (Reason.NOT_ALLOWED, None),
    "PropertyNames": (Reason.PROPERTY_NAMES, None),
    "DependentRequired": (Reason.MISSING_MEMBER, None),
    "ContentEncoding": (Reason.CONTENT_ENCODING, "content_encoding"),
    "ContentMediaType": (Reason.CONTENT_MEDIA_TYPE, "content_media_type"),
}


def is_custom(error: Any) -> bool:
    """Whether a jsonschema-rs error is our own keyword's (the exact-integer check)."""
    return type(error.kind).__name__ == "Custom"


def describe_error(error: Any, schema: JSONValue) -> Violation:
    """The violation a jsonschema-rs error reports, against the strict `schema`."""
    kind_name = type(error.kind).__name__
    path: tuple[str | int, ...] = tuple(error.instance_path)
    if kind_name == "Custom":  # only our exact-integer keyword is registered
        node = _schema_at(schema, tuple(error.schema_path)[:-1])
        if isinstance(node, dict) and "const" in node and "type" not in node:
            return Violation(path, Reason.CONST, copy.deepcopy(node["const"]), True)
        if isinstance(node, dict) and "enum" in node and "type" not in node:
            return Violation(path, Reason.ENUM, copy.deepcopy(node["enum"]), True)
        return Violation(path, Reason.TYPE, "integer", True)
    reason, member = _REASONS.get(kind_name, (Reason.CONSTRAINT, None))
    details = _kind_details(error)
    if reason is Reason.UNEXPECTED_MEMBER:
        unexpected = details.get("unexpected")
        if isinstance(unexpected, list) and unexpected:
            path = (*path, str(unexpected[0]))
        allowed = _declared_members(schema, tuple(error.schema_path)[:-1])
        return Violation(path, reason, allowed, allowed is not None)
    if member is None or member not in details:
        return Violation(path, reason, None, False)
    expected = details[member]
    if reason is Reason.TYPE and isinstance(expected, list) and len(expected) == 1:
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
            node = resolve_local(root, node["$ref"])
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
    declared = False
    seen: set[int] = set()
    stack = [_schema_at(root, schema_path)]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node.get("properties"), dict):
            declared = True
            names.update(node["properties"])
        if isinstance(node.get("$ref"), str):
            stack.append(resolve_local(root, node["$ref"]))
        stack.extend(subschemas(node, PART_ONE, (*PART_LIST, *ALTERNATIVES), ("dependentSchemas",)))
    # An object schema that declares its members as none (properties: {}) allows none: that is
    # `expected: []`, not "nothing to say" (an empty list is falsy, not absent).
    return sorted(names) if declared else None


def to_pointer(path: Iterable[str | int]) -> str:
    """A JSON Pointer (RFC 6901) for a path of member names and array indexes."""
    pointer = ""
    for step in path:
        text = str(step)
        if "~" in text or "/" in text:
            text = text.replace("~", "~0").replace("/", "~1")
        pointer += "/" + text
    return pointer
