"""JSON Lines shards: lines as they came in, typed rows encoded, rejects with their four fields,
atomic writes, compression and the line count the accounting reads back."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from transcript_clean.errors import OutputError
from transcript_clean.jsonl_sink import (
    JsonlShard,
    count_lines,
    data_lines,
    is_empty,
    reject_lines,
    typed_objects,
)
from transcript_clean.pipeline import REJECT_FIELDS, reject_schema
from transcript_clean.sinks import OutputFormat
from transcript_clean.sources.base import JSON_COLUMNS_KEY, LINE_ERROR, RAW_LINE

MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_call_id", pa.string()),
    ]
)
LINES = [
    '{"messages": [{"role": "user", "content": "hi"}], "id": 1}',
    '{"id":2,"messages":[{"role":"tool","tool_call_id":"c1","content":"18 C"}]}   ',
    '{"messages": [], "id": 3, "extra": 1.50}',
]


def jsonl_table(lines: list[str | None], errors: list[str | None] | None = None) -> pa.Table:
    """A table as a JSON Lines source reads one (the contract's columns): typed values, then
    `_raw_line` and `_line_error`."""
    errors = errors or [None] * len(lines)
    rows = [
        json.loads(x) if x is not None and e is None else None
        for x, e in zip(lines, errors, strict=True)
    ]
    return pa.table(
        {
            "messages": pa.array(
                [
                    r["messages"] if r and e is None else None
                    for r, e in zip(rows, errors, strict=True)
                ],
                pa.list_(MESSAGE),
            ),
            "id": pa.array(
                [r["id"] if r and e is None else None for r, e in zip(rows, errors, strict=True)]
            ),
            RAW_LINE: pa.array(lines, pa.string()),
            LINE_ERROR: pa.array(errors, pa.string()),
        }
    )


def with_reject_fields(table: pa.Table, codes: list[list[str]], first_row: int = 0) -> pa.Table:
    values = [
        codes,
        ["why"] * len(codes),
        ["in.jsonl"] * len(codes),
        list(range(first_row, first_row + len(codes))),
    ]
    for field, column in zip(REJECT_FIELDS, values, strict=True):
        table = table.append_column(field, pa.array(column, field.type))
    assert table.schema.equals(reject_schema(table.select(table.schema.names[:-4]).schema))
    return table


def test_rows_with_their_lines_are_written_byte_for_byte() -> None:
    assert bytes(data_lines(jsonl_table(LINES))) == "".join(f"{x}\n" for x in LINES).encode()


def test_a_row_without_its_line_is_encoded_and_hidden_columns_never_written() -> None:
    table = jsonl_table(LINES)
    raw = table.column(RAW_LINE).to_pylist()
    raw[1] = None  # a repaired row the reader could not re-encode, say
    table = table.set_column(table.schema.get_field_index(RAW_LINE), RAW_LINE, pa.array(raw))
    lines = bytes(data_lines(table)).decode().splitlines()
    assert lines[0] == LINES[0] and lines[2] == LINES[2]
    assert json.loads(lines[1]) == {
        "messages": [{"role": "tool", "content": "18 C", "tool_call_id": "c1"}],
        "id": 2,
    }
    assert RAW_LINE not in lines[1] and LINE_ERROR not in lines[1]


def test_typed_rows_keep_the_schema_order_and_write_nulls() -> None:
    table = pa.table(
        {
            "messages": pa.array(
                [[{"role": "user", "content": None, "tool_call_id": None}]], pa.list_(MESSAGE)
            ),
            "tools": pa.array(['[{"name": "f"}]'], pa.json_()),
            "meta": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
            "blob": pa.array([b"\x00\x01"], pa.binary()),
            "score": pa.array([None], pa.float64()),
        }
    )
    [line] = bytes(data_lines(table)).decode().splitlines()
    assert line == (
        '{"messages":[{"role":"user","content":null,"tool_call_id":null}],'
        '"tools":[{"name":"f"}],"meta":{"k":1},"blob":"AAE=","score":null}'
    )


def test_a_column_of_json_text_is_written_as_its_json() -> None:
    schema = pa.schema([("tools", pa.string())], metadata={JSON_COLUMNS_KEY: b"tools"})
    table = pa.table({"tools": ['{"a": [1, 2]}', "not json", None]}, schema=schema)
    assert [row["tools"] for row in typed_objects(table)] == [{"a": [1, 2]}, "not json", None]


def test_reject_lines_carry_the_row_and_the_four_fields() -> None:
    lines: list[str | None] = [LINES[0], LINES[1], "{not json", LINES[2]]
    errors = [None, None, "line 3 is not JSON: ...", None]
    table = jsonl_table(lines, errors)
    raw = table.column(RAW_LINE).to_pylist()
    raw[3] = None  # no line: its typed values
    table = table.set_column(table.schema.get_field_index(RAW_LINE), RAW_LINE, pa.array(raw))
    codes = [["orphan_tool_result"], ["unanswered_tool_call"], ["malformed_row"], ["x"]]
    out = reject_lines(with_reject_fields(table, codes, first_row=7)).decode().splitlines()
    fields = {"_reject_message": "why", "_source": "in.jsonl"}
    # the row's own bytes, then the fields: the trailing white space goes
    assert out[0].startswith(LINES[0][:-1] + ',"_reject_codes"')
    assert out[1].startswith(LINES[1].rstrip()[:-1] + ',"_reject_codes"')
    assert json.loads(out[0]) == {
        **json.loads(LINES[0]), "_reject_codes": codes[0], **fields, "_source_row": 7
    }  # fmt: skip
    assert json.loads(out[2]) == {
        RAW_LINE: "{not json", "_reject_codes": ["malformed_row"], **fields, "_source_row": 9
    }  # fmt: skip
    assert json.loads(out[3]) == {
        "messages": [], "id": 3, "_reject_codes": ["x"], **fields, "_source_row": 10
    }  # fmt: skip


def test_a_reject_of_an_empty_object_or_with_a_field_of_ours() -> None:
    table = pa.table({"id": pa.array([None, None], pa.int64())})
    table = table.append_column(RAW_LINE, pa.array(["{}", '{"_source": "mine", "id": 1}']))
    out = reject_lines(with_reject_fields(table, [["a"], ["b"]])).decode().splitlines()
    assert json.loads(out[0])["_reject_codes"] == ["a"]
    assert json.loads(out[1]) == {
        "_prev_source": "mine", "id": 1, "_reject_codes": ["b"], "_reject_message": "why",
        "_source": "in.jsonl", "_source_row": 1,
    }  # fmt: skip


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
@pytest.mark.parametrize("batch_rows", [1, 2, 10])
def test_a_shard_is_atomic_and_its_lines_read_back(
    tmp_path: Path, compression: str, batch_rows: int
) -> None:
    output = OutputFormat("jsonl", compression)
    table = jsonl_table(LINES * 3)
    path = tmp_path / output.shard_name(0)
    shard = output.open(path, table.schema)
    for batch in table.to_batches(max_chunksize=batch_rows):
        shard.write(batch)
    assert not path.exists() and path.with_name(path.name + ".tmp").exists()
    shard.close()
    assert shard.rows == 9 and output.rows(path) == 9 and not output.is_empty(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    with pa.input_stream(
        str(path), compression=None if compression == "none" else compression
    ) as f:
        assert f.read().decode().splitlines() == LINES * 3
    # the same rows in other batches: the same bytes
    again = tmp_path / "again" / path.name
    with output.open(again, table.schema) as other:
        other.write(table)
    assert again.read_bytes() == path.read_bytes()


def test_names_and_compressions() -> None:
    assert OutputFormat().shard_name(3) == "part-00003.parquet"
    assert OutputFormat("jsonl").shard_name(0) == "part-00000.jsonl"
    assert OutputFormat("jsonl", "gzip").suffix == ".jsonl.gz"
    assert OutputFormat("jsonl", "zstd").suffix == ".jsonl.zst"
    with pytest.raises(OutputError, match="jsonl output is one of none, gzip, zstd, not 'snappy'"):
        OutputFormat("jsonl", "snappy")
    with pytest.raises(OutputError, match="parquet, jsonl, not 'csv'"):
        OutputFormat("csv")


def test_abort_and_an_error_leave_nothing(tmp_path: Path) -> None:
    table = jsonl_table(LINES)
    path = tmp_path / "part-00000.jsonl"
    with pytest.raises(RuntimeError), JsonlShard(path, table.schema) as shard:
        shard.write(table)
        raise RuntimeError
    assert list(tmp_path.iterdir()) == []
    with JsonlShard(path, table.schema) as shard, pytest.raises(OutputError, match="columns"):
        shard.write(table.select(["id"]))


def test_a_shard_cut_short_does_not_count(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a"')
    with pytest.raises(ValueError, match="ends inside a line"):
        count_lines(path)
    whole = gzip.compress(b'{"a": 1}\n' * 1000)
    cut = tmp_path / "b.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises((OSError, ValueError)):
        count_lines(cut, "gzip")
    empty = tmp_path / "c.jsonl.zst"
    with JsonlShard(empty, pa.schema([("a", pa.int64())]), compression="zstd"):
        pass
    assert is_empty(empty, "zstd") and count_lines(empty, "zstd") == 0


def test_lines_are_valid_json_for_any_text() -> None:
    texts = ['quote " and \\ and \n', "\u2028 é 😀", "\x00"]
    table = pa.table({"t": texts})
    assert [orjson.loads(x)["t"] for x in bytes(data_lines(table)).splitlines()] == texts


def test_a_data_shard_of_rows_with_their_lines_is_given_the_lines_alone(tmp_path: Path) -> None:
    # Rows that each have their line are written from it alone, so only it need be gathered:
    # the same bytes as from the whole rows. A rejects shard, or rows without lines, need all.
    table = jsonl_table(LINES)
    whole = JsonlShard(tmp_path / "a.jsonl", table.schema)
    assert whole.columns_for(table) == [RAW_LINE]
    rejects = JsonlShard(tmp_path / "r.jsonl", table.schema, rejects=True)
    assert rejects.columns_for(table) == table.schema.names
    rejects.abort()
    raw = table.column(RAW_LINE).to_pylist()
    missing = table.set_column(
        table.schema.get_field_index(RAW_LINE), RAW_LINE, pa.array([None, *raw[1:]], pa.string())
    )
    assert whole.columns_for(missing) == table.schema.names
    with whole:
        whole.write(table)
    with JsonlShard(tmp_path / "b.jsonl", table.schema) as alone:
        alone.write(table.select([RAW_LINE]))
        with pytest.raises(OutputError, match="without their lines"):
            alone.write(missing.select([RAW_LINE]))
    assert (tmp_path / "b.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
