"""openai_strict: which input schemas are in OpenAI's strict subset as they stand, and the form
they are listed in (each object's `required` in the order of its properties)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from agents.strict_schema import ensure_strict_json_schema

from strictcall.core.openai_strict import (
    MAX_DEPTH,
    MAX_ENUM_VALUES,
    MAX_NAME_CHARS,
    MAX_PROPERTIES,
    qualifies,
    strict_schema,
)


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **extra,
    }


QUALIFYING: list[Any] = [
    closed({}),
    closed({"a": {"type": "string", "pattern": "^x$", "format": "date-time"}}),
    closed({"n": {"type": "number", "minimum": 0, "exclusiveMaximum": 9, "multipleOf": 0.5}}),
    closed({"a": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}}),
    closed({"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}),
    closed({"a": {"enum": ["x", "y"]}, "b": {"const": 3}, "c": {"type": ["string", "null"]}}),
    closed({"a": {"$ref": "#/$defs/p"}}, **{"$defs": {"p": closed({"x": {"type": "boolean"}})}}),
    closed({"a": {"$ref": "#"}}, description="recursive", title="t"),
]


@pytest.mark.parametrize("schema", QUALIFYING)
def test_a_schema_in_the_subset_qualifies_and_strict_hosts_leave_it_as_it_is(
    schema: dict[str, Any],
) -> None:
    listed = strict_schema(schema)
    assert listed is not None and listed == schema
    assert ensure_strict_json_schema(copy.deepcopy(listed)) == listed


def test_required_is_listed_in_the_order_of_the_properties() -> None:
    schema = closed({"a": {"type": "string"}, "b": {"type": "string"}})
    schema["required"] = ["b", "a"]
    listed = strict_schema(schema)
    assert listed is not None and listed["required"] == ["a", "b"]
    assert schema["required"] == ["b", "a"]  # a copy: the tool's schema is left alone
    empty = {"type": "object", "properties": {}, "additionalProperties": False}
    assert strict_schema(empty) == closed({})


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = closed({"x": schema})
    return schema


NOT_QUALIFYING: dict[str, Any] = {
    "not-an-object": True,
    "array-root": {"type": "array", "items": {"type": "string"}},
    "any-of-root": {**closed({}), "anyOf": [closed({})]},
    "optional-member": {**closed({"a": {"type": "string"}}), "required": []},
    "open-object": {**closed({"a": {"type": "string"}}), "additionalProperties": True},
    "no-properties": {"type": "object", "additionalProperties": False},
    "min-length": closed({"a": {"type": "string", "minLength": 1}}),
    "max-length": closed({"a": {"type": "string", "maxLength": 9}}),
    "unique-items": closed({"a": {"type": "array", "items": {}, "uniqueItems": True}}),
    "one-of": closed({"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}),
    "all-of": closed({"a": {"allOf": [{"type": "string"}]}}),
    "not": closed({"a": {"not": {"type": "string"}}}),
    "pattern-properties": closed({}, patternProperties={"^x": {"type": "string"}}),
    "default": closed({"a": {"type": "string", "default": "x"}}),
    "untyped": closed({"a": {}}),
    "boolean-subschema": closed({"a": True}),
    "unknown-type": closed({"a": {"type": "date"}}),
    "empty-type-list": closed({"a": {"type": []}}),
    "unknown-format": closed({"a": {"type": "string", "format": "uri"}}),
    "string-keyword-on-number": closed({"a": {"type": "number", "pattern": "x"}}),
    "ref-with-siblings": closed({"a": {"$ref": "#/$defs/p", "description": "d"}}),
    "remote-ref": closed({"a": {"$ref": "https://example.com/s"}}),
    "empty-any-of": closed({"a": {"anyOf": []}}),
    "bad-any-of-branch": closed({"a": {"anyOf": [{"type": "string", "minLength": 1}]}}),
    "enum-not-a-list": closed({"a": {"enum": "x"}}),
    "required-not-a-list": {**closed({"a": {"type": "string"}}), "required": "a"},
    "required-not-names": {**closed({"a": {"type": "string"}}), "required": [1]},
    "definitions-not-an-object": {**closed({}), "$defs": []},
    "bad-definition": {**closed({}), "$defs": {"p": {"type": "string", "maxLength": 2}}},
    "too-deep": deep(MAX_DEPTH + 2),
    "too-many-properties": closed({f"p{i}": {"type": "null"} for i in range(MAX_PROPERTIES + 1)}),
    "too-many-enum-values": closed({"a": {"enum": list(range(MAX_ENUM_VALUES + 1))}}),
    "too-many-characters": closed({"a": {"enum": ["x" * (MAX_NAME_CHARS + 1)]}}),
}


@pytest.mark.parametrize("schema", NOT_QUALIFYING.values(), ids=NOT_QUALIFYING.keys())
def test_a_schema_outside_the_subset_does_not_qualify(schema: Any) -> None:
    assert qualifies(copy.deepcopy(schema)) is False
    assert strict_schema(schema) is None


def test_the_deepest_nesting_openai_allows_qualifies() -> None:
    assert qualifies(deep(MAX_DEPTH)) is True
