"""Parquet sources (`transcript_clean.sources.parquet`): local files, folders, globs and URIs."""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sources_helpers import conversations, ids, rows, write_parquet

from transcript_clean.errors import SourceError
from transcript_clean.sizes import row_sizes
from transcript_clean.sources import DEFAULT_BATCH_SIZE, Part, open_source


def test_parquet_file(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "train.parquet", conversations(0, 25))
    source = open_source(str(path))
    assert (source.kind, source.name, source.num_rows) == ("parquet", str(path), 25)
    assert source.parts() == [Part(str(path), 25, str(path))]
    assert rows(source) == conversations(0, 25).to_pylist()


def test_parquet_folder_is_sorted_recursive_and_skips_hidden(tmp_path: Path) -> None:
    write_parquet(tmp_path / "b" / "x.parquet", conversations(20, 5))
    write_parquet(tmp_path / "a.parquet", conversations(0, 10))
    write_parquet(tmp_path / "b.parquet", conversations(10, 10))
    write_parquet(tmp_path / ".cache" / "old.parquet", conversations(90, 3))
    write_parquet(tmp_path / "_delta_log" / "c.parquet", conversations(95, 3))
    (tmp_path / "README.md").write_text("not data")
    source = open_source(str(tmp_path))
    assert [part.name for part in source.parts()] == [
        str(tmp_path / "a.parquet"),
        str(tmp_path / "b" / "x.parquet"),
        str(tmp_path / "b.parquet"),
    ]
    assert ids(source) == list(range(10)) + list(range(20, 25)) + list(range(10, 20))
    assert source.num_rows == 25


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [("*.parquet", ["a", "b"]), ("**/*.parquet", ["a", "b", "sub/c"]), ("sub/c*", ["sub/c"])],
)
def test_parquet_glob(tmp_path: Path, pattern: str, expected: list[str]) -> None:
    for index, name in enumerate(["a", "b", "sub/c"]):
        write_parquet(tmp_path / f"{name}.parquet", conversations(index * 10, 10))
    source = open_source(str(tmp_path / pattern))
    assert [part.name for part in source.parts()] == [
        str(tmp_path / f"{name}.parquet") for name in expected
    ]
    assert source.num_rows == 10 * len(expected)


ROW_RANGES = [
    (0, None),
    (0, 35),
    (3, 7),  # inside one row group
    (10, 20),  # exactly one row group
    (9, 11),  # across a boundary
    (5, 33),  # across several
    (34, 35),  # the last row
    (30, 100),  # past the end
    (35, None),  # empty at the end
    (12, 12),  # empty
    (20, 10),  # stop before start
]


@pytest.mark.parametrize("batch_size", [1, 10, DEFAULT_BATCH_SIZE])
@pytest.mark.parametrize(("start", "stop"), ROW_RANGES)
def test_parquet_row_ranges(tmp_path: Path, start: int, stop: int | None, batch_size: int) -> None:
    source = open_source(str(write_parquet(tmp_path / "t.parquet", conversations(0, 35))))
    expected = list(range(start, 35 if stop is None else min(stop, 35)))
    assert ids(source, start=start, stop=stop, batch_size=batch_size) == expected


def test_parquet_reads_only_the_row_groups_a_range_touches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = open_source(str(write_parquet(tmp_path / "t.parquet", conversations(0, 50))))
    asked = []
    iter_batches = pq.ParquetFile.iter_batches

    def spy(self: pq.ParquetFile, **kw: Any) -> Iterator[pa.RecordBatch]:
        asked.append(kw["row_groups"])
        return iter_batches(self, **kw)  # type: ignore[no-any-return]

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    assert ids(source, start=12, stop=15) == [12, 13, 14]
    assert ids(source, start=19, stop=31) == list(range(19, 31))
    assert asked == [[1], [1, 2, 3]]


def test_read_rejects_bad_arguments(tmp_path: Path) -> None:
    source = open_source(str(write_parquet(tmp_path / "t.parquet", conversations(0, 5))))
    part = source.parts()[0]
    with pytest.raises(ValueError, match="negative"):
        list(source.read(part, start=-1))
    with pytest.raises(ValueError, match="batch_size"):
        list(source.read(part, batch_size=0))


