"""The rows the fast path settled, counted as the per-row path would have (`settle`), and
their profile measured from the view that settled them (`settled_profile`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.fastpath import Verdicts
from transcript_clean.formats.base import Format
from transcript_clean.pipeline.assemble import Rejected, Replaced
from transcript_clean.policy import DEFAULT, Config
from transcript_clean.profile import Profile
from transcript_clean.rules import EMPTY_ASSISTANT_TURN, TRAILING_TOOL_CALL
from transcript_clean.shapes import ShapedFormat
from transcript_clean.shapes.arrow import message_counts, with_parts
from transcript_clean.sources import RAW_LINE
from transcript_clean.stats import Stats


def settle(
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
    elif verdicts.messages is not None:  # counted from the view that settled them
        lengths = verdicts.messages
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
        for code, counts in reject.present.items():
            present = int(counts[reject.rows].sum())
            stats.add_code(code, "present", len(at), present, source, first_row + at[0])
        codes = sorted([reject.code, *reject.present])
        rejected += (Rejected(i, codes, m) for i, m in zip(at, reject.messages, strict=True))
    if not repaired.any():
        return None, rejected
    fixed = verdicts.repaired_column
    assert fixed is not None
    positions = np.flatnonzero(repaired)
    if isinstance(fmt, ShapedFormat):  # the candidate columns repaired, in one struct
        rows = with_parts(table.take(pa.array(positions)), fixed)
        written = int(message_counts(rows, fmt).sum())
    else:
        # The other columns taken; the conversation column is the one written anew (taking
        # it too cost more than the rest of the row, for nothing).
        at = table.schema.get_field_index(column)
        others = table.remove_column(at)
        if others.num_columns:
            rows = others.take(pa.array(positions)).add_column(at, table.schema.field(at), fixed)
        else:  # a table of no column has no rows to take
            rows = pa.Table.from_arrays([fixed], schema=table.schema)
        if pa.types.is_list(fixed.type) or pa.types.is_large_list(fixed.type):
            written = int(pc.sum(pc.list_value_length(fixed)).as_py() or 0)
        else:  # one text (hh's transcripts): counted as the per-row path counts what it wrote
            written = int(fmt.message_counts(rows).sum())
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


def settled_profile(verdicts: Verdicts, config: Config = DEFAULT) -> Profile | None:
    """The profile of the rows `verdicts` settled that decode, measured from the view that
    settled them (what `profile_batch` measures of them from the batch, without reading the
    column again); None where the view cannot tell it, or tokens are counted (`profile_batch`
    does that). Worked out beside the verdicts, for `Verdicts.profile`."""
    if verdicts.view is None or config.tokenizer is not None or not verdicts.read.any():
        return None  # (no row settled: nothing to measure, not an empty measure)
    measures = verdicts.view.measures(verdicts.read)
    if measures is None:
        return None
    profile = Profile()
    profile.add(measures)
    return profile
