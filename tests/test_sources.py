from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# No test may wait on the network: the Hub is unreachable. Set before `datasets` is imported
# (it reads these once), and patched again below in case another module imported it first.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from transcript_clean.errors import SourceError
from transcript_clean.sources import (
    DEFAULT_BATCH_SIZE,
    JSON_COLUMNS_KEY,
    Part,
    Source,
    StreamingSource,
    json_columns,
    open_source,
    rows_to_table,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Offline, with a fresh cache: nothing reaches the network or the user's cache."""
    import datasets
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def rows(source: Source, part: Part | None = None, **kw: Any) -> list[dict[str, Any]]:
    """Every row `read` gives for `part` (default: each part in turn), checking each batch."""
    out = []
    for each in [part] if part else source.parts():
        for batch in source.read(each, **kw):
            assert batch.schema.equals(source.schema, check_metadata=True)
            assert 0 < batch.num_rows <= kw.get("batch_size", DEFAULT_BATCH_SIZE)
            out.extend(batch.to_pylist())
    return out


def ids(source: Source, **kw: Any) -> list[int]:
    return [row["id"] for row in rows(source, **kw)]


def conversations(first: int, count: int) -> pa.Table:
    numbers = list(range(first, first + count))
    return pa.table(
        {
            "id": numbers,
            "messages": [[{"role": "user", "content": f"question {i}"}] for i in numbers],
        }
    )


def write_parquet(path: Path, table: pa.Table, row_group_size: int = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


# Parquet ----------------------------------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("empty", "no Parquet files in folder"),
        ("empty/*.parquet", "no files match"),
        ("./nope.parquet", "no such file or folder: ./nope.parquet"),
        ("owner/nope.jsonl", "no such file or folder"),
    ],
)
def test_nothing_to_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, message: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no data")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SourceError, match=message):
        open_source(spec)


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


def test_parquet_file_that_changes_during_a_run(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "t.parquet", conversations(0, 5))
    source = open_source(str(path))
    path.write_bytes(b"gone")
    with pytest.raises(SourceError, match=r"t\.parquet"):
        rows(source)


# JSON -------------------------------------------------------------------------------------------

JSON_ROWS = [
    {"id": 0, "messages": [{"role": "user", "content": "hi"}]},
    {"id": 1, "messages": [{"role": "user", "content": "hello"}], "extra": True},
]


@pytest.mark.parametrize("name", ["rows.json", "rows.jsonl", "rows.json.gz", "lines.json"])
def test_json_rows(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name == "rows.json":
        text = json.dumps(JSON_ROWS)
    else:  # JSON Lines, also under a .json name
        text = "\n".join(json.dumps(row) for row in JSON_ROWS) + "\n\n"
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(json.dumps(JSON_ROWS).encode()))
    else:
        path.write_text(text, encoding="utf-8")
    source = open_source(str(path))
    assert (source.kind, source.num_rows, json_columns(source.schema)) == ("json", 2, [])
    assert source.schema.names == ["id", "messages", "extra"]
    assert rows(source) == [{**JSON_ROWS[0], "extra": None}, JSON_ROWS[1]]
    assert rows(source, start=1, batch_size=1) == [JSON_ROWS[1]]


def test_json_single_object_is_one_row(tmp_path: Path) -> None:
    source = open_source(str(write_json(tmp_path / "one.json", JSON_ROWS[0])))
    assert rows(source) == [JSON_ROWS[0]]


def test_json_columns_arrow_cannot_hold_become_json_text(tmp_path: Path) -> None:
    mixed = [
        {"messages": [{"role": "user", "content": "text"}], "n": 1, "tags": ["a"]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]},
        {"messages": None, "n": 2.5, "tags": ["b"]},
    ]
    source = open_source(str(write_json(tmp_path / "mixed.json", mixed)))
    assert json_columns(source.schema) == ["messages", "n"]
    assert source.schema.metadata == {JSON_COLUMNS_KEY: b"messages,n"}
    assert source.schema.field("messages").type == pa.string()
    assert source.schema.field("tags").type == pa.list_(pa.string())
    read = rows(source)
    assert read[0]["messages"] == '[{"role": "user", "content": "text"}]'
    assert read[2]["messages"] is None  # null stays null, not "null"
    assert decode(source, read) == [{"tags": None, "n": None, **row} for row in mixed]


@pytest.mark.parametrize(
    "values",
    [
        [{"a": 1}, {"b": 2}],  # Arrow would add missing keys as nulls
        [1, 2**70],  # too big for int64
        [{}, {}],  # Parquet cannot store a struct without fields
        [[1], ["x"]],
    ],
)
def test_rows_to_table_falls_back_when_arrow_is_not_exact(values: list[Any]) -> None:
    table = rows_to_table([{"v": value} for value in values])
    assert json_columns(table.schema) == ["v"]
    assert [json.loads(text) for text in table.column("v").to_pylist()] == values


def test_rows_to_table_without_rows() -> None:
    assert rows_to_table([]).num_rows == 0


