"""The columnar helpers held to what they stand for: `holds_text` to the regular expression it
spares (`NOT_SPACE`), whatever the text, its nulls, its slice and its string type; and
`inserted_lists` to `list.insert`; `joined_lists` to `+`; `list_sizes` and `validity` to
`len` and `is not None`."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_clean.columnar.arrays import (
    NOT_SPACE,
    as_mask,
    holds_text,
    joined_lists,
    list_sizes,
    text_lengths,
    validity,
    with_nulls,
)
from transcript_clean.columnar.edits import inserted_lists

# Every white-space character `str.isspace()` knows, with look-alikes that are not (a zero-width
# space, a byte-order mark, the first bytes' other characters: U+00E9, U+1000, U+20AC, U+3042).
_SPACES = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
_CHARS = st.sampled_from([*_SPACES, "\u200b", "\ufeff", "\u00e9", "\u1000", "\u20ac", "\u3042"])
_TEXTS = st.one_of(
    st.none(),
    st.text(_CHARS, max_size=4),
    st.text(max_size=6),
    st.builds(lambda a, b: a + b, st.text(_CHARS, max_size=3), st.text(max_size=3)),
)


def _regex(text: pa.Array) -> np.ndarray:
    return as_mask(pc.match_substring_regex(text, NOT_SPACE), fill=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TEXTS, st.booleans()), max_size=20), st.integers(0, 11), st.booleans())
def test_with_nulls_is_if_else_without_a_copy(
    drawn: list[tuple[str | None, bool]], cut: int, large: bool
) -> None:
    """A text array given nulls by a new bitmap over its own buffers holds what `if_else` gives
    (a slice too: the bitmap is read from the slice's offset), and its lengths and blank tests,
    which read the buffers, agree."""
    texts = [t for t, _ in drawn]
    text = pa.array(texts, pa.large_string() if large else pa.string()).slice(cut)
    keep = np.array([k for _, k in drawn][cut:], dtype=bool)
    wanted = pc.if_else(pa.array(keep, pa.bool_()), text, pa.nulls(len(text), text.type))
    got = with_nulls(text, keep)
    got.validate(full=True)
    assert got.to_pylist() == wanted.to_pylist()
    assert got.null_count == wanted.null_count
    assert text_lengths(got).tolist() == text_lengths(wanted).tolist()
    assert holds_text(got).tolist() == holds_text(wanted).tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.booleans()), max_size=40),
    st.integers(0, 17),
    st.integers(0, 40),
    st.booleans(),
    st.booleans(),
)
def test_as_mask_unpacks_what_to_numpy_gives(
    values: list[bool | None], cut: int, size: int, fill: bool, chunked: bool
) -> None:
    """A boolean array's bits read from its buffers are `fill_null` then `to_numpy`'s, for a
    slice at any bit offset, with or without nulls, chunked or not."""
    array = pa.array(values, pa.bool_()).slice(cut, size)
    data: pa.Array | pa.ChunkedArray = pa.chunked_array([array, array]) if chunked else array
    wanted = pc.fill_null(data, fill).to_numpy(zero_copy_only=False).astype(bool)
    got = as_mask(data, fill=fill)
    assert got.dtype == bool
    assert got.tolist() == wanted.tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=4)), max_size=20),
    st.integers(0, 11),
    st.integers(0, 3),
    st.booleans(),
)
def test_list_sizes_and_validity(
    rows: list[list[int] | None], cut: int, hidden: int, large: bool
) -> None:
    """Each row's items and whether it is valid, read from the offsets and the bitmap: of a
    slice too, and where a null row's offsets step over `hidden` items (which Arrow allows)."""
    type_ = pa.large_list(pa.int64()) if large else pa.list_(pa.int64())
    offsets, values = [0], []
    for row in rows:
        values += row if row is not None else [0] * hidden
        offsets.append(len(values))
    mask = pa.array([row is None for row in rows], pa.bool_())
    kind = pa.LargeListArray if large else pa.ListArray
    column = kind.from_arrays(pa.array(offsets), pa.array(values, pa.int64()), type_, mask=mask)
    column = column.slice(cut)
    kept = rows[cut:]
    assert list_sizes(column).tolist() == [0 if row is None else len(row) for row in kept]
    assert validity(column).tolist() == [row is not None for row in kept]


@settings(max_examples=400, deadline=None)
@given(st.lists(_TEXTS, max_size=12), st.integers(0, 3), st.booleans())
def test_holds_text_is_the_regular_expressions_answer(
    texts: list[str | None], cut: int, large: bool
) -> None:
    text = pa.array(texts, pa.large_string() if large else pa.string()).slice(cut)
    assert holds_text(text).tolist() == _regex(text).tolist()
    assert holds_text(text).tolist() == [t is not None and bool(t.strip()) for t in texts[cut:]]


@pytest.mark.parametrize(
    "text",
    [
        pa.array([], pa.string()),
        pa.nulls(3, pa.string()),
        pa.chunked_array([["a", " "], [None, "\u3000x"]]),
    ],
    ids=["empty", "nulls", "chunked"],
)
def test_holds_text_reads_any_column_the_regular_expression_reads(text: pa.Array) -> None:
    assert holds_text(text).tolist() == _regex(text).tolist()


def test_fields_agree_over_a_field_null_in_every_row() -> None:
    """A field Arrow typed `null` (no row gave it a value: a JSON Lines `weight` always null)
    agrees, null with null, where a comparison would have no kernel."""
    from transcript_clean.columnar.arrays import fields_agree

    first = pa.array(
        [{"value": "a", "weight": None, "n": 1}, {"value": "b", "weight": None, "n": 1}]
    )
    second = pa.array(
        [{"value": "c", "weight": None, "n": 1}, {"value": "d", "weight": None, "n": 2}]
    )
    assert first.type.field("weight").type == pa.null()
    assert fields_agree(first, second, {"value"}).tolist() == [True, False]


def test_sole_is_the_one_flagged_element_of_a_group_of_one() -> None:
    from transcript_clean.columnar.arrays import sole

    parent = np.array([0, 1, 1, 2, 4], dtype=np.int64)  # group 3 has no element
    flags = np.array([True, True, True, False, True])
    assert sole(flags, parent, 5).tolist() == [0, -1, -1, -1, 4]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 9), max_size=4), min_size=1, max_size=5),
    st.data(),
    st.booleans(),
)
def test_inserted_lists_puts_each_value_where_list_insert_would(
    lists: list[list[int]], data: st.DataObject, large: bool
) -> None:
    """`inserted_lists` (R5's new results among a row's items or a message's blocks) is
    `list.insert` of each value in turn, after those already put before the same element."""
    inserts = data.draw(
        st.lists(st.tuples(st.integers(0, len(lists) - 1), st.integers(0, 5)), max_size=6)
    )
    inserts.sort(key=lambda owner_before: owner_before[0])
    kind = pa.large_list(pa.int64()) if large else pa.list_(pa.int64())
    column = pa.array(lists, kind)
    values = pa.array([100 + k for k in range(len(inserts))], pa.int64())
    owner = np.array([o for o, _ in inserts], dtype=np.int64)
    before = np.array([b for _, b in inserts], dtype=np.int64)
    got = inserted_lists(column, values, owner, before)
    expected = [list(items) for items in lists]
    shift = [[0] * (len(items) + 1) for items in lists]  # values put before each element so far
    for k, (o, b) in enumerate(inserts):
        b = min(b, len(lists[o]))
        expected[o].insert(b + sum(shift[o][: b + 1]), 100 + k)
        shift[o][b] += 1
    assert got.type == kind
    assert got.to_pylist() == expected


