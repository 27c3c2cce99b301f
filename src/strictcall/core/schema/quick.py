"""The quick describer: a failure described by walking the strict schema in Python.

It covers the schemas tools declare most: closed objects (nested at any depth), arrays of
items, members with a type (or a list of types), enum, const, length, pattern, format and
numeric bounds, and unions of such alternatives (anyOf, oneOf: a nullable member, say). For
those it is complete: it finds the fault the validator found, with the answer the validator's
own error iterator would give (`CompiledSchema.exact_violation`), at a fraction of its cost.
A schema that says anything else ($ref, allOf, if, patternProperties, ...) gets no quick
describer, and the exact path describes its failures.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from strictcall.core.schema.describe import Violation
from strictcall.core.schema.strict import EXACT_INTEGER
from strictcall.errors import JSONValue, Reason

Describe = Callable[[Any], Violation | None]
"""A subschema's describer: the first violation in a value, its path relative to the value."""

# Keywords that validate nothing: a node may hold them beside what the quick path reads.
_ANNOTATIONS: Final = frozenset(
    {
        *("title", "description", "default", "examples", "$comment", "$schema"),
        *("deprecated", "readOnly", "writeOnly"),
    }
)
# What the quick path reads; any other keyword of the JSON Schema vocabulary (or a legacy one
# jsonschema-rs may honour) leaves the schema to the exact path. Keywords outside the
# vocabulary validate nothing, as JSON Schema says (BFCL's "optional", say).
_READ: Final = frozenset(
    {
        *("type", "enum", "const", EXACT_INTEGER, "minLength", "maxLength", "pattern"),
        *("format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
        *("multipleOf", "items", "minItems", "maxItems", "uniqueItems", "properties"),
        *("required", "additionalProperties", "minProperties", "maxProperties"),
        *("anyOf", "oneOf"),
    }
)
_VOCABULARY: Final = frozenset(
    {
        *_READ,
        *_ANNOTATIONS,
        *("$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$defs"),
        *("allOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems"),
        *("contains", "patternProperties", "propertyNames", "unevaluatedItems"),
        *("unevaluatedProperties", "maxContains", "minContains", "dependentRequired"),
        *("contentEncoding", "contentMediaType", "contentSchema"),
        # older drafts' keywords, which a validator might still read
        *("definitions", "dependencies", "additionalItems", "$recursiveRef", "$recursiveAnchor"),
        *("id",),
    }
)

_KIND_CHECKS: Final[Mapping[str, Callable[[Any], bool]]] = {
    "null": lambda v: v is None,
    "boolean": lambda v: v is True or v is False,
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "string": lambda v: type(v) is str,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
}
# The order in which jsonschema-rs lists the types of a failed `"type": [...]`.
_KIND_ORDER: Final = ("null", "boolean", "integer", "number", "string", "array", "object")
# The Python types of parsed JSON values each kind of bound applies to.
_STRING: Final = (str,)
_NUMBER: Final = (int, float)

_Check = Callable[[Any], Violation | None]
_new: Final[Callable[[type[Violation], tuple[Any, ...]], Violation]] = tuple.__new__
"""A Violation made in C (its NamedTuple constructor is a Python function)."""


class QuickDescriber:
    """The quick describer of one strict schema (`of`), or None for schemas it does not cover.

    It runs only after the validator said "invalid". Violations whose expected value is
    immutable are made once, when the schema is compiled; a list or object expected value is
    copied for each answer, since answers are handed out.
    """

    __slots__ = ("_root", "first_violation", "in_object")

    def __init__(self, root: Describe, in_object: Describe | None = None) -> None:
        self._root: Final = root
        self.first_violation: Final[Describe] = root
        """The violation in an instance, or None when it finds none (the exact path then
        looks): the compiled describer itself, called without a method in between."""
        self.in_object: Final[Describe] = root if in_object is None else in_object
        """`first_violation` of an instance known to be an object (a call's arguments): the
        root's own checks of an object, without asking the instance's type first."""

    @classmethod
    def of(cls, schema: JSONValue) -> QuickDescriber | None:
        """A describer for the strict `schema` if the quick path covers it, else None."""
        try:
            part = _compile_part(schema)
        except _Uncovered:
            return None
        if part is None:
            return None
        in_object = None
        if part.types is not None and dict in part.types:
            in_object = _nothing if part.rest is None else part.rest
        return cls(part.whole, in_object)


FlatObject = QuickDescriber
"""The quick describer's first name, from when it covered flat objects only."""


class _Part(NamedTuple):
    """A compiled subschema: the Python types its `type` admits (None: any), the violation of
    a value of another type, the rest of its checks (None: none), and all of them in one."""

    types: frozenset[type] | None
    wrong: _Check
    rest: Describe | None
    whole: Describe


def _compile(schema: JSONValue) -> Describe | None:
    part = _compile_part(schema)
    return None if part is None else part.whole


def _compile_part(schema: JSONValue) -> _Part | None:
    if schema is True:
        return _Part(None, _nothing, None, _nothing)
    if not isinstance(schema, dict):
        return None
    for keyword in schema:
        if (
            keyword not in _READ
            and (keyword in _VOCABULARY or keyword.startswith("$"))
            and keyword not in _ANNOTATIONS
        ):
            return None
    if "anyOf" in schema or "oneOf" in schema:
        union = _compile_union(schema)
        return None if union is None else _Part(None, _nothing, union, union)
    first: list[_Check] = []
    exact = schema.get(EXACT_INTEGER) is True
    kinds = _kinds(schema.get("type"))
    if kinds is not None and "integer" in kinds and "number" not in kinds and not exact:
        return None  # not a strict schema: 1.0 would be an integer here
    if exact and kinds is None:
        first.append(_exact_integer_check(schema))
    for keyword, reason in (("enum", Reason.ENUM), ("const", Reason.CONST)):
        if keyword in schema:
            if keyword == "enum" and not isinstance(schema["enum"], list):
                return None
            first.append(_member_check(keyword, reason, schema[keyword]))
    by_type: dict[type, tuple[_Check, ...]] = {}
    for python_types, checks in (
        (_STRING, _string_checks(schema)),
        (_NUMBER, _number_checks(schema)),
        ((list,), _array_checks(schema)),
        ((dict,), _object_checks(schema)),
    ):
        if checks is None:
            return None
        for python_type in python_types:
            if checks:
                by_type[python_type] = tuple(checks)
    rest = _node(tuple(first), by_type)
    if kinds is None:
        return _Part(None, _nothing, rest, rest if rest is not None else _nothing)
    types = frozenset(python for kind in kinds for python in _PYTHON_TYPES[kind])
    if not first and by_type.keys() == types:
        (only, *others) = by_type.values()
        if not others and len(only) == 1:
            rest = only[0]  # asked only of a value of its one type: no dispatch on the type
    # A float where an integer is asked for is strictcall's own rule, which wins over the
    # type's own error (`CompiledSchema.exact_violation`): told "integer" either way.
    wrong = _type_check(kinds)
    if exact and len(kinds) > 1:
        integer = Violation((), Reason.TYPE, "integer", True)
        listed = wrong
        wrong = lambda v: integer if type(v) is float else listed(v)  # noqa: E731
    return _Part(types, wrong, rest, _typed(types, wrong, rest))


_PYTHON_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "null": (type(None),),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "array": (list,),
    "object": (dict,),
}