def test_bad_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": \n', encoding="utf-8")
    with pytest.raises(SourceError, match=r"bad\.jsonl: line 3: invalid JSON"):
        open_source(str(path))


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("broken.json", '[{"a": 1},\n  {"a": }]', r"broken\.json: line 2, column 9"),
        ("scalars.json", "[1, 2]", r"scalars\.json: row 0 is a int, expected a JSON object"),
        ("lists.jsonl", "[1]\n", r"lists\.jsonl: line 1 is a list"),
    ],
)
def test_json_that_is_not_rows(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(SourceError, match=message):
        open_source(str(tmp_path / name))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("rows.json.gz", b"not gzip", r"cannot read .*rows\.json\.gz"),
        ("rows.json", b'[{"a": "\xff"}]', r"rows\.json is not UTF-8"),
    ],
)
def test_json_file_that_cannot_be_read(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SourceError, match=message):
        open_source(str(tmp_path / name))


def test_json_glob_is_one_source(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", JSON_ROWS[:1])
    write_json(tmp_path / "b.json", [{"id": 5, "messages": [], "extra": False}])
    source = open_source(str(tmp_path / "*.json"))
    assert [(part.name, part.num_rows) for part in source.parts()] == [
        (str(tmp_path / "a.json"), 1),
        (str(tmp_path / "b.json"), 1),
    ]
    assert [row["id"] for row in rows(source, source.parts()[1])] == [5]


def test_glob_mixing_json_and_parquet(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", JSON_ROWS)
    write_parquet(tmp_path / "b.parquet", conversations(0, 2))
    with pytest.raises(SourceError, match="mixes JSON files"):
        open_source(str(tmp_path / "*"))


def test_json_fingerprint(tmp_path: Path) -> None:
    path = write_json(tmp_path / "rows.json", JSON_ROWS)
    fingerprint = open_source(str(path)).fingerprint()
    assert open_source(str(path)).fingerprint() == fingerprint
    write_json(path, JSON_ROWS[::-1])
    assert open_source(str(path)).fingerprint() != fingerprint


def decode(source: Source, read: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with their JSON-text columns decoded, as the pipeline reads them."""
    as_json = json_columns(source.schema)
    return [
        {k: json.loads(v) if k in as_json and v is not None else v for k, v in row.items()}
        for row in read
    ]


SHARED_FILES = {
    "sharegpt/glaive_toolcall_en_demo.json": 300,
    "sharegpt/fastchat_dummy_conversation.json": 500,
    "sharegpt/axolotl_conversation_missingturns.json": 1,
    "openai/toy_chat_fine_tuning.jsonl": 5,
    "openai/functionary_test_case.json": 1,
}


@pytest.mark.parametrize("name", sorted(SHARED_FILES))
def test_shared_data_loads_and_round_trips(name: str) -> None:
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    text = path.read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        original = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        value = json.loads(text)
        original = value if isinstance(value, list) else [value]
    source = open_source(str(path))
    assert source.num_rows == SHARED_FILES[name]
    assert decode(source, rows(source, batch_size=64)) == original


def test_functionary_falls_back_to_json_text() -> None:
    path = DATA / "openai/functionary_test_case.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    # Its messages have different keys (tool_calls, name, metainfo): Arrow would add nulls.
    assert json_columns(open_source(str(path)).schema) == ["tools", "messages"]


# datasets folders -------------------------------------------------------------------------------


def test_datasets_folder(tmp_path: Path) -> None:
    import datasets

    dataset = datasets.Dataset.from_list(conversations(0, 30).to_pylist())
    dataset.save_to_disk(str(tmp_path / "saved"))
    source = open_source(str(tmp_path / "saved"))
    assert (source.kind, source.num_rows) == ("datasets-folder", 30)
    assert source.parts()[0].name == str(tmp_path / "saved")
    assert source.schema.metadata[b"huggingface"]
    assert ids(source, start=8, stop=23, batch_size=10) == list(range(8, 23))
    assert rows(source) == dataset.to_list()
    assert open_source(str(tmp_path / "saved")).fingerprint() == source.fingerprint()


def test_datasets_folder_after_select(tmp_path: Path) -> None:
    import datasets

    dataset = datasets.Dataset.from_list(conversations(0, 30).to_pylist())
    dataset.select([5, 3, 1]).save_to_disk(str(tmp_path / "saved"))
    assert ids(open_source(str(tmp_path / "saved"))) == [5, 3, 1]


def test_dataset_dict_folder_needs_a_split(tmp_path: Path) -> None:
    import datasets

    folder = tmp_path / "dict"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(conversations(0, 4).to_pylist()),
            "test": datasets.Dataset.from_list(conversations(100, 2).to_pylist()),
        }
    ).save_to_disk(str(folder))
    with pytest.raises(SourceError, match=r"several splits \(train, test\)"):
        open_source(str(folder))
    with pytest.raises(SourceError, match="no split 'dev'; its splits: train, test"):
        open_source(str(folder), split="dev")
    test = open_source(str(folder), split="test")
    assert (test.kind, test.parts()[0].name) == ("datasets-folder", str(folder / "test"))
    assert ids(test) == [100, 101]
    assert test.fingerprint() != open_source(str(folder), split="train").fingerprint()


# The Hub, through the same code path with local builders ----------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("builder", ["json", "parquet"])
def test_hub_loader_with_a_local_builder(tmp_path: Path, builder: str, streaming: bool) -> None:
    table = conversations(0, 25)
    if builder == "json":
        data = tmp_path / "rows.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))
    else:
        data = write_parquet(tmp_path / "rows.parquet", table)
    source = open_source(builder, data_files=str(data), streaming=streaming)
    assert (source.kind, source.name) == ("hub", builder)
    assert source.num_rows == (None if streaming else 25)
    assert [part.num_rows for part in source.parts()] == [None if streaming else 25]
    assert rows(source, batch_size=10) == table.to_pylist()
    assert ids(source, start=7, stop=19, batch_size=5) == list(range(7, 19))
    assert ids(source, start=20) == list(range(20, 25))
    assert (
        open_source(builder, data_files=str(data), streaming=streaming).fingerprint()
        == source.fingerprint()
    )


def test_streaming_dataset_without_features() -> None:
    import datasets

    def generate() -> Iterator[dict[str, Any]]:
        yield from conversations(0, 7).to_pylist()

    dataset = datasets.IterableDataset.from_generator(generate)
    assert dataset.features is None  # so the schema comes from the first row
    source = StreamingSource("generated", dataset, "0")
    assert source.schema.names == ["id", "messages"]
    assert ids(source, start=2, batch_size=3) == list(range(2, 7))


def test_hub_fingerprint_names_the_split(tmp_path: Path) -> None:
    data = write_parquet(tmp_path / "rows.parquet", conversations(0, 3))
    train = open_source("parquet", data_files={"train": str(data), "test": str(data)})
    test = open_source("parquet", data_files={"train": str(data), "test": str(data)}, split="test")
    assert train.fingerprint() != test.fingerprint()


def test_hub_unknown_split(tmp_path: Path) -> None:
    data = write_parquet(tmp_path / "rows.parquet", conversations(0, 3))
    with pytest.raises(SourceError, match=r"'parquet'.*Unknown split \"dev\""):
        open_source("parquet", data_files=str(data), split="dev")


@pytest.mark.parametrize("streaming", [False, True])
def test_hub_id_not_cached_fails_fast(tmp_path: Path, streaming: bool) -> None:
    started = time.monotonic()
    with pytest.raises(SourceError, match="transcript-clean-tests/no-such-dataset"):
        open_source("transcript-clean-tests/no-such-dataset", streaming=streaming)
    assert time.monotonic() - started < 30


# Pickling ---------------------------------------------------------------------------------------


def every_kind(tmp_path: Path) -> list[Source]:
    import datasets

    table = conversations(0, 12)
    parquet = write_parquet(tmp_path / "rows.parquet", table)
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))
    datasets.Dataset.from_list(table.to_pylist()).save_to_disk(str(tmp_path / "saved"))
    return [
        open_source(str(parquet)),
        open_source(str(jsonl)),
        open_source(str(tmp_path / "saved")),
        open_source("parquet", data_files=str(parquet)),
        open_source("json", data_files=str(jsonl), streaming=True),
    ]


def test_sources_pickle(tmp_path: Path) -> None:
    for source in every_kind(tmp_path):
        copy = pickle.loads(pickle.dumps(source))
        part = pickle.loads(pickle.dumps(source.parts()[0]))
        assert (copy.kind, copy.name, copy.parts()) == (source.kind, source.name, source.parts())
        assert copy.schema.equals(source.schema, check_metadata=True)
        assert copy.fingerprint() == source.fingerprint()
        assert rows(copy, part, start=3, stop=9) == rows(source, start=3, stop=9)
        assert ids(copy, part=part) == list(range(12)), source.kind


def test_local_roots(tmp_path: Path) -> None:
    import datasets

    parquet = write_parquet(tmp_path / "data" / "a.parquet", conversations(0, 2))
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(json.dumps(JSON_ROWS[0]) + "\n")
    datasets.Dataset.from_list(JSON_ROWS).save_to_disk(str(tmp_path / "saved"))
    assert open_source(str(parquet)).local_roots() == [parquet]
    assert open_source(str(tmp_path / "data")).local_roots() == [tmp_path / "data"]
    assert open_source(str(tmp_path / "data" / "*.parquet")).local_roots() == [tmp_path / "data"]
    assert open_source(str(jsonl)).local_roots() == [jsonl]
    assert open_source(str(tmp_path / "saved")).local_roots() == [tmp_path / "saved"]
    assert open_source("json", data_files=str(jsonl)).local_roots() == [jsonl]
    assert open_source("json", data_files=[str(jsonl)], streaming=True).local_roots() == [jsonl]


# URIs -------------------------------------------------------------------------------------------


def uri_layout(root: Path) -> None:
    for index, name in enumerate(["a", "b", "sub/c"]):
        write_parquet(root / f"{name}.parquet", conversations(index * 10, 10))
    write_parquet(root / ".hidden" / "x.parquet", conversations(90, 3))


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