def test_parquet_keeps_schema_metadata(tmp_path: Path) -> None:
    table = conversations(0, 3).replace_schema_metadata({b"huggingface": b'{"info": {}}'})
    source = open_source(str(write_parquet(tmp_path / "t.parquet", table)))
    assert source.schema.metadata == {b"huggingface": b'{"info": {}}'}
    assert len(rows(source)) == 3  # `rows` checks every batch's schema, metadata included


@pytest.mark.parametrize("content", [b"", b"not parquet at all", b"PAR1" + b"\0" * 20 + b"PAR1"])
def test_corrupt_parquet_names_the_file(tmp_path: Path, content: bytes) -> None:
    write_parquet(tmp_path / "a.parquet", conversations(0, 3))
    (tmp_path / "b.parquet").write_bytes(content)
    with pytest.raises(SourceError, match=r"b\.parquet as Parquet: .+"):
        open_source(str(tmp_path))


def test_parquet_schemas_must_match(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", conversations(0, 3))
    other = conversations(3, 3).set_column(0, "id", pa.array(["3", "4", "5"]))
    write_parquet(tmp_path / "b.parquet", other)
    with pytest.raises(SourceError) as error:
        open_source(str(tmp_path))
    message = str(error.value)
    assert "a.parquet" in message and "b.parquet" in message
    assert "'id' (int64)" in message and "'id' (string)" in message


def test_parquet_nullability_is_a_mismatch(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", conversations(0, 3))
    table = conversations(3, 3)
    strict = table.cast(table.schema.set(0, pa.field("id", pa.int64(), nullable=False)))
    write_parquet(tmp_path / "b.parquet", strict)
    with pytest.raises(
        SourceError, match=r"'id' \(int64\), of .*b\.parquet is 'id' \(int64, not null\)"
    ):
        open_source(str(tmp_path))


def test_parquet_extra_column_is_a_mismatch(tmp_path: Path) -> None:
    write_parquet(tmp_path / "a.parquet", conversations(0, 3))
    write_parquet(tmp_path / "b.parquet", conversations(3, 3).append_column("x", pa.array([1] * 3)))
    message = r"column 2 of .*a\.parquet is missing, of .*b\.parquet is 'x'"
    with pytest.raises(SourceError, match=message):
        open_source(str(tmp_path))


def test_parquet_fingerprint(tmp_path: Path) -> None:
    write_parquet(tmp_path / "data" / "a.parquet", conversations(0, 5))
    write_parquet(tmp_path / "data" / "b.parquet", conversations(5, 5))
    fingerprint = open_source(str(tmp_path / "data")).fingerprint()
    assert fingerprint == open_source(str(tmp_path / "data")).fingerprint()
    assert len(fingerprint) == 16 and int(fingerprint, 16) >= 0
    # The same files elsewhere are the same input.
    shutil.copytree(tmp_path / "data", tmp_path / "copy")
    assert open_source(str(tmp_path / "copy")).fingerprint() == fingerprint
    # A changed file is not.
    write_parquet(tmp_path / "data" / "b.parquet", conversations(6, 5))
    assert open_source(str(tmp_path / "data")).fingerprint() != fingerprint


def test_parquet_fingerprint_hashes_the_footer_as_written(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "t.parquet", conversations(0, 5))
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    footer = data[-8 - length : -8]
    assert footer[-1] == 0  # the struct's stop byte

    def with_unknown_field(value: int) -> tuple[str, bytes]:
        """The fingerprint of the file with one more footer field, of an id pyarrow does not
        know (99, an i32, zigzag `value`), and its metadata as pyarrow writes it out again."""
        longer = footer[:-1] + bytes([0x05, 0xC6, 0x01, value, 0x00])
        path.write_bytes(data[: -8 - length] + longer + len(longer).to_bytes(4, "little") + b"PAR1")
        assert ids(open_source(str(path))) == list(range(5))
        written_out = pa.BufferOutputStream()
        pq.read_metadata(path).write_metadata_file(written_out)
        return open_source(str(path)).fingerprint(), written_out.getvalue().to_pybytes()

    seven, seven_written_out = with_unknown_field(14)
    eight, eight_written_out = with_unknown_field(16)
    assert seven_written_out == eight_written_out  # pyarrow dropped the field
    assert seven != eight


def test_parquet_file_that_changes_during_a_run(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "t.parquet", conversations(0, 5))
    source = open_source(str(path))
    path.write_bytes(b"gone")
    with pytest.raises(SourceError, match=r"t\.parquet"):
        rows(source)


# URIs -------------------------------------------------------------------------------------------


def uri_layout(root: Path) -> None:
    for index, name in enumerate(["a", "b", "sub/c"]):
        write_parquet(root / f"{name}.parquet", conversations(index * 10, 10))
    write_parquet(root / ".hidden" / "x.parquet", conversations(90, 3))
    write_parquet(root / ".x.parquet", conversations(93, 3))  # `*` skips it, as `glob.glob` does


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("a.parquet", ["a"]),
        ("", ["a", "b", "sub/c"]),
        ("/", ["a", "b", "sub/c"]),
        ("/*.parquet", ["a", "b"]),
        ("/**/*.parquet", ["a", "b", "sub/c"]),
        ("/sub/c*", ["sub/c"]),
        ("/[ab].parquet", ["a", "b"]),
        ("/?.parquet", ["a", "b"]),
    ],
)
def test_parquet_over_file_uris(tmp_path: Path, spec: str, expected: list[str]) -> None:
    uri_layout(tmp_path / "data")
    base = (tmp_path / "data").as_uri()
    uri = f"{base}/{spec}" if spec == "a.parquet" else base + spec
    local = str(tmp_path / "data" / spec.lstrip("/")) if spec.strip("/") else str(tmp_path / "data")
    source = open_source(uri)
    assert (source.kind, source.name) == ("parquet", uri)
    assert [part.name for part in source.parts()] == [f"{base}/{name}.parquet" for name in expected]
    assert rows(source) == rows(open_source(local))
    assert source.fingerprint() == open_source(local).fingerprint()
    assert source.local_roots() == open_source(local).local_roots()


