"""`open_source`: what a spec names, and what every kind of source does alike (pickling, local
roots). Each kind has its own module: test_sources_parquet.py, test_sources_json.py and
test_sources_hf.py."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from sources_helpers import (
    JSON_ROWS,
    conversations,
    go_offline,
    ids,
    rows,
    write_json,
    write_parquet,
)

from transcript_clean.errors import SourceError
from transcript_clean.sources import Source, open_source


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    go_offline(monkeypatch, tmp_path)


# What a spec names ------------------------------------------------------------------------------


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


def test_glob_mixing_json_and_parquet(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", JSON_ROWS)
    write_parquet(tmp_path / "b.parquet", conversations(0, 2))
    with pytest.raises(SourceError, match="mixes JSON files"):
        open_source(str(tmp_path / "*"))


# Every kind alike -------------------------------------------------------------------------------


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


def test_a_folder_of_json_lines_files_reads_them_as_a_glob_does(tmp_path: Path) -> None:
    folder = tmp_path / "raw"
    (folder / "b").mkdir(parents=True)
    for name, rows_of in (("a.jsonl", JSON_ROWS[:1]), ("b/c.jsonl", JSON_ROWS[1:])):
        text = "".join(json.dumps(row) + "\n" for row in rows_of)
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "_hidden.jsonl").write_text('{"id": 9}\n', encoding="utf-8")
    source = open_source(str(folder))
    assert source.num_rows == 2
    assert [row["id"] for row in rows(source)] == [0, 1]
