"""JSON and JSON Lines files (each maybe gzipped), read whole into one Arrow table."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa

from transcript_clean.errors import SourceError
from transcript_clean.sources.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    JSON_COLUMNS_KEY,
    FileSource,
    Part,
    digest,
    label,
    row_range,
    table_batches,
)

_JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")


class JsonSource(FileSource):
    """JSON files, one part each: a list of row objects, one row object, or JSON Lines.

    The files are read whole into memory and become one Arrow table. A column Arrow cannot hold
    exactly (a `content` that is a string in one message and a list in another, objects with
    different keys, ints mixed with floats) is stored as JSON text instead, and named in the
    schema metadata under `JSON_COLUMNS_KEY`, so the reader can decode it back to the same values.
    """

    kind = "json"

    def __init__(self, name: str, files: Sequence[Path], root: Path) -> None:
        rows: list[dict[str, Any]] = []
        self._parts: list[Part] = []
        digests = []
        conversations = []
        for file in files:
            data = _read_bytes(file)
            file_rows = _json_rows(file, data)
            if _is_one_conversation(file_rows):
                file_rows = [{CONVERSATION_COLUMN: file_rows}]
                conversations.append(file)
            self._parts.append(Part(str(file), len(file_rows), len(rows)))
            rows.extend(file_rows)
            digests.append((label(file, root), hashlib.sha256(data).hexdigest()))
        self._root = root
        self._table = rows_to_table(rows)
        self._fingerprint = digest("json", digests)
        super().__init__(name, self._table.schema)
        if conversations:
            what = "a list of messages" if len(conversations) == 1 else "lists of messages"
            self.note = (
                f"{', '.join(f.name for f in conversations)}: {what}, read as one conversation "
                f"in column {CONVERSATION_COLUMN!r}"
            )

    def read(
        self,
        part: Part,
        start: int = 0,
        stop: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> Iterator[pa.RecordBatch]:
        start, stop = row_range(part, start, stop, batch_size, batch_bytes)
        if start < stop:
            rows = self._table.slice(part.key + start, stop - start)
            yield from table_batches(rows, self.schema, batch_size, batch_bytes)

    def fingerprint(self) -> str:
        """From each file's name and the bytes that were read."""
        return self._fingerprint


CONVERSATION_COLUMN = "messages"
"""The column a file holding one conversation (a list of messages) is read into."""


def _is_one_conversation(rows: list[dict[str, Any]]) -> bool:
    """Whether a file's rows are the messages of one conversation, as agent harnesses save a
    trajectory: every row has a `role` and none holds a conversation of its own."""
    return bool(rows) and all(
        "role" in row
        and not any(
            isinstance(v, list) and v and isinstance(v[0], dict) and "role" in v[0]
            for v in row.values()
        )
        for row in rows
    )


def _read_bytes(file: Path) -> bytes:
    try:
        data = file.read_bytes()
        return gzip.decompress(data) if file.name.endswith(".gz") else data
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceError(f"cannot read {file}: {exc}") from exc


