"""Coverage-guided fuzzing (atheris, libFuzzer) of the strict intake and the schema describer.

    make atheris                       # both targets, ATHERIS_SECONDS each (default 120)
    .venv/bin/python reliability/atheris_fuzz.py intake [libFuzzer flags...]
    .venv/bin/python reliability/atheris_fuzz.py describer [libFuzzer flags...]

Needs the `fuzz` extra (`pip install -e '.[fuzz]'`: atheris, a binary wheel for CPython on
Linux x86-64). strictcall's modules are instrumented for branch coverage; orjson and
jsonschema-rs are native and are not.

Targets and what each refuses to see:

    intake     `strictcall.core.jsontext.parse_document` on the bytes and on their text: it parses
    or
               raises JSONTextError, nothing else; what it parses is JSON (exact types, str keys,
               finite floats) and `has_float` is True whenever a float is in it.
    describer  the bytes as strict JSON `[schema, instance]` (or an instance for one of a few
               fixed tool schemas, BFCL-like, chosen by the first byte): a schema is compiled or
               refused with SchemaDefinitionError; an instance the validator refuses gets a
               violation whose path is in the instance; when the validator reports a single
               error, the quick describer (if it covers the schema) and the exact path agree.

A crash is written under reliability/atheris-crashes/ (libFuzzer's artifact prefix); each one
found is kept as a case in tests/test_fuzz_regressions.py. The corpus grows in
reliability/atheris-corpus/<target>/ (not committed), so a second run starts where the first
stopped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    import atheris
except ImportError:
    sys.exit("atheris is not installed: pip install -e '.[fuzz]' (the `fuzz` extra)")

with atheris.instrument_imports(include=["strictcall"]):
    from strictcall.core.jsontext import JSONTextError, parse_document
    from strictcall.core.schema import CompiledSchema, QuickDescriber, SchemaDefinitionError

HERE = Path(__file__).resolve().parent

FIXED_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "location": {"type": "string", "minLength": 1},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
        },
        "required": ["location"],
    },
    {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "qty": {"type": "number"}},
                    "required": ["id"],
                },
                "maxItems": 4,
            },
            "note": {"anyOf": [{"type": "string", "maxLength": 8}, {"type": "null"}]},
            "mode": {"const": "fast"},
        },
    },
    {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date"},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}, "uniqueItems": True},
            "ratio": {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": 10},
        },
        "required": ["when"],
    },
]
_COMPILED = [CompiledSchema(schema) for schema in FIXED_SCHEMAS]


def _is_json(value: Any, depth: int = 0) -> bool:
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _is_json(v, depth + 1) for k, v in value.items())
    if kind is list:
        return all(_is_json(v, depth + 1) for v in value)
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    return kind in (str, int, bool) or value is None


def _holds_float(value: Any) -> bool:
    if type(value) is float:
        return True
    if type(value) is dict:
        return any(_holds_float(v) for v in value.values())
    if type(value) is list:
        return any(_holds_float(v) for v in value)
    return False


def fuzz_intake(data: bytes) -> None:
    for raw in (data, data.decode("utf-8", "surrogateescape")):
        try:
            document = parse_document(raw)
        except JSONTextError:
            continue
        if not _is_json(document.value):
            raise AssertionError("parsed a value that is not JSON")
        if _holds_float(document.value) and not document.has_float:
            raise AssertionError("a float in the value, has_float False")


def _in_instance(instance: Any, path: tuple[Any, ...]) -> bool:
    """Whether every step of `path` but an unexpected member's last names a place."""
    node = instance
    for step in path[:-1]:
        if (type(node) is dict and step in node) or (
            type(node) is list and type(step) is int and 0 <= step < len(node)
        ):
            node = node[step]
        else:
            return False
    return True


def fuzz_describer(data: bytes) -> None:
    if not data:
        return
    try:
        document = parse_document(data[1:])
    except JSONTextError:
        return
    value = document.value
    if data[0] % 4 < len(_COMPILED):
        compiled, instance = _COMPILED[data[0] % 4], value
    else:
        if type(value) is not list or len(value) != 2:
            return
        schema, instance = value
        try:
            compiled = CompiledSchema(schema)
        except SchemaDefinitionError:
            return
        except RecursionError:
            return  # a schema nested past Python's own limit: refused before it is used
    try:
        valid = compiled.is_valid(instance, has_float=True)
    except ValueError:
        return  # a str the validator cannot read as UTF-8 (a lone surrogate): refused at intake
    if valid:
        return
    violation = compiled.first_violation(instance)
    if violation is None:
        raise AssertionError("an invalid instance without a violation")
    if not _in_instance(instance, violation.path):
        raise AssertionError("a violation's path outside the instance")
    quick = QuickDescriber.of(compiled.strict)
    if quick is None:
        return
    errors = list(compiled._exact.iter_errors(instance))
    if len(errors) != 1:
        return
    found = quick.first_violation(instance)
    exact = compiled.exact_violation(instance)
    if json.dumps(found) != json.dumps(exact):
        raise AssertionError(f"quick {found} != exact {exact}")


TARGETS = {"intake": fuzz_intake, "describer": fuzz_describer}
SEEDS: dict[str, list[bytes]] = {
    "intake": [
        b'{"name":"read_note","arguments":{"note_id":"n1"}}',
        b'{"a":[1,2.5,-0,1e400,"\\ud800"],"b":{"c":null,"c":true}}',
        b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]",
    ],
    "describer": [
        b'\x00{"location":"x","unit":"kelvin","days":1.0}',
        b'\x01{"items":[{"id":"a","qty":1},{"id":2}],"note":null,"mode":"slow"}',
        b'\x02{"when":"2026-13-01","code":"AB","tags":["a","a"],"ratio":0.3}',
        b'\x03[{"type":"object","properties":{"a":{"type":["integer","null"]}}},{"a":1.5}]',
        b'\x03[{"type":"object","properties":{"a":{"oneOf":[{"type":"number"},{"type":"integer"}]}}},'
        b'{"a":1}]',
    ],
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: atheris_fuzz.py {{{','.join(TARGETS)}}} [libFuzzer flags...]")
    target = sys.argv[1]
    corpus = HERE / "atheris-corpus" / target
    crashes = HERE / "atheris-crashes"
    corpus.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(exist_ok=True)
    if not any(corpus.iterdir()):
        for number, seed in enumerate(SEEDS[target]):
            (corpus / f"seed-{number}").write_bytes(seed)
    flags = list(sys.argv[2:])
    argv = [sys.argv[0], *flags, f"-artifact_prefix={crashes}/{target}-", str(corpus)]
    atheris.Setup(argv, TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
