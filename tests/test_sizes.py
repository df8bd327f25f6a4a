"""Bytes per row (`transcript_clean.sizes`): what batches and row groups are cut by."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_clean.sizes import cut_by_bytes, first_rows_within, row_sizes, total_size

TABLE = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int64()),
        "messages": [
            [{"role": "user", "content": "hello"}],
            None,
            [{"role": "a", "content": None}, {"role": "bb", "content": "x" * 100}],
        ],
        "tags": pa.array([["a"], [], None], pa.large_list(pa.large_string())),
    }
)


def test_row_sizes_count_values_and_offsets() -> None:
    # id 8; messages: list offset 4 + per message role and content (4-byte offsets each);
    # tags: large list offset 8 + per tag 8-byte offset and its bytes
    assert row_sizes(TABLE).tolist() == [
        8 + 4 + (4 + 4) + (4 + 5) + 8 + (8 + 1),
        8 + 4 + 8,
        8 + 4 + (4 + 1) + (4 + 0) + (4 + 2) + (4 + 100) + 8,
    ]


def test_row_sizes_of_other_types() -> None:
    words = pa.array(["aa", None, "aa", "bbbb"]).dictionary_encode()
    table = pa.table(
        {
            "word": words,  # int32 index and the value it points to
            "pair": pa.array([[1, 2], [3, 4], None, [5, 6]], pa.list_(pa.int16(), 2)),
            "map": pa.array([[("k", 1)], [], None, []], pa.map_(pa.string(), pa.int8())),
            "nothing": pa.nulls(4),
        }
    )
    assert row_sizes(table).tolist() == [
        (4 + 6) + 4 + (4 + (4 + 1) + 1),
        (4 + 6) + 4 + 4,  # a null index counts as pointing to the first value
        (4 + 6) + 4 + 4,
        (4 + 8) + 4 + 4,
    ]
    assert row_sizes(table.slice(3)).tolist() == [4 + 8 + 4 + 4]
    for part in (table, table.slice(1), table.slice(3)):
        assert total_size(part) == int(row_sizes(part).sum())


@pytest.mark.parametrize("start", [0, 1, 2])
def test_a_rows_size_does_not_depend_on_its_batch(start: int) -> None:
    whole = row_sizes(TABLE).tolist()
    assert row_sizes(TABLE.slice(start)).tolist() == whole[start:]
    chunked = pa.concat_tables([TABLE.slice(0, 1), TABLE.slice(1)])
    assert row_sizes(chunked).tolist() == whole


def test_first_rows_within_takes_at_least_one_row() -> None:
    sizes = row_sizes(TABLE)
    assert first_rows_within(sizes, 10**9, 10) == 3
    assert first_rows_within(sizes, 10**9, 2) == 2
    assert first_rows_within(sizes, int(sizes[0] + sizes[1]), 10) == 2
    assert first_rows_within(sizes, 1, 10) == 1


@pytest.mark.parametrize(("rows", "nbytes"), [(1, 10**9), (2, 10**9), (10, 60), (10, 1)])
def test_cut_by_bytes_keeps_every_row_in_order(rows: int, nbytes: int) -> None:
    pieces = list(cut_by_bytes(TABLE.to_batches(), rows, nbytes))
    assert pa.Table.from_batches(pieces).equals(TABLE)
    for piece in pieces:
        assert piece.num_rows <= rows
        assert piece.num_rows == 1 or row_sizes(piece).sum() <= nbytes


@pytest.mark.parametrize("rows", [1, 2, 10])
def test_cut_by_rows_alone_cuts_where_bytes_would_not(rows: int) -> None:
    by_rows = list(cut_by_bytes(TABLE.to_batches(), rows, None))
    by_bytes = list(cut_by_bytes(TABLE.to_batches(), rows, 10**9))
    assert [p.num_rows for p in by_rows] == [p.num_rows for p in by_bytes]
    assert pa.Table.from_batches(by_rows).equals(TABLE)


_nested = st.recursive(
    st.one_of(st.none(), st.text(max_size=4), st.integers(0, 9)),
    lambda inner: st.lists(inner, max_size=3) | st.fixed_dictionaries({"a": inner, "b": inner}),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_nested, min_size=1, max_size=8), st.integers(0, 4), st.integers(0, 4))
def test_total_size_is_the_sum_of_the_rows_sizes(values: list[Any], start: int, cut: int) -> None:
    try:
        column = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types Arrow cannot hold in one column
        return
    words = pa.array([str(i % 2) for i in range(len(values))]).dictionary_encode()
    table = pa.table({"v": column, "d": words})
    chunked = pa.concat_tables([table.slice(0, cut), table.slice(cut)])
    for part in (table, table.slice(start), chunked):
        assert total_size(part) == int(row_sizes(part).sum())


def test_total_size_of_every_type_row_sizes_reads() -> None:
    for part in (TABLE, TABLE.slice(1), TABLE.slice(2, 1), TABLE.slice(3)):
        assert total_size(part) == int(row_sizes(part).sum())
