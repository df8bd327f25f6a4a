"""Cleaning one record batch (`clean_batch`): what every engine runs.

Rows the Arrow fast path settles stay Arrow data; the others go through `clean_row` (rows.py,
SPEC section 5 for one row); the batch comes back split into kept rows, rejects and stats.
"""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.batch_profile import profile_batch
from transcript_clean.columnar.arrays import Mask, flattened, rows_with, whole
from transcript_clean.convert import ConvertingFormat
from transcript_clean.errors import FormatError
from transcript_clean.fastpath import Verdicts, fast_verdicts
from transcript_clean.fastpath.base import FastRepair, Origins, replaced
from transcript_clean.formats.base import Format, Row, put
from transcript_clean.model import Message
from transcript_clean.policy import DEFAULT, Config, for_format
from transcript_clean.profile import Profile
from transcript_clean.rows import (
    RepairStep,
    RowResult,
    Violation,
    clean_row,
    rejected_row,
    too_deep,
    unencodable,
)
from transcript_clean.rules import (
    EMPTY_ASSISTANT_TURN,
    MALFORMED_ROW,
    TRAILING_TOOL_CALL,
    UNANSWERED_TOOL_CALL,
    Rule,
    rules,
)
from transcript_clean.rules._template import written_arguments
from transcript_clean.shapes import ShapedFormat
from transcript_clean.shapes.arrow import (
    ARROW_REPAIRS,
    message_counts,
    shape_declarations,
    shaped_verdicts,
    with_parts,
)
from transcript_clean.sizes import row_sizes
from transcript_clean.sources import LINE_ERROR, RAW_LINE, hidden_columns, json_columns, jsontypes
from transcript_clean.sources.base import moved_down
from transcript_clean.stats import Stats
from transcript_clean.utf8 import invalid_text, mend, python_rows, reject_message

__all__ = [
    "REJECT_FIELDS",
    "BatchResult",
    "CleanedBatch",
    "RepairStep",
    "RowResult",
    "Violation",
    "batch_verdicts",
    "clean_batch",
    "clean_batch_parts",
    "clean_row",
    "clean_stored_row",
    "holds_json_text",
    "line_errors",
    "not_utf8",
    "previous_names",
    "reject_schema",
    "stored_as_json",
]

REJECT_FIELDS = (
    pa.field("_reject_codes", pa.list_(pa.string())),
    pa.field("_reject_message", pa.string()),
    pa.field("_source", pa.string()),
    pa.field("_source_row", pa.int64()),
)


class BatchResult(NamedTuple):
    """What `clean_batch` returns: kept rows (the input's schema), rejects, and their stats."""

    kept: pa.Table
    rejects: pa.Table
    stats: Stats


class CleanedBatch(NamedTuple):
    """What `clean_batch_parts` returns: `clean_batch`'s result with the kept rows not gathered
    yet (`kept_rows` does that: a copy of the batch, which the thread writing it can make)."""

    table: pa.Table
    kept: npt.NDArray[np.bool_]
    """Which rows of `table` are kept."""
    replaced: list[Replaced]
    """Kept rows written anew (repaired), in place of theirs."""
    rejects: pa.Table
    stats: Stats
    written: pa.Table | None = None
    """The kept rows written in another format (`--to`, `convert.py`), in their own schema:
    then they are the kept rows, and `replaced` is empty."""

    def kept_rows(self, columns: Collection[str] | None = None) -> pa.Table:
        """The kept rows; of the columns of `columns` alone, where given (those a shard
        writes: a JSON Lines source's lines are gathered only where they are written)."""
        if self.written is not None:
            names = [n for n in self.written.column_names if columns is None or n in columns]
            return self.written.select(names)
        table, replaced = self.table, self.replaced
        if columns is not None and not set(table.column_names) <= set(columns):
            names = [name for name in table.column_names if name in columns]
            table = table.select(names)
            replaced = [Replaced(at, rows.select(names)) for at, rows in replaced]
        return _assemble_kept(table, self.kept, replaced)


def holds_json_text(schema: pa.Schema, column: str) -> bool:
    """Whether the conversation column holds JSON as text (some datasets store it so, and
    `sources` falls back to it for JSON that Arrow cannot type): decoded before cleaning."""
    return column in json_columns(schema) or pa.types.is_string(schema.field(column).type)


