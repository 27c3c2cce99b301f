"""Describing a failure: where an instance broke its strict schema, why, and what was expected.

The error path is slower and only taken on failure: the first error is turned into a path, a
stable reason (`strictcall.errors.Reason`) and what was expected, all taken from the schema and
the instance's location, never from the instance's values. `strictcall.core.schema.quick` describes
the common schemas' failures without the validator's error iterator; both paths give the same
answer for the same failure.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from strictcall.core.schema.strict import (
    ALTERNATIVES,
    PART_LIST,
    PART_ONE,
    resolve_local,
    subschemas,
)
from strictcall.errors import JSONValue, Reason


class Violation(NamedTuple):
    """Where an instance broke its schema, why, and what was expected there."""

    path: tuple[str | int, ...]
    reason: Reason
    expected: JSONValue
    has_expected: bool


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