def _typed(types: frozenset[type], wrong: _Check, rest: Describe | None) -> Describe:
    if rest is None:
        return lambda value: wrong(value) if type(value) not in types else None
    return lambda value: wrong(value) if type(value) not in types else rest(value)


def _nothing(value: Any) -> Violation | None:
    return None


def _node(first: tuple[_Check, ...], by_type: dict[type, tuple[_Check, ...]]) -> Describe | None:
    """The checks in order, the first that finds a violation answering; None if none."""
    if not by_type:
        if not first:
            return None
        if len(first) == 1:
            return first[0]
    if not first and len(by_type) == 1:  # e.g. an object's members: one call less
        ((only_type, checks),) = by_type.items()
        if len(checks) == 1:
            (only,) = checks
            return lambda value: only(value) if type(value) is only_type else None
    get = by_type.get

    def describe(value: Any) -> Violation | None:
        for check in first:
            found = check(value)
            if found is not None:
                return found
        checks = get(type(value))
        if checks is not None:
            for check in checks:
                found = check(value)
                if found is not None:
                    return found
        return None

    return describe


def _kinds(kind: JSONValue) -> tuple[str, ...] | None:
    """The node's types, None when it names none."""
    if kind is None:
        return None
    names = [kind] if isinstance(kind, str) else kind
    if not isinstance(names, list) or not names:
        raise _Uncovered
    if not all(isinstance(name, str) and name in _KIND_CHECKS for name in names):
        raise _Uncovered
    return tuple(names)


