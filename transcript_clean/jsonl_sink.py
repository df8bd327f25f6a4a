"""JSON Lines shards: rows encoded as lines, written atomically like `sinks.ParquetShard`.

A row read from JSON Lines carries its line (`_raw_line`, `sources.base.RAW_LINE`): that line is
written back byte for byte, so a row that needed no change comes out as it came in, absent keys
absent. A row without one (read from Parquet or the Hub) is encoded from its typed values: every
column and struct field in the schema's order, nulls as `null` (Parquet cannot tell an absent key
from a null one), JSON-typed values (`pa.json_()`, or a column of JSON text) as the JSON they hold,
binary values as base64 text. A reject line is the row's object with the four `_reject_*` /
`_source*` fields added (a key of the row's named as one of them moved to `_prev_<name>`,
as `pipeline.previous_names` says); a line that was not a JSON object is kept whole under
`_raw_line`.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.atomic import AtomicFile, temp_path
from transcript_clean.errors import OutputError
from transcript_clean.jsontext import orjson_loads, strict_loads
from transcript_clean.sources import jsontypes
from transcript_clean.sources.base import (
    LINE_ERROR,
    RAW_LINE,
    hidden_columns,
    hidden_renames,
    json_columns,
)

__all__ = ["JSONL_CODECS", "JsonlShard", "count_lines", "data_lines", "is_empty", "reject_lines"]

JSONL_CODECS = {"none": "", "gzip": ".gz", "zstd": ".zst"}
"""The compressions a JSON Lines shard may have, and what each adds to its name."""

_JSON_EXTENSION = "arrow.json"
_DUMPS = orjson.OPT_NON_STR_KEYS  # a map's keys may be numbers
_CHUNK = 2**20
_NEWLINE = ord("\n")


class JsonlShard(AtomicFile):
    """One JSON Lines file written atomically: `ParquetShard`'s interface (`write`, `close`,
    `abort`, `rows`, a `with` block), lines instead of row groups.

    Lines go to the temporary name (compressed as asked, through Arrow's
    `CompressedOutputStream`); `close()` fsyncs it and moves it into place with `os.replace`.
    `rejects=True`: the rows are a rejects table, written as `reject_lines` says.
    """

    def __init__(
        self, path: Path, schema: pa.Schema, *, compression: str = "none", rejects: bool = False
    ) -> None:
        if compression not in JSONL_CODECS:
            raise OutputError(
                f"JSON Lines output can be compressed with {', '.join(JSONL_CODECS)}, "
                f"not {compression!r}"
            )
        self.path = Path(path)
        self.schema = schema
        self.rows = 0
        """Rows written so far."""
        self._rejects = rejects
        self._temp = temp_path(self.path)
        self._done = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            raw = pa.OSFile(str(self._temp), "wb")
            self._file = raw
            self._stream: pa.NativeFile = (
                raw if compression == "none" else pa.CompressedOutputStream(raw, compression)
            )
        except (pa.ArrowException, OSError) as exc:
            raise OutputError(f"cannot write {self.path}: {exc}") from exc

    def columns_for(self, table: pa.Table) -> list[str]:
        """Its columns; of a JSON Lines source's rows, each with its line (`_raw_line`), the
        lines alone: a data shard writes the line of a row that has one, byte for byte."""
        lines = RAW_LINE in table.column_names and table.column(RAW_LINE).null_count == 0
        return [RAW_LINE] if lines and not self._rejects else list(self.schema.names)

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        """Append rows, one line each: rows of its schema, or (a data shard) the lines alone of
        rows that each have one (`columns_for`)."""
        if self._done:
            raise OutputError(f"{self.path} is already closed")
        lines_alone = not self._rejects and data.schema.names == [RAW_LINE]
        if data.schema.names != self.schema.names and not lines_alone:
            raise OutputError(
                f"rows for {self.path} do not fit its schema: the columns are "
                f"{', '.join(data.schema.names)}, not {', '.join(self.schema.names)}"
            )
        if not data.num_rows:
            return
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if lines_alone and table.column(RAW_LINE).null_count:
            raise OutputError(f"rows for {self.path} without their lines came with lines alone")
        lines = reject_lines(table) if self._rejects else data_lines(table)
        try:
            self._stream.write(lines)
        except (pa.ArrowException, OSError) as exc:
            raise OutputError(f"cannot write {self.path}: {exc}") from exc
        self.rows += table.num_rows

    def _finish(self) -> None:
        self._stream.close()  # a compressed stream closes the file under it too
        self._file.close()

    def _discard(self) -> None:
        with contextlib.suppress(Exception):
            self._stream.close()
        self._file.close()

    def __repr__(self) -> str:
        return f"JsonlShard({str(self.path)!r}, rows={self.rows})"


# ---------------------------------------------------------------------------------------------
# rows as lines


def data_lines(table: pa.Table) -> bytes | pa.Buffer:
    """The rows of `table` as JSON Lines, each ending in a newline: a row's `_raw_line` where it
    has one, else its typed values (`typed_objects`)."""
    if RAW_LINE not in table.schema.names:
        return _joined(
            [orjson.dumps(row, default=_default, option=_DUMPS) for row in typed_objects(table)]
        )
    raw = table.column(RAW_LINE).combine_chunks()
    if raw.null_count == 0:
        # every row has its line: one Arrow join, no Python per row
        return _lines_buffer(raw)
    missing = pc.is_null(raw).to_pylist()
    typed = iter(typed_objects(table.filter(pc.is_null(raw))))
    lines: list[bytes] = []
    for line, absent in zip(raw.to_pylist(), missing, strict=True):
        if absent:
            lines.append(orjson.dumps(next(typed), default=_default, option=_DUMPS))
        else:
            lines.append(line.encode())
    return _joined(lines)


def reject_lines(table: pa.Table) -> bytes:
    """A rejects table (the input's columns, then the four reject columns) as JSON Lines.

    A row with its line is that line with the four fields added at the end of its object (the
    row's own bytes kept); a line that was not a JSON object (`_line_error`) is
    `{"_raw_line": "<the line>", ...the four fields}`; any other row is its typed values.
    """
    from transcript_clean.pipeline import REJECT_FIELDS

    names = table.schema.names
    fields = table.select([f.name for f in REJECT_FIELDS]).to_pylist()
    raws = table.column(RAW_LINE).to_pylist() if RAW_LINE in names else [None] * len(fields)
    errors = table.column(LINE_ERROR).to_pylist() if LINE_ERROR in names else [None] * len(fields)
    typed: list[dict[str, Any]] | None = None
    lines: list[bytes] = []
    for i, (raw, error, extra) in enumerate(zip(raws, errors, fields, strict=True)):
        if raw is not None and error is not None:
            lines.append(orjson.dumps({RAW_LINE: raw, **extra}))
        elif raw is not None:
            lines.append(_with_fields(raw, extra))
        else:
            if typed is None:
                typed = typed_objects(table)
            lines.append(orjson.dumps(typed[i], default=_default, option=_DUMPS))
    return _joined(lines)


def _with_fields(raw: str, extra: dict[str, Any]) -> bytes:
    """The object on line `raw` with `extra`'s fields appended, the line's own bytes kept."""
    try:
        row = strict_loads(raw)  # orjson's reading, but a huge integer exactly
    except (ValueError, RecursionError):
        row = None
    if not isinstance(row, dict):  # cannot happen for a line read as a row; kept whole then
        return orjson.dumps({RAW_LINE: raw, **extra})
    # The row has one of them, or a `_raw_line` this run would seem to have written (a line
    # that was not JSON): kept under `_prev`, as the reader reads it (`hidden_renames`).
    if any(name in row for name in (*extra, RAW_LINE, LINE_ERROR)):
        from transcript_clean.pipeline import previous_names

        renames = previous_names(list(row)) | hidden_renames(list(row))
        row = {renames.get(name, name): value for name, value in row.items()}
        return jsontypes.dumps({**row, **extra}).encode()
    body = raw.rstrip(" \t\r\n")  # JSON's whitespace: a line's end is its object's `}`
    head = body[:-1].rstrip(" \t\r\n")
    return head.encode() + (b"," if row else b"") + orjson.dumps(extra)[1:]


def typed_objects(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of `table` as JSON-ready objects: the columns but the hidden ones, in order."""
    hidden = set(hidden_columns(table.schema))
    text = set(json_columns(table.schema))
    names = [name for name in table.schema.names if name not in hidden]
    rows: list[dict[str, Any]] = table.select(names).to_pylist()
    converters = {
        name: conv
        for name in names
        if (conv := _converter(table.schema.field(name).type, json_text=name in text)) is not None
    }
    for row in rows:
        for name, conv in converters.items():
            row[name] = conv(row[name])
    return rows


Converter = Callable[[Any], Any]


def _converter(type_: pa.DataType, *, json_text: bool = False) -> Converter | None:
    """What turns a value of `type_`, as `to_pylist` gives it, into its JSON value; None when
    it is one already. Built once per column, so a column that needs nothing costs nothing."""
    if isinstance(type_, pa.BaseExtensionType):
        if type_.extension_name == _JSON_EXTENSION:
            return _json_value
        return _converter(type_.storage_type)
    if json_text and (pa.types.is_string(type_) or pa.types.is_large_string(type_)):
        return _json_value
    if pa.types.is_struct(type_):
        fields = (type_.field(i) for i in range(type_.num_fields))
        parts = {f.name: conv for f in fields if (conv := _converter(f.type)) is not None}
        if not parts:
            return None
        return lambda value: None if value is None else _convert_struct(value, parts)
    if pa.types.is_map(type_):
        keys = _converter(type_.key_type) or _same
        items = _converter(type_.item_type) or _same
        return lambda value: None if value is None else {keys(k): items(v) for k, v in value}
    if (
        pa.types.is_list(type_)
        or pa.types.is_large_list(type_)
        or pa.types.is_fixed_size_list(type_)
        or pa.types.is_list_view(type_)
        or pa.types.is_large_list_view(type_)
    ):
        item = _converter(type_.value_type)
        if item is None:
            return None
        return lambda value: None if value is None else [item(v) for v in value]
    if (
        pa.types.is_binary(type_)
        or pa.types.is_large_binary(type_)
        or pa.types.is_fixed_size_binary(type_)
    ):
        return lambda value: None if value is None else base64.b64encode(value).decode()
    return None


def _convert_struct(value: dict[str, Any], parts: dict[str, Converter]) -> dict[str, Any]:
    for name, conv in parts.items():
        value[name] = conv(value[name])
    return value


def _same(value: Any) -> Any:
    return value


def _json_value(text: str | None) -> Any:
    """JSON text as its value; text that is not JSON stays text (a reject may hold such). A
    value holding an integer orjson cannot write (past 64 bits) is its compact text, read and
    written by the standard library, exactly (`jsontext.orjson_loads`)."""
    if text is None:
        return None
    try:
        return orjson_loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        value = strict_loads(text)
    except (ValueError, RecursionError):
        return text
    return orjson.Fragment(jsontypes.dumps(value))


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def _joined(lines: list[bytes]) -> bytes:
    """The lines, each ending in a newline, in one copy."""
    return b"\n".join(lines) + b"\n" if lines else b""


def _lines_buffer(raw: pa.Array) -> pa.Buffer:
    """A string array's values, each followed by a newline, as one buffer."""
    joined = pc.binary_join_element_wise(raw, "\n", "")
    width = np.int64 if pa.types.is_large_string(joined.type) else np.int32
    offsets = np.frombuffer(joined.buffers()[1], dtype=width)
    start, stop = int(offsets[joined.offset]), int(offsets[joined.offset + len(joined)])
    return joined.buffers()[2].slice(start, stop - start)


# ---------------------------------------------------------------------------------------------
# reading shards back: the accounting


def count_lines(path: Path | BinaryIO, compression: str = "none") -> int:
    """The lines in a JSON Lines shard: the rows it holds. A file cut short inside its last
    line, or a compressed stream cut short, does not count as whole."""
    lines = 0
    last = _NEWLINE
    buffer = np.empty(_CHUNK, dtype=np.uint8)  # one buffer, read into again and again
    with _opened(path, compression) as stream:
        while size := stream.readinto(buffer):
            chunk = buffer[:size]
            lines += int(np.count_nonzero(chunk == _NEWLINE))  # 4x bytes.count's speed
            last = int(chunk[-1])
    if last != _NEWLINE:
        raise ValueError(f"{path} ends inside a line")
    return lines


def is_empty(path: Path, compression: str = "none") -> bool:
    """Whether a JSON Lines shard holds no line (read no further than its first byte)."""
    with _opened(path, compression) as stream:
        return not stream.read(1)


def _opened(path: Path | BinaryIO, compression: str) -> pa.NativeFile:
    raw = pa.OSFile(str(path), "rb") if isinstance(path, Path) else pa.PythonFile(path, "r")
    if compression == "none":
        return raw
    return pa.CompressedInputStream(raw, compression)
