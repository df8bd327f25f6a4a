"""JSON values as typed Arrow data: the types rows fit, and `pa.json_()` where they fit none.

A JSON source's columns are typed as the ecosystem types conversations (`list<struct<...>>`,
keys missing from some objects null), so that `datasets`, DuckDB, polars and the Hub viewer
read the output as values. A value that fits no one type is stored with Arrow's canonical
JSON extension type (Parquet's JSON logical type; `datasets` decodes it), as narrowly as
possible: the smallest field whose values differ in type, not the whole column. So are tool
JSON schemas (`FREE_FORM`), objects with more keys than `MAX_FIELDS` across rows (free-form
data: a struct of all their keys would be mostly nulls), `{}` (Parquet stores no struct
without fields) and values nested too deep for Parquet readers (`PARQUET_DEPTH`).

`to_array` builds an array of Python values in such a type (`json_` leaves encoded as JSON
text), `python_rows` gives rows back as Python values (`json_` leaves decoded).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import orjson
import pyarrow as pa

from transcript_clean.jsontext import orjson_loads

JSON: Final = pa.json_()

FREE_FORM: Final = frozenset({"parameters", "input_schema"})
"""Fields holding a tool's JSON schema: free-form by nature, stored as JSON whatever they hold."""
MAX_FIELDS: Final = 64
"""A struct with more fields than this across rows holds free-form data: stored as JSON."""
PARQUET_DEPTH: Final = 64
"""Parquet readers refuse a schema nested over 100 levels (a struct is one, a list two): a
value nested deeper than this is stored as JSON, so that the files written read back."""

_INT64: Final = (-(2**63), 2**63 - 1)


class TooDeep:
    """A row's value nested deeper than the JSON parser goes: kept as its JSON text, stored as
    `json_`, so that the cleaner, failing to read it in turn, rejects its row as
    `malformed_row` instead of the whole file failing."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def is_json(type_: pa.DataType) -> bool:
    return isinstance(type_, pa.JsonType)


def has_json(type_: pa.DataType) -> bool:
    """Whether `type_` is `json_` or holds one."""
    if is_json(type_):
        return True
    return any(has_json(type_.field(i).type) for i in range(type_.num_fields))


# ---------------------------------------------------------------------------------------------
# inferring types


def type_of(value: Any, depth: int = 0) -> pa.DataType:
    """The Arrow type of one JSON value (before `finish`)."""
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64() if _INT64[0] <= value <= _INT64[1] else JSON
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if depth > PARQUET_DEPTH or isinstance(value, TooDeep):
        return JSON
    if isinstance(value, list):
        item: pa.DataType = pa.null()
        for element in value:
            item = unify(item, type_of(element, depth + 2))
        return list_of(item)
    if isinstance(value, dict):
        return pa.struct([(key, type_of(item, depth + 1)) for key, item in value.items()])
    return JSON


def infer(values: Iterable[Any]) -> pa.DataType:
    """The type that holds every one of `values` (`finish`ed)."""
    out: pa.DataType = pa.null()
    for value in values:
        out = unify(out, type_of(value))
    return finish(out)


def unify(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The narrowest type holding values of `a` and of `b`: structs get every field of both,
    ints widen to floats, and types that share no shape become `json_`."""
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if is_json(a) or is_json(b):
        return JSON
    numbers = {pa.int64(), pa.float64()}
    if a in numbers and b in numbers:
        return pa.float64()
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        fields = {f.name: f.type for f in a}
        for f in b:
            fields[f.name] = unify(fields[f.name], f.type) if f.name in fields else f.type
        return pa.struct(list(fields.items()))
    if _is_list(a) and _is_list(b):
        return list_of(unify(a.value_type, b.value_type))
    return JSON


def unify_schemas(schemas: Iterable[pa.Schema]) -> pa.Schema:
    """One schema for rows of any of `schemas` (columns in order of first appearance)."""
    return schema_of(row_type(s) for s in schemas)


def row_type(schema: pa.Schema) -> pa.DataType:
    """The struct type of rows of `schema`, in the types `type_of` gives (`_plain`): what
    `unify_schemas` unifies and `schema_of` finishes."""
    return _plain(pa.struct(list(schema)))


