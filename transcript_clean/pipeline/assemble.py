"""A batch's output put together: the kept rows in input order (repaired ones written anew,
fitted to the input's schema) and the rejects with their four columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from transcript_clean.convert import ConvertingFormat
from transcript_clean.formats.base import Format, Row
from transcript_clean.pipeline.stored import as_stored
from transcript_clean.policy import Config
from transcript_clean.rows import RowResult, unencodable
from transcript_clean.rules._template import written_arguments
from transcript_clean.sources import LINE_ERROR, RAW_LINE, jsontypes
from transcript_clean.sources.base import moved_down

REJECT_FIELDS = (
    pa.field("_reject_codes", pa.list_(pa.string())),
    pa.field("_reject_message", pa.string()),
    pa.field("_source", pa.string()),
    pa.field("_source_row", pa.int64()),
)


def previous_names(names: list[str]) -> dict[str, str]:
    """The input columns that the four reject columns would meet again, each with its new name
    (`sources.base.moved_down`): the rows of an earlier run's rejects/ cleaned again keep that
    run's verdict as `_prev_reject_codes`, `_prev_source_row` ..., and the one before it as
    `_prev_prev_...`, since no reader opens a Parquet file that has a name twice."""
    return moved_down(names, (f.name for f in REJECT_FIELDS))


def reject_schema(schema: pa.Schema) -> pa.Schema:
    """The rejects' schema: the input's columns (those named as ours renamed, `previous_names`)
    and the four reject columns."""
    renames = previous_names(schema.names)
    out = schema
    for i, f in enumerate(schema):
        if f.name in renames:
            out = out.set(i, f.with_name(renames[f.name]))
    for f in REJECT_FIELDS:
        out = out.append(f)
    return out


class Rejected(NamedTuple):
    """A rejected row: its position in the batch, its codes and its message."""

    position: int
    codes: list[str]
    message: str | None


class Replaced(NamedTuple):
    """Rows of a batch written anew: their positions in the batch, and the rows, in that order."""

    positions: npt.NDArray[np.int64]
    rows: pa.Table


def written_schema(fmt: Format, config: Config, schema: pa.Schema) -> pa.Schema | None:
    """The schema kept rows of `schema` are written in, where it is not `schema`: every kept
    row is then written anew (`Format.written_schema`): in the format of `--to`, or with
    calls' arguments in the form `--arguments-as` asks where the input's types cannot hold it
    (objects in a column of text)."""
    if isinstance(fmt, ConvertingFormat):
        return fmt.written_schema(schema)
    form = written_arguments(config)
    writer = fmt.with_arguments(form) if form is not None else None
    return writer.written_schema(schema) if writer is not None else None


def fit_repaired(
    repaired: dict[int, RowResult],
    schema: pa.Schema,
    json_column: str | None,
    lines: Mapping[int, str] | None = None,
) -> Replaced | None:
    """The repaired rows in the input's schema, converted together. A row that does not fit the
    schema any more is rejected as `unencodable_row` (and left out). A JSON Lines row's line
    is the repaired row re-encoded (or its line as it came in, from `lines`, where the row is
    unchanged); `json_` leaves are encoded as JSON text."""
    if not repaired:
        return None
    rows = []
    as_lines = RAW_LINE in schema.names
    for i, result in repaired.items():
        assert result.row is not None
        row = as_stored(result.row, json_column)
        if as_lines:
            line = lines.get(i) if lines is not None else None
            row = {**row, RAW_LINE: line or jsontypes.dumps(row), LINE_ERROR: None}
        rows.append(row)
    typed = as_lines or any(jsontypes.has_json(f.type) for f in schema)

    def build(rows: list[Row]) -> pa.Table:
        return jsontypes.to_table(rows, schema) if typed else pa.Table.from_pylist(rows, schema)

    try:
        return Replaced(np.fromiter(repaired, np.int64), build(rows))
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError):
        pass  # find the rows that do not fit, one by one
    positions, fitted = [], []
    for (i, result), row in zip(repaired.items(), rows, strict=True):
        try:
            fitted.append(build([row]))
            positions.append(i)
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError) as err:
            unencodable(result, f"the repaired row does not fit the input's schema: {err}")
    if not fitted:
        return None
    return Replaced(np.array(positions, np.int64), pa.concat_tables(fitted))


def assemble_kept(
    table: pa.Table, kept: npt.NDArray[np.bool_], replaced: list[Replaced]
) -> pa.Table:
    """The kept rows in input order, gathered with one `take`: unchanged rows from the input,
    repaired ones from the tables they were written anew into. A batch kept whole as it came
    (most of a clean dataset's) is the input itself: no copy."""
    if not replaced and kept.all():
        return table
    index = np.arange(table.num_rows, dtype=np.int64)
    end = table.num_rows
    for positions, _ in replaced:
        index[positions] = end + np.arange(len(positions), dtype=np.int64)
        end += len(positions)
    source = pa.concat_tables([table, *(rows for _, rows in replaced)])
    return source.take(pa.array(index[kept]))


def assemble_rejects(
    table: pa.Table, rejected: list[Rejected], source: str, first_row: int
) -> pa.Table:
    """The rejected rows as they came in, in input order, with the four reject columns."""
    rejected = sorted(rejected, key=lambda r: r.position)  # the fast path's come first
    positions = [r.position for r in rejected]
    out = table.take(pa.array(positions, pa.int64()))
    renames = previous_names(out.schema.names)
    if renames:
        out = out.rename_columns([renames.get(name, name) for name in out.schema.names])
    columns = [
        [r.codes for r in rejected],
        [r.message for r in rejected],
        [source] * len(rejected),
        [first_row + i for i in positions],
    ]
    for f, values in zip(REJECT_FIELDS, columns, strict=True):
        out = out.append_column(f, pa.array(values, f.type))
    return out