class _Uncovered(Exception):
    """The schema says something the quick path does not read."""


def _type_check(kinds: tuple[str, ...]) -> _Check:
    """The violation of a value of none of the `kinds` (it is only asked of such values)."""
    ordered = [kind for kind in _KIND_ORDER if kind in kinds]
    if len(ordered) == 1:
        wrong = Violation((), Reason.TYPE, ordered[0], True)
        return lambda value: wrong
    return lambda value: Violation((), Reason.TYPE, list(ordered), True)


def _exact_integer_check(schema: dict[str, Any]) -> _Check:
    """strictcall's own rule: a float is never an integer here; it wins over every other
    fault at the same place, as in `CompiledSchema.exact_violation`."""
    if "type" not in schema and "const" in schema:
        return _copying(Violation((), Reason.CONST, schema["const"], True), float)
    if "type" not in schema and "enum" in schema:
        return _copying(Violation((), Reason.ENUM, schema["enum"], True), float)
    wrong = Violation((), Reason.TYPE, "integer", True)
    return lambda value: wrong if type(value) is float else None


def _member_check(keyword: str, reason: Reason, options: JSONValue) -> _Check:
    # JSON Schema's equality (1 == 1.0, true != 1), exactly as the validator decides it
    import jsonschema_rs  # loaded by the first schema (`CompiledSchema`), not by the import

    validator = jsonschema_rs.Draft202012Validator({keyword: options})
    violation = Violation((), reason, options, True)
    is_valid = validator.is_valid
    if isinstance(options, list) and all(
        item is None or type(item) in _SCALARS for item in options
    ):  # an enum of scalars (the usual one): a copy of the list, made in C
        return lambda value: (
            None if is_valid(value) else _new(Violation, ((), reason, list(options), True))
        )
    if isinstance(options, list | dict):
        return lambda value: None if is_valid(value) else _fresh(violation)
    return lambda value: None if is_valid(value) else violation


def _copying(violation: Violation, when: type) -> _Check:
    if isinstance(violation.expected, list | dict):
        return lambda value: _fresh(violation) if type(value) is when else None
    return lambda value: violation if type(value) is when else None


def _fresh(violation: Violation) -> Violation:
    expected = violation.expected
    if isinstance(expected, list) and all(
        item is None or type(item) in _SCALARS for item in expected
    ):
        return violation._replace(expected=list(expected))
    return violation._replace(expected=copy.deepcopy(expected))


_SCALARS: Final = frozenset({str, int, float, bool})


def _is_number(limit: object) -> bool:
    return type(limit) is int or type(limit) is float