def _plain(type_: pa.DataType) -> pa.DataType:
    """`type_` in the types `type_of` gives, so that a block Arrow's JSON reader typed and one
    typed line by line unify: text for what the reader took for timestamps (the text is what
    the file says), 64-bit numbers."""

    def plain(leaf: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(leaf) or pa.types.is_date(leaf):
            return pa.string()
        if pa.types.is_integer(leaf):
            return pa.int64()
        if pa.types.is_floating(leaf):
            return pa.float64()
        return leaf

    return _leaves_mapped(type_, plain)


def too_deep(type_: pa.DataType) -> bool:
    """Whether `type_` nests deeper than `PARQUET_DEPTH`. Iterative, so that any depth is fine
    (Arrow's JSON reader types a value nested thousands deep)."""
    stack = [(type_, 0)]
    while stack:
        kind, depth = stack.pop()
        if depth > PARQUET_DEPTH:
            return True
        step = 2 if _is_list(kind) else 1
        stack.extend((kind.field(i).type, depth + step) for i in range(kind.num_fields))
    return False


def schema_of(row_types: Iterable[pa.DataType]) -> pa.Schema:
    """The schema of rows of the struct types `row_types` (`type_of` a row), `finish`ed."""
    row = unify_all(row_types)
    if not pa.types.is_struct(row):
        return pa.schema([])
    return pa.schema([f.with_type(finish(f.type, f.name, 1)) for f in row])


def unify_all(types: Iterable[pa.DataType]) -> pa.DataType:
    out: pa.DataType = pa.null()
    for type_ in types:
        out = unify(out, type_)
    return out


def finish(type_: pa.DataType, name: str = "", depth: int = 0) -> pa.DataType:
    """`type_` as stored: `json_` for tool schemas, wide or empty structs and deep nesting."""
    if depth > PARQUET_DEPTH:
        return JSON
    if pa.types.is_struct(type_):
        if name in FREE_FORM or not 0 < type_.num_fields <= MAX_FIELDS:
            return JSON
        return pa.struct([f.with_type(finish(f.type, f.name, depth + 1)) for f in type_])
    if _is_list(type_):
        return list_of(finish(type_.value_type, name, depth + 2))
    return type_


def list_of(item: pa.DataType) -> pa.DataType:
    """A list of `item`, its items named as Parquet names them (`element`), so that a JSON
    source's schema is the one its output reads back with, and cleaning that output again
    writes the same files."""
    return pa.list_(pa.field("element", item))


def _is_list(type_: pa.DataType) -> bool:
    return bool(pa.types.is_list(type_) or pa.types.is_large_list(type_))


# ---------------------------------------------------------------------------------------------
# values to Arrow and back


def to_array(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """`values` as an array of `type_` (from `infer`), `json_` leaves encoded as JSON text. A
    lone surrogate (JSON's `"\\ud800"`, which Python reads into a string) has no UTF-8 form: it
    is kept as the bytes UTF-8 would give it, which are not UTF-8, so that the cleaner rejects
    its row as `malformed_row`, naming the field (`utf8.invalid_text`)."""
    storage = storage_type(type_)
    prepared = [_encoded(v, type_) for v in values] if has_json(type_) else list(values)
    try:
        array = pa.array(prepared, storage)
    except UnicodeEncodeError:
        raw = [_surrogates_as_bytes(v) for v in prepared]
        array = pa.array(raw, _binary(storage)).view(storage)
    return array if storage == type_ else array.cast(type_)


def to_table(rows: Sequence[dict[str, Any] | None], schema: pa.Schema) -> pa.Table:
    """`rows` (None: a row of nulls) as a table of `schema`; a missing key is null."""
    if not len(schema):  # rows without columns, still so many rows
        return pa.table({"": pa.nulls(len(rows))}).drop_columns([""])
    arrays = [
        to_array([None if row is None else row.get(f.name) for row in rows], f.type) for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def python_rows(table: pa.Table, errors: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """`table.to_pylist()`, with the JSON text of `json_` leaves decoded. A row whose text does
    not decode (nested too deep for the parser, say) is left as it is, and, given `errors`,
    noted there by position with what is wrong where."""
    rows: list[dict[str, Any]] = table.to_pylist()
    for f in table.schema:
        if has_json(f.type):
            for k, row in enumerate(rows):
                try:
                    row[f.name] = decoded(row[f.name], f.type, f.name)
                except UndecodedJson as err:
                    if errors is not None:
                        errors.setdefault(k, str(err))
    return rows


class UndecodedJson(ValueError):
    """A `json_` value whose text does not decode."""


def decoded(value: Any, type_: pa.DataType, path: str = "") -> Any:
    """A value as `to_pylist` gives it, with the JSON text of its `json_` leaves decoded."""
    if value is None:
        return None
    if is_json(type_):
        try:
            return loads(value)
        except RecursionError:
            raise UndecodedJson(f"{path}: nested too deep to parse") from None
        except ValueError as err:
            raise UndecodedJson(f"{path}: not valid JSON ({err})") from None
    if pa.types.is_struct(type_):
        return {f.name: decoded(value.get(f.name), f.type, f"{path}.{f.name}") for f in type_}
    if _is_list(type_):
        return [decoded(item, type_.value_type, f"{path}[{k}]") for k, item in enumerate(value)]
    return value


def loads(text: str | bytes | memoryview) -> Any:
    """A JSON value: orjson, or the standard library where a string holds a lone surrogate
    (orjson refuses one; Python keeps it, and `to_array` then marks the row not UTF-8) or the
    text a long run of digits (`jsontext.orjson_loads`: an integer orjson reads as a float)."""
    try:
        return orjson_loads(text)
    except orjson.JSONDecodeError:
        return json.loads(bytes(text) if isinstance(text, memoryview) else text)


def dumps(value: Any) -> str:
    """Compact JSON text of a value; a lone surrogate is kept (orjson refuses one)."""
    if isinstance(value, TooDeep):
        return value.text
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # a lone surrogate, or nested deeper than orjson writes
        pass
    # What json.loads read is less deep than the recursion limit, yet writing it back may
    # need more frames than are left: the limit is raised while it is written.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 2000)
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    finally:
        sys.setrecursionlimit(limit)


def _encoded(value: Any, type_: pa.DataType) -> Any:
    if value is None:
        return None
    if is_json(type_):
        return dumps(value)
    if pa.types.is_struct(type_) and isinstance(value, dict):
        return {f.name: _encoded(value.get(f.name), f.type) for f in type_}
    if _is_list(type_) and isinstance(value, list):
        return [_encoded(item, type_.value_type) for item in value]
    return value


def storage_type(type_: pa.DataType) -> pa.DataType:
    """`type_` with text in place of `json_` (what such an array is built as, then cast)."""
    return _leaves_mapped(type_, lambda leaf: pa.string() if is_json(leaf) else leaf)


def as_storage(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """`array` in its `storage_type`: the same buffers, `json_` leaves seen as their text. What
    compute kernels are given: some cannot build an array of an extension type, which they
    may need to (`list_flatten` of lists null in every row makes an empty array of their item
    type; `if_else`, `list_slice` and a concatenation of no chunks do too)."""
    if not has_json(array.type):
        return array
    storage = storage_type(array.type)
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([chunk.view(storage) for chunk in array.chunks], storage)
    return array.view(storage)


def _binary(type_: pa.DataType) -> pa.DataType:
    """`type_` with binary data in place of text: Arrow takes any bytes there."""
    return _leaves_mapped(type_, lambda leaf: pa.binary() if pa.types.is_string(leaf) else leaf)


def _leaves_mapped(type_: pa.DataType, change: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    """`type_` with each type that is no struct nor list `change`d."""
    if pa.types.is_struct(type_):
        return pa.struct([f.with_type(_leaves_mapped(f.type, change)) for f in type_])
    if _is_list(type_):
        return pa.list_(type_.value_field.with_type(_leaves_mapped(type_.value_type, change)))
    return change(type_)


def _surrogates_as_bytes(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict):
        return {key: _surrogates_as_bytes(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_surrogates_as_bytes(item) for item in value]
    return value
