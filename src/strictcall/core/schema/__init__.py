"""JSON Schema 2020-12 for tool calls: made strict, compiled, and failures described.

Every schema a tool declares is made strict before it is compiled, unless it says otherwise
(`strict`: unknown members refused at every depth, 1.0 is not an integer, a boolean is not a
number). Validation is jsonschema-rs, compiled once per schema (`compiled`). The error path is
slower and only taken on failure: the first error becomes a JSON Pointer, a stable reason and
what was expected, from the schema and the instance's location alone (`describe`).
"""

from strictcall.core.schema.compiled import CompiledSchema, SchemaDefinitionError
from strictcall.core.schema.describe import Violation, to_pointer
from strictcall.core.schema.quick import FlatObject, QuickDescriber
from strictcall.core.schema.strict import admits_numbers, make_strict

__all__ = [
    "CompiledSchema",
    "FlatObject",
    "QuickDescriber",
    "SchemaDefinitionError",
    "Violation",
    "admits_numbers",
    "make_strict",
    "to_pointer",
]