def test_uri_source_reads_ranges_and_pickles_without_its_filesystem(tmp_path: Path) -> None:
    uri_layout(tmp_path)
    source = open_source(tmp_path.as_uri())
    part = source.parts()[1]
    assert ids(source, part=part, start=3, stop=7, batch_size=2) == [13, 14, 15, 16]
    data = pickle.dumps(source)
    assert b"LocalFileSystem" not in data  # the URI travels; each process reconnects
    copy = pickle.loads(data)
    assert copy.fingerprint() == source.fingerprint()
    assert ids(copy) == list(range(30))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("/nope.parquet", "no such file or folder"),
        ("/empty", "no Parquet files in folder"),
        ("/empty/*.parquet", "no files match"),
        ("/nope/*.parquet", "no files match"),
        ("/rows.jsonl", "JSON is read from local files only"),
        ("/bad.parquet", r"bad\.parquet as Parquet"),
    ],
)
def test_uri_errors(tmp_path: Path, spec: str, message: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "rows.jsonl").write_text("{}\n")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(SourceError, match=message):
        open_source(tmp_path.as_uri() + spec)


def test_unknown_uri_scheme() -> None:
    with pytest.raises(SourceError, match=r"cannot reach nosuchfs://bucket/x\.parquet"):
        open_source("nosuchfs://bucket/x.parquet")


def test_parquet_over_an_fsspec_filesystem() -> None:
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    try:
        for index, name in enumerate(["a", "sub/b"]):
            with memory.open(f"/transcript-clean-test/{name}.parquet", "wb") as handle:
                pq.write_table(conversations(index * 10, 10), handle)
        source = open_source("memory://transcript-clean-test/")
        assert [part.name for part in source.parts()] == [
            "memory://transcript-clean-test/a.parquet",
            "memory://transcript-clean-test/sub/b.parquet",
        ]
        assert source.local_roots() == []
        copy = pickle.loads(pickle.dumps(source))  # memory:// is per process: one process here
        assert ids(copy) == list(range(20))
        assert copy.fingerprint() == source.fingerprint()
    finally:
        memory.rm("/transcript-clean-test", recursive=True)


