"""Text that is not UTF-8 in Arrow string data: which rows hold it, where, and those rows mended.

Arrow's Parquet reader does not check that string columns hold UTF-8, and pyarrow raises
`UnicodeDecodeError` when such a string becomes Python. A row holding one is a `malformed_row`
reject (`invalid_text` says where), never a crash, and never goes to `data/`. Its rejects row
keeps the text with U+FFFD in place of each invalid byte (`mend`): a rejects file any reader
can load, with the schema the input has (a binary copy would change it), and the message says
that the text was mended.

    >>> import pyarrow as pa
    >>> invalid_text(pa.table({"id": ["ok"]}))
    {}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import text_bytes
from transcript_clean.columnar.edits import replaced
from transcript_clean.fastpath.base import flagged_within
from transcript_clean.sources import jsontypes

__all__ = ["MENDED", "invalid_text", "mend", "python_rows", "reject_message"]

Mask = npt.NDArray[np.bool_]

MENDED: Final = "the rejects row holds it with U+FFFD in place of the invalid bytes"

# UTF-8 as RFC 3629 defines it, byte by byte (RE2 reads binary data as Latin-1): no overlong
# forms, no surrogates, nothing past U+10FFFF.
_UTF8: Final = (
    r"^(?:[\x00-\x7F]|[\xC2-\xDF][\x80-\xBF]|\xE0[\xA0-\xBF][\x80-\xBF]"
    r"|[\xE1-\xEC\xEE\xEF][\x80-\xBF]{2}|\xED[\x80-\x9F][\x80-\xBF]"
    r"|\xF0[\x90-\xBF][\x80-\xBF]{2}|[\xF1-\xF3][\x80-\xBF]{3}|\xF4[\x80-\x8F][\x80-\xBF]{2})*\z"
)


def invalid_text(table: pa.Table) -> dict[int, str]:
    """The rows of `table` that hold a string that is not UTF-8, each with where the first one
    is: `messages[1].content: not UTF-8 at byte 3`. Cheap when there is none: Arrow checks
    each column at once, and only a column that fails is looked into row by row."""
    if not table.num_rows:
        return {}
    bad = np.zeros(table.num_rows, dtype=bool)
    for column in table.columns:
        if _has_text(column.type) and not _valid(column):
            bad |= _bad_elements(jsontypes.as_storage(column.combine_chunks()))
    if not bad.any():
        return {}
    at = np.flatnonzero(bad)
    rows = table.take(pa.array(at)).cast(_as_binary(table.schema)).to_pylist()
    out = {}
    for position, row in zip(at.tolist(), rows, strict=True):
        where = None
        for f in table.schema:
            where = _first_invalid(row[f.name], f.type, f.name)
            if where is not None:
                break
        out[position] = where or "a string is not UTF-8"
    return out


def mend(table: pa.Table, rows: Iterable[int]) -> pa.Table:
    """`table` with the text of `rows` made UTF-8: each invalid byte becomes U+FFFD."""
    positions = np.array(sorted(rows), dtype=np.int64)
    if not len(positions):
        return table
    columns = []
    for f, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_dictionary(f.type) and not _valid(column):
            # Its dictionary holds the bad text whichever rows use it: made anew, whole.
            raw = column.cast(_binary(f.type)).to_pylist()
            column = pa.array([_mended(value, f.type) for value in raw], f.type)
        elif _has_text(f.type) and not _valid(column):
            raw = column.take(pa.array(positions)).cast(_binary(f.type)).to_pylist()
            storage = jsontypes.storage_type(f.type)  # JSON text stays text: not encoded again
            new = pa.array([_mended(v, f.type) for v in raw], storage).cast(f.type)
            column = replaced(column.combine_chunks(), positions, new)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=table.schema)


def python_rows(data: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """`data.to_pylist()`, with any text that is not UTF-8 mended (`mend`) instead of raising,
    and `pa.json_()` values decoded (`jsontypes.python_rows`)."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    bad = invalid_text(table)
    return jsontypes.python_rows(mend(table, bad) if bad else table)


def reject_message(where: str) -> str:
    """The reject message for a row whose text is not UTF-8 at `where`."""
    return f"{where}; {MENDED}"


# ---------------------------------------------------------------------------------------------
# finding it


def _has_text(type_: pa.DataType) -> bool:
    if isinstance(type_, pa.BaseExtensionType):  # `pa.json_()`: JSON text
        return _has_text(type_.storage_type)
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return True
    if pa.types.is_dictionary(type_):
        return _has_text(type_.value_type)
    return any(_has_text(type_.field(i).type) for i in range(type_.num_fields))


def _valid(column: pa.Array | pa.ChunkedArray) -> bool:
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    try:
        for chunk in chunks:
            # `json_` fields are read as their text: Arrow cannot flatten lists of them
            # that are null in every row (`jsontypes.as_storage`).
            for leaf in _text_leaves(jsontypes.as_storage(chunk)):
                if not _ascii(leaf):  # ASCII is UTF-8: only other text is checked in full
                    leaf.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _ascii(leaf: pa.Array) -> bool:
    """Whether the bytes a string array's values use are all ASCII: one look at them, about
    twenty times cheaper than validating them as UTF-8."""
    if not (pa.types.is_string(leaf.type) or pa.types.is_large_string(leaf.type)):
        return False
    return bool(text_bytes(leaf)[1].max(initial=0) < 0x80)


