"""The quick describer of flat object schemas never reports what the validator does not see."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
from hypothesis import given
from hypothesis import strategies as st

from strictcall.core.schema import CompiledSchema, FlatObject, make_strict

FLAT = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "count": {"type": "integer", "minimum": 0, "exclusiveMaximum": 10},
        "ratio": {"type": "number", "maximum": 1.5, "exclusiveMinimum": -1},
        "flag": {"type": "boolean"},
        "nothing": {"type": "null"},
        "odd": {"type": "integer", "minLength": 3},  # minLength does not apply to integers
        "code": {"type": "string", "pattern": "^[a-z]+\\d?$", "maxLength": 4},
    },
    "required": ["name", "count"],
}

values = st.none() | st.booleans() | st.integers(-20, 20) | st.floats(-3, 3) | st.text(max_size=7)
instances = st.dictionaries(
    st.sampled_from(["name", "count", "ratio", "flag", "nothing", "odd", "code", "extra"]),
    values | st.lists(values, max_size=2),
)


def test_the_quick_path_covers_nested_enum_and_nullable_schemas_and_no_others() -> None:
    assert FlatObject.of(make_strict(FLAT)) is not None
    nested = {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}
    assert FlatObject.of(make_strict(nested)) is not None  # a member with members of its own
    assert (
        FlatObject.of(make_strict({"type": "object", "properties": {"a": {"enum": [1]}}}))
        is not None
    )
    nullable = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert FlatObject.of(make_strict({"type": "object", "properties": {"a": nullable}})) is not None
    items = {"type": "array", "items": {"type": "integer"}, "minItems": 1}
    assert FlatObject.of(make_strict({"type": "object", "properties": {"a": items}})) is not None
    # an object assembled from parts, a reference, a condition: the exact path's
    assert FlatObject.of(make_strict({"type": "object", "anyOf": [{"required": ["a"]}]})) is None
    referring = {"$defs": {"d": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/d"}}}
    assert FlatObject.of(make_strict({"type": "object", **referring})) is None
    assert FlatObject.of(make_strict({"type": "object", "not": {"required": ["a"]}})) is None
    assert FlatObject.of({"type": "object", "properties": {}}) is None  # not closed


@given(instances)
def test_a_quick_violation_is_always_a_real_one(instance: dict[str, Any]) -> None:
    compiled = CompiledSchema(FLAT)
    flat = FlatObject.of(compiled.strict)
    assert flat is not None
    quick = flat.first_violation(instance)
    valid = compiled.is_valid(instance, has_float=True)
    if quick is None:
        return
    assert not valid
    validator = jsonschema_rs.Draft202012Validator(make_strict(FLAT), validate_formats=True)
    paths = {tuple(error.instance_path) for error in validator.iter_errors(instance)}
    if quick.reason == "unexpected_member":
        assert () in paths
    elif quick.reason == "missing_member":
        assert () in paths and quick.expected not in instance
    else:  # a type error on a float for an integer is the exact-integer rule's own
        assert quick.path in paths or type(instance[str(quick.path[0])]) is float


@given(instances)
def test_invalid_instances_always_get_a_violation(instance: dict[str, Any]) -> None:
    compiled = CompiledSchema(FLAT)
    if not compiled.is_valid(instance, has_float=True):
        assert compiled.first_violation(instance) is not None


ROOTS = [
    FLAT,
    {"type": ["object", "null"], "properties": {"a": {"type": "integer"}}},
    {"properties": {"a": {"type": "string"}}, "required": ["a"]},  # no type: any value
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"a": {"enum": [1, "x"]}}, "maxProperties": 1},
    {"anyOf": [{"type": "object", "properties": {"a": {"type": "null"}}}, {"type": "null"}]},
    {"type": "object"},
]


@given(st.sampled_from(range(len(ROOTS))), instances)
def test_the_object_describer_answers_as_the_quick_describer_on_objects(
    root: int, instance: dict[str, Any]
) -> None:
    compiled = CompiledSchema(ROOTS[root])
    quick = FlatObject.of(compiled.strict)
    assert quick is not None
    assert quick.in_object(instance) == quick.first_violation(instance)
    assert compiled.quick_in_object is not None
    assert compiled.quick_in_object(instance) == quick.first_violation(instance)