_LISTS = st.lists(st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3)), max_size=6)


@settings(max_examples=200, deadline=None)
@given(_LISTS, _LISTS, st.integers(0, 2), st.integers(0, 2))
def test_joined_lists_is_each_rows_items_then_the_others(
    first: list[list[int] | None], second: list[list[int] | None], cut: int, cut2: int
) -> None:
    rows = min(len(first) - cut, len(second) - cut2)
    if rows < 0:
        return
    a = pa.array(first, pa.list_(pa.int64())).slice(cut, rows)
    b = pa.array(second, pa.large_list(pa.int64())).slice(cut2, rows)
    joined = joined_lists(a, b)
    assert joined is not None
    expected = [(x or []) + (y or []) for x, y in zip(first[cut:], second[cut2:], strict=False)][
        :rows
    ]
    assert joined.to_pylist() == expected
    assert joined.type == a.type


def test_joined_lists_reads_two_struct_types_as_one_with_the_fields_of_both() -> None:
    a = pa.array([[{"role": "user", "content": "q"}]])
    b = pa.array([[{"role": "assistant", "content": "x", "weight": 1.0}]])
    joined = joined_lists(a, b)
    assert joined is not None
    assert joined.to_pylist() == [
        [
            {"role": "user", "content": "q", "weight": None},
            {"role": "assistant", "content": "x", "weight": 1.0},
        ]
    ]
    # Types that do not unify: none.
    c = pa.array([[{"role": "assistant", "content": [{"type": "text"}]}]])
    assert joined_lists(a, c) is None
