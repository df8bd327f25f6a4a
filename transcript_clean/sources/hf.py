"""`datasets` sources: folders written by `save_to_disk`, and `load_dataset` (the Hub, or a builder
such as "json" or "parquet" given data files). `datasets` is imported only when one is opened."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from transcript_clean.errors import SourceError, option_name
from transcript_clean.sources.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    Part,
    Source,
    check_range,
    digest,
    row_range,
    table_batches,
)

DataFiles = str | Sequence[str] | Mapping[str, str | Sequence[str]]


class _DatasetsSource(Source):
    """What the `datasets` sources share: a fingerprint and local roots known when opened."""

    def __init__(
        self, name: str, schema: pa.Schema, fingerprint: str, roots: list[Path] | None
    ) -> None:
        super().__init__(name, schema)
        self._fingerprint = fingerprint
        self._roots = roots or []

    def local_roots(self) -> list[Path]:
        return list(self._roots)

    def fingerprint(self) -> str:
        return self._fingerprint


class DatasetSource(_DatasetsSource):
    """A `datasets.Dataset` (Arrow-backed, usually memory-mapped), one part, read by slices."""

    def __init__(
        self,
        name: str,
        kind: str,
        dataset: Any,
        part_name: str,
        fingerprint: str,
        roots: list[Path],
    ) -> None:
        super().__init__(name, dataset.features.arrow_schema, fingerprint, roots)
        self.kind = kind
        self._dataset = dataset
        self._part = Part(part_name, dataset.num_rows, None)

    def parts(self) -> list[Part]:
        return [self._part]

    def read(
        self,
        part: Part,
        start: int = 0,
        stop: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> Iterator[pa.RecordBatch]:
        start, stop = row_range(part, start, stop, batch_size, batch_bytes)
        arrow = self._dataset.with_format("arrow")
        for low in range(start, stop, batch_size):
            yield from table_batches(
                arrow[low : min(low + batch_size, stop)], self.schema, batch_size, batch_bytes
            )


class StreamingSource(_DatasetsSource):
    """A streaming `datasets.IterableDataset`: one part of unknown length, read from its start."""

    kind = "hub"

    def __init__(
        self, name: str, dataset: Any, fingerprint: str, roots: list[Path] | None = None
    ) -> None:
        features = dataset.features
        if features is not None:
            schema = features.arrow_schema
        else:  # a builder that only knows its columns once it reads: look at the first row
            try:
                first = next(iter(dataset.with_format("arrow").iter(batch_size=1)), None)
            except Exception as exc:  # the network, the Hub, a bad file: name the dataset
                raise SourceError(f"cannot read dataset {name}: {exc}") from exc
            schema = pa.schema([]) if first is None else first.schema
        super().__init__(name, schema, fingerprint, roots)
        self._dataset = dataset

    def parts(self) -> list[Part]:
        return [Part(self.name, None, None)]

    def read(
        self,
        part: Part,
        start: int = 0,
        stop: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> Iterator[pa.RecordBatch]:
        check_range(start, stop, batch_size, batch_bytes)
        dataset = self._dataset.skip(start) if start else self._dataset
        if stop is not None:
            dataset = dataset.take(max(stop - start, 0))
        try:
            for table in dataset.with_format("arrow").iter(batch_size=batch_size):
                yield from table_batches(table, self.schema, batch_size, batch_bytes)
        except Exception as exc:  # the network, the Hub, a bad file: name the dataset
            raise SourceError(f"cannot read dataset {self.name}: {exc}") from exc


def load_hub(
    path: str,
    *,
    subset: str | None = None,
    split: str | None = None,
    revision: str | None = None,
    streaming: bool = False,
    data_files: DataFiles | None = None,
) -> Source:
    """`datasets.load_dataset(path, subset, split=split or "train", ...)` as a source.

    `path` is a Hub id, or a builder name such as "json" or "parquet" given `data_files`.
    Any failure (no network, unknown dataset, unknown split) is a `SourceError` naming `path`.
    """
    import datasets

    split = split or "train"
    try:
        dataset = datasets.load_dataset(
            path, subset, split=split, revision=revision, streaming=streaming,
            data_files=data_files,
        )  # fmt: skip
    except Exception as exc:  # datasets raises many kinds; all mean "cannot load this one"
        raise SourceError(f"cannot load dataset {path!r}: {type(exc).__name__}: {exc}") from exc
    files = _data_files_state(data_files)
    fingerprint = digest("hub", path, subset, split, revision, files)
    roots = [Path(name) for name, size, _ in files if size is not None]
    if os.path.isdir(path):  # load_dataset also reads a local folder of data files
        roots.append(Path(path))
    if isinstance(dataset, datasets.IterableDataset):
        return StreamingSource(path, dataset, fingerprint, roots)
    if isinstance(dataset, datasets.Dataset):
        return DatasetSource(path, "hub", dataset, path, fingerprint, roots)
    raise SourceError(f"dataset {path!r} loaded as {type(dataset).__name__}, not a Dataset")


def _data_files_state(data_files: DataFiles | None) -> list[tuple[str, int | None, int | None]]:
    """`data_files` with each local file's size and modification time, for the fingerprint."""
    if data_files is None:
        return []
    if isinstance(data_files, str):
        names: list[str] = [data_files]
    elif isinstance(data_files, Mapping):
        names = [n for v in data_files.values() for n in ([v] if isinstance(v, str) else v)]
    else:
        names = list(data_files)
    state: list[tuple[str, int | None, int | None]] = []
    for name in names:
        if os.path.isfile(name):
            stat = os.stat(name)
            state.append((name, stat.st_size, stat.st_mtime_ns))
        else:  # remote, or a pattern
            state.append((name, None, None))
    return state


def open_datasets_folder(spec: str, path: Path, split: str | None) -> DatasetSource:
    """A folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # a damaged folder can fail in many ways inside datasets
        raise SourceError(f"cannot load datasets folder {spec}: {exc}") from exc
    note = None
    if isinstance(loaded, datasets.DatasetDict):
        splits = ", ".join(loaded)
        if split is None and len(loaded) == 1:  # nothing to choose: its only split
            split = next(iter(loaded))
            note = f"its only split, {split}"
        if split is None:
            raise SourceError(
                f"{spec} holds several splits ({splits}): choose one with {option_name('split')}"
            )
        if split not in loaded:
            raise SourceError(f"{spec} has no split {split!r}; its splits: {splits}")
        dataset, folder = loaded[split], path / split
    else:
        dataset, folder = loaded, path
    fingerprint = _folder_fingerprint(folder)
    source = DatasetSource(spec, "datasets-folder", dataset, str(folder), fingerprint, [path])
    source.note = note
    return source


def _folder_fingerprint(folder: Path) -> str:
    """From the folder's state.json (the dataset's fingerprint, its files) and the files' sizes."""
    state = (folder / "state.json").read_bytes()
    files = json.loads(state).get("_data_files", [])
    sizes = [os.path.getsize(folder / item["filename"]) for item in files if "filename" in item]
    return digest("datasets-folder", hashlib.sha256(state).hexdigest(), sizes)
