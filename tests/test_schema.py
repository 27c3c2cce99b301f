"""schema: strictness applied to declared schemas, assembly kept working, located violations."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from strictcall.core.schema import (
    CompiledSchema,
    SchemaDefinitionError,
    Violation,
    admits_numbers,
    make_strict,
    to_pointer,
)
from strictcall.errors import JSONValue, Reason

EXACT = "x-strictcall-exact-integer"
SENTINEL = "SENTINEL-VALUE-123"


def accepts(schema: JSONValue, instance: JSONValue) -> bool:
    """Whether the compiled strict schema accepts `instance`, asked as the gateway asks."""
    compiled = CompiledSchema(schema)
    has_float = _has_float(instance)
    valid = compiled.is_valid(instance, has_float=has_float)
    if not has_float:  # both validators must agree where no float is involved
        assert compiled.is_valid(instance, has_float=True) is valid
    assert (compiled.first_violation(instance) is None) is valid
    return valid


def _has_float(value: JSONValue) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return False


def violation(schema: JSONValue, instance: JSONValue) -> Violation:
    found = CompiledSchema(schema).first_violation(instance)
    assert found is not None
    return found


# --- make_strict: what is added where -------------------------------------------------------


def test_make_strict_leaves_the_declared_schema_untouched() -> None:
    declared = {"type": "object", "properties": {"n": {"type": "integer"}}}
    before = copy.deepcopy(declared)
    strict = make_strict(declared)
    assert declared == before
    assert strict["additionalProperties"] is False
    assert strict["properties"]["n"][EXACT] is True


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "object"}, ()),
        ({"properties": {}}, ()),
        ({"patternProperties": {"^x": {}}}, ()),
        ({"type": ["object", "null"]}, ()),
        ({"type": "object", "properties": {"a": {"type": "object"}}}, ("properties", "a")),
        ({"type": "array", "items": {"type": "object"}}, ("items",)),
        ({"type": "array", "prefixItems": [{"type": "object"}]}, ("prefixItems", 0)),
        ({"additionalProperties": {"type": "object"}, "type": "object"}, ("additionalProperties",)),
        (
            {"type": "object", "patternProperties": {"^x": {"type": "object"}}},
            ("patternProperties", "^x"),
        ),
        ({"anyOf": [{"type": "object"}, {"type": "null"}]}, ("anyOf", 0)),
        ({"oneOf": [{"type": "string"}, {"type": "object"}]}, ("oneOf", 1)),
    ],
    ids=[
        "type-object",
        "properties",
        "pattern-properties",
        "type-list",
        "member",
        "items",
        "prefix-items",
        "extras-schema",
        "pattern-member",
        "bare-anyof-branch",
        "bare-oneof-branch",
    ],
)
def test_object_schemas_without_their_own_word_are_closed_with_additional_properties(
    schema: JSONValue, where: tuple[str | int, ...]
) -> None:
    node = make_strict(schema)
    for step in where:
        node = node[step]
    assert node["additionalProperties"] is False
    assert "unevaluatedProperties" not in node


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "additionalProperties": True},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "unevaluatedProperties": True},
        {"type": "object", "unevaluatedProperties": False},
        {"type": "object", "additionalProperties": False},
    ],
    ids=["open", "extras-schema", "unevaluated-open", "unevaluated-closed", "closed"],
)
def test_a_schema_that_says_how_to_treat_extras_keeps_its_word(schema: JSONValue) -> None:
    strict = make_strict(schema)
    for key in ("additionalProperties", "unevaluatedProperties"):
        assert strict.get(key) == schema.get(key)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"type": "array"},
        {"required": ["a"]},
        {"minProperties": 1},
        {"enum": [{"a": 1}]},
        True,
        False,
    ],
    ids=["string", "array", "required-alone", "min-properties", "enum", "true", "false"],
)
def test_schemas_that_declare_no_members_are_not_closed(schema: JSONValue) -> None:
    strict = make_strict(schema)
    assert strict == schema


def test_an_assembling_schema_is_closed_where_used_and_its_parts_stay_open() -> None:
    strict = make_strict(
        {
            "$defs": {"base": {"type": "object", "properties": {"a": {"type": "object"}}}},
            "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"b": {}}}],
        }
    )
    assert strict["unevaluatedProperties"] is False
    assert "additionalProperties" not in strict
    base = strict["$defs"]["base"]
    assert "additionalProperties" not in base and "unevaluatedProperties" not in base
    assert base["properties"]["a"]["additionalProperties"] is False  # standalone inside a part
    assert "additionalProperties" not in strict["allOf"][1]


def test_a_def_only_ever_used_as_a_whole_value_is_closed_in_place() -> None:
    strict = make_strict(
        {
            "type": "object",
            "$defs": {
                "item": {"type": "object", "properties": {"x": {}}},
                "colour": {"type": "string", "enum": ["red"]},
            },
            "properties": {
                "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
                "maybe": {
                    "anyOf": [{"$ref": "#/$defs/item", "description": "d"}, {"type": "null"}]
                },
                "colour": {"$ref": "#/$defs/colour"},
            },
        }
    )
    assert strict["$defs"]["item"]["additionalProperties"] is False
    assert strict["properties"]["items"]["items"] == {"$ref": "#/$defs/item"}
    assert "unevaluatedProperties" not in strict["properties"]["maybe"]["anyOf"][0]
    assert "unevaluatedProperties" not in strict["properties"]["colour"]


@pytest.mark.parametrize(
    "other_use",
    [
        {"allOf": [{"$ref": "#/$defs/item"}, {"properties": {"y": {}}}]},
        {"$ref": "#/$defs/item", "properties": {"y": {}}},
        {"not": {"$ref": "#/$defs/item"}},
        {"type": "object", "properties": {"z": {}}, "anyOf": [{"$ref": "#/$defs/item"}]},
    ],
    ids=["allof-part", "beside-members", "condition", "alternative-of-object"],
)
def test_a_def_also_used_as_a_part_stays_open_and_each_whole_use_is_closed(
    other_use: JSONValue,
) -> None:
    strict = make_strict(
        {
            "type": "object",
            "$defs": {"item": {"type": "object", "properties": {"x": {}}}},
            "properties": {"whole": {"$ref": "#/$defs/item"}, "other": other_use},
        }
    )
    assert "additionalProperties" not in strict["$defs"]["item"]
    assert strict["properties"]["whole"]["unevaluatedProperties"] is False


@pytest.mark.parametrize(
    "schema",
    [
        {
            "$defs": {"item": {"type": "object", "properties": {"x": {}}}},
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/item"}, "b": {"$dynamicRef": "#meta"}},
        },
        {
            "$defs": {"item": {"type": "object", "properties": {"x": {}}}},
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/item"}, "b": {"$id": "other", "type": "string"}},
        },
        {
            "$defs": {"item": {"$anchor": "it", "type": "object", "properties": {"x": {}}}},
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/item"}, "b": {"$ref": "#it"}},
        },
    ],
    ids=["dynamic-ref", "nested-id", "anchor-ref"],
)
def test_defs_stay_open_when_some_reference_is_not_a_local_pointer(schema: JSONValue) -> None:
    strict = make_strict(schema)
    assert "additionalProperties" not in strict["$defs"]["item"]
    assert strict["properties"]["a"]["unevaluatedProperties"] is False


def test_a_root_that_is_a_bare_reference_closes_its_def_in_place() -> None:
    strict = make_strict(
        {
            "$defs": {"main": {"type": "object", "properties": {"x": {"$ref": "#/$defs/main"}}}},
            "$ref": "#/$defs/main",
        }
    )
    assert strict["$defs"]["main"]["additionalProperties"] is False
    assert "unevaluatedProperties" not in strict
    assert accepts(strict, {"x": {"x": {}}}) is True
    assert accepts(strict, {"x": {"y": {}}}) is False


def test_alternatives_beside_an_objects_own_members_are_parts_of_it() -> None:
    strict = make_strict(
        {
            "type": "object",
            "properties": {"kind": {"type": "string"}},
            "oneOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}],
        }
    )
    assert strict["unevaluatedProperties"] is False
    assert "additionalProperties" not in strict
    for branch in strict["oneOf"]:
        assert "additionalProperties" not in branch


@pytest.mark.parametrize("keyword", ["not", "if"])
def test_conditions_are_never_closed_at_any_depth(keyword: str) -> None:
    condition = {
        "type": "object",
        "properties": {"inner": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    strict = make_strict({keyword: condition})
    kept = strict[keyword]
    assert "additionalProperties" not in kept
    assert "additionalProperties" not in kept["properties"]["inner"]
    assert kept["properties"]["inner"]["properties"]["n"][EXACT] is True


@pytest.mark.parametrize(
    ("schema", "exact"),
    [
        ({"type": "integer"}, True),
        ({"type": ["integer", "null"]}, True),
        ({"type": ["integer", "number"]}, False),
        ({"type": "number"}, False),
        ({"type": "string"}, False),
        ({"enum": [1, 2]}, True),
        ({"enum": [1, "a", None]}, True),
        ({"enum": [1, 2.5]}, False),
        ({"enum": [True, False]}, False),
        ({"enum": ["a"]}, False),
        ({"const": 3}, True),
        ({"const": 3.0}, False),
        ({"const": True}, False),
        ({"type": "number", "enum": [1, 2]}, False),
    ],
    ids=[
        "integer",
        "integer-or-null",
        "integer-or-number",
        "number",
        "string",
        "enum-of-ints",
        "enum-mixed",
        "enum-with-float",
        "enum-of-bools",
        "enum-of-strings",
        "const-int",
        "const-float",
        "const-bool",
        "number-with-int-enum",
    ],
)
def test_floats_are_refused_exactly_where_only_integers_are_asked_for(
    schema: JSONValue, exact: bool
) -> None:
    assert (EXACT in make_strict(schema)) is exact


def test_the_advertised_schema_never_holds_the_internal_keyword() -> None:
    compiled = CompiledSchema(
        {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "l": {"items": {"const": 1}}},
            "$defs": {"d": {"enum": [1]}},
        }
    )
    assert EXACT in json.dumps(compiled.strict)
    assert EXACT not in json.dumps(compiled.advertised)
    assert compiled.advertised["additionalProperties"] is False


# --- the strict schema's behaviour ------------------------------------------------------------

PROFILE = {
    "$defs": {
        "named": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        }
    },
    "allOf": [{"$ref": "#/$defs/named"}, {"properties": {"age": {"type": "integer"}}}],
}
REF_BESIDE = {
    "$defs": {"named": {"type": "object", "properties": {"name": {"type": "string"}}}},
    "$ref": "#/$defs/named",
    "properties": {"age": {"type": "integer"}},
}
VARIANTS = {
    "type": "object",
    "properties": {"kind": {"enum": ["circle", "square"]}},
    "required": ["kind"],
    "oneOf": [
        {"properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["r"]},
        {"properties": {"kind": {"const": "square"}, "side": {"type": "number"}}},
    ],
}
ONE_OF_REQUIRED = {
    "type": "object",
    "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
    "anyOf": [{"required": ["email"]}, {"required": ["phone"]}],
}
BARE_UNION = {
    "anyOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
    ]
}
CONDITIONAL = {
    "type": "object",
    "properties": {"kind": {"enum": ["a", "b"]}},
    "if": {"properties": {"kind": {"const": "a"}}},
    "then": {"properties": {"x": {"type": "integer"}}, "required": ["x"]},
    "else": {"properties": {"y": {"type": "string"}}},
}
DEPENDENT = {
    "type": "object",
    "properties": {"card": {"type": "string"}},
    "dependentSchemas": {"card": {"properties": {"cvv": {"type": "string"}}, "required": ["cvv"]}},
}
NOT_BOTH = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "not": {"required": ["a", "b"]},
}
TREE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#"}},
    },
}
PATTERNED = {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}}
SHARED_DEF = {
    "type": "object",
    "$defs": {"named": {"type": "object", "properties": {"name": {"type": "string"}}}},
    "properties": {
        "whole": {"$ref": "#/$defs/named"},
        "list": {"type": "array", "items": {"$ref": "#/$defs/named"}},
        "extended": {"allOf": [{"$ref": "#/$defs/named"}, {"properties": {"age": {}}}]},
    },
}
NESTED_MODELS = {
    "type": "object",
    "$defs": {
        "Inner": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]},
        "Outer": {
            "type": "object",
            "properties": {
                "inner": {"$ref": "#/$defs/Inner"},
                "maybe": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}]},
            },
        },
    },
    "properties": {"outer": {"$ref": "#/$defs/Outer"}},
}

BEHAVIOUR = [
    pytest.param(PROFILE, {"name": "a", "age": 1}, True, id="allof-ref-assembled"),
    pytest.param(PROFILE, {"name": "a"}, True, id="allof-ref-minimal"),
    pytest.param(PROFILE, {"name": "a", "admin": True}, False, id="allof-ref-unknown"),
    pytest.param(PROFILE, {"age": 1}, False, id="allof-ref-missing"),
    pytest.param(REF_BESIDE, {"name": "a", "age": 1}, True, id="ref-beside-members"),
    pytest.param(REF_BESIDE, {"name": "a", "x": 1}, False, id="ref-beside-unknown"),
    pytest.param(VARIANTS, {"kind": "circle", "r": 1.5}, True, id="variant-circle"),
    pytest.param(VARIANTS, {"kind": "square", "side": 2}, True, id="variant-square"),
    pytest.param(VARIANTS, {"kind": "square", "side": 2, "r": 1}, False, id="variant-other-member"),
    pytest.param(VARIANTS, {"kind": "circle", "r": 1, "x": 1}, False, id="variant-unknown"),
    pytest.param(ONE_OF_REQUIRED, {"email": "e"}, True, id="require-either-email"),
    pytest.param(ONE_OF_REQUIRED, {"phone": "p"}, True, id="require-either-phone"),
    pytest.param(ONE_OF_REQUIRED, {}, False, id="require-either-none"),
    pytest.param(ONE_OF_REQUIRED, {"email": "e", "fax": "f"}, False, id="require-either-unknown"),
    pytest.param(BARE_UNION, {"a": 1}, True, id="union-a"),
    pytest.param(BARE_UNION, {"b": 1}, True, id="union-b"),
    pytest.param(BARE_UNION, {"a": 1, "c": 1}, False, id="union-unknown"),
    pytest.param(CONDITIONAL, {"kind": "a", "x": 1}, True, id="if-then"),
    pytest.param(CONDITIONAL, {"kind": "b", "y": "s"}, True, id="if-else"),
    pytest.param(CONDITIONAL, {"kind": "a", "y": "s", "x": 1}, False, id="if-else-member-in-then"),
    pytest.param(CONDITIONAL, {"kind": "b", "x": 1}, False, id="if-then-member-in-else"),
    pytest.param(DEPENDENT, {"card": "c", "cvv": "1"}, True, id="dependent-present"),
    pytest.param(DEPENDENT, {"cvv": "1"}, False, id="dependent-member-alone"),
    pytest.param(DEPENDENT, {"card": "c"}, False, id="dependent-missing"),
    pytest.param(NOT_BOTH, {"a": 1}, True, id="not-one"),
    pytest.param(NOT_BOTH, {"a": 1, "b": 2}, False, id="not-both"),
    pytest.param(TREE, {"name": "r", "children": [{"name": "c", "children": []}]}, True, id="tree"),
    pytest.param(TREE, {"name": "r", "children": [{"name": "c", "x": 1}]}, False, id="tree-deep"),
    pytest.param(PATTERNED, {"x-a": 1}, True, id="pattern-member"),
    pytest.param(PATTERNED, {"y": 1}, False, id="pattern-unknown"),
    pytest.param(SHARED_DEF, {"whole": {"name": "a"}}, True, id="shared-def-whole"),
    pytest.param(SHARED_DEF, {"whole": {"name": "a", "age": 1}}, False, id="shared-def-whole-x"),
    pytest.param(SHARED_DEF, {"list": [{"name": "a"}, {"x": 1}]}, False, id="shared-def-list-x"),
    pytest.param(SHARED_DEF, {"extended": {"name": "a", "age": 1}}, True, id="shared-def-part"),
    pytest.param(SHARED_DEF, {"extended": {"name": "a", "x": 1}}, False, id="shared-def-part-x"),
    pytest.param(NESTED_MODELS, {"outer": {"inner": {"v": 1}}}, True, id="nested-models"),
    pytest.param(NESTED_MODELS, {"outer": {"maybe": None}}, True, id="nested-models-null"),
    pytest.param(
        NESTED_MODELS, {"outer": {"maybe": {"v": 1, "w": 2}}}, False, id="nested-models-deep-x"
    ),
    pytest.param(NESTED_MODELS, {"outer": {"inner": {"v": 1.0}}}, False, id="nested-models-1.0"),
    pytest.param(NESTED_MODELS, {"outer": {"x": 1}}, False, id="nested-models-outer-x"),
    pytest.param({"type": "integer"}, 1, True, id="integer"),
    pytest.param({"type": "integer"}, 1.0, False, id="integer-1.0"),
    pytest.param({"type": "integer"}, True, False, id="integer-true"),
    pytest.param({"type": "number"}, 1.0, True, id="number-1.0"),
    pytest.param({"type": "number"}, True, False, id="number-true"),
    pytest.param({"enum": [1, 2]}, 1.0, False, id="enum-1.0"),
    pytest.param({"enum": [1, 2]}, True, False, id="enum-true"),
    pytest.param({"const": 0}, False, False, id="const-0-false"),
    pytest.param({"const": False}, 0, False, id="const-false-0"),
    pytest.param({"not": {"type": "integer"}}, 1.0, True, id="not-integer-1.0"),
    pytest.param({"type": "object"}, {}, True, id="empty-object"),
    pytest.param({"type": "object"}, {"a": 1}, False, id="closed-empty-object"),
    pytest.param({"type": "object", "additionalProperties": True}, {"a": 1}, True, id="open"),
]


@pytest.mark.parametrize(("schema", "instance", "valid"), BEHAVIOUR)
def test_the_strict_schema_accepts_what_the_declaration_means_and_nothing_unknown(
    schema: JSONValue, instance: JSONValue, valid: bool
) -> None:
    assert accepts(schema, instance) is valid


def test_a_boolean_schema_is_compiled_as_is() -> None:
    assert accepts(True, {"anything": [1.5]}) is True
    assert accepts(False, None) is False


@pytest.mark.parametrize(
    "schema",
    [[], "object", 1, None, {"type": "nope"}, {"minimum": "zero"}, {"$ref": "#/$defs/missing"}],
    ids=["list", "str", "int", "null", "bad-type", "bad-minimum", "dangling-ref"],
)
def test_a_schema_that_is_not_json_schema_is_refused_at_definition(schema: Any) -> None:
    with pytest.raises(SchemaDefinitionError):
        CompiledSchema(schema)


# --- violations: where, why, what was expected -------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        ({"type": "integer"}, "1", Violation((), Reason.TYPE, "integer", True)),
        ({"type": "integer"}, 1.0, Violation((), Reason.TYPE, "integer", True)),
        ({"type": "integer", "multipleOf": 5}, 2.0, Violation((), Reason.TYPE, "integer", True)),
        ({"type": "integer", "minimum": 3}, 2.0, Violation((), Reason.TYPE, "integer", True)),
        ({"type": ["string", "null"]}, 1, Violation((), Reason.TYPE, ["null", "string"], True)),
        ({"enum": [1, 2]}, 1.0, Violation((), Reason.ENUM, [1, 2], True)),
        ({"const": 3}, 3.0, Violation((), Reason.CONST, 3, True)),
        (
            {"type": "object", "properties": {"a": {}}, "required": ["a"]},
            {},
            Violation((), Reason.MISSING_MEMBER, "a", True),
        ),
        (
            {"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}},
            {"a": 1},
            Violation((), Reason.MISSING_MEMBER, "b", True),
        ),
        (
            {"type": "object", "properties": {"b": {}, "a": {}}},
            {"c": 1},
            Violation(("c",), Reason.UNEXPECTED_MEMBER, ["a", "b"], True),
        ),
        (PATTERNED, {"y": 1}, Violation(("y",), Reason.UNEXPECTED_MEMBER, None, False)),
        (
            PROFILE,
            {"name": "a", "z": 1},
            Violation(("z",), Reason.UNEXPECTED_MEMBER, ["age", "name"], True),
        ),
        (
            VARIANTS,
            {"kind": "square", "zz": 1},
            Violation(("zz",), Reason.UNEXPECTED_MEMBER, ["kind", "r", "side"], True),
        ),
        ({"type": "string", "minLength": 2}, "a", Violation((), Reason.MIN_LENGTH, 2, True)),
        ({"type": "string", "maxLength": 2}, "abc", Violation((), Reason.MAX_LENGTH, 2, True)),
        ({"type": "string", "pattern": "^a+$"}, "b", Violation((), Reason.PATTERN, "^a+$", True)),
        ({"type": "string", "format": "email"}, "b", Violation((), Reason.FORMAT, "email", True)),
        ({"enum": ["a", "b"]}, "c", Violation((), Reason.ENUM, ["a", "b"], True)),
        ({"const": "a"}, "c", Violation((), Reason.CONST, "a", True)),
        ({"type": "number", "minimum": 1}, 0, Violation((), Reason.MINIMUM, 1, True)),
        ({"type": "number", "maximum": 1}, 2, Violation((), Reason.MAXIMUM, 1, True)),
        (
            {"type": "number", "exclusiveMinimum": 1},
            1,
            Violation((), Reason.EXCLUSIVE_MINIMUM, 1, True),
        ),
        (
            {"type": "number", "exclusiveMaximum": 1},
            1,
            Violation((), Reason.EXCLUSIVE_MAXIMUM, 1, True),
        ),
        ({"type": "number", "multipleOf": 0.5}, 0.3, Violation((), Reason.MULTIPLE_OF, 0.5, True)),
        ({"type": "array", "minItems": 1}, [], Violation((), Reason.MIN_ITEMS, 1, True)),
        ({"type": "array", "maxItems": 1}, [1, 2], Violation((), Reason.MAX_ITEMS, 1, True)),
        (
            {"type": "array", "uniqueItems": True},
            [1, 1],
            Violation((), Reason.UNIQUE_ITEMS, None, False),
        ),
        (
            {"type": "object", "minProperties": 1, "additionalProperties": True},
            {},
            Violation((), Reason.MIN_PROPERTIES, 1, True),
        ),
        (
            {"anyOf": [{"type": "string"}, {"type": "null"}]},
            1,
            Violation((), Reason.ANY_OF, None, False),
        ),
        (
            {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            1,
            Violation((), Reason.ONE_OF, None, False),
        ),
        ({"not": {"type": "string"}}, "a", Violation((), Reason.NOT, None, False)),
        (
            {"type": "object", "properties": {"x": False}},
            {"x": 1},
            Violation(("x",), Reason.NOT_ALLOWED, None, False),
        ),
        (
            {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
            [{"k": "a"}, {"k": 1}],
            Violation((1, "k"), Reason.TYPE, "string", True),
        ),
    ],
    ids=[
        "type",
        "float-for-integer",
        "float-for-integer-before-multiple-of",
        "float-for-integer-before-minimum",
        "type-list",
        "float-in-int-enum",
        "float-for-int-const",
        "required",
        "dependent-required",
        "unexpected-member-sorted",
        "unexpected-member-no-properties",
        "unexpected-member-through-allof",
        "unexpected-member-through-oneof",
        "min-length",
        "max-length",
        "pattern",
        "format",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusive-minimum",
        "exclusive-maximum",
        "multiple-of",
        "min-items",
        "max-items",
        "unique-items",
        "min-properties",
        "any-of",
        "one-of",
        "not",
        "false-schema",
        "nested-path",
    ],
)
def test_the_first_violation_says_where_why_and_what_was_expected(
    schema: JSONValue, instance: JSONValue, expected: Violation
) -> None:
    assert violation(schema, instance) == expected


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "integer"}, SENTINEL),
        ({"enum": ["a"]}, SENTINEL),
        ({"const": "a"}, SENTINEL),
        ({"type": "string", "maxLength": 3}, SENTINEL),
        ({"type": "string", "pattern": "^a$"}, SENTINEL),
        ({"type": "string", "format": "email"}, SENTINEL),
        ({"type": "array", "uniqueItems": True}, [SENTINEL, SENTINEL]),
        ({"type": "array", "contains": {"type": "integer"}}, [SENTINEL]),
        ({"type": "object", "properties": {"a": {}}}, {"a": SENTINEL, "b": SENTINEL}),
        ({"anyOf": [{"type": "integer"}, {"const": 1}]}, SENTINEL),
        ({"oneOf": [{"type": "integer"}, {"const": 1}]}, SENTINEL),
        ({"not": {"type": "string"}}, SENTINEL),
        (
            {"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": True},
            {SENTINEL: 1},
        ),
        ({"type": "object", "maxProperties": 1, "additionalProperties": True}, {"a": 1, "b": 2}),
    ],
    ids=[
        "type",
        "enum",
        "const",
        "max-length",
        "pattern",
        "format",
        "unique-items",
        "contains",
        "unexpected-member",
        "any-of",
        "one-of",
        "not",
        "property-names",
        "max-properties",
    ],
)
def test_a_violation_never_holds_the_instances_values(schema: JSONValue, instance: Any) -> None:
    found = violation(schema, instance)
    assert SENTINEL not in json.dumps(found.expected)
    assert SENTINEL not in found.reason


def test_a_valid_instance_has_no_violation() -> None:
    assert CompiledSchema(PROFILE).first_violation({"name": "a"}) is None


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        ((), ""),
        (("a",), "/a"),
        (("a", 0, "b"), "/a/0/b"),
        (("a/b",), "/a~1b"),
        (("m~n",), "/m~0n"),
        (("~1",), "/~01"),
        (("",), "/"),
    ],
    ids=["root", "member", "nested", "slash", "tilde", "tilde-one", "empty-name"],
)
def test_to_pointer_writes_rfc6901_pointers(path: tuple[str | int, ...], pointer: str) -> None:
    assert to_pointer(path) == pointer


# --- which schemas admit numbers ----------------------------------------------------------------

_STRING = {"type": "string"}


@pytest.mark.parametrize(
    "schema",
    [
        False,
        _STRING,
        {"type": ["string", "null", "boolean"]},
        {"enum": ["a", "b", None, True]},
        {"const": {"a": ["b"]}},
        {"type": "object", "properties": {"a": _STRING}, "additionalProperties": False},
        {"type": "object", "properties": {"a": _STRING}, "unevaluatedProperties": False},
        {"type": "object", "additionalProperties": _STRING},
        {"type": "array", "items": _STRING, "minItems": 1},
        {"type": "array", "prefixItems": [_STRING], "items": False},
    ],
)
def test_a_schema_that_refuses_numbers_everywhere_is_known_to(schema: JSONValue) -> None:
    assert admits_numbers(schema) is False
    assert admits_numbers(make_strict(schema)) is False


@pytest.mark.parametrize(
    "schema",
    [
        True,
        {},
        {"type": "integer"},
        {"type": ["string", "number"]},
        {"enum": ["a", 1]},
        {"const": [[1.5]]},
        {"minLength": 1},  # no type: anything, numbers too
        {"type": "object"},  # members of any kind
        {"type": "object", "properties": {"a": {"type": "number"}}},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"type": "array"},
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": False},
        {"type": "string", "$ref": "#/$defs/x", "$defs": {"x": _STRING}},  # unread: assume so
        {"anyOf": [_STRING]},
        {"type": "string", "not": {"type": "number"}},
    ],
)
def test_a_schema_that_may_admit_a_number_anywhere_is_taken_to(schema: JSONValue) -> None:
    assert admits_numbers(schema) is True


def test_a_closed_object_schema_admits_numbers_only_through_its_members() -> None:
    closed = make_strict({"type": "object", "properties": {"a": _STRING}})
    opened = make_strict({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}})
    assert (admits_numbers(closed), admits_numbers(opened)) == (False, True)
    assert CompiledSchema(closed).admits_numbers is False
    assert CompiledSchema(opened).admits_numbers is True
