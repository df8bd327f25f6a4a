"""The profile's Arrow helpers (`transcript_clean.fastpath.measures`) against plain Python."""

from __future__ import annotations

import pyarrow as pa
import pytest

from transcript_clean.columnar.arrays import whole
from transcript_clean.fastpath.measures import column_array, leading_bytes


@pytest.mark.parametrize("type_", [pa.string(), pa.large_string()])
def test_leading_bytes_are_each_texts_first_byte(type_: pa.DataType) -> None:
    texts = ["assistant", "", "tool", "é", "user", ""]
    array = pa.array(["x", *texts], type_).slice(1)  # an offset into the buffers
    expected = [t.encode()[0] if t else 0 for t in texts]
    assert leading_bytes(array).tolist() == expected


def test_leading_bytes_of_no_text() -> None:
    assert leading_bytes(pa.array([], pa.string())).tolist() == []
    assert leading_bytes(pa.array(["", ""], pa.string())).tolist() == [0, 0]


def test_column_array_keeps_a_single_chunk_and_joins_several() -> None:
    one = pa.table({"c": pa.chunked_array([pa.array(["a", "b"])])})
    data = column_array(one, "c").buffers()[2]
    assert data is not None
    assert data.address == one.column("c").chunk(0).buffers()[2].address  # not copied
    two = pa.table({"c": pa.chunked_array([pa.array(["a"]), pa.array(["b", "c"])])})
    assert column_array(two, "c").to_pylist() == ["a", "b", "c"]


def test_whole_takes_an_array_or_one_chunk_as_it_is() -> None:
    array = pa.array(["a", "b", "c"]).slice(1)  # an offset into the buffers, kept
    assert whole(array) is array
    chunk = whole(pa.chunked_array([array]))
    assert chunk.offset == 1 and chunk.buffers()[2].address == array.buffers()[2].address
    joined = whole(pa.chunked_array([array, pa.array(["d"])]))
    assert joined.to_pylist() == ["b", "c", "d"]