def stored_as_json(schema: pa.Schema, fmt: Format) -> bool:
    """Whether `fmt`'s conversation column is JSON text to parse before cleaning: where it
    `holds_json_text`, and the format reads no plain text there (`Format.plain_text`)."""
    return not fmt.plain_text and holds_json_text(schema, fmt.column)


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


def batch_verdicts(
    batch: pa.RecordBatch | pa.Table,
    config: Config = DEFAULT,
    *,
    format: Format | str = "auto",
    codes: bool = True,
    exact_lines: bool = True,
    reencode: bool = False,
) -> Verdicts | None:
    """What the Arrow fast path settles in `batch`: the first step of `clean_batch`, which can
    run ahead of it (on the thread that reads the batches, say) and be handed to it as
    `verdicts`. None when the fast path settles nothing here (the format has none, or the
    column holds JSON text).

    Rows the fast path settles never become Python objects: clean ones are kept as they are,
    and, where the config keeps or repairs them, rows whose only code is calls pending at the
    end or one the format's Arrow side repairs. `codes=False` settles the clean rows
    alone: `clean_batch`'s `on_row` must see every row with a code. `exact_lines=False` says
    a JSON Lines row's line (`_raw_line`) is not written (Parquet output drops it), so the
    Arrow side may repair those rows too. `reencode=True` lets it repair them where the lines
    are written as well, and marks the verdicts `stale_lines`: `clean_batch_parts` then writes
    just those rows' lines anew (`_relined`: each line edited as the repair says, else
    re-encoded by the per-row path), while the Arrow side settles their stats and the rows it
    rejects (a reject's line is the row as it came in). The per-row path's rows cost far more
    than the Arrow side's, and about a third of those a repair would send it turn out
    rejected.
    """
    table, fmt = _prepared(batch, format)
    config = for_format(config, fmt)
    enabled = [rule for rule in rules() if rule.enabled(config)]
    # Rows with text that is not UTF-8, and lines that are not rows: unread here, rejected by
    # the per-row path.
    unread = sorted(
        set(invalid_text(table))
        | set(line_errors(table))
        | set(oversized(table, config.max_row_bytes))
    )
    # A repaired JSON Lines row written as JSON Lines is its line re-encoded, which an Arrow
    # repair would leave stale: it takes the per-row path, or with `reencode` has its line
    # re-encoded by it once the Arrow side has settled it.
    lines = exact_lines and RAW_LINE in table.schema.names
    in_arrow = not lines or reencode
    repair = [r.code for r in enabled if codes and in_arrow and _repairs_in_arrow(config, r.code)]
    verdicts = _verdicts(table, fmt, config, enabled, unread, repair, codes)
    if verdicts is not None and lines and verdicts.repaired.any():
        verdicts.stale_lines = True
    return verdicts


def _verdicts(
    table: pa.Table,
    fmt: Format,
    config: Config,
    enabled: list[Rule],
    unread: list[int],
    repair: list[str],
    codes: bool,
) -> Verdicts | None:
    """`batch_verdicts` once it knows which codes the Arrow side may repair."""
    if isinstance(fmt, ShapedFormat):
        return _shaped_verdicts(table, fmt, enabled, unread, repair)
    if stored_as_json(table.schema, fmt):
        return None
    column = whole(table.column(fmt.column))
    if unread:
        at = np.array(unread, dtype=np.int64)
        column = replaced(column, at, pa.nulls(len(at), column.type))
    return fast_verdicts(
        fmt,
        column,
        keep_trailing=codes and config.action(TRAILING_TOOL_CALL) == "keep",
        repair=repair,
        reject=[r.code for r in enabled if codes and config.action(r.code) == "reject"],
        schema=table.schema,
        enabled=enabled,
        tools=declaring_columns(table, fmt),
        side={n: whole(table.column(n)) for n in fmt.side_columns if n in table.schema.names},
        config=config,
    )


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


def declaring_columns(table: pa.Table, fmt: Format) -> list[pa.Array]:
    """The batch's columns of declared tools that the format reads, each in one chunk."""
    names = [n for n in fmt.declaring_columns if n in table.schema.names]
    return [whole(table.column(n)) for n in names]


