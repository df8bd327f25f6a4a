from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from transcript_clean.errors import OutputError
from transcript_clean.sinks import (
    OutputFormat,
    ParquetShard,
    shard_name,
    temp_path,
    write_table_atomic,
    write_text_atomic,
)
from transcript_clean.sizes import row_sizes

SCHEMA = pa.schema(
    [("id", pa.int64()), ("messages", pa.list_(pa.struct([("role", pa.string())])))],
    metadata={b"note": b"kept"},
)


def table(rows: int, first: int = 0) -> pa.Table:
    ids = list(range(first, first + rows))
    messages = [[{"role": "user"}, {"role": f"a{i}"}] for i in ids]
    return pa.table({"id": ids, "messages": messages}, schema=SCHEMA)


def test_shard_name() -> None:
    assert shard_name(0) == "part-00000.parquet"
    assert shard_name(123) == "part-00123.parquet"


def test_shard_writes_on_close_only(tmp_path: Path) -> None:
    path = tmp_path / "out" / shard_name(0)
    shard = ParquetShard(path, SCHEMA)
    shard.write(table(5))
    assert not path.exists()
    assert temp_path(path).exists()
    shard.close()
    assert not temp_path(path).exists()
    assert pq.read_table(path).equals(table(5))
    assert shard.rows == 5


def test_abort_deletes_the_temp_file(tmp_path: Path) -> None:
    path = tmp_path / shard_name(0)
    shard = ParquetShard(path, SCHEMA)
    shard.write(table(3))
    shard.abort()
    assert list(tmp_path.iterdir()) == []
    shard.close()  # after abort: nothing to do, still no file
    assert list(tmp_path.iterdir()) == []


def test_exception_inside_with_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / shard_name(0)
    with pytest.raises(RuntimeError, match="boom"), ParquetShard(path, SCHEMA) as shard:
        shard.write(table(3))
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_with_block_closes(tmp_path: Path) -> None:
    path = tmp_path / shard_name(0)
    with ParquetShard(path, SCHEMA) as shard:
        shard.write(table(2))
    assert pq.read_table(path).num_rows == 2
    shard.abort()  # after close: keeps the finished file
    assert path.exists()


def test_empty_shard_is_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / shard_name(0)
    ParquetShard(path, SCHEMA).close()
    read = pq.read_table(path)
    assert read.num_rows == 0
    assert read.schema.equals(SCHEMA)
    assert read.schema.metadata == SCHEMA.metadata


@pytest.mark.parametrize("batch_size", [1, 7, 100])
def test_row_groups_do_not_depend_on_batches(tmp_path: Path, batch_size: int) -> None:
    rows = table(100)
    reference = tmp_path / "reference.parquet"
    write_table_atomic(reference, rows, row_group_size=30)
    path = tmp_path / shard_name(0)
    with ParquetShard(path, SCHEMA, row_group_size=30) as shard:
        for batch in rows.to_batches(max_chunksize=batch_size):
            shard.write(batch)
    metadata = pq.ParquetFile(path).metadata
    groups = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    assert groups == [30, 30, 30, 10]
    assert path.read_bytes() == reference.read_bytes()


def test_same_batches_give_identical_bytes(tmp_path: Path) -> None:
    def write(path: Path) -> bytes:
        with ParquetShard(path, SCHEMA, row_group_size=16) as shard:
            shard.write(table(10))
            shard.write(table(25, first=10).to_batches()[0])
        return path.read_bytes()

    assert write(tmp_path / "a.parquet") == write(tmp_path / "b.parquet")


def test_write_casts_to_the_schema(tmp_path: Path) -> None:
    narrow = pa.table({"id": pa.array([1, 2], pa.int32()), "messages": [[], None]})
    path = tmp_path / shard_name(0)
    with ParquetShard(path, SCHEMA) as shard:
        shard.write(narrow)
    read = pq.read_table(path)
    assert read.schema.equals(SCHEMA)
    assert read.schema.metadata == SCHEMA.metadata
    assert read.column("id").to_pylist() == [1, 2]


def test_write_rejects_other_columns(tmp_path: Path) -> None:
    path = tmp_path / shard_name(0)
    with ParquetShard(path, SCHEMA) as shard, pytest.raises(OutputError, match="schema"):
        shard.write(pa.table({"other": [1]}))


def test_write_after_close_fails(tmp_path: Path) -> None:
    shard = ParquetShard(tmp_path / shard_name(0), SCHEMA)
    shard.close()
    with pytest.raises(OutputError, match="closed"):
        shard.write(table(1))


def test_datasets_features_survive(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {
            "label": datasets.ClassLabel(names=["bad", "good"]),
            "messages": [{"role": datasets.Value("string"), "content": datasets.Value("string")}],
            "score": datasets.Value("float32"),
        }
    )
    source = datasets.Dataset.from_dict(
        {
            "label": [0, 1],
            "messages": [[{"role": "user", "content": "hi"}], []],
            "score": [0.5, 1.0],
        },
        features=features,
    )
    arrow = source.data.table
    path = tmp_path / shard_name(0)
    with ParquetShard(path, arrow.schema) as shard:
        for batch in arrow.to_batches(max_chunksize=1):
            shard.write(batch)
    loaded = datasets.load_dataset(
        "parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache")
    )
    assert loaded.features == features
    assert loaded.to_list() == source.to_list()


