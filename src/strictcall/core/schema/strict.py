"""Making a declared schema strict: the rules strictcall adds to JSON Schema 2020-12.

- an object schema that does not itself say `additionalProperties` or `unevaluatedProperties`
  refuses unknown members, at every depth (`additionalProperties: false`, or
  `unevaluatedProperties: false` where the object is assembled from parts with allOf, $ref,
  anyOf/oneOf beside its own members, if/then/else or dependentSchemas; the parts are left
  open at their own level so that the assembly works, a $def is closed in place only when it
  is never used as a part, and conditions (`if`, `not`) are never closed, since that would
  change what they test);
- "integer" means an integer written as one: 1.0 is refused where an integer is asked for
  (JSON Schema alone would accept it), and by an enum or const of integers; say
  `"type": "number"` to accept it;
- a boolean is never a number (JSON Schema already says so, and jsonschema-rs honours it).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from typing import Any, Final

from strictcall.errors import JSONValue

EXACT_INTEGER: Final = "x-strictcall-exact-integer"

# Where a subschema sits decides how it is tightened. A standalone subschema (a member's value,
# an array's items) is closed like the root. A part (allOf, then/else, $defs, dependentSchemas,
# and anyOf/oneOf under an object schema) is left open at its own level: the schema that
# assembles it is closed with `unevaluatedProperties: false`, which sees every member the parts
# declare. A condition (if, not) is never closed at any depth, since closing it would change
# what it tests (a closed `not` would let everything through). Exact integers apply everywhere.
_STANDALONE_ONE: Final = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "contentSchema",
)
_STANDALONE_LIST: Final = ("prefixItems",)
_STANDALONE_MAP: Final = ("properties", "patternProperties")
PART_ONE: Final = ("then", "else")
PART_LIST: Final = ("allOf",)
_PART_MAP: Final = ("$defs", "definitions", "dependentSchemas")
ALTERNATIVES: Final = ("anyOf", "oneOf")
_CONDITIONS: Final = ("if", "not")
_ASSEMBLING: Final = ("allOf", "$ref", "$dynamicRef", "if", "dependentSchemas")
_OPEN_KEYWORDS: Final = ("additionalProperties", "unevaluatedProperties")


def make_strict(schema: JSONValue) -> JSONValue:
    """A deep copy of `schema` with the strictness rules of this module applied."""
    strict = copy.deepcopy(schema)
    closed = _closable_defs(strict)
    for node, close, condition in _positions(strict, closed):
        if (
            close
            and not condition
            and not any(key in node for key in _OPEN_KEYWORDS)
            and _may_be_object(node, strict)
        ):
            is_object = _describes_object(node)
            if _assembles(node) or (is_object and any(key in node for key in ALTERNATIVES)):
                if not _refers_to_closed(node, strict, closed):
                    node["unevaluatedProperties"] = False
            elif is_object:
                node["additionalProperties"] = False
        if _asks_integer(node):
            node[EXACT_INTEGER] = True
    return strict


_Position = tuple[dict[str, Any], bool, bool]


def _positions(root: JSONValue, closed_defs: set[int]) -> Iterator[_Position]:
    """Every subschema of `root`, parents first, with whether it is closed where it stands
    (standalone, or a $def in `closed_defs`) and whether it sits inside a condition."""
    stack: list[tuple[JSONValue, bool, bool]] = [(root, True, False)]
    while stack:
        node, close, condition = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node, close, condition
        for sub in subschemas(node, _STANDALONE_ONE, _STANDALONE_LIST, _STANDALONE_MAP):
            stack.append((sub, True, condition))
        for sub in subschemas(node, PART_ONE, PART_LIST, _PART_MAP):
            stack.append((sub, id(sub) in closed_defs, condition))
        # Alternatives under an object schema are parts of it; a bare union's are standalone.
        alternatives_close = close and not (_describes_object(node) or _assembles(node))
        for sub in subschemas(node, (), ALTERNATIVES, ()):
            stack.append((sub, alternatives_close, condition))
        for sub in subschemas(node, _CONDITIONS, (), ()):
            stack.append((sub, False, True))


def _closable_defs(root: JSONValue) -> set[int]:
    """The root's $defs that are only ever referenced as whole values (`{"$ref": ...}` where a
    standalone subschema stands): those are closed in place, which validates faster than
    `unevaluatedProperties` at every reference. A $def that is assembled with anything, or
    referenced from a condition, stays open."""
    if not isinstance(root, dict):
        return set()
    closable = {
        id(sub)
        for key in ("$defs", "definitions")
        if isinstance(root.get(key), dict)
        for sub in root[key].values()
        if isinstance(sub, dict)
    }
    while closable:
        blocked: set[int] = set()
        for node, close, condition in _positions(root, closable):
            if "$dynamicRef" in node or ("$id" in node and node is not root):
                return set()  # references this module does not resolve: keep every $def open
            ref = node.get("$ref")
            if not isinstance(ref, str):
                continue
            if not (ref.startswith("#/") or ref == "#"):
                return set()
            target = id(resolve_local(root, ref))
            if target in closable and not (close and not condition and _is_bare_ref(node)):
                blocked.add(target)
        if not blocked:
            break
        closable -= blocked
    return closable


def _is_bare_ref(node: dict[str, Any]) -> bool:
    """The subschema is a reference and nothing else that validates."""
    return all(key in _BESIDE_BARE_REF for key in node)


_BESIDE_BARE_REF: Final = frozenset(
    {
        "$ref",
        "$defs",
        "definitions",
        "$comment",
        "description",
        "title",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        EXACT_INTEGER,
    }
)


def _refers_to_closed(node: dict[str, Any], root: JSONValue, closed_defs: set[int]) -> bool:
    """A bare reference to a schema that is closed where it stands (the root, or a $def
    closed in place) needs no closing of its own."""
    if not _is_bare_ref(node):
        return False
    target = resolve_local(root, node["$ref"])
    return target is root or id(target) in closed_defs


def _assembles(schema: dict[str, Any]) -> bool:
    return any(key in schema for key in _ASSEMBLING)


def subschemas(
    schema: dict[str, Any], one: Iterable[str], lists: Iterable[str], maps: Iterable[str]
) -> Iterable[JSONValue]:
    for key in one:
        if key in schema:
            yield schema[key]
    for key in lists:
        value = schema.get(key)
        if isinstance(value, list):
            yield from value
    for key in maps:
        value = schema.get(key)
        if isinstance(value, dict):
            yield from value.values()


def _describes_object(schema: dict[str, Any]) -> bool:
    """The schema declares an object's members (a bare `required` only constrains them)."""
    return _names_type(schema.get("type"), "object") or any(
        key in schema for key in _STANDALONE_MAP
    )


