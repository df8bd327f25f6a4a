"""What the fast path's tests share: its results held to the per-row path's, for any format."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import generate_rows

from transcript_clean.fastpath import clean_mask, fast_verdicts
from transcript_clean.formats.base import Format
from transcript_clean.pipeline import CleanedBatch, clean_batch, clean_row
from transcript_clean.policy import DEFAULT, STRICT, Config


def per_row_clean(row: dict[str, Any], fmt: Format) -> bool:
    """Whether the per-row path keeps `row` unchanged with no code."""
    result = clean_row(row, fmt, DEFAULT)
    return result.status == "unchanged" and not result.actions


def assert_fast_and_slow_agree(table: pa.Table, config: Config, fmt: Format) -> CleanedBatch:
    """`clean_batch` gives the same kept rows, rejects and stats with and without the fast path;
    returns the per-row path's result."""
    fast = clean_batch(table, config, format=fmt, source="s")
    slow = clean_batch(table, config, format=fmt, source="s", fast=False)
    assert fast.kept.to_pylist() == slow.kept.to_pylist()
    assert fast.rejects.to_pylist() == slow.rejects.to_pylist()
    assert fast.stats == slow.stats
    return slow


def assert_settled_in_arrow(
    table: pa.Table,
    fmt: Format,
    *,
    handled: list[bool],
    repaired: list[bool],
    lengths: list[int],
    words: dict[str, list[str]],
) -> None:
    """Under the default config, the fast path settles the rows of `handled` (the others go
    per-row), repairs those of `repaired` into rows of `lengths` messages and rejects the others
    with `words` per code; and both paths agree under the default and strict configs."""
    from transcript_clean.pipeline import batch_verdicts

    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    assert verdicts.handled.tolist() == handled
    assert verdicts.repaired.tolist() == repaired
    assert verdicts.repaired_column is not None
    assert [len(c) for c in verdicts.repaired_column.to_pylist()] == lengths
    assert {r.code: r.messages for r in verdicts.rejects} == words
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, fmt)


def assert_verdicts_equal_on_generated_rows(fmt: Format, seed: int, kinds: int) -> None:
    """On 3,000 generated rows with `kinds` kinds of planted defect or more, the fast path finds
    clean exactly the rows the per-row path does, and most rows are."""
    rows, planted = [], []
    for row, codes in generate_rows(3000, format=fmt.name, seed=seed):
        rows.append(row)
        planted.append(codes)
    assert len(set().union(*planted)) >= kinds
    table = pa.Table.from_pylist(rows)
    mask = clean_mask(fmt, table.column(fmt.column))
    assert mask is not None
    assert mask.tolist() == [per_row_clean(r, fmt) for r in table.to_pylist()]
    assert mask.sum() > 2000


def verdicts_reached(tables: st.SearchStrategy[pa.Table], fmt: Format) -> list[int]:
    """Over 60 tables drawn the same way each run: how many rows the fast path found clean,
    found pending at the end, and left to the per-row path."""
    seen = [0, 0, 0]

    @settings(max_examples=60, derandomize=True, database=None, deadline=None)
    @given(tables)
    def collect(table: pa.Table) -> None:
        verdicts = fast_verdicts(fmt, table.column(fmt.column), keep_trailing=True)
        assert verdicts is not None
        seen[0] += int(verdicts.clean.sum())
        seen[1] += int(verdicts.trailing.sum())
        seen[2] += int((~verdicts.handled).sum())

    collect()
    return seen