def _shaped_verdicts(
    table: pa.Table,
    fmt: ShapedFormat,
    enabled: list[Rule],
    unread: list[int],
    repair: list[str],
) -> Verdicts | None:
    """`batch_verdicts` for a dataset type: the rows clean for every candidate, and those with
    a candidate repaired in Arrow (`shapes.arrow`), for the codes of `repair` it can."""
    if any(holds_json_text(table.schema, c) for c in fmt.shape.columns):
        return None
    tools = declaring_columns(table, fmt.inner)
    if fmt.shape.prompt is not None and "." in fmt.shape.prompt:  # OpenAI's `input.tools`
        nested = shape_declarations(table, fmt.shape.prompt)
        if nested is None:
            return None  # declarations the fast path cannot read: every row goes per-row
        tools += nested
    fixes = [c for c in ARROW_REPAIRS if c in repair]
    return shaped_verdicts(table, fmt, enabled, unread, fixes, tools)


def _repairs_in_arrow(config: Config, code: str) -> bool:
    """Whether the config repairs `code` as the fast path can (an unanswered call by a cut)."""
    if config.action(code) != "repair":
        return False
    return code != UNANSWERED_TOOL_CALL or config.interrupted_call == "cut"


def clean_batch(
    batch: pa.RecordBatch | pa.Table,
    config: Config = DEFAULT,
    *,
    format: Format | str = "auto",
    source: str = "",
    first_row: int = 0,
    on_row: Callable[[int, Row, RowResult], None] | None = None,
    fast: bool = True,
    verdicts: Verdicts | None = None,
) -> BatchResult:
    """Clean one Arrow batch: `(kept, rejects, stats)` (`clean_batch_parts`, gathered).

    `kept` has the input's schema and its rows in input order, an unchanged row value for value,
    in one contiguous chunk (a Parquet writer handed many small chunks is slower, and the
    chunks it is handed decide the file's pages);
    `rejects` holds rejected rows as they came in plus `_reject_codes`, `_reject_message`,
    `_source` and `_source_row` (`first_row` + the row's position in the batch).

    Rows the Arrow fast path proves clean skip the per-row path (`fast=False` sends every row
    through it: the same result, slower); `on_row` sees every row that takes the per-row path,
    which includes every row with a code. `verdicts` is the fast path's answer computed ahead
    by `batch_verdicts` for this batch, config and format (with `codes=on_row is None`); by
    default it is computed here.
    """
    cleaned = clean_batch_parts(
        batch,
        config,
        format=format,
        source=source,
        first_row=first_row,
        on_row=on_row,
        fast=fast,
        verdicts=verdicts,
    )
    return BatchResult(cleaned.kept_rows(), cleaned.rejects, cleaned.stats)


def clean_batch_parts(
    batch: pa.RecordBatch | pa.Table,
    config: Config = DEFAULT,
    *,
    format: Format | str = "auto",
    source: str = "",
    first_row: int = 0,
    on_row: Callable[[int, Row, RowResult], None] | None = None,
    fast: bool = True,
    verdicts: Verdicts | None = None,
) -> CleanedBatch:
    """`clean_batch`, leaving the kept rows to be gathered (`CleanedBatch.kept_rows`)."""
    table, fmt = _prepared(batch, format)
    config = for_format(config, fmt)
    as_json = stored_as_json(table.schema, fmt)
    # Every kept row written anew: every row takes the per-row path then (a converting format
    # has no Arrow side; `--arguments-as` needs `--chat-template`, whose rules are per-row).
    anew = written_schema(fmt, config, table.schema)
    stats = Stats()
    if verdicts is None and fast:
        verdicts = batch_verdicts(table, config, format=fmt, codes=on_row is None)
    elif verdicts is not None and len(verdicts.clean) != table.num_rows:
        raise ValueError(
            f"verdicts for {len(verdicts.clean)} rows given for a batch of {table.num_rows}"
        )
    settled: Replaced | None = None
    rejected: list[Rejected] = []
    demoted: list[int] = []
    decoded: dict[int, Sequence[Message] | None] = {}
    measured: tuple[Profile, Mask] | None = None  # the verdicts' profile, and of which rows
    with _cyclic_gc_paused():
        if verdicts is None or not fast:
            slow = np.arange(table.num_rows)
        else:
            if verdicts.profile is not None:
                measured = verdicts.profile, verdicts.read
            lines = None
            if verdicts.stale_lines:
                verdicts, lines, demoted = _relined(table, fmt, config, as_json, verdicts)
            slow = np.flatnonzero(~verdicts.handled)
            settled, rejected = _settle(table, fmt, verdicts, stats, source, first_row, lines)
        kept, rejects, fitted = _clean_rows(
            table, slow, rejected, fmt, config, as_json, stats, source, first_row, on_row,
            decoded, anew,
        )  # fmt: skip
    read = None if verdicts is None or not fast else verdicts.read
    if measured is not None:
        # The settled rows were measured with the verdicts: only the others are measured here
        # (not those `_relined` handed back to the per-row path, measured with the others).
        stats.profile.merge(measured[0])
        for i in demoted:
            del decoded[i]
        read = np.zeros(table.num_rows, dtype=bool)
    if isinstance(fmt, ShapedFormat):
        # The per-row path's transcript of a dataset type's row is its last candidate's after
        # the prompt's repairs: every row is profiled from the batch as it came in instead
        # (but those measured with the verdicts).
        read = np.ones(table.num_rows, dtype=bool) if measured is None else ~measured[1]
        read[list(line_errors(table))] = False
        # A row the cleaner could not read (`malformed_row`, `unknown_role`: no prompt, say)
        # has nothing to measure, though its first candidate alone may read.
        read[[i for i, messages in decoded.items() if messages is None]] = False
        decoded = {}
    stats.profile.merge(profile_batch(table, fmt, read, decoded, tokenizer=config.tokenizer))
    if anew is not None:  # every row took the per-row path
        written = fitted.rows if fitted is not None else pa.Table.from_batches([], anew)
        return CleanedBatch(table, kept, [], rejects, stats, written)
    replaced = [r for r in (settled, fitted) if r is not None]
    return CleanedBatch(table, kept, replaced, rejects, stats)


