"""Whether a tool's input schema qualifies for OpenAI's strict mode exactly as it stands.

OpenAI constrains a strict tool's arguments to a subset of JSON Schema (the structured-outputs
guide's "Supported schemas"): an object root; every object closed (`additionalProperties:
false`) with every property required; only the keywords listed below; at most 10 levels of
nesting, 5000 properties and 1000 enum values. A schema outside it is refused by the API, and
hosts that "fix" it (the OpenAI Agents SDK's `ensure_strict_json_schema`) change what the tool
accepts, e.g. by making optional members required. So strictcall marks a tool strict only when
its schema already qualifies, and lists every other tool with `strict: false`, unchanged.

A qualifying schema is listed with every object's `required` written out in the order of its
`properties` (`required: []` where it has none): the same set, so the same schema, in the form
those hosts write it, so that they leave it as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Final

from strictcall.errors import JSONValue

MAX_DEPTH: Final = 10
"""Object nesting OpenAI allows below the root."""
MAX_PROPERTIES: Final = 5000
"""Object properties OpenAI allows in one schema, all objects together."""
MAX_ENUM_VALUES: Final = 1000
"""Enum values OpenAI allows in one schema, all enums together."""
MAX_NAME_CHARS: Final = 120_000
"""Characters OpenAI allows across property names, definition names, enum and const values."""

_ANY: Final = frozenset({"type", "description", "title", "enum", "const", "anyOf"})
_NUMBER: Final = frozenset(
    {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"}
)
_BY_TYPE: Final[Mapping[str, frozenset[str]]] = {
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "string": frozenset({"pattern", "format"}),
    "number": _NUMBER,
    "integer": _NUMBER,
    "boolean": frozenset(),
    "null": frozenset(),
}
_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_DEFINITIONS: Final = ("$defs", "definitions")
_TYPED: Final = frozenset({"type", "enum", "const", "anyOf"})
"""A node needs one of these: OpenAI has no schema that admits any value."""


def strict_schema(schema: JSONValue) -> dict[str, JSONValue] | None:
    """`schema` in the form strict hosts write (a fresh copy), when it qualifies for OpenAI's
    strict mode as it stands; None when it does not."""
    listed = copy.deepcopy(schema)
    return listed if qualifies(listed, canonical=True) else None


def qualifies(schema: JSONValue, *, canonical: bool = False) -> bool:
    """Whether `schema` is a schema OpenAI accepts for a strict function tool. `canonical`:
    rewrite each object's `required` in the order of its properties, in place."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        return False
    budget = _Budget(canonical)
    for key in _DEFINITIONS:
        if key not in schema:
            continue
        definitions = schema[key]
        if not isinstance(definitions, dict):
            return False
        for name, definition in definitions.items():
            budget.chars += len(name)
            if not _node(definition, 0, budget):
                return False
    if not _node(schema, 0, budget, root=True):
        return False
    return budget.within()


class _Budget:
    """What the whole schema has used of OpenAI's size limits so far."""

    def __init__(self, canonical: bool) -> None:
        self.canonical = canonical
        self.properties = 0
        self.enum_values = 0
        self.chars = 0

    def within(self) -> bool:
        return (
            self.properties <= MAX_PROPERTIES
            and self.enum_values <= MAX_ENUM_VALUES
            and self.chars <= MAX_NAME_CHARS
        )


def _types(node: dict[str, JSONValue]) -> list[str] | None:
    """The node's declared types, or None when `type` is malformed or names an unknown type."""
    declared = node.get("type")
    if declared is None:
        return []
    names = declared if isinstance(declared, list) else [declared]
    if not names or not all(isinstance(name, str) and name in _BY_TYPE for name in names):
        return None
    return names


def _node(node: JSONValue, depth: int, budget: _Budget, *, root: bool = False) -> bool:
    """Whether one subschema, and everything under it, is in the strict subset (the root may
    hold the definitions, checked apart)."""
    if not isinstance(node, dict) or depth > MAX_DEPTH:
        return False
    if "$ref" in node:  # a reference stands alone (siblings would be merged or dropped)
        ref = node["$ref"]
        return set(node) == {"$ref"} and isinstance(ref, str) and (ref == "#" or ref[:2] == "#/")
    types = _types(node)
    if types is None or not _TYPED.intersection(node):
        return False
    allowed = _ANY.union(*(_BY_TYPE[name] for name in types), _DEFINITIONS if root else ())
    if not allowed.issuperset(node):
        return False
    if "format" in node and node["format"] not in _FORMATS:
        return False
    for key in ("enum", "const"):
        if key in node:
            values = node[key] if key == "enum" else [node[key]]
            if not isinstance(values, list):
                return False
            budget.enum_values += len(values) if key == "enum" else 0
            budget.chars += sum(len(value) for value in values if isinstance(value, str))
    if "anyOf" in node:
        branches = node["anyOf"]
        if not isinstance(branches, list) or not branches:
            return False
        if not all(_node(branch, depth, budget) for branch in branches):
            return False
    if "object" in types and not _object(node, depth, budget):
        return False
    return "items" not in node or _node(node["items"], depth + 1, budget)


def _object(node: dict[str, JSONValue], depth: int, budget: _Budget) -> bool:
    """An object node: declared properties, closed, and every property required."""
    properties = node.get("properties")
    if not isinstance(properties, dict) or node.get("additionalProperties") is not False:
        return False
    required = node.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return False
    if set(required) != properties.keys():
        return False
    if budget.canonical:
        node["required"] = list(properties)
    budget.properties += len(properties)
    budget.chars += sum(len(name) for name in properties)
    return all(_node(value, depth + 1, budget) for value in properties.values())
