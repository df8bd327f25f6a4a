"""Text that is not UTF-8 in Arrow data (issue 14, item 3): found, located and mended."""

from __future__ import annotations

import pyarrow as pa
import pytest

from transcript_clean.utf8 import MENDED, invalid_text, mend, python_rows, reject_message


def text(*values: bytes | None) -> pa.Array:
    """A string array holding `values` as they are, UTF-8 or not (as a Parquet file may)."""
    return pa.array(values, pa.binary()).view(pa.string())


def test_a_table_of_valid_text_has_none() -> None:
    assert invalid_text(pa.table({"s": ["a", None, "é"], "n": [1, 2, 3]})) == {}


def test_each_row_is_located_at_its_first_bad_byte() -> None:
    messages = pa.ListArray.from_arrays(
        [0, 2, 3, 4],
        pa.StructArray.from_arrays(
            [text(b"user", b"assistant", b"user", b"user"), text(b"hi", b"ok\xff", b"fine", None)],
            names=["role", "content"],
        ),
    )
    table = pa.table({"messages": messages, "id": text(b"a", b"b", b"\xed\xa0\x80")})
    assert invalid_text(table) == {
        0: "messages[1].content: not UTF-8 at byte 2",
        2: "id: not UTF-8 at byte 0 (a lone surrogate)",
    }
    assert invalid_text(table.slice(1)) == {1: "id: not UTF-8 at byte 0 (a lone surrogate)"}


@pytest.mark.parametrize(
    "array",
    [
        text(b"ok", b"\xc0\x80"),  # an overlong form
        text(b"ok", b"\xf4\x90\x80\x80"),  # past U+10FFFF
        text(b"ok", b"\xe2\x82"),  # cut short
        text(b"ok", b"x\xff").dictionary_encode(),
        pa.array([b"ok", b"x\xff"], pa.large_binary()).view(pa.large_string()),
        pa.MapArray.from_arrays(
            pa.array([0, 1, 2], pa.int32()), text(b"k", b"k"), text(b"v", b"\xff")
        ),
    ],
)
def test_every_kind_of_bad_text_and_column_is_found(array: pa.Array) -> None:
    table = pa.table({"c": array})
    assert list(invalid_text(table)) == [1]
    mended = mend(table, [1])
    mended.validate(full=True)
    assert mended.schema == table.schema
    assert python_rows(mended.slice(0, 1)) == table.slice(0, 1).to_pylist()
    assert "\ufffd" in str(python_rows(mended)[1]["c"])


def test_python_rows_mends_instead_of_raising() -> None:
    table = pa.table({"s": text(b"ok", b"a\xffb")})
    with pytest.raises(UnicodeDecodeError):
        table.to_pylist()
    assert python_rows(table) == [{"s": "ok"}, {"s": "a\ufffdb"}]
    assert python_rows(table.to_batches()[0]) == [{"s": "ok"}, {"s": "a\ufffdb"}]
    assert reject_message("s: not UTF-8 at byte 1") == f"s: not UTF-8 at byte 1; {MENDED}"


def test_ascii_text_is_valid_and_only_the_bytes_a_slice_uses_are_looked_at() -> None:
    bad = b"caf\xe9"  # Latin-1, not UTF-8
    raw = pa.array([b"plain", bad, "é".encode(), b"ok"], pa.binary()).cast(pa.string(), safe=False)
    table = pa.table({"text": raw})
    assert invalid_text(table) == {1: "text: not UTF-8 at byte 3"}
    assert invalid_text(table.slice(2)) == {}  # UTF-8 past ASCII, and the bad value left out
    assert invalid_text(table.slice(0, 1)) == {}  # ASCII alone
    assert invalid_text(pa.table({"text": pa.array(["only", "ascii", None])})) == {}


def test_a_batch_whose_json_typed_lists_are_all_null_is_read() -> None:
    """A JSON source types a field whose values differ in type as `pa.json_()`; a batch whose
    list of such structs is null in every row (no row declares tools) once made Arrow build an
    empty array of the extension type, which it cannot (issue 27, findings 1, 8 and 16)."""
    storage = pa.list_(pa.struct([("name", pa.string()), ("parameters", pa.string())]))
    typed = pa.list_(pa.struct([("name", pa.string()), ("parameters", pa.json_())]))
    table = pa.table(
        {
            "tools": pa.array([None, None], storage).cast(typed),
            "id": text(b"a", b"b\xff"),
        }
    )
    assert invalid_text(table) == {1: "id: not UTF-8 at byte 1"}
    assert python_rows(table) == [{"tools": None, "id": "a"}, {"tools": None, "id": "b\ufffd"}]