def _may_be_object(schema: dict[str, Any], root: JSONValue) -> bool:
    """False when the schema's own type, or its local $ref target's, rules objects out."""
    if "type" in schema:
        return _names_type(schema["type"], "object")
    ref = schema.get("$ref")
    if isinstance(ref, str) and not any(key in schema for key in ("allOf", "anyOf", "oneOf")):
        target = resolve_local(root, ref)
        if isinstance(target, dict) and "type" in target:
            return _names_type(target["type"], "object")
    return True


def _names_type(kind: JSONValue, name: str) -> bool:
    return kind == name or (isinstance(kind, list) and name in kind)


def _asks_integer(schema: dict[str, Any]) -> bool:
    """The schema only accepts integers where it accepts numbers: refuse every float there."""
    kind = schema.get("type")
    if kind is not None:
        if _names_type(kind, "number"):
            return False
        if _names_type(kind, "integer"):
            return True
    if "const" in schema:
        values: list[JSONValue] = [schema["const"]]
    elif isinstance(schema.get("enum"), list):
        values = schema["enum"]
    else:
        return False
    # An enum of integers matches 1.0 as 1 in JSON Schema; here 1.0 is not one of them.
    has_int = any(type(value) is int for value in values)
    return has_int and not any(type(value) is float for value in values)


def resolve_local(root: JSONValue, ref: JSONValue) -> JSONValue:
    """The subschema a local reference ("#" or "#/a/b") names, or None."""
    if not isinstance(ref, str):
        return None
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    from urllib.parse import unquote  # a $ref with a path only: not on every import

    node = root
    for raw in ref[2:].split("/"):
        step = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return None
    return node


# The keywords `admits_numbers` reads. A schema with any other keyword ($ref, allOf, not, ...)
# is taken to admit numbers: the answer may be a needless "yes", never a wrong "no".
_READ_FOR_NUMBERS: Final = frozenset(
    {
        *("type", "enum", "const", "properties", "required", "additionalProperties"),
        *("unevaluatedProperties", "items", "prefixItems", "minItems", "maxItems"),
        *("uniqueItems", "minProperties", "maxProperties", "minLength", "maxLength"),
        *("pattern", "format", "title", "description", "$schema", "$comment", "default"),
        *("examples", "deprecated", "readOnly", "writeOnly"),
    }
)


def admits_numbers(schema: JSONValue) -> bool:
    """Whether a value that satisfies `schema` may hold a number anywhere in it; True when
    the schema says anything this does not read."""
    if schema is False:
        return False
    if type(schema) is not dict or not _READ_FOR_NUMBERS.issuperset(schema):
        return True
    if "const" in schema:
        return _holds_number(schema["const"])
    if "enum" in schema:
        return _holds_number(schema["enum"])
    kind = schema.get("type")
    kinds = {kind} if type(kind) is str else set(kind) if type(kind) is list else None
    if kinds is None or "number" in kinds or "integer" in kinds:
        return True
    members: list[JSONValue] = []
    if "object" in kinds:
        properties = schema.get("properties", {})
        if type(properties) is not dict:
            return True
        members += properties.values()
        # members the schema does not name: additionalProperties decides, else
        # unevaluatedProperties (no other keyword here can evaluate one), else any
        members.append(
            schema.get("additionalProperties", schema.get("unevaluatedProperties", True))
        )
    if "array" in kinds:
        prefix = schema.get("prefixItems", [])
        if type(prefix) is not list:
            return True
        members += prefix
        members.append(schema.get("items", True))
    return any(admits_numbers(member) for member in members)


def _holds_number(value: JSONValue) -> bool:
    if type(value) is int or type(value) is float:
        return True
    if type(value) is dict:
        return any(_holds_number(item) for item in value.values())
    if type(value) is list:
        return any(_holds_number(item) for item in value)
    return False