def _profile_rendered(stats: Stats, results: Sequence[RowResult]) -> None:
    """The rendered and trained tokens of the rows kept (`--chat-template`), for the profile."""
    counted = [r.rendered for r in results if r.rendered is not None and r.status != "rejected"]
    stats.profile.rendered_rows += sum(r.templated for r in results)
    stats.profile.add_rendered(
        [tokens for tokens, _ in counted],
        [trained for _, trained in counted if trained is not None],
    )


def _clean_rows(
    table: pa.Table,
    slow: npt.NDArray[np.int64],
    rejected: list[Rejected],
    fmt: Format,
    config: Config,
    as_json: bool,
    stats: Stats,
    source: str,
    first_row: int,
    on_row: Callable[[int, Row, RowResult], None] | None,
    decoded: dict[int, Sequence[Message] | None] | None = None,
    anew: pa.Schema | None = None,
) -> tuple[npt.NDArray[np.bool_], pa.Table, Replaced | None]:
    """The per-row path for the rows at `slow`: which rows of the batch are kept, the rejects
    (with the fast path's, `rejected`), and the rows re-encoded (repaired, or with calls'
    arguments in another form); with `anew` (`written_schema`), every kept row, in it. Only
    Arrow and NumPy data come out, so the Python objects made on the way are gone before the
    cyclic collector is back. `decoded` gets each row's transcript as it came in (None:
    unread), by position, for the profile."""
    positions: list[int] = slow.tolist()
    picked = table.take(pa.array(slow)) if positions else table.slice(0, 0)
    # A row with text that is not UTF-8 cannot become Python as it is: it is a malformed_row,
    # and it and its rejects row hold its text mended (`utf8`). The fast path never settles one.
    bad = invalid_text(picked)
    if bad:
        picked = mend(picked, bad)
        table = mend(table, [positions[k] for k in bad])
    unreadable = line_errors(picked)
    big = oversized(picked, config.max_row_bytes)
    unreadable.update(big)
    rows = _values_but(picked, big, set(bad) | set(unreadable), unreadable)
    results = [
        rejected_row(MALFORMED_ROW, unreadable[k])
        if k in unreadable
        else not_utf8(row, fmt, bad[k])
        if k in bad
        else clean_stored_row(row, fmt, config, as_json=as_json)
        for k, row in enumerate(rows)
    ]
    if anew is not None:
        # Every kept row is written anew, in a schema of its own (the format of `--to`, or
        # calls' arguments as objects): an unchanged row as it came in, and its line.
        kept_results = {
            i: r for i, r in zip(positions, results, strict=True) if r.status != "rejected"
        }
        raws = picked.column(RAW_LINE).to_pylist() if RAW_LINE in picked.schema.names else None
        lines = {}
        for k, (i, result) in enumerate(zip(positions, results, strict=True)):
            if result.status != "rejected" and result.row is None:
                result.row = rows[k]
                if raws is not None and raws[k] is not None:
                    lines[i] = raws[k]
        fitted = _fit_repaired(kept_results, anew, None, lines)
    else:
        rewritten = {
            i: r
            for i, r in zip(positions, results, strict=True)
            if r.row is not None and r.status != "rejected"
        }
        fitted = _fit_repaired(rewritten, table.schema, fmt.column if as_json else None)

    kept = np.ones(table.num_rows, dtype=bool)
    kept[[i for i, _, _ in rejected]] = False
    if config.chat_template is not None:
        _profile_rendered(stats, results)
    for i, row, result in zip(positions, rows, results, strict=True):
        if result.status == "rejected":
            kept[i] = False
            rejected.append(Rejected(i, result.codes, result.reject_message))
        stats.add_row(result, source, first_row + i)
        if decoded is not None:
            decoded[i] = None if result.decoded is None else result.decoded.messages
        if on_row is not None:
            on_row(first_row + i, row, result)
    return kept, _assemble_rejects(table, rejected, source, first_row), fitted


