"""Tags counted over a string column (`columnar/tags.py`) held to `count_substring`."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from transcript_clean.columnar.tags import tag_counts

TAGS = ("<tool_call>", "<think>", "<tool_response>")
_pieces = st.sampled_from(
    [
        "",
        "a",
        "é",
        "<",
        "<tool_",
        "call>",
        "<think>",
        "<tool_call>",
        "</think>",
        "<tool_response>",
        "😀<",
    ]
)
_texts = st.one_of(st.none(), st.lists(_pieces, max_size=5).map("".join), st.text(max_size=4))


def _counted(texts: pa.Array, tag: str) -> list[int]:
    return pc.fill_null(pc.count_substring(texts, tag), 0).to_pylist()


@given(st.lists(_texts, max_size=10), st.booleans(), st.integers(0, 3), st.integers(0, 3))
def test_tags_are_counted_as_count_substring_counts_them(
    values: list[str | None], large: bool, start: int, end: int
) -> None:
    texts = pa.array(values, pa.large_string() if large else pa.string())
    texts = texts.slice(min(start, len(texts)), max(len(texts) - start - end, 0))
    counts = tag_counts(texts, *TAGS)
    assert [c.tolist() for c in counts] == [_counted(texts, t) for t in TAGS]


def test_a_tag_spanning_two_texts_is_in_neither() -> None:
    assert tag_counts(pa.array(["x<tool_", "call>", "<think>"]), "<tool_call>", "<think>")[
        0
    ].tolist() == [0, 0, 0]


def test_a_tag_whose_places_may_overlap_is_refused() -> None:
    with pytest.raises(ValueError, match="overlap"):
        tag_counts(pa.array(["aaa"]), "aa")
