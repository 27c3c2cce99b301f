"""Compiled JSON Schema 2020-12 validators with strictness and located errors.

Every schema a tool declares is made strict before it is compiled, unless it says otherwise:

- an object schema that does not itself say `additionalProperties` or `unevaluatedProperties`
  refuses unknown members, at every depth (`additionalProperties: false`, or
  `unevaluatedProperties: false` where the object is assembled with allOf/$ref/if, whose
  branches are left open so that the assembly works);
- "integer" means an integer written as one: 1.0 is refused where an integer is asked for
  (JSON Schema alone would accept it); say `"type": "number"` to accept it;
- a boolean is never a number (JSON Schema already says so, and jsonschema-rs honours it).

Validation itself is jsonschema-rs, compiled once per schema. The error path is slower and only
taken on failure: the first error is turned into a JSON Pointer, a stable reason and what was
expected, all taken from the schema and the instance's location, never from the instance's values.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import jsonschema_rs

from strictcall.errors import JSONValue

_EXACT_INTEGER: Final = "x-strictcall-exact-integer"

# Keywords whose value is one subschema, a list of them, or a map of them.
_ONE_SCHEMA: Final = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "not",
    "contentSchema",
)
_OPEN_ONE_SCHEMA: Final = ("if", "then", "else")
_SCHEMA_LIST: Final = ("prefixItems", "anyOf", "oneOf")
_OPEN_SCHEMA_LIST: Final = ("allOf",)
_SCHEMA_MAP: Final = ("properties", "patternProperties", "$defs", "definitions")
_OPEN_SCHEMA_MAP: Final = ("dependentSchemas",)
_ASSEMBLING: Final = ("allOf", "$ref", "$dynamicRef", "if", "dependentSchemas")


class SchemaDefinitionError(ValueError):
    """A tool declared a schema that is not a valid JSON Schema 2020-12 document."""


@dataclass(frozen=True, slots=True)
class Violation:
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
    _tighten(strict, close=True)
    return strict


def _tighten(schema: JSONValue, *, close: bool) -> None:
    if not isinstance(schema, dict):
        return
    if (
        close
        and _describes_object(schema)
        and not ("additionalProperties" in schema or "unevaluatedProperties" in schema)
    ):
        if any(key in schema for key in _ASSEMBLING):
            schema["unevaluatedProperties"] = False
        else:
            schema["additionalProperties"] = False
    if _asks_integer(schema.get("type")):
        schema[_EXACT_INTEGER] = True
    for key in _ONE_SCHEMA:
        if key in schema:
            _tighten(schema[key], close=True)
    for key in _OPEN_ONE_SCHEMA:
        if key in schema:
            _tighten(schema[key], close=False)
    for key in _SCHEMA_LIST:
        for sub in _as_list(schema.get(key)):
            _tighten(sub, close=True)
    for key in _OPEN_SCHEMA_LIST:
        for sub in _as_list(schema.get(key)):
            _tighten(sub, close=False)
    for key in _SCHEMA_MAP:
        for sub in _as_map_values(schema.get(key)):
            _tighten(sub, close=True)
    for key in _OPEN_SCHEMA_MAP:
        for sub in _as_map_values(schema.get(key)):
            _tighten(sub, close=False)


def _describes_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind):
        return True
    return "properties" in schema or "required" in schema or "patternProperties" in schema


def _asks_integer(kind: JSONValue) -> bool:
    if kind == "integer":
        return True
    return isinstance(kind, list) and "integer" in kind and "number" not in kind


def _as_list(value: JSONValue) -> Iterable[JSONValue]:
    return value if isinstance(value, list) else ()


def _as_map_values(value: JSONValue) -> Iterable[JSONValue]:
    return value.values() if isinstance(value, dict) else ()


class CompiledSchema:
    """A strict schema compiled twice: a fast validator, and an exact-integer one for floats."""

    __slots__ = ("_exact", "_fast", "advertised", "declared", "strict")

    def __init__(self, schema: JSONValue) -> None:
        if not isinstance(schema, dict | bool):
            raise SchemaDefinitionError("a schema is an object or a boolean")
        self.declared: Final = copy.deepcopy(schema)
        self.strict: Final = make_strict(schema)
        plain = _without_key(self.strict, _EXACT_INTEGER)
        self.advertised: Final = plain
        try:
            jsonschema_rs.meta.validate(schema)
            self._fast = jsonschema_rs.Draft202012Validator(plain, validate_formats=True)
            self._exact = jsonschema_rs.Draft202012Validator(
                self.strict, validate_formats=True, keywords={_EXACT_INTEGER: _ExactInteger}
            )
        except (jsonschema_rs.ValidationError, ValueError) as exc:
            raise SchemaDefinitionError(str(exc)) from None

    def is_valid(self, instance: JSONValue, *, has_float: bool) -> bool:
        """True when `instance` (a JSON value) satisfies the strict schema."""
        if has_float:
            return bool(self._exact.is_valid(instance))
        return bool(self._fast.is_valid(instance))

    def first_violation(self, instance: JSONValue) -> Violation | None:
        """The first place where `instance` breaks the strict schema, or None."""
        for error in self._exact.iter_errors(instance):
            return _describe(error, self.strict)
        return None


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


def _declared_members(schema: JSONValue, schema_path: tuple[str | int, ...]) -> JSONValue:
    """The member names the object schema at `schema_path` declares, if it can be found."""
    node = schema
    for step in schema_path:
        if isinstance(node, dict) and isinstance(step, str) and step in node:
            node = node[step]
            continue
        if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
            continue
        return None
    if isinstance(node, dict) and isinstance(node.get("properties"), dict):
        return sorted(node["properties"])
    return None


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def to_pointer(path: Iterable[str | int]) -> str:
    """A JSON Pointer (RFC 6901) for a path of member names and array indexes."""
    return "".join("/" + str(step).replace("~", "~0").replace("/", "~1") for step in path)