def _values_but(
    picked: pa.Table, big: dict[int, str], from_arrow: set[int], unreadable: dict[int, str]
) -> list[Row]:
    """`_row_values`, but the rows at `big` are left empty: never made Python objects."""
    if not big:
        return _row_values(picked, from_arrow, unreadable)
    small = [k for k in range(picked.num_rows) if k not in big]
    errors = {i: unreadable[k] for i, k in enumerate(small) if k in unreadable}
    values = _row_values(
        picked.take(pa.array(small, pa.int64())),
        {i for i, k in enumerate(small) if k in from_arrow},
        errors,
    )
    unreadable.update((small[i], error) for i, error in errors.items())
    rows: list[Row] = [{} for _ in range(picked.num_rows)]
    for k, row in zip(small, values, strict=True):
        rows[k] = row
    return rows


def _row_values(picked: pa.Table, from_arrow: set[int], unreadable: dict[int, str]) -> list[Row]:
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


def settled_profile(verdicts: Verdicts, config: Config = DEFAULT) -> Profile | None:
    """The profile of the rows `verdicts` settled that decode, measured from the view that
    settled them (what `profile_batch` measures of them from the batch, without reading the
    column again); None where the view cannot tell it, or tokens are counted (`profile_batch`
    does that). Worked out beside the verdicts, for `Verdicts.profile`."""
    if verdicts.view is None or config.tokenizer is not None:
        return None
    measures = verdicts.view.measures(verdicts.read)
    if measures is None:
        return None
    profile = Profile()
    profile.add(measures)
    return profile


def not_utf8(row: Row, fmt: Format, where: str) -> RowResult:
    """The result of a row whose text is not UTF-8 at `where` (the row, mended)."""
    conversation = row.get(fmt.column)
    count = len(conversation) if isinstance(conversation, list) else 0
    return rejected_row(MALFORMED_ROW, reject_message(where), count)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The per-row path makes hundreds of thousands of small objects and no reference cycles
    (refcounting frees them). Python's cyclic collector would scan all of them again and again
    while they live: pausing it for one batch cut the per-row path's time by about a third
    (docs/performance.md). Whatever cycle a batch does leave is
    collected once the collector runs again; the objects should be gone by then, or its first
    run scans them all once more."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Rejected(NamedTuple):
    """A rejected row: its position in the batch, its codes and its message."""

    position: int
    codes: list[str]
    message: str | None


class Replaced(NamedTuple):
    """Rows of a batch written anew: their positions in the batch, and the rows, in that order."""

    positions: npt.NDArray[np.int64]
    rows: pa.Table


