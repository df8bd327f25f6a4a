"""`datasets` sources (`transcript_clean.sources.hf`): `save_to_disk` folders, and the Hub through
the same code path with local builders."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sources_helpers import conversations, go_offline, ids, rows, write_parquet

from transcript_clean.errors import SourceError
from transcript_clean.sources import StreamingSource, open_source


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    go_offline(monkeypatch, tmp_path)


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


def test_a_dataset_dict_folder_of_one_split_reads_it(tmp_path: Path) -> None:
    import datasets

    folder = tmp_path / "dict"
    only = datasets.Dataset.from_list(conversations(0, 3).to_pylist())
    datasets.DatasetDict({"train": only}).save_to_disk(str(folder))
    source = open_source(str(folder))
    assert (source.kind, source.parts()[0].name) == ("datasets-folder", str(folder / "train"))
    assert ids(source) == [0, 1, 2]
    assert source.note == "its only split, train"
