"""The quick and the exact describe paths give the same answer for the same failure.

Closed object schemas are generated (members with a type or a list of types and bounds, enums,
consts, nullable anyOf/oneOf unions, arrays of items, objects of their own members; some
required), then an instance that satisfies the schema is broken in exactly one place; the quick
describer (`QuickDescriber`, first named `FlatObject`) and the validator's own error iterator
(`exact_violation`) must then report the same violation: the same path, reason and expected
value, down to an empty list.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from strictcall.core.schema import CompiledSchema, FlatObject, Violation
from strictcall.errors import Reason

NAMES = st.sampled_from(["a", "b", "c", "note_id", "x/y", "t~1"])
SAMPLES: dict[str, Any] = {
    "string": "abc",
    "integer": 3,
    "number": 2.5,
    "boolean": False,
    "null": None,
}
# What a single fault puts in a value's place: other types, bounds broken (the generated
# bounds are minLength 2, maxLength 4, minimum 1, maximum 5, exclusiveMaximum 6, minItems 1,
# maxItems 3), floats where integers are asked for, members of no enum, empty containers.
REPLACEMENTS: list[Any] = [
    *(0, 1.5, 2.0, 6, 100, -1, "1", "", "a", "abcdefg", "zz", True, False, None),
    *([], {}, [0]),
]
ENUMS: list[list[Any]] = [["x", "y"], [1, 2, 3], ["x", None], [1, "x", [1]], [2.5, 3]]
CONSTS: list[Any] = ["x", 3, None, {"k": [1]}]


@st.composite
def leaf_schemas(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(SAMPLES)))
    schema: dict[str, Any] = {"type": kind}
    if kind == "string":
        if draw(st.booleans()):
            schema["minLength"] = 2
        if draw(st.booleans()):
            schema["maxLength"] = 4
    if kind in ("integer", "number"):
        for keyword, limit in (("minimum", 1), ("maximum", 5), ("exclusiveMaximum", 6)):
            if draw(st.booleans()):
                schema[keyword] = limit
    return schema


@st.composite
def member_schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """A member's schema: a leaf most often; an enum, a const, a list of types, a nullable
    union, an array of items or an object of its own members (two levels deep at most)."""
    shapes = ["leaf", "leaf", "enum", "typed_enum", "const", "types", "any_of", "one_of"]
    if depth < 2:
        shapes += ["array", "object"]
    shape = draw(st.sampled_from(shapes))
    if shape == "enum":
        return {"enum": draw(st.sampled_from(ENUMS))}
    if shape == "typed_enum":
        return draw(
            st.sampled_from(
                [{"type": "string", "enum": ["x", "y"]}, {"type": "integer", "enum": [1, 3]}]
            )
        )
    if shape == "const":
        return {"const": draw(st.sampled_from(CONSTS))}
    if shape == "types":
        return {"type": draw(st.sampled_from([["string", "null"], ["null", "integer"]]))}
    if shape in ("any_of", "one_of"):
        keyword = "anyOf" if shape == "any_of" else "oneOf"
        return {keyword: [draw(leaf_schemas().filter(_not_null)), {"type": "null"}]}
    if shape == "array":
        schema: dict[str, Any] = {"type": "array", "items": draw(member_schemas(depth + 1))}
        if draw(st.booleans()):
            schema["minItems"] = 1
        if draw(st.booleans()):
            schema["maxItems"] = 3
        return schema
    if shape == "object":
        return draw(object_schemas(depth + 1))
    return draw(leaf_schemas())


def _not_null(schema: dict[str, Any]) -> bool:
    return bool(schema["type"] != "null")


@st.composite
def object_schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    names = draw(st.lists(NAMES, unique=True, max_size=4))
    properties = {name: draw(member_schemas(depth)) for name in names}
    required = [name for name in names if draw(st.booleans())]
    if not names and draw(st.booleans()):
        return {"type": "object"}  # closed by strictness alone: no member allowed
    return {"type": "object", "properties": properties, "required": required}


def satisfying(schema: dict[str, Any], draw: st.DrawFn) -> Any:
    """A value the (generated) schema accepts."""
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    if "const" in schema:
        return schema["const"]
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema:
            return satisfying(draw(st.sampled_from(schema[keyword])), draw)
    kind = schema["type"]
    if isinstance(kind, list):
        return SAMPLES[draw(st.sampled_from(kind))]
    if kind == "array":
        low, high = schema.get("minItems", 0), schema.get("maxItems", 3)
        return [satisfying(schema["items"], draw) for _ in range(draw(st.integers(low, high)))]
    if kind == "object":
        return {
            name: satisfying(member, draw)
            for name, member in schema.get("properties", {}).items()
            if name in schema["required"] or draw(st.booleans())
        }
    return SAMPLES[kind]


def places(schema: dict[str, Any], value: Any, path: tuple[Any, ...] = ()) -> list[Any]:
    """Where one fault can go: (path, schema, value) of every value in the instance."""
    found = [(path, schema, value)]
    if isinstance(value, dict) and "properties" in schema:
        for name, item in value.items():
            found += places(schema["properties"][name], item, (*path, name))
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += places(schema["items"], item, (*path, index))
    return found


def put(instance: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copied = copy.copy(instance)
    copied[path[0]] = put(instance[path[0]], path[1:], new)
    return copied


@st.composite
def single_faults(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    """A schema and an instance that breaks it in exactly one place: a value replaced, a
    member added or removed, an item added."""
    schema = draw(object_schemas())
    instance = satisfying(schema, draw)
    path, where, value = draw(st.sampled_from(places(schema, instance)))
    faults = ["replace"]
    if isinstance(value, dict):
        faults.append("unexpected")
        if any(name in value for name in where.get("required", [])):
            faults.append("missing")
    if isinstance(value, list):
        faults.append("append")
    fault = draw(st.sampled_from(faults))
    new: Any
    if fault == "unexpected":
        extra = draw(st.sampled_from(["zz", "admin", "A"]))
        new = {**value, extra: draw(st.sampled_from([0, "", None, [], {}]))}
    elif fault == "missing":
        gone = draw(st.sampled_from([name for name in where["required"] if name in value]))
        new = {name: item for name, item in value.items() if name != gone}
    elif fault == "append":
        new = [*value, draw(st.sampled_from(REPLACEMENTS))]
    else:
        new = draw(st.sampled_from(REPLACEMENTS))
    return schema, put(instance, path, new)


def same(left: Violation | None, right: Violation | None) -> bool:
    # JSON text tells False from 0 and [] from None, as the wire does
    return json.dumps(left) == json.dumps(right)


@settings(max_examples=1500, deadline=None)
@given(single_faults())
def test_the_quick_and_the_exact_path_describe_a_single_fault_alike(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    schema, instance = case
    compiled = CompiledSchema(schema)
    flat = FlatObject.of(compiled.strict)
    assert flat is not None
    assume(not compiled.is_valid(instance, has_float=True))  # some replacements still fit
    quick = flat.first_violation(instance)
    exact = compiled.exact_violation(instance)
    assert quick is not None and exact is not None
    assert same(quick, exact), (quick, exact)


def test_an_object_allowing_no_members_expects_an_empty_list_on_both_paths() -> None:
    compiled = CompiledSchema({"type": "object", "properties": {}})
    flat = FlatObject.of(compiled.strict)
    assert flat is not None
    expected = Violation(("x",), Reason.UNEXPECTED_MEMBER, [], True)
    assert same(flat.first_violation({"x": 1}), expected)
    assert same(compiled.exact_violation({"x": 1}), expected)