def _relined(
    table: pa.Table, fmt: Format, config: Config, as_json: bool, verdicts: Verdicts
) -> tuple[Verdicts, list[str], list[int]]:
    """The lines of the rows `verdicts` repaired (`stale_lines`): the verdicts without the rows
    the per-row path takes back, the others' lines in order, and the rows taken back.

    The Arrow side settles these rows' stats, profile and typed values as for Parquet output;
    only their lines are written here, byte for byte what the per-row path alone would write.
    Where the view says where each repaired message came from (`repaired_origins`), a line is
    its line with the repair's edits made (`_edited`): no row becomes Python objects. The
    others are re-encoded by the per-row path, as `_fit_repaired` writes them (its typed row
    is not built: the Arrow side's repaired values fit the schema by construction); a row it
    does not repair as the Arrow side did goes back to it whole (none, unless the two
    disagree)."""
    positions = np.flatnonzero(verdicts.repaired)
    fixes = [(f.code, f.action, f.rows[positions]) for f in verdicts.repairs]
    lines: list[str | None] = [None] * len(positions)
    origins = verdicts.repaired_origins
    if origins is not None and verdicts.repaired_column is not None:
        # Edited only where this config repairs the row's codes as the verdicts did (verdicts
        # worked out for another config are the per-row path's to check).
        fits = np.ones(len(positions), dtype=bool)
        for code, _, mask in fixes:
            if not _repairs_in_arrow(config, code):
                fits &= ~mask
        raws = table.column(RAW_LINE).take(pa.array(positions)).to_pylist()
        lines = _edited(raws, fits, origins, verdicts.repaired_column, fmt.column)
    slow = [k for k, line in enumerate(lines) if line is None]
    agree = np.ones(len(positions), dtype=bool)
    if slow:
        unreadable: dict[int, str] = {}
        rows = _row_values(table.take(pa.array(positions[slow])), set(), unreadable)
        for j, (k, row) in enumerate(zip(slow, rows, strict=True)):
            result = (
                None if j in unreadable else clean_stored_row(row, fmt, config, as_json=as_json)
            )
            arrow = {code: action for code, action, mask in fixes if mask[k]}
            if result is None or result.status != "repaired" or result.actions != arrow:
                agree[k] = False
                continue
            assert result.row is not None
            lines[k] = jsontypes.dumps(_as_stored(result.row, fmt.column if as_json else None))
    written = [line for line in lines if line is not None]
    if agree.all():
        return verdicts, written, []
    demoted = positions[~agree]
    return _without(verdicts, demoted), written, demoted.tolist()


def _edited(
    raws: list[str], fits: Mask, origins: Origins, column: pa.Array, name: str
) -> list[str | None]:
    """Each repaired row's line with the Arrow side's edits made: its messages (`name`) those
    the repair kept, in order, each as it came in but for the text of those it rewrote (R4's
    merge), set as the per-row path's encoder sets it (`put`). Exactly what the per-row path
    writes, whose encoder writes an untouched message as it came (`formats/openai/codec.py`):
    where that is not sure the row is left to it (None): a message made anew (R2's answer),
    content that is a list of parts (a media part's keys are written in the encoder's order),
    a config whose repairs are not the verdicts' (`fits`)."""
    flat, sizes, parent = flattened(origins.messages)
    at = pc.struct_field(flat, "at").to_numpy(zero_copy_only=False).astype(np.int64)
    rewritten = pc.struct_field(flat, "rewritten").to_numpy(zero_copy_only=False)
    bounds = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    changed = np.flatnonzero(rewritten & (at >= 0))
    texts = pc.struct_field(column.flatten(), origins.text).take(pa.array(changed)).to_pylist()
    new_text = dict(zip(changed.tolist(), texts, strict=True))
    fits = fits & ~rows_with(at < 0, parent, len(raws))
    return [
        _edited_line(
            raw,
            name,
            at[bounds[k] : bounds[k + 1]].tolist(),
            int(bounds[k]),
            new_text,
            origins.text,
        )
        if fits[k]
        else None
        for k, raw in enumerate(raws)
    ]


def _edited_line(
    raw: str, name: str, sources: list[int], first: int, new_text: dict[int, str], text: str
) -> str | None:
    """One line of `_edited`: its messages (`name`) those at `sources` (positions in the row as
    it came in), the `text` of the one at `first + j` set to `new_text`'s where it has one.
    None where the line does not read as the Arrow side read it (no list of objects there, a
    position past its end), or a message's text is a list of parts."""
    row = jsontypes.loads(raw)
    items = row.get(name) if type(row) is dict else None
    if type(items) is not list:
        return None
    messages = []
    for j, source in enumerate(sources, first):
        item = items[source] if source < len(items) else None
        if type(item) is not dict or type(item.get(text)) is list:
            return None
        if j in new_text:
            item = dict(item)
            put(item, text, new_text[j])
        messages.append(item)
    row[name] = messages
    return jsontypes.dumps(row)


