"""The quick and the exact describe paths give the same answer for the same failure.

Flat object schemas are generated (members of one type each, with bounds, some required), then
an instance that satisfies the schema is broken in exactly one place; the quick describer
(`FlatObject`) and the validator's own error iterator (`exact_violation`) must then report the
same violation: the same path, reason and expected value, down to an empty list.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strictcall.errors import Reason
from strictcall.schema import CompiledSchema, FlatObject, Violation

NAMES = st.sampled_from(["a", "b", "c", "note_id", "x/y", "t~1"])
SAMPLES: dict[str, Any] = {
    "string": "abc",
    "integer": 3,
    "number": 2.5,
    "boolean": False,
    "null": None,
}
WRONG: dict[str, list[Any]] = {
    "string": [0, None, [], {}],
    "integer": [1.5, "1", True, None],
    "number": ["1", False, None, []],
    "boolean": [0, "", None, []],
    "null": [0, False, "", []],
}


@st.composite
def member_schemas(draw: st.DrawFn) -> dict[str, Any]:
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
def flat_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(NAMES, unique=True, max_size=4))
    properties = {name: draw(member_schemas()) for name in names}
    required = [name for name in names if draw(st.booleans())]
    return {"type": "object", "properties": properties, "required": required}


def bound_breakers(member: dict[str, Any]) -> list[Any]:
    """Values of the member's type that break exactly one of its bounds."""
    breakers: list[Any] = []
    if "minLength" in member:
        breakers.append("a")
    if "maxLength" in member:
        breakers.append("abcdefg")
    if "minimum" in member:
        breakers.append(0)
    if "maximum" in member and "exclusiveMaximum" not in member:
        breakers.append(100)
    if "exclusiveMaximum" in member and "maximum" not in member:
        breakers.append(6)
    return breakers


def satisfying(schema: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    instance = {}
    for name, member in schema["properties"].items():
        if name in schema["required"] or draw(st.booleans()):
            instance[name] = SAMPLES[member["type"]]
    return instance


@st.composite
def single_faults(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A flat schema and an instance that breaks it in exactly one place."""
    schema = draw(flat_schemas())
    instance = satisfying(schema, draw)
    faults = ["unexpected"]
    if schema["required"]:
        faults.append("missing")
    if instance:
        faults.append("type")
    bounds = [
        (name, value) for name in instance for value in bound_breakers(schema["properties"][name])
    ]
    if bounds:
        faults.append("bound")
    fault = draw(st.sampled_from(faults))
    if fault == "unexpected":
        extra = draw(st.sampled_from(["zz", "admin", "A"]))
        instance[extra] = draw(st.sampled_from([0, "", None, [], {}]))
    elif fault == "bound":
        name, value = draw(st.sampled_from(bounds))
        instance[name] = value
    elif fault == "missing":
        del instance[draw(st.sampled_from(schema["required"]))]
    else:
        name = draw(st.sampled_from(sorted(instance)))
        instance[name] = draw(st.sampled_from(WRONG[schema["properties"][name]["type"]]))
    return schema, instance


def same(left: Violation | None, right: Violation | None) -> bool:
    # JSON text tells False from 0 and [] from None, as the wire does
    return json.dumps(left) == json.dumps(right)


@settings(max_examples=400, deadline=None)
@given(single_faults())
def test_the_quick_and_the_exact_path_describe_a_single_fault_alike(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    schema, instance = case
    compiled = CompiledSchema(schema)
    flat = FlatObject.of(compiled.strict)
    assert flat is not None
    assert not compiled.is_valid(instance, has_float=True)
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
