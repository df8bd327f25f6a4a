"""Cleaning one record batch (`clean_batch`, `clean_batch_parts`): the fast path's verdicts
settled, the other rows through the per-row path with the cyclic collector paused, the batch's
profile, and the result (`CleanedBatch`)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from transcript_clean.batch_profile import profile_batch
from transcript_clean.columnar.arrays import Mask
from transcript_clean.convert import ConvertingFormat
from transcript_clean.fastpath import Verdicts
from transcript_clean.formats.base import Format, Row
from transcript_clean.model import Message
from transcript_clean.pipeline.assemble import (
    Rejected,
    Replaced,
    assemble_kept,
    assemble_rejects,
    fit_repaired,
    written_schema,
)
from transcript_clean.pipeline.lines import relined
from transcript_clean.pipeline.settle import settle, settled_profile
from transcript_clean.pipeline.stored import (
    clean_stored_row,
    line_errors,
    not_utf8,
    oversized,
    prepared,
    stored_as_json,
    values_but,
)
from transcript_clean.pipeline.verdicts import batch_verdicts
from transcript_clean.policy import DEFAULT, Config, for_format
from transcript_clean.profile import Profile
from transcript_clean.rows import RowResult, rejected_row
from transcript_clean.rules import MALFORMED_ROW
from transcript_clean.shapes import ShapedFormat
from transcript_clean.sources import RAW_LINE
from transcript_clean.stats import Stats
from transcript_clean.utf8 import invalid_text, mend


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
        return assemble_kept(table, self.kept, replaced)


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
    table, fmt = prepared(batch, format)
    config = for_format(config, fmt)
    as_json = stored_as_json(table.schema, fmt)
    # Every kept row written anew: every row takes the per-row path then (a converting format
    # has no Arrow side; `--arguments-as` needs `--chat-template`, whose rules are per-row).
    anew = written_schema(fmt, config, table.schema)
    stats = Stats()
    if verdicts is None and fast:
        verdicts = batch_verdicts(table, config, format=fmt, codes=on_row is None)
        if verdicts is not None:  # the settled rows measured from their view, as engines do
            verdicts.profile = settled_profile(verdicts, config)
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
                verdicts, lines, demoted = relined(table, fmt, config, as_json, verdicts)
            slow = np.flatnonzero(~verdicts.handled)
            settled, rejected = settle(table, fmt, verdicts, stats, source, first_row, lines)
        kept, rejects, fitted = _clean_rows(
            table, slow, rejected, fmt, config, as_json, stats, source, first_row, on_row,
            decoded, anew,
        )  # fmt: skip
    read = None if verdicts is None or not fast else verdicts.read
    if measured is not None:
        # The settled rows were measured with the verdicts: only the others are measured here
        # (not those `relined` handed back to the per-row path, measured with the others).
        stats.profile.merge(measured[0])
        for i in demoted:
            del decoded[i]
        read = np.zeros(table.num_rows, dtype=bool)
    # Rows of a dataset type written in another format (`--to`) are profiled as they came in.
    measured_as = fmt.source if isinstance(fmt, ConvertingFormat) else fmt
    if isinstance(measured_as, ShapedFormat):
        # The per-row path's transcript of a dataset type's row is its last candidate's after
        # the prompt's repairs: every row is profiled from the batch as it came in instead
        # (but those measured with the verdicts).
        read = np.ones(table.num_rows, dtype=bool) if measured is None else ~measured[1]
        read[list(line_errors(table))] = False
        # A row the cleaner could not read (`malformed_row`, `unknown_role`: no prompt, say)
        # has nothing to measure, though its first candidate alone may read.
        read[[i for i, messages in decoded.items() if messages is None]] = False
        decoded = {}
    stats.profile.merge(
        profile_batch(table, measured_as, read, decoded, tokenizer=config.tokenizer)
    )
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
    rows = values_but(picked, big, set(bad) | set(unreadable), unreadable)
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
        fitted = fit_repaired(kept_results, anew, None, lines)
    else:
        rewritten = {
            i: r
            for i, r in zip(positions, results, strict=True)
            if r.row is not None and r.status != "rejected"
        }
        fitted = fit_repaired(rewritten, table.schema, fmt.column if as_json else None)

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
    return kept, assemble_rejects(table, rejected, source, first_row), fitted


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
