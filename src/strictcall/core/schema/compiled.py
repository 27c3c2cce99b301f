"""A strict schema compiled into validators: jsonschema-rs, once per schema.

Two validators per schema: a fast one for instances without floats, and an exact-integer one
(with strictcall's keyword that refuses 1.0 for an integer) for instances that may hold one.
Failures are described by `strictcall.core.schema.quick` where it covers the schema, else by
`strictcall.core.schema.describe`.

A schema is resolved within itself and the meta-schemas the validator bundles, never beyond: a
`$ref` to another document (`http:`, `file:`, a name relative to an `$id`) or a `$schema` naming
a meta-schema not bundled is a `SchemaDefinitionError`, and nothing is fetched or read. The MCP
specification says implementations MUST NOT fetch network references; a file is no better.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Final

from strictcall.core.schema.describe import Violation, describe_error, is_custom
from strictcall.core.schema.quick import QuickDescriber
from strictcall.core.schema.strict import EXACT_INTEGER, admits_numbers, make_strict
from strictcall.errors import JSONValue, StrictcallError


class SchemaDefinitionError(StrictcallError, ValueError):
    """A tool declared a schema that is not a valid JSON Schema 2020-12 document."""


class _ExactInteger:
    """jsonschema-rs keyword: a float is never an integer, even 1.0."""

    def __init__(self, parent_schema: object, value: object, schema_path: object) -> None:
        pass

    def validate(self, instance: object) -> None:
        if type(instance) is float:
            raise ValueError("integer")


BUNDLED_META_SCHEMAS: Final = frozenset(
    uri + end
    for uri in (
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-04/schema",
    )
    for end in ("", "#")
)
"""The `$schema` values a schema may name: the meta-schemas jsonschema-rs bundles."""

OUTSIDE_REFERENCE: Final = (
    "it refers to a document outside itself ($ref to another resource, or a $schema that is "
    "not a bundled meta-schema); strictcall resolves no reference outside the schema"
)


class _Retriever:
    """The validators' retriever: nothing outside the schema is fetched or read; it only
    notes that a reference asked for something."""

    __slots__ = ("asked",)

    def __init__(self) -> None:
        self.asked = False

    def __call__(self, uri: str) -> JSONValue:
        self.asked = True
        raise LookupError("strictcall resolves no reference outside the schema")


def _names_unbundled_meta_schema(schema: JSONValue) -> bool:
    """Whether a `$schema` anywhere in `schema` names a meta-schema that is not bundled (the
    meta-schema check would try to fetch it)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            named = node.get("$schema")
            if "$schema" in node and named not in BUNDLED_META_SCHEMAS:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


_ERRORS_SEARCHED: Final = 64
"""How many errors `first_violation` reads looking for an exact-integer fault at the first
error's place."""


class CompiledSchema:
    """A strict schema compiled twice: a fast validator, and an exact-integer one for floats.
    `as_declared`: the schema is enforced (and advertised) as written, by JSON Schema 2020-12
    alone, without the rules strictcall adds (`strictcall.core.schema.strict`)."""

    __slots__ = (
        "_exact",
        "_fast",
        "_flat",
        "admits_numbers",
        "advertised",
        "declared",
        "is_valid_when",
        "quick_in_object",
        "strict",
    )

    def __init__(self, schema: JSONValue, *, as_declared: bool = False) -> None:
        if not isinstance(schema, dict | bool):
            raise SchemaDefinitionError("a schema is an object or a boolean")
        import jsonschema_rs  # on the first schema, not by `import strictcall` (~30 ms)

        if _names_unbundled_meta_schema(schema):
            raise SchemaDefinitionError(OUTSIDE_REFERENCE)
        try:
            jsonschema_rs.meta.validate(schema)
        except (jsonschema_rs.ValidationError, ValueError) as exc:
            raise SchemaDefinitionError(str(exc)) from None
        self.declared: Final = copy.deepcopy(schema)
        self.strict: Final = copy.deepcopy(schema) if as_declared else make_strict(schema)
        plain = _without_key(self.strict, EXACT_INTEGER)
        self.advertised: Final = plain
        retriever = _Retriever()
        try:
            self._fast = jsonschema_rs.Draft202012Validator(
                plain, validate_formats=True, retriever=retriever
            )
            self._exact = jsonschema_rs.Draft202012Validator(
                self.strict,
                validate_formats=True,
                keywords={EXACT_INTEGER: _ExactInteger},
                retriever=retriever,
            )
        except (jsonschema_rs.ValidationError, ValueError) as exc:
            reason = OUTSIDE_REFERENCE if retriever.asked else str(exc)
            raise SchemaDefinitionError(reason) from None
        describer = QuickDescriber.of(self.strict)
        self._flat = None if describer is None else describer.first_violation
        self.quick_in_object: Final = None if describer is None else describer.in_object
        """The quick describer of an object instance (a call's arguments), None where it
        covers nothing: `first_violation` of an object is its answer when it finds one, else
        `exact_violation`'s (the hot refusal path's two Python calls less)."""
        self.admits_numbers: Final = admits_numbers(self.strict)
        """Whether a value it accepts may hold a number anywhere (True when in doubt)."""
        self.is_valid_when: Final[tuple[Callable[[JSONValue], bool], ...]] = (
            self._fast.is_valid,
            self._exact.is_valid,
        )
        """The validators' own checks, indexed by whether the instance may hold a float:
        `is_valid_when[has_float](instance)`, the hot path's one Python call less."""

    def is_valid(self, instance: JSONValue, *, has_float: bool) -> bool:
        """True when `instance` (a JSON value) satisfies the strict schema."""
        return bool(self.is_valid_when[has_float](instance))

    def first_violation(self, instance: JSONValue) -> Violation | None:
        """The first place where `instance` breaks the strict schema, or None.

        A float where an integer is asked for is a type error even when the validator first
        finds another fault at that place (2.0 against multipleOf 5 is told "integer").
        """
        if self._flat is not None:
            quick = self._flat(instance)
            if quick is not None:
                return quick
        return self.exact_violation(instance)

    def exact_violation(self, instance: JSONValue) -> Violation | None:
        """`first_violation` by the validator's own error iterator alone (the exact path),
        without the quick describer; the two agree on every single fault."""
        first = None
        for count, error in enumerate(self._exact.iter_errors(instance)):
            if first is None:
                first = error
                if is_custom(first):
                    break
            elif is_custom(error) and error.instance_path == first.instance_path:
                first = error
                break
            if count >= _ERRORS_SEARCHED:
                break
        return None if first is None else describe_error(first, self.strict)


def _without_key(schema: JSONValue, name: str) -> JSONValue:
    if isinstance(schema, dict):
        return {k: _without_key(v, name) for k, v in schema.items() if k != name}
    if isinstance(schema, list):
        return [_without_key(v, name) for v in schema]
    return schema