def _without(verdicts: Verdicts, rows: npt.NDArray[np.int64]) -> Verdicts:
    """`verdicts` with the repaired `rows` left to the per-row path."""
    repaired = verdicts.repaired.copy()
    repaired[rows] = False
    column = verdicts.repaired_column
    if column is not None:
        column = column.filter(pa.array(repaired[verdicts.repaired]))
    repairs = []
    for fix in verdicts.repairs:
        fixed = fix.rows & repaired
        if fixed.any():
            repairs.append(FastRepair(fix.code, fix.action, fixed, fix.occurrences))
    origins = verdicts.repaired_origins
    if origins is not None:
        origins = origins.filter(repaired[verdicts.repaired])
    return dataclasses.replace(
        verdicts,
        repaired=repaired,
        repairs=repairs,
        repaired_column=column,
        repaired_origins=origins,
    )


def _settle(
    table: pa.Table,
    fmt: Format,
    verdicts: Verdicts,
    stats: Stats,
    source: str,
    first_row: int,
    lines: list[str] | None = None,
) -> tuple[Replaced | None, list[Rejected]]:
    """Count the rows the fast path settled, as the per-row path would have; returns the rows it
    repaired (with `lines` for their lines, where given) and those it rejected."""
    column = fmt.column
    if isinstance(fmt, ShapedFormat):
        lengths = message_counts(table, fmt)
    else:
        lengths = fmt.message_counts(table)
    clean, trailing, repaired = verdicts.clean, verdicts.trailing, verdicts.repaired
    if verdicts.tool_counts is not None:
        # A row rejected while decoding has its tools unread, as on the per-row path.
        stats.add_tools(*verdicts.tool_counts.count(verdicts.read))
    stats.add_clean_rows(int(clean.sum()), int(lengths[clean].sum()))
    if trailing.any():
        messages = int(lengths[trailing].sum())
        stats.add_kept_rows(int(trailing.sum()), messages, messages)
        first = int(np.flatnonzero(trailing)[0])
        calls = int(verdicts.trailing_calls[trailing].sum())
        stats.add_code(
            TRAILING_TOOL_CALL, "kept", int(trailing.sum()), calls, source, first_row + first
        )
    rejected: list[Rejected] = []
    for reject in verdicts.rejects:
        at = np.flatnonzero(reject.rows).tolist()
        stats.add_rejected_rows(len(at), int(lengths[reject.rows].sum()))
        occurrences = int(reject.occurrences[reject.rows].sum())
        stats.add_code(reject.code, "rejected", len(at), occurrences, source, first_row + at[0])
        codes = [reject.code]
        rejected += (Rejected(i, codes, m) for i, m in zip(at, reject.messages, strict=True))
    if not repaired.any():
        return None, rejected
    fixed = verdicts.repaired_column
    assert fixed is not None
    positions = np.flatnonzero(repaired)
    rows = table.take(pa.array(positions))
    if isinstance(fmt, ShapedFormat):  # the candidate columns repaired, in one struct
        rows = with_parts(rows, fixed)
        written = int(message_counts(rows, fmt).sum())
    else:
        written = int(pc.sum(pc.list_value_length(fixed)).as_py() or 0)
        at = table.schema.get_field_index(column)
        rows = rows.set_column(at, table.schema.field(at), fixed)
    if lines is not None:
        at = table.schema.get_field_index(RAW_LINE)
        rows = rows.set_column(at, table.schema.field(at), pa.array(lines, rows.schema[at].type))
    stats.add_kept_rows(len(positions), int(lengths[repaired].sum()), written, repaired=True)
    for fix in verdicts.repairs:
        first = first_row + int(np.flatnonzero(fix.rows)[0])
        occurrences = int(fix.occurrences[fix.rows].sum())
        stats.add_code(fix.code, fix.action, int(fix.rows.sum()), occurrences, source, first)
        if fix.code == EMPTY_ASSISTANT_TURN:
            stats.empty_turns_dropped += occurrences
    return Replaced(positions, rows), rejected


def _prepared(batch: pa.RecordBatch | pa.Table, format: Format | str) -> tuple[pa.Table, Format]:
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


def _as_stored(row: Row, json_column: str | None) -> Row:
    """A repaired row as its batch stores it: the conversation as JSON text where the batch
    holds it so (`json_column`)."""
    if json_column is not None:
        row = {**row, json_column: json.dumps(row[json_column], ensure_ascii=False)}
    return row


def _fit_repaired(
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
        row = _as_stored(result.row, json_column)
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


def _assemble_kept(
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


def _assemble_rejects(
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
