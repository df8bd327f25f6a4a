"""Arguments checked against the simple schemas most tools declare: held as structs (Anthropic's
`input`, rig's `arguments`), over a struct column at once (`struct_fails`); read from JSON text
(OpenAI's, ShareGPT's), object by object without the compiled validator (`object_fails`).

A tool's schema is simple (`tools.simple_schema`) when it says no more than an object's
properties, each of a JSON scalar type (`string`, `integer`, `number`, `boolean`), and which
are required. Whether a struct breaks it is then told by the struct's field types and nulls
alone, as the validator tells it of the object the per-row path makes of the struct
(`pa.StructArray.to_pylist`: every field a key, a null one `None`):

- a required key the struct type has no field for is missing in every object;
- a typed property whose field is null is `None`, of no scalar type: it fails;
- otherwise a field's Arrow type is its values' JSON type (text, an integer, a boolean), but a
  float passes `integer` only where it is whole;
- a field no property names is let be (no `additionalProperties`).

Any other schema or field type (nested values, dates, bytes) is not told here: the caller
validates those objects one by one.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Mask, as_mask, is_text
from transcript_clean.tools import SimpleSchema

__all__ = ["object_fails", "struct_fails"]


def struct_fails(schema: SimpleSchema, structs: pa.Array) -> Mask | None:
    """Per struct (none null), whether the object it is fails `schema`; None where a field the
    schema types is of a type told only by validating its values."""
    typed, required = schema
    fields = {field.name: i for i, field in enumerate(structs.type)}
    if any(name not in fields for name in required):
        return np.ones(len(structs), dtype=bool)
    fails = np.zeros(len(structs), dtype=bool)
    for name, kind in typed:
        at = fields.get(name)
        if at is None:
            continue  # no such key in any object: a property, not required
        passes = _passes(pc.struct_field(structs, [at]), kind)
        if passes is None:
            return None
        fails |= ~passes
    return fails


def object_fails(schema: SimpleSchema, value: dict[str, object]) -> bool:
    """Whether the object `value` (JSON read by orjson) fails `schema`, as the validator tells
    it: a required key missing, or a typed property's value not of its JSON type (a boolean is
    no number, a float is an integer only where it is whole). About a third of what the
    compiled validator costs a call, which most of the declared-tools checks' time was."""
    typed, required = schema
    if not required <= value.keys():
        return True
    for name, kind in typed:
        got = value.get(name, _ABSENT)
        if got is not _ABSENT and not _is(got, kind):
            return True
    return False


_ABSENT: Final = object()
"""A key's value where the object has no such key."""


def _is(value: object, kind: str) -> bool:
    """Whether `value` is of the JSON type `kind` (`string`, `integer`, `number`, `boolean`)."""
    if kind == "string":
        return type(value) is str
    if kind == "boolean":
        return type(value) is bool
    if type(value) is int:
        return True
    if type(value) is float:
        return kind == "number" or value.is_integer()  # not infinity, nor NaN
    return False


def _passes(values: pa.Array, kind: str) -> Mask | None:
    """Per value, whether it is of JSON type `kind` (a null is of none); None for values whose
    Arrow type does not say their JSON type."""
    type_ = values.type
    if pa.types.is_null(type_):
        return np.zeros(len(values), dtype=bool)
    if is_text(type_):
        matches = kind == "string"
    elif pa.types.is_boolean(type_):
        matches = kind == "boolean"
    elif pa.types.is_integer(type_):
        matches = kind in ("integer", "number")
    elif pa.types.is_floating(type_):
        if kind == "integer":
            whole = pc.and_(pc.is_finite(values), pc.equal(pc.floor(values), values))
            return as_mask(whole, fill=False)
        matches = kind == "number"
    else:
        return None
    if not matches:
        return np.zeros(len(values), dtype=bool)
    return as_mask(values.is_valid())