def test_write_text_atomic(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "summary.json"
    write_text_atomic(path, "{}\n")
    write_text_atomic(path, "é\r\n")
    assert path.read_bytes() == "é\r\n".encode()
    assert sorted(p.name for p in path.parent.iterdir()) == ["summary.json"]


def test_write_text_atomic_failure_leaves_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "target"
    folder.mkdir()  # a folder where the file should go: os.replace fails
    with pytest.raises(OutputError, match="target"):
        write_text_atomic(folder, "text")
    assert list(tmp_path.iterdir()) == [folder]


def test_failed_close_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> None:
        raise OSError("disk full")

    shard = ParquetShard(tmp_path / shard_name(0), SCHEMA)
    shard.write(table(3))
    monkeypatch.setattr("transcript_clean.atomic._fsync", fail)
    with pytest.raises(OutputError, match=r"part-00000\.parquet: disk full"):
        shard.close()
    assert list(tmp_path.iterdir()) == []


def uneven(rows: int) -> pa.Table:
    """Rows of sizes from about 10 to 400 bytes, in no order."""
    ids = list(range(rows))
    messages = [[{"role": "x" * (i * 37 % 97)}] * (1 + i % 4) for i in ids]
    return pa.table({"id": ids, "messages": messages}, schema=SCHEMA)


def greedy_groups(sizes: list[int], nbytes: int, rows: int) -> list[int]:
    """Row groups as the rows alone decide them: each as long as it fits, at least one row."""
    groups: list[int] = []
    count = total = 0
    for size in sizes:
        if count and (count == rows or total + size > nbytes):
            groups.append(count)
            count = total = 0
        count += 1
        total += size
    return [*groups, count] if count else groups


def row_groups(path: Path) -> list[int]:
    metadata = pq.ParquetFile(path).metadata
    return [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]


@pytest.mark.parametrize("batch_size", [1, 7, 100])
@pytest.mark.parametrize(("nbytes", "rows"), [(2000, 16384), (2000, 12), (150, 16384)])
def test_row_groups_are_cut_by_bytes_whatever_the_batches(
    tmp_path: Path, batch_size: int, nbytes: int, rows: int
) -> None:
    data = uneven(100)
    expected = greedy_groups(row_sizes(data).tolist(), nbytes, rows)
    assert len(expected) > 3
    reference = tmp_path / "reference.parquet"
    write_table_atomic(reference, data, row_group_bytes=nbytes, row_group_size=rows)
    path = tmp_path / shard_name(0)
    with ParquetShard(path, SCHEMA, row_group_bytes=nbytes, row_group_size=rows) as shard:
        for batch in data.to_batches(max_chunksize=batch_size):
            shard.write(batch)
    assert row_groups(path) == expected
    assert path.read_bytes() == reference.read_bytes()
    assert pq.read_table(path).equals(data)


def test_a_row_larger_than_a_row_group_is_one_alone(tmp_path: Path) -> None:
    data = uneven(10)
    sizes = row_sizes(data).tolist()
    big = max(sizes)
    path = tmp_path / shard_name(0)
    with ParquetShard(path, SCHEMA, row_group_bytes=big - 1) as shard:
        shard.write(data)
    groups = row_groups(path)
    assert groups == greedy_groups(sizes, big - 1, 16384)
    assert 1 in groups and sum(groups) == 10


def test_row_group_bytes_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="row_group_bytes"):
        ParquetShard(tmp_path / shard_name(0), SCHEMA, row_group_bytes=0)


def test_rows_opens_the_shard_and_refuses_a_column_written_twice(tmp_path: Path) -> None:
    from transcript_clean.sinks import OutputFormat

    path = tmp_path / shard_name(0)
    twice = pa.Table.from_arrays([pa.array([1, 2]), pa.array([3, 4])], names=["id", "id"])
    pq.write_table(twice, path)  # pyarrow writes it; no reader can open it
    with pytest.raises(ValueError, match="id"):
        OutputFormat().rows(path)
    write_table_atomic(tmp_path / "good.parquet", table(3))
    assert OutputFormat().rows(tmp_path / "good.parquet") == 3
    cut = tmp_path / "cut.parquet"  # a shard cut short has no footer: no rows to count
    cut.write_bytes((tmp_path / "good.parquet").read_bytes()[:-9])
    with pytest.raises(pa.ArrowInvalid):
        OutputFormat().rows(cut)


def test_a_row_group_is_encoded_the_same_however_its_rows_came(tmp_path: Path) -> None:
    # Issue 27, finding 2: Parquet's writer checks its dictionary's size as each chunk comes,
    # so the same rows in other batches fell back to plain encoding elsewhere: other bytes.
    texts = [f"{i:05d} " + "lorem ipsum " * 80 for i in range(3000)]  # a 3 MB dictionary
    table = pa.table({"text": texts[:1500] * 2})
    written = []
    for cut in ([3000], [1000, 2000], [7, 1493, 1500]):
        path = tmp_path / f"{len(cut)}.parquet"
        with ParquetShard(path, table.schema) as shard:
            start = 0
            for rows in cut:
                shard.write(table.slice(start, rows).combine_chunks())
                start += rows
        written.append(path.read_bytes())
    assert pq.read_table(tmp_path / "2.parquet").equals(table)
    assert written[1] == written[0] and written[2] == written[0]


def test_a_bad_compression_names_the_keyword_a_python_caller_passes() -> None:
    with pytest.raises(
        OutputError,
        match=r"^compression for jsonl output is one of none, gzip, zstd, not 'snappy'$",
    ):
        OutputFormat("jsonl", "snappy")
