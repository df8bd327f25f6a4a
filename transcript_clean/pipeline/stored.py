"""Rows as a batch stores them, read for the per-row path: the batch and its format, a
conversation kept as JSON text, the lines a JSON Lines source could not read, rows too large to
read, text that is not UTF-8, and each row as the per-row path takes it."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from transcript_clean.errors import FormatError
from transcript_clean.formats.base import Format, Row
from transcript_clean.policy import Config
from transcript_clean.rows import RowResult, clean_row, rejected_row, too_deep
from transcript_clean.rules import MALFORMED_ROW
from transcript_clean.sizes import row_sizes
from transcript_clean.sources import LINE_ERROR, RAW_LINE, hidden_columns, json_columns, jsontypes
from transcript_clean.utf8 import python_rows, reject_message


def prepared(batch: pa.RecordBatch | pa.Table, format: Format | str) -> tuple[pa.Table, Format]:
    """`batch` as a table, and its format, which must find its column there."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    fmt = _resolve_format(format, table)
    if fmt.column not in table.column_names:
        raise FormatError(
            f"no column {fmt.column!r} for format {fmt.name}; the columns are "
            f"{', '.join(table.column_names)}"
        )
    return table, fmt


def _resolve_format(format: Format | str, table: pa.Table) -> Format:
    if isinstance(format, Format):
        return format
    from transcript_clean.formats import get_format
    from transcript_clean.shapes.detect import detect_format

    if format == "auto":
        return detect_format(table.column_names, python_rows(table.slice(0, 20)))
    return get_format(format)


def holds_json_text(schema: pa.Schema, column: str) -> bool:
    """Whether the conversation column holds JSON as text (some datasets store it so, and
    `sources` falls back to it for JSON that Arrow cannot type): decoded before cleaning."""
    return column in json_columns(schema) or pa.types.is_string(schema.field(column).type)


def stored_as_json(schema: pa.Schema, fmt: Format) -> bool:
    """Whether `fmt`'s conversation column is JSON text to parse before cleaning: where it
    `holds_json_text`, and the format reads no plain text there (`Format.plain_text`)."""
    return not fmt.plain_text and holds_json_text(schema, fmt.column)


def line_errors(table: pa.Table) -> dict[int, str]:
    """The rows of `table` that a JSON Lines source could not read (`LINE_ERROR`), with why."""
    if LINE_ERROR not in table.schema.names:
        return {}
    errors = table.column(LINE_ERROR)
    if errors.null_count == len(errors):
        return {}
    at = np.flatnonzero(errors.is_valid().to_numpy(zero_copy_only=False))
    return dict(zip(at.tolist(), errors.take(pa.array(at)).to_pylist(), strict=True))


def oversized(table: pa.Table, limit: int | None) -> dict[int, str]:
    """The rows of `table` holding more than `limit` bytes in Arrow (`--max-row-bytes`), with
    why. Not a JSON Lines source's: its reader skips such lines itself, by their length."""
    if limit is None or RAW_LINE in table.schema.names or table.nbytes <= limit:
        return {}
    sizes = row_sizes(table)
    return {
        int(k): f"row of {int(sizes[k]):,} bytes, over --max-row-bytes ({limit:,}): not read"
        for k in np.flatnonzero(sizes > limit)
    }


def clean_stored_row(
    row: Row, fmt: Format, config: Config, *, as_json: bool, trace: bool = False
) -> RowResult:
    """`clean_row` for a row as it is stored: a conversation kept as JSON text (`as_json`, see
    `holds_json_text`) is parsed first, and text that does not parse is a `malformed_row`."""
    if as_json:
        text = row[fmt.column]
        try:
            row = {**row, fmt.column: json.loads(text) if text is not None else None}
        except (TypeError, json.JSONDecodeError) as err:
            return rejected_row(MALFORMED_ROW, f"{fmt.column}: not valid JSON ({err})")
        except RecursionError:
            return rejected_row(MALFORMED_ROW, too_deep(fmt.column))
    return clean_row(row, fmt, config, trace=trace)


def not_utf8(row: Row, fmt: Format, where: str) -> RowResult:
    """The result of a row whose text is not UTF-8 at `where` (the row, mended)."""
    conversation = row.get(fmt.column)
    count = len(conversation) if isinstance(conversation, list) else 0
    return rejected_row(MALFORMED_ROW, reject_message(where), count)


def as_stored(row: Row, json_column: str | None) -> Row:
    """A repaired row as its batch stores it: the conversation as JSON text where the batch
    holds it so (`json_column`)."""
    if json_column is not None:
        row = {**row, json_column: json.dumps(row[json_column], ensure_ascii=False)}
    return row


def values_but(
    picked: pa.Table, big: dict[int, str], from_arrow: set[int], unreadable: dict[int, str]
) -> list[Row]:
    """`row_values`, but the rows at `big` are left empty: never made Python objects."""
    if not big:
        return row_values(picked, from_arrow, unreadable)
    small = [k for k in range(picked.num_rows) if k not in big]
    errors = {i: unreadable[k] for i, k in enumerate(small) if k in unreadable}
    values = row_values(
        picked.take(pa.array(small, pa.int64())),
        {i for i, k in enumerate(small) if k in from_arrow},
        errors,
    )
    unreadable.update((small[i], error) for i, error in errors.items())
    rows: list[Row] = [{} for _ in range(picked.num_rows)]
    for k, row in zip(small, values, strict=True):
        rows[k] = row
    return rows


def row_values(picked: pa.Table, from_arrow: set[int], unreadable: dict[int, str]) -> list[Row]:
    """The rows as the per-row path reads them, without the hidden columns: a JSON Lines row
    from its line (orjson), so that it has exactly the file's keys (those missing stay
    missing); the others, and the rows at `from_arrow`, from Arrow, `json_` leaves decoded
    (a row whose `json_` text does not decode goes into `unreadable`, with why)."""
    hidden = hidden_columns(picked.schema)
    data = picked.drop_columns(hidden) if hidden else picked
    raws: list[str | None] = (
        picked.column(RAW_LINE).to_pylist() if RAW_LINE in hidden else [None] * len(picked)
    )
    arrow = [k for k, raw in enumerate(raws) if raw is None or k in from_arrow]
    if len(arrow) == len(raws):
        return jsontypes.python_rows(data, unreadable)
    rows: list[Row] = [{} for _ in raws]
    errors: dict[int, str] = {}
    taken = data.take(pa.array(arrow, pa.int64()))
    for k, row in zip(arrow, jsontypes.python_rows(taken, errors), strict=True):
        rows[k] = row
    unreadable.update((arrow[k], error) for k, error in errors.items())
    for k, raw in enumerate(raws):
        if raw is not None and k not in from_arrow:
            rows[k] = jsontypes.loads(raw)
    return rows