def _bound(
    schema: dict[str, Any], keyword: str, reason: Reason, broken: Callable[[Any, Any], bool]
) -> _Check | None:
    """A check for one bound, None when the schema has none."""
    if keyword not in schema:
        return None
    limit = schema[keyword]
    if not _is_number(limit):
        raise _Uncovered
    violation = Violation((), reason, limit, True)
    test = functools.partial(broken, limit)
    return lambda value: violation if test(value) else None


def _gather(parts: list[_Check | None]) -> list[_Check]:
    return [part for part in parts if part is not None]


def _by_validator(keyword: str, reason: Reason, value: JSONValue, expected: bool) -> _Check:
    """A check the validator's own engine decides (ECMA-262 patterns, formats, multipleOf)."""
    import jsonschema_rs

    is_valid = jsonschema_rs.Draft202012Validator({keyword: value}, validate_formats=True).is_valid
    violation = Violation((), reason, value if expected else None, expected)
    return lambda v: None if is_valid(v) else violation


def _string_checks(schema: dict[str, Any]) -> list[_Check] | None:
    parts: list[_Check | None] = [
        _bound(schema, "minLength", Reason.MIN_LENGTH, lambda n, v: len(v) < n),
        _bound(schema, "maxLength", Reason.MAX_LENGTH, lambda n, v: len(v) > n),
    ]
    for keyword, reason in (("pattern", Reason.PATTERN), ("format", Reason.FORMAT)):
        if keyword in schema:
            if not isinstance(schema[keyword], str):
                return None
            parts.append(_by_validator(keyword, reason, schema[keyword], True))
    return _gather(parts)


def _number_checks(schema: dict[str, Any]) -> list[_Check] | None:
    parts: list[_Check | None] = [
        _bound(schema, "minimum", Reason.MINIMUM, lambda n, v: v < n),
        _bound(schema, "maximum", Reason.MAXIMUM, lambda n, v: v > n),
        _bound(schema, "exclusiveMinimum", Reason.EXCLUSIVE_MINIMUM, lambda n, v: v <= n),
        _bound(schema, "exclusiveMaximum", Reason.EXCLUSIVE_MAXIMUM, lambda n, v: v >= n),
    ]
    if "multipleOf" in schema:
        if not _is_number(schema["multipleOf"]):
            return None
        parts.append(_by_validator("multipleOf", Reason.MULTIPLE_OF, schema["multipleOf"], True))
    return _gather(parts)


def _array_checks(schema: dict[str, Any]) -> list[_Check] | None:
    parts: list[_Check | None] = [
        _bound(schema, "minItems", Reason.MIN_ITEMS, lambda n, v: len(v) < n),
        _bound(schema, "maxItems", Reason.MAX_ITEMS, lambda n, v: len(v) > n),
    ]
    unique = schema.get("uniqueItems", False)
    if unique is True:
        parts.append(_by_validator("uniqueItems", Reason.UNIQUE_ITEMS, True, False))
    elif unique is not False:
        return None
    if "items" in schema:
        items = _compile_part(schema["items"])
        if items is None:
            return None
        if items.types is not None or items.rest is not None:
            parts.append(_items_check(items))
    return _gather(parts)


def _items_check(items: _Part) -> _Check:
    types, wrong, rest = items.types, items.wrong, items.rest

    def check(value: list[Any]) -> Violation | None:
        for index, item in enumerate(value):
            if types is not None and type(item) not in types:
                found = wrong(item)
            elif rest is not None:
                found = rest(item)
            else:
                continue
            if found is not None:
                return _new(Violation, ((index, *found[0]), found[1], found[2], found[3]))
        return None

    return check