def long_conversations(count: int) -> pa.Table:
    """Rows of 1 to 9 KB, the long ones first."""
    text = [("x" * (1000 * (9 - i % 9)) + str(i)) for i in range(count)]
    return pa.table({"id": list(range(count)), "messages": [[{"content": t}] for t in text]})


@pytest.mark.parametrize("row_group_size", [7, 1000])
@pytest.mark.parametrize("batch_bytes", [1, 12_000, 50_000])
def test_batches_hold_at_most_batch_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_group_size: int, batch_bytes: int
) -> None:
    table = long_conversations(100)
    path = write_parquet(tmp_path / "t.parquet", table, row_group_size=row_group_size)
    source = open_source(str(path))
    asked: list[tuple[int, list[int]]] = []
    iter_batches = pq.ParquetFile.iter_batches

    def recording(self: pq.ParquetFile, batch_size: int, row_groups: list[int], **kw: Any) -> Any:
        asked.append((batch_size, row_groups))
        return iter_batches(self, batch_size=batch_size, row_groups=row_groups, **kw)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recording)
    batches = list(source.read(source.parts()[0], 3, 95, batch_size=64, batch_bytes=batch_bytes))
    assert pa.Table.from_batches(batches).equals(table.slice(3, 92))
    for batch in batches:
        assert batch.num_rows <= 64
        assert batch.num_rows == 1 or row_sizes(batch).sum() <= batch_bytes
    # What is read at once is cut to the budget too, from the footer: not 64 rows of 1-9 KB;
    # and each reader reads about `batch_bytes` of row groups, as it keeps what it read.
    metadata = pq.ParquetFile(path).metadata
    assert [g for _, groups in asked for g in groups] == list(range(94 // row_group_size + 1))
    for step, groups in asked:
        assert step == 1 or step * 1000 <= batch_bytes
        footer = sum(metadata.row_group(g).total_byte_size for g in groups)
        assert len(groups) == 1 or footer <= batch_bytes


def test_read_rejects_a_batch_of_no_bytes(tmp_path: Path) -> None:
    source = open_source(str(write_parquet(tmp_path / "t.parquet", conversations(0, 5))))
    with pytest.raises(ValueError, match="batch_bytes"):
        list(source.read(source.parts()[0], batch_bytes=0))


def repeated_long_texts(count: int) -> pa.Table:
    """Rows of about 20 KB made of four texts repeated: dictionary-encoded in the file, so the
    footer's sizes are a few hundredths of what the rows decode to."""
    texts = [chr(ord("a") + k) * 2000 for k in range(4)]
    return pa.table(
        {
            "id": list(range(count)),
            "messages": [
                [{"content": texts[(i + j) % 4]} for j in range(10)] for i in range(count)
            ],
        }
    )


@pytest.mark.parametrize("row_group_size", [50, 250, 1000])
def test_rows_the_footer_undersizes_are_read_within_batch_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_group_size: int
) -> None:
    # Finding 2 of issue 27: a footer gives encoded sizes, so dictionary-encoded long texts
    # looked 50 times smaller than they are, and a block was decoded in one batch of GBs.
    table = repeated_long_texts(1000)
    path = write_parquet(tmp_path / "t.parquet", table, row_group_size=row_group_size)
    footer = pq.ParquetFile(path).metadata
    encoded = sum(footer.row_group(g).total_byte_size for g in range(footer.num_row_groups))
    assert encoded * 20 < table.nbytes  # the case: the footer says far less than the rows hold
    read: list[int] = []
    iter_batches = pq.ParquetFile.iter_batches

    def recording(self: pq.ParquetFile, **kw: Any) -> Iterator[pa.RecordBatch]:
        for batch in iter_batches(self, **kw):
            read.append(batch.nbytes)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recording)
    source = open_source(str(path))
    budget = 2 * 2**20
    batches = list(source.read(source.parts()[0], 3, 990, batch_size=16_384, batch_bytes=budget))
    assert pa.Table.from_batches(batches).equals(table.slice(3, 987))
    # What is decoded at once stays near the budget: no batch of every row (20 MB).
    assert max(read) <= 2 * budget