def _text_leaves(array: pa.Array) -> Iterator[pa.Array]:
    """The string arrays within `array`, each holding only the values `array` refers to. A
    batch sliced from a larger nested array still holds all of its children, which a full
    validation of the batch would check whole, for every batch (docs/performance.md)."""
    type_ = array.type
    if isinstance(array, pa.ExtensionArray):
        yield from _text_leaves(array.storage)
    elif pa.types.is_string(type_) or pa.types.is_large_string(type_):
        yield array
    elif pa.types.is_dictionary(type_):
        yield from _text_leaves(array.dictionary)
    elif pa.types.is_struct(type_):
        for child in array.flatten():
            yield from _text_leaves(child)
    elif pa.types.is_map(type_):
        yield array  # rare in conversations: checked whole (what is wrong is found row by row)
    elif pa.types.is_list(type_) or pa.types.is_large_list(type_):
        yield from _text_leaves(pc.list_flatten(array))


def _bad_elements(array: pa.Array) -> Mask:
    """Per element of `array`, whether any string in it is not UTF-8."""
    return flagged_within(array, _bad_strings)


def _bad_strings(array: pa.Array) -> Mask | None:
    """Per element, for a string array, whether it is not UTF-8; nothing to look into for an
    array without text; None for the others."""
    if isinstance(array, pa.ExtensionArray):
        return _bad_strings(array.storage)
    type_ = array.type
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        binary = array.view(pa.large_binary() if pa.types.is_large_string(type_) else pa.binary())
        ok = pc.fill_null(pc.match_substring_regex(binary, _UTF8), True)
        return ~np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
    if not _has_text(type_):
        return np.zeros(len(array), dtype=bool)
    return None


def _first_invalid(value: Any, type_: pa.DataType, path: str) -> str | None:
    """Where in `value` (a row's value with its text as bytes) the first text that is not UTF-8
    is, and at which byte."""
    if value is None:
        return None
    if isinstance(value, bytes) and _text_type(type_):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as err:
            # A lone surrogate's UTF-8 form (what a JSON source's "\ud800" becomes) says so.
            surrogate = value[err.start : err.start + 2] >= b"\xed\xa0"
            surrogate &= value[err.start : err.start + 1] == b"\xed"
            kind = " (a lone surrogate)" if surrogate else ""
            return f"{path}: not UTF-8 at byte {err.start}{kind}"
        return None
    if pa.types.is_struct(type_):
        for i in range(type_.num_fields):
            f = type_.field(i)
            where = _first_invalid(value.get(f.name), f.type, f"{path}.{f.name}")
            if where is not None:
                return where
    elif pa.types.is_map(type_):
        for k, (key, item) in enumerate(value):
            where = _first_invalid(key, type_.key_type, f"{path}[{k}].key")
            where = where or _first_invalid(item, type_.item_type, f"{path}[{k}].value")
            if where is not None:
                return where
    elif pa.types.is_list(type_) or pa.types.is_large_list(type_):
        for k, item in enumerate(value):
            where = _first_invalid(item, type_.value_type, f"{path}[{k}]")
            if where is not None:
                return where
    return None


# ---------------------------------------------------------------------------------------------
# mending it


def _text_type(type_: pa.DataType) -> bool:
    if isinstance(type_, pa.BaseExtensionType):
        return _text_type(type_.storage_type)
    if pa.types.is_dictionary(type_):
        return _text_type(type_.value_type)
    return bool(pa.types.is_string(type_) or pa.types.is_large_string(type_))


def _mended(value: Any, type_: pa.DataType) -> Any:
    """A row's value with its text as bytes (`_binary`) back as text, invalid bytes U+FFFD."""
    if value is None:
        return None
    if isinstance(value, bytes) and _text_type(type_):
        return value.decode("utf-8", errors="replace")
    if pa.types.is_struct(type_):
        return {f.name: _mended(value.get(f.name), f.type) for f in type_}
    if pa.types.is_map(type_):
        return [(_mended(k, type_.key_type), _mended(v, type_.item_type)) for k, v in value]
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return [_mended(item, type_.value_type) for item in value]
    return value


def _binary(type_: pa.DataType) -> pa.DataType:
    """`type_` with its text as binary data: what `cast` turns text into without checking it."""
    if isinstance(type_, pa.BaseExtensionType):
        return _binary(type_.storage_type)
    if pa.types.is_string(type_):
        return pa.binary()
    if pa.types.is_large_string(type_):
        return pa.large_binary()
    if pa.types.is_dictionary(type_):
        return _binary(type_.value_type)
    if pa.types.is_struct(type_):
        return pa.struct([f.with_type(_binary(f.type)) for f in type_])
    if pa.types.is_map(type_):
        return pa.map_(_binary(type_.key_type), _binary(type_.item_type))
    if pa.types.is_large_list(type_):
        return pa.large_list(type_.value_field.with_type(_binary(type_.value_type)))
    if pa.types.is_list(type_):
        return pa.list_(type_.value_field.with_type(_binary(type_.value_type)))
    return type_


def _as_binary(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(_binary(f.type)) for f in schema], metadata=schema.metadata)