def _object_checks(schema: dict[str, Any]) -> list[_Check] | None:
    if not any(key in schema for key in ("properties", "required", "additionalProperties")):
        if "minProperties" in schema or "maxProperties" in schema:
            return None
        return []
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if (
        schema.get("additionalProperties") is not False
        or not isinstance(properties, dict)
        or not isinstance(required, list)
        or not all(isinstance(name, str) for name in required)
    ):
        return None
    members: dict[str, _Part] = {}
    for name, member in properties.items():
        part = _compile_part(member)
        if part is None:
            return None
        members[name] = part
    # A closed object that does not say "properties" is refused any member at all, as the
    # validator reports it: at the object, by its `additionalProperties: false` alone (no
    # expected list); one that declares its members as none expects the empty list.
    names = sorted(members) if "properties" in schema else None
    missing = tuple((name, Violation((), Reason.MISSING_MEMBER, name, True)) for name in required)
    parts: list[_Check | None] = [
        _bound(schema, "minProperties", Reason.MIN_PROPERTIES, lambda n, v: len(v) < n),
        _bound(schema, "maxProperties", Reason.MAX_PROPERTIES, lambda n, v: len(v) > n),
        _members_check(members, names, missing),
    ]
    return _gather(parts)


def _members_check(
    members: dict[str, _Part],
    names: list[str] | None,
    missing: tuple[tuple[str, Violation], ...],
) -> _Check:
    """Unknown members, then missing ones, then each member's value, in one loop each; a
    member's type is checked here, without a call, and its violation made once if it can be."""
    known: dict[str, tuple[frozenset[type] | None, Violation | None, _Check, Describe | None]] = {}
    for name, part in members.items():
        fixed = None
        if part.types is not None:
            sample = part.wrong(_NO_TYPE)
            if sample is not None and not isinstance(sample.expected, list):
                fixed = Violation((name,), sample.reason, sample.expected, sample.has_expected)
        known[name] = (part.types, fixed, part.wrong, part.rest)
    checked = {name: entry for name, entry in known.items() if entry[0] or entry[3]}
    not_allowed = Violation((), Reason.NOT_ALLOWED, None, False)

    known_names = known.keys()
    required = frozenset(name for name, _ in missing)

    def check(value: dict[str, Any]) -> Violation | None:
        if not known_names >= value.keys():  # compared in C; the loop finds the first one
            for name in value:
                if name not in known:
                    if names is None:
                        return not_allowed
                    return Violation((name,), Reason.UNEXPECTED_MEMBER, list(names), True)
        if not value.keys() >= required:
            for name, violation in missing:
                if name not in value:
                    return violation
        for name, item in value.items():
            entry = checked.get(name)
            if entry is None:
                continue
            types, fixed, wrong, rest = entry
            if types is not None and type(item) not in types:
                if fixed is not None and type(item) is not float:
                    return fixed
                found = wrong(item)
            elif rest is not None:
                found = rest(item)
                if found is None:
                    continue
            else:
                continue
            if found is not None:
                return _new(Violation, ((name, *found[0]), found[1], found[2], found[3]))
        return None

    return check


class _NoType:
    """A value of no JSON type: asked of a member's type check, to see its violation."""


_NO_TYPE: Final = _NoType()


def _compile_union(schema: dict[str, Any]) -> Describe | None:
    """anyOf or oneOf of alternatives the quick path covers, with nothing else beside it
    but annotations: one violation at the union's place, as the validator reports it."""
    keyword = "anyOf" if "anyOf" in schema else "oneOf"
    if any(key != keyword and key not in _ANNOTATIONS and key in _VOCABULARY for key in schema):
        return None
    options = schema[keyword]
    if not isinstance(options, list) or not options:
        return None
    alternatives: list[Describe] = []
    for option in options:
        describe = _compile(option)
        if describe is None:
            return None
        alternatives.append(describe)
    if keyword == "anyOf":
        failed = Violation((), Reason.ANY_OF, None, False)

        def any_of(value: Any) -> Violation | None:
            for describe in alternatives:
                if describe(value) is None:
                    return None
            return failed

        return any_of
    failed = Violation((), Reason.ONE_OF, None, False)

    def one_of(value: Any) -> Violation | None:
        matched = 0
        for describe in alternatives:
            if describe(value) is None:
                matched += 1
        return None if matched == 1 else failed

    return one_of
