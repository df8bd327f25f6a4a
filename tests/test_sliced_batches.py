"""A batch may be a slice of a larger table (a library caller's, `explain --row`'s): its
arrays' offsets do not start at 0 and their children hold rows outside it. Every format's
fast path reads it as the per-row path does, and never fails on it."""

from __future__ import annotations

import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree
from synthetic import FORMATS, arrow_schema, every_rates, generate_rows

from transcript_clean.formats import get_format
from transcript_clean.policy import DEFAULT, STRICT


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_sliced_batch_is_read_as_the_per_row_path_reads_it(fmt: str) -> None:
    rows = [row for row, _ in generate_rows(120, fmt, seed=13, rates=every_rates(fmt))]
    table = pa.Table.from_pylist(rows, schema=arrow_schema(fmt))
    for sliced in (table.slice(7, 60), table.slice(119, 1)):
        for config in (DEFAULT, STRICT):
            assert_fast_and_slow_agree(sliced, config, get_format(fmt))