def _json_rows(file: Path, data: bytes) -> list[dict[str, Any]]:
    """The row objects of a JSON or JSON Lines file."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{file} is not UTF-8 text: {exc}") from exc
    if file.name.removesuffix(".gz").endswith(_JSON_LINES_SUFFIXES):
        return _json_lines(file, text)
    try:
        try:
            value = json.loads(text)
        except RecursionError:
            value = _shallow_rows(text)  # a row nested too deep: see `_TooDeep`
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # a complete value, then more: JSON Lines under a .json name
            return _json_lines(file, text)
        raise SourceError(
            f"{file}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        ) from exc
    rows: list[Any] = value if isinstance(value, list) else [value]
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            kind = type(row).__name__
            raise SourceError(f"{file}: row {index} is a {kind}, expected a JSON object")
    return rows


def _json_lines(file: Path, text: str) -> list[dict[str, Any]]:
    rows: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = _row(line)
        except json.JSONDecodeError as exc:
            raise SourceError(f"{file}: line {number}: invalid JSON: {exc.msg}") from exc
        if not isinstance(row, dict):
            kind = type(row).__name__
            raise SourceError(f"{file}: line {number} is a {kind}, expected a JSON object")
        rows.append(row)
    return rows


def rows_to_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """An Arrow table of `rows` (columns in order of first appearance, missing keys null).

    A column Arrow cannot hold exactly becomes JSON text (`json.dumps`, None stays null) and is
    listed under `JSON_COLUMNS_KEY` in the schema metadata; so does a column with a lone
    surrogate in a string (`_text_array`).
    """
    names = list(dict.fromkeys(name for row in rows for name in row))
    arrays = []
    as_json = []
    for name in names:
        values = [row.get(name) for row in rows]
        array = _exact_array(values)
        if array is None:
            texts = [_json_text(v) for v in values]
            array = _text_array(texts)
            as_json.append(name)
        arrays.append(array)
    metadata = {JSON_COLUMNS_KEY: ",".join(as_json).encode()} if as_json else None
    return pa.Table.from_arrays(arrays, names=names, metadata=metadata)


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, _TooDeep):
        return value.text
    return json.dumps(value, ensure_ascii=False)


def _text_array(texts: list[str | None]) -> pa.Array:
    """`texts` as a string array. A lone surrogate (JSON's `"\\ud800"`, which Python reads
    into a string) has no UTF-8 form: it is kept as the bytes UTF-8 would give it, which are
    not UTF-8, so that the cleaner rejects its row as `malformed_row`, naming the field."""
    try:
        return pa.array(texts, pa.string())
    except UnicodeEncodeError:
        raw = [None if t is None else t.encode("utf-8", "surrogatepass") for t in texts]
        return pa.array(raw, pa.binary()).view(pa.string())


def _exact_array(values: list[Any]) -> pa.Array | None:
    """`values` as an Arrow array that gives back exactly `values`, or None when there is none.
    A string with a lone surrogate is held as the bytes UTF-8 would give it (`_text_array`)."""
    try:
        array = pa.array(values)
    except UnicodeEncodeError:
        return _with_surrogates(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None
    if _unfit_for_parquet(array.type) or not _same(array.to_pylist(), values):
        return None
    return array


def _with_surrogates(values: list[Any]) -> pa.Array | None:
    """`_exact_array` for values with lone surrogates: typed as they would be with those
    strings empty, and built with them as bytes in the binary twin of that type."""
    try:
        typed = _exact_array(_strings_mapped(values, lambda text: ""))
        raw = _strings_mapped(values, lambda text: text.encode("utf-8", "surrogatepass"))
        if typed is None:
            return None
        return pa.array(raw, _binary(typed.type)).view(typed.type)
    except (pa.ArrowException, RecursionError, TypeError, ValueError):
        return None


def _strings_mapped(value: Any, change: Callable[[str], Any]) -> Any:
    """`value` with each string that has no UTF-8 form (a lone surrogate) replaced by
    `change(string)`."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return change(value)
        return value
    if isinstance(value, dict):
        return {key: _strings_mapped(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_strings_mapped(item, change) for item in value]
    return value


def _binary(type_: pa.DataType) -> pa.DataType:
    """`type_` with binary data in place of text: Arrow takes any bytes there."""
    if pa.types.is_string(type_):
        return pa.binary()
    if pa.types.is_struct(type_):
        return pa.struct([f.with_type(_binary(f.type)) for f in type_])
    if pa.types.is_list(type_):
        return pa.list_(type_.value_field.with_type(_binary(type_.value_type)))
    return type_


# Parquet readers refuse a schema nested deeper than 100 levels (a struct is one, a list two):
# a value nested deeper is written as JSON text, so that the files written can be read back.
_PARQUET_DEPTH: Final = 64


def _unfit_for_parquet(type_: pa.DataType) -> bool:
    """Whether Parquet cannot store `type_`: a struct without fields (what `{}` becomes) or a
    nesting too deep to read back. Iterative, so that any depth is fine."""
    stack = [(type_, 0)]
    while stack:
        kind, depth = stack.pop()
        if pa.types.is_struct(kind) and kind.num_fields == 0:
            return True
        depth += 2 if kind.num_fields and not pa.types.is_struct(kind) else 1
        if depth > _PARQUET_DEPTH:
            return True
        stack.extend((kind.field(i).type, depth) for i in range(kind.num_fields))
    return False


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: types must match too (1 is not 1.0), key order may differ.
    Iterative, so that any depth is fine."""
    pairs = [(a, b)]
    while pairs:
        a, b = pairs.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            if a.keys() != b.keys():
                return False
            pairs.extend((a[key], b[key]) for key in a)
        elif isinstance(a, list):
            if len(a) != len(b):
                return False
            pairs.extend(zip(a, b, strict=True))
        elif isinstance(a, float) and a != a:  # NaN
            if b == b:
                return False
        elif a != b:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# rows nested deeper than the parser goes


class _TooDeep:
    """A row's value nested deeper than `json.loads` goes (it raises `RecursionError`): kept as
    its JSON text, so that its column becomes JSON text and the cleaner, failing to read it in
    turn, rejects the row as `malformed_row` instead of the whole file failing."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _row(text: str) -> Any:
    """`json.loads(text)`; a row object too deep for it has its too-deep values kept as text."""
    try:
        return json.loads(text)
    except RecursionError:
        return _shallow_object(text)


_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def _shallow_object(text: str) -> dict[str, Any]:
    """The members of the JSON object `text`, each parsed, or `_TooDeep` where too deep."""
    out: dict[str, Any] = {}
    at = _skip(text, 0)
    if text[at : at + 1] != "{":
        raise json.JSONDecodeError("Expecting '{'", text, at)
    at = _skip(text, at + 1)
    while text[at : at + 1] != "}" or out:
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text[at : at + 1] != ":" or not isinstance(key, str):
            raise json.JSONDecodeError("Expecting ':' after a key", text, at)
        at = _skip(text, at + 1)
        try:
            out[key], at = _DECODER.raw_decode(text, at)
        except RecursionError:
            end = _value_end(text, at)
            out[key], at = _TooDeep(text[at:end]), end
        at, more = _after_item(text, at, "}")
        if not more:
            break
    if text[_skip(text, at + 1) :]:
        raise json.JSONDecodeError("Extra data", text, at + 1)
    return out


def _shallow_rows(text: str) -> list[Any]:
    """The values of the JSON list `text` (or the one value it is), each read by `_row`."""
    at = _skip(text, 0)
    if text[at : at + 1] != "[":
        return [_row(text)]
    rows: list[Any] = []
    at = _skip(text, at + 1)
    while text[at : at + 1] != "]" or rows:
        end = _value_end(text, at)
        rows.append(_row(text[at:end]))
        at, more = _after_item(text, end, "]")
        if not more:
            break
    return rows


def _after_item(text: str, at: int, close: str) -> tuple[int, bool]:
    """Past the `,` after an item of a list or object (and True: another item follows), or at
    its `close` (and False)."""
    at = _skip(text, at)
    if text[at : at + 1] == close:
        return at, False
    if text[at : at + 1] != ",":
        raise json.JSONDecodeError(f"Expecting ',' or '{close}'", text, at)
    return _skip(text, at + 1), True


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _value_end(text: str, at: int) -> int:
    """Where the JSON value starting at `at` ends, found without recursion: brackets counted
    outside strings. (Whether it is valid JSON is for the cleaner's parse to say.)"""
    depth = 0
    index = at
    while index < len(text):
        char = text[index]
        if char == '"':
            index += 1
            while index < len(text) and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return index + 1
        elif depth == 0 and char in ",:" + _SPACE:
            return index
        index += 1
    if depth:
        raise json.JSONDecodeError("Unterminated value", text, at)
    return index
