"""What the flatteners of the Gemini, Bedrock and Hermes formats share: a struct array's fields
read whether or not the batch's Arrow type has them, and the type tests that decide whether a
flattener reads a layout at all (`Format.flatten` returns None for one it does not)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import NOT_SPACE, Mask, as_mask, field_type, is_text

__all__ = [
    "alias",
    "field",
    "fits",
    "is_list_of_structs",
    "not_blank",
    "positions",
    "prefixed",
    "present",
    "text_or_null",
]

TypeTest = Callable[[pa.DataType], bool]


def is_list_of_structs(type_: pa.DataType | None) -> bool:
    if type_ is None or not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    return bool(pa.types.is_struct(type_.value_type))


def text_or_null(type_: pa.DataType) -> bool:
    return is_text(type_) or pa.types.is_null(type_)


def fits(struct: pa.DataType, name: str, test: TypeTest) -> bool:
    """Whether the field `name` of `struct` is absent, holds only nulls, or passes `test`."""
    kind = field_type(struct, name)
    return kind is None or pa.types.is_null(kind) or test(kind)


def alias(struct: pa.DataType, names: tuple[str, ...]) -> str:
    """The one of `names` (a key and its snake_case twin) that `struct` holds values under;
    `names[0]` when it holds none. Raises LookupError when it holds both: the decoder takes
    the first that is not null, element by element, which a flattener does not follow."""
    held = [n for n in names if not pa.types.is_null(field_type(struct, n) or pa.null())]
    if len(held) > 1:
        raise LookupError(f"both {' and '.join(held)}")
    return held[0] if held else names[0]


def field(structs: pa.Array, name: str) -> pa.Array:
    """The field `name` of a struct array; nulls (as text) where the structs have no such
    field, or only nulls in it. Null where the struct itself is."""
    if not pa.types.is_struct(structs.type) or structs.type.get_field_index(name) < 0:
        return pa.nulls(len(structs), pa.string())
    values = pc.struct_field(structs, name)
    if pa.types.is_null(values.type):
        return pa.nulls(len(structs), pa.string())
    return values


def present(structs: pa.Array, name: str) -> Mask:
    """Per struct, whether its field `name` holds a value."""
    return ~as_mask(field(structs, name).is_null())


def not_blank(text: pa.Array) -> Mask:
    """Per text, whether it holds something besides white space (`str.strip()`'s); null: no."""
    return as_mask(pc.match_substring_regex(text, NOT_SPACE), fill=False)


def prefixed(prefix: str, values: pa.Array) -> pa.Array:
    """Each value as text after `prefix` (a number written in decimal)."""
    text = values if is_text(values.type) else pc.cast(values, pa.string())
    return pc.binary_join_element_wise(prefix, text, "")


def positions(n: int) -> pa.Array:
    return pa.array(np.arange(n, dtype=np.int64))
