"""Inputs: Parquet files, JSON files, `datasets` folders and Hub datasets, as Arrow record batches.

Parquet is also read over URIs (`s3://`, `gs://`, `file://`, and whatever else pyarrow or fsspec
reach), so that a cluster's workers can read the same input.

`open_source(spec)` works out what `spec` names and returns a `Source`: one schema, a list of
independently readable `Part`s, and `read(part, start, stop)` for any row range of a part, in
bounded memory. Sources and parts pickle, so worker processes can read their own ranges.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import json
import os
import re
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from transcript_clean.errors import SourceError

DEFAULT_BATCH_SIZE = 4096
JSON_COLUMNS_KEY = b"transcript_clean.json_columns"
"""Schema metadata key: the comma-separated columns that hold JSON text instead of typed values."""

DataFiles = str | Sequence[str] | Mapping[str, str | Sequence[str]]

_JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
_JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
_GLOB_CHARS = re.compile(r"[*?\[]")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True, slots=True)
class Part:
    """An independently readable piece of a source: one file, or one in-memory table."""

    name: str
    """What a reject's `_source` says: the file path, or the dataset id or folder."""
    num_rows: int | None
    """None only for a streaming Hub dataset."""
    key: Any
    """Whatever `Source.read` needs to find the part; picklable."""


class Source(ABC):
    """A dataset to clean, read part by part. Subclasses exist per kind; instances pickle."""

    kind: str
    """"parquet", "json", "datasets-folder" or "hub"."""

    uses_pandas = True
    """Whether reading it may hand pyarrow pandas objects: it does when `datasets` reads it."""

    def __init__(self, name: str, schema: pa.Schema) -> None:
        self.name = name
        self.schema = schema

    @abstractmethod
    def parts(self) -> list[Part]:
        """The parts, in the source's order."""

    @abstractmethod
    def read(
        self,
        part: Part,
        start: int = 0,
        stop: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> Iterator[pa.RecordBatch]:
        """Rows [start, stop) of `part`, in order, in batches of at most `batch_size` rows, every
        batch with `self.schema`."""

    @abstractmethod
    def fingerprint(self) -> str:
        """A short hex digest that changes when the input's content does; cheap to compute."""

    def local_roots(self) -> list[Path]:
        """The local files and folders this source reads (so that outputs can stay out of them)."""
        return []

    @property
    def num_rows(self) -> int | None:
        """Rows in all parts; None when a part's count is unknown (streaming)."""
        counts = [part.num_rows for part in self.parts()]
        return None if None in counts else sum(n for n in counts if n is not None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def json_columns(schema: pa.Schema) -> list[str]:
    """The columns of `schema` that hold JSON text to decode (see `JSON_COLUMNS_KEY`)."""
    value = (schema.metadata or {}).get(JSON_COLUMNS_KEY, b"")
    return [name for name in value.decode().split(",") if name]


def open_source(
    spec: str,
    *,
    split: str | None = None,
    subset: str | None = None,
    revision: str | None = None,
    streaming: bool = False,
    data_files: DataFiles | None = None,
) -> Source:
    """Open what `spec` names, checked in this order:

    - with `data_files`: `datasets.load_dataset(spec, data_files=...)` (see `load_hub`);
    - a file: JSON when its name ends in `.json`, `.jsonl` or `.ndjson` (each maybe `.gz`), else
      Parquet;
    - a folder: a `DatasetDict` saved by `save_to_disk` (has `dataset_dict.json`; needs `split`),
      a `Dataset` saved by it (has `state.json`), else every `*.parquet` file below it, sorted by
      path, skipping names that start with `.` or `_`;
    - a glob (`data/*.parquet`, `**` allowed): its files, sorted, all Parquet or all JSON;
    - a URI (`s3://bucket/data/`, `gs://...`, `file:///...`, any scheme pyarrow or fsspec
      knows): a Parquet file, a folder of them or a glob, read through that filesystem;
    - a Hub id (`owner/name` or `name`): `load_hub`.

    `split`, `subset`, `revision` and `streaming` apply to the Hub; `split` also picks the split of
    a `DatasetDict` folder. Raises `SourceError` for anything it cannot open.
    """
    if data_files is not None:
        return load_hub(
            spec, subset=subset, split=split, revision=revision, streaming=streaming,
            data_files=data_files,
        )  # fmt: skip
    if _URI.match(spec):
        return _open_uri(spec)
    path = Path(os.path.expanduser(spec))
    if path.is_file():
        return _open_files(spec, [path], path)
    if path.is_dir():
        if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
            return _open_datasets_folder(spec, path, split)
        files = sorted(
            file
            for file in path.rglob("*.parquet")
            if file.is_file() and not _hidden(file.relative_to(path))
        )
        if not files:
            raise SourceError(f"no Parquet files in folder {spec}")
        return _open_files(spec, files, path)
    if _GLOB_CHARS.search(spec):
        matches = glob.glob(os.path.expanduser(spec), recursive=True)
        files = sorted(Path(match) for match in matches if os.path.isfile(match))
        if not files:
            raise SourceError(f"no files match {spec}")
        return _open_files(spec, files, _glob_root(path))
    if _HUB_ID.fullmatch(spec) and not _is_json_name(spec) and not spec.endswith(".parquet"):
        return load_hub(spec, subset=subset, split=split, revision=revision, streaming=streaming)
    raise SourceError(f"no such file or folder: {spec}")


def _hidden(relative: Path) -> bool:
    return any(part.startswith((".", "_")) for part in relative.parts)


def _glob_root(pattern: Path) -> Path:
    """The folder a glob's matches are named relative to: its parts before the first wildcard."""
    root = Path()
    for part in pattern.parts:
        if _GLOB_CHARS.search(part):
            break
        root = root / part
    return root


def _is_json_name(name: str) -> bool:
    return name.removesuffix(".gz").endswith(_JSON_SUFFIXES)


def _open_files(spec: str, files: list[Path], root: Path) -> Source:
    """A Parquet or JSON source over `files`, which lie in `root` (or are `root`)."""
    json_files = [file for file in files if _is_json_name(file.name)]
    if not json_files:
        return ParquetSource(spec, files, root)
    if len(json_files) == len(files):
        return JsonSource(spec, files, root)
    other = next(file for file in files if not _is_json_name(file.name))
    raise SourceError(f"{spec} mixes JSON files ({json_files[0]}) with others ({other})")


def _check_range(start: int, stop: int | None, batch_size: int) -> None:
    if start < 0 or (stop is not None and stop < 0):
        raise ValueError(f"row range [{start}, {stop}) has a negative bound")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")


def _row_range(part: Part, start: int, stop: int | None, batch_size: int) -> tuple[int, int]:
    """`[start, stop)` checked and clipped to the rows of `part`, whose length is known."""
    _check_range(start, stop, batch_size)
    assert part.num_rows is not None
    return start, part.num_rows if stop is None else min(stop, part.num_rows)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with exactly `schema`, metadata included (same types, maybe other list names)."""
    if batch.schema.equals(schema, check_metadata=True):
        return batch
    return batch.cast(schema)


def _table_batches(table: pa.Table, schema: pa.Schema, batch_size: int) -> Iterator[pa.RecordBatch]:
    for batch in table.to_batches(max_chunksize=batch_size):
        if batch.num_rows:
            yield _conform(batch, schema)


def _digest(*items: object) -> str:
    return hashlib.sha256(json.dumps(items, default=str).encode()).hexdigest()[:16]


# Parquet ----------------------------------------------------------------------------------------


class _FileSource(Source):
    """Files under one local root, one part each."""

    uses_pandas = False

    _parts: list[Part]
    _root: Path

    def parts(self) -> list[Part]:
        return list(self._parts)

    def local_roots(self) -> list[Path]:
        return [self._root]


class ParquetSource(_FileSource):
    """Parquet files, one part each. Reads only the row groups a range touches."""

    kind = "parquet"

    def __init__(self, name: str, files: Sequence[Path], root: Path) -> None:
        self._root = root
        self._open_parts(name, [(str(file), str(file), _label(file, root)) for file in files])

    def _open_parts(self, name: str, files: Sequence[tuple[str, str, str]]) -> None:
        """Read the footers of `files`, each (part name, key for `_open`, fingerprint label)."""
        self._parts: list[Part] = []
        self._labels: list[str] = []
        first: tuple[str, pa.Schema] | None = None
        for part_name, key, label in files:
            try:
                with self._open(key) as parquet:
                    schema, num_rows = parquet.schema_arrow, parquet.metadata.num_rows
            except (pa.ArrowException, OSError) as exc:
                raise SourceError(f"cannot read {part_name} as Parquet: {exc}") from exc
            if first is None:
                first = (part_name, schema)
            else:
                _check_same_schema(first[0], first[1], part_name, schema)
            self._parts.append(Part(part_name, num_rows, key))
            self._labels.append(label)
        if first is None:
            raise SourceError(f"no Parquet files in {name}")
        super().__init__(name, first[1])

    @contextmanager
    def _open(self, key: str) -> Iterator[pq.ParquetFile]:
        with pq.ParquetFile(key) as parquet:
            yield parquet

    def _size_and_footer(self, key: str) -> tuple[int, bytes]:
        return os.path.getsize(key), _footer(Path(key))

    def read(
        self,
        part: Part,
        start: int = 0,
        stop: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> Iterator[pa.RecordBatch]:
        start, stop = _row_range(part, start, stop, batch_size)
        if start >= stop:
            return
        try:
            with self._open(part.key) as parquet:
                groups, position = _row_groups(parquet.metadata, start, stop)
                for batch in parquet.iter_batches(batch_size=batch_size, row_groups=groups):
                    low, high = max(start - position, 0), min(stop - position, batch.num_rows)
                    if high > low:
                        yield _conform(batch.slice(low, high - low), self.schema)
                    position += batch.num_rows
                    if position >= stop:
                        break
        except (pa.ArrowException, OSError) as exc:
            raise SourceError(f"cannot read {part.name}: {exc}") from exc

    def fingerprint(self) -> str:
        """From each file's name (relative to the folder), size and footer bytes."""
        items = []
        for part, label in zip(self._parts, self._labels, strict=True):
            size, footer = self._size_and_footer(part.key)
            items.append((label, size, hashlib.sha256(footer).hexdigest()))
        return _digest("parquet", items)


class UriParquetSource(ParquetSource):
    """Parquet files on the filesystem a URI names (`s3://`, `gs://`, `file://`, ...).

    It pickles as its URI: each process re-creates the filesystem (and its credentials) itself.
    """

    def __init__(self, name: str, uri: str, paths: Sequence[str], root: str) -> None:
        """`paths` are paths on the filesystem of `uri`, below `root` (the path `uri` names)."""
        self._uri = uri
        self._root_path = root
        self._filesystem: pafs.FileSystem | None = None
        files = []
        for path in paths:
            relative = path[len(root) :].strip("/")
            label = relative or path.rstrip("/").rsplit("/", 1)[-1]
            files.append((f"{uri.rstrip('/')}/{relative}" if relative else uri, path, label))
        self._open_parts(name, files)

    @property
    def filesystem(self) -> pafs.FileSystem:
        if self._filesystem is None:
            self._filesystem = _uri_filesystem(self._uri)[0]
        return self._filesystem

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_filesystem": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def local_roots(self) -> list[Path]:
        return [Path(self._root_path)] if self._uri.lower().startswith("file://") else []

    @contextmanager
    def _open(self, key: str) -> Iterator[pq.ParquetFile]:
        with self.filesystem.open_input_file(key) as handle, pq.ParquetFile(handle) as parquet:
            yield parquet

    def _size_and_footer(self, key: str) -> tuple[int, bytes]:
        try:
            with self.filesystem.open_input_file(key) as handle:
                return int(handle.size()), _read_footer(handle, key)
        except (pa.ArrowException, OSError) as exc:
            raise SourceError(f"cannot read {key}: {exc}") from exc


def _uri_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem `uri` names and the path on it: pyarrow's own, else fsspec's."""
    try:
        try:
            filesystem, path = pafs.FileSystem.from_uri(uri)
        except pa.ArrowInvalid as exc:
            if "Unrecognized filesystem type" not in str(exc):
                raise
            import fsspec  # type: ignore[import-untyped]  # datasets needs it; knows memory:// ...

            fs, path = fsspec.core.url_to_fs(uri)
            filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    except (pa.ArrowException, OSError, ValueError, ImportError) as exc:
        raise SourceError(f"cannot reach {uri}: {exc}") from exc
    return filesystem, str(path)


def _open_uri(spec: str) -> Source:
    """A Parquet file, a folder of them (recursively) or a glob, on the filesystem of a URI."""
    scheme_end = spec.index("://") + 3
    wildcard = _GLOB_CHARS.search(spec, scheme_end)
    # a glob: list the folder before the first wildcard, and match the rest against each path
    uri = spec if wildcard is None else spec[: spec.rfind("/", scheme_end, wildcard.start())]
    filesystem, root = _uri_filesystem(uri)
    root = root.rstrip("/") or root
    try:
        info = filesystem.get_file_info(root)
        if wildcard is not None:
            glob_text = spec[len(uri) :].lstrip("/")
            pattern = _glob_pattern(glob_text)
            deep = "/" in glob_text or "**" in glob_text
            found = (
                _list_files(filesystem, root, recursive=deep)
                if info.type == pafs.FileType.Directory
                else []
            )
            paths = [path for path in found if pattern.fullmatch(_relative(path, root))]
            if not paths:
                raise SourceError(f"no files match {spec}")
        elif info.type == pafs.FileType.File:
            paths = [root]
        elif info.type == pafs.FileType.Directory:
            paths = [
                path
                for path in _list_files(filesystem, root, recursive=True)
                if path.endswith(".parquet") and not _hidden(Path(_relative(path, root)))
            ]
            if not paths:
                raise SourceError(f"no Parquet files in folder {spec}")
        else:
            raise SourceError(f"no such file or folder: {spec}")
    except (pa.ArrowException, OSError) as exc:
        raise SourceError(f"cannot list {spec}: {exc}") from exc
    json_file = next((path for path in paths if _is_json_name(path)), None)
    if json_file is not None:
        raise SourceError(
            f"{spec}: JSON is read from local files only ({json_file}); over a URI, use Parquet"
        )
    return UriParquetSource(spec, uri, paths, root)


def _list_files(filesystem: pafs.FileSystem, root: str, *, recursive: bool) -> list[str]:
    selector = pafs.FileSelector(root, recursive=recursive)
    infos = filesystem.get_file_info(selector)
    return sorted(info.path for info in infos if info.type == pafs.FileType.File)


def _relative(path: str, root: str) -> str:
    return path[len(root) :].lstrip("/") if path.startswith(root) else path


def _glob_pattern(glob_text: str) -> re.Pattern[str]:
    """A glob as a regex over `/`-separated paths, with `glob.glob`'s rules: `*` and `?` stay
    within a name, `**/` spans folders, and no wildcard matches a name's leading dot."""
    out = []
    position = 0
    while position < len(glob_text):
        hide = "(?!\\.)" if position == 0 or glob_text[position - 1] == "/" else ""
        if glob_text.startswith("**/", position):
            out.append("(?:(?!\\.)[^/]*/)*")
            position += 3
        elif glob_text[position] == "*":
            out.append(hide + "[^/]*")
            position += 2 if glob_text.startswith("**", position) else 1
        elif glob_text[position] == "?":
            out.append(hide + "[^/]")
            position += 1
        elif glob_text[position] == "[" and "]" in glob_text[position + 2 :]:
            close = glob_text.index("]", position + 2)
            body = glob_text[position + 1 : close]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append(hide + f"[{body.replace(chr(92), chr(92) * 2)}]")
            position = close + 1
        else:
            out.append(re.escape(glob_text[position]))
            position += 1
    return re.compile("".join(out))


def _row_groups(metadata: pq.FileMetaData, start: int, stop: int) -> tuple[list[int], int]:
    """The row groups holding rows of [start, stop), and the row number the first one starts at."""
    groups: list[int] = []
    first = offset = 0
    for index in range(metadata.num_row_groups):
        rows = metadata.row_group(index).num_rows
        if offset < stop and offset + rows > start:
            if not groups:
                first = offset
            groups.append(index)
        offset += rows
    return groups, first


def _check_same_schema(path_a: str, a: pa.Schema, path_b: str, b: pa.Schema) -> None:
    if a.equals(b, check_metadata=False):
        return
    for index in range(max(len(a), len(b))):
        field_a = a.field(index) if index < len(a) else None
        field_b = b.field(index) if index < len(b) else None
        if field_a is None or field_b is None or not field_a.equals(field_b):
            break
    raise SourceError(
        f"Parquet files have different schemas: column {index} of {path_a} is "
        f"{_describe(field_a)}, of {path_b} is {_describe(field_b)}"
    )


def _describe(field: pa.Field | None) -> str:
    if field is None:
        return "missing"
    return f"{field.name!r} ({field.type}{'' if field.nullable else ', not null'})"


def _label(file: Path, root: Path) -> str:
    """The name of `file` in a fingerprint: relative to the folder, so a copy is the same input."""
    if file == root:
        return file.name
    try:
        return file.relative_to(root).as_posix()
    except ValueError:
        return file.name


def _footer(path: Path) -> bytes:
    """The Parquet footer: the file's metadata, without reading any data."""
    try:
        with path.open("rb") as handle:
            return _read_footer(handle, str(path))
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc}") from exc


def _read_footer(handle: IO[bytes] | pa.NativeFile, name: str) -> bytes:
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(size - 8, 0))
    tail = handle.read(8)
    length = int.from_bytes(tail[:4], "little")
    if len(tail) < 8 or tail[4:] != b"PAR1" or length > size - 12:
        raise SourceError(f"{name} is not a Parquet file (no footer)")
    handle.seek(size - 8 - length)
    return bytes(handle.read(length))


# JSON -------------------------------------------------------------------------------------------


class JsonSource(_FileSource):
    """JSON files, one part each: a list of row objects, one row object, or JSON Lines.

    The files are read whole into memory and become one Arrow table. A column Arrow cannot hold
    exactly (a `content` that is a string in one message and a list in another, objects with
    different keys, ints mixed with floats) is stored as JSON text instead, and named in the
    schema metadata under `JSON_COLUMNS_KEY`, so the reader can decode it back to the same values.
    """

    kind = "json"

    def __init__(self, name: str, files: Sequence[Path], root: Path) -> None:
        rows: list[dict[str, Any]] = []
        self._parts: list[Part] = []
        digests = []
        for file in files:
            data = _read_bytes(file)
            file_rows = _json_rows(file, data)
            self._parts.append(Part(str(file), len(file_rows), len(rows)))
            rows.extend(file_rows)
            digests.append((_label(file, root), hashlib.sha256(data).hexdigest()))
        self._root = root
        self._table = rows_to_table(rows)
        self._fingerprint = _digest("json", digests)
        super().__init__(name, self._table.schema)

    def read(
        self,
        part: Part,
        start: int = 0,
        stop: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> Iterator[pa.RecordBatch]:
        start, stop = _row_range(part, start, stop, batch_size)
        if start < stop:
            rows = self._table.slice(part.key + start, stop - start)
            yield from _table_batches(rows, self.schema, batch_size)

    def fingerprint(self) -> str:
        """From each file's name and the bytes that were read."""
        return self._fingerprint


def _read_bytes(file: Path) -> bytes:
    try:
        data = file.read_bytes()
        return gzip.decompress(data) if file.name.endswith(".gz") else data
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceError(f"cannot read {file}: {exc}") from exc


def _json_rows(file: Path, data: bytes) -> list[dict[str, Any]]:
    """The row objects of a JSON or JSON Lines file."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{file} is not UTF-8 text: {exc}") from exc
    if file.name.removesuffix(".gz").endswith(_JSON_LINES_SUFFIXES):
        return _json_lines(file, text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # a complete value, then more: JSON Lines under a .json name
            return _json_lines(file, text)
        raise SourceError(
            f"{file}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        ) from exc
    rows: list[Any] = value if isinstance(value, list) else [value]
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            kind = type(row).__name__
            raise SourceError(f"{file}: row {index} is a {kind}, expected a JSON object")
    return rows


def _json_lines(file: Path, text: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError(f"{file}: line {number}: invalid JSON: {exc.msg}") from exc
        if not isinstance(row, dict):
            kind = type(row).__name__
            raise SourceError(f"{file}: line {number} is a {kind}, expected a JSON object")
        rows.append(row)
    return rows


def rows_to_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """An Arrow table of `rows` (columns in order of first appearance, missing keys null).

    A column Arrow cannot hold exactly becomes JSON text (`json.dumps`, None stays null) and is
    listed under `JSON_COLUMNS_KEY` in the schema metadata.
    """
    names = list(dict.fromkeys(name for row in rows for name in row))
    arrays = []
    as_json = []
    for name in names:
        values = [row.get(name) for row in rows]
        array = _exact_array(values)
        if array is None:
            texts = [None if v is None else json.dumps(v, ensure_ascii=False) for v in values]
            array = pa.array(texts, pa.string())
            as_json.append(name)
        arrays.append(array)
    metadata = {JSON_COLUMNS_KEY: ",".join(as_json).encode()} if as_json else None
    return pa.Table.from_arrays(arrays, names=names, metadata=metadata)


def _exact_array(values: list[Any]) -> pa.Array | None:
    """`values` as an Arrow array that gives back exactly `values`, or None when there is none."""
    try:
        array = pa.array(values)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None
    if _has_empty_struct(array.type) or not _same(array.to_pylist(), values):
        return None
    return array


def _has_empty_struct(type_: pa.DataType) -> bool:
    """Parquet cannot store a struct without fields (what `{}` becomes)."""
    if pa.types.is_struct(type_) and type_.num_fields == 0:
        return True
    return any(_has_empty_struct(type_.field(i).type) for i in range(type_.num_fields))


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: types must match too (1 is not 1.0), key order may differ."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:  # NaN
        return bool(b != b)
    return bool(a == b)


# datasets and the Hub ---------------------------------------------------------------------------


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
    ) -> Iterator[pa.RecordBatch]:
        start, stop = _row_range(part, start, stop, batch_size)
        arrow = self._dataset.with_format("arrow")
        for low in range(start, stop, batch_size):
            yield from _table_batches(
                arrow[low : min(low + batch_size, stop)], self.schema, batch_size
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
    ) -> Iterator[pa.RecordBatch]:
        _check_range(start, stop, batch_size)
        dataset = self._dataset.skip(start) if start else self._dataset
        if stop is not None:
            dataset = dataset.take(max(stop - start, 0))
        try:
            for table in dataset.with_format("arrow").iter(batch_size=batch_size):
                yield from _table_batches(table, self.schema, batch_size)
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
    fingerprint = _digest("hub", path, subset, split, revision, files)
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


def _open_datasets_folder(spec: str, path: Path, split: str | None) -> Source:
    """A folder written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # a damaged folder can fail in many ways inside datasets
        raise SourceError(f"cannot load datasets folder {spec}: {exc}") from exc
    if isinstance(loaded, datasets.DatasetDict):
        splits = ", ".join(loaded)
        if split is None:
            raise SourceError(f"{spec} holds several splits ({splits}): choose one with a split")
        if split not in loaded:
            raise SourceError(f"{spec} has no split {split!r}; its splits: {splits}")
        dataset, folder = loaded[split], path / split
    else:
        dataset, folder = loaded, path
    fingerprint = _folder_fingerprint(folder)
    return DatasetSource(spec, "datasets-folder", dataset, str(folder), fingerprint, [path])


def _folder_fingerprint(folder: Path) -> str:
    """From the folder's state.json (the dataset's fingerprint, its files) and the files' sizes."""
    state = (folder / "state.json").read_bytes()
    files = json.loads(state).get("_data_files", [])
    sizes = [os.path.getsize(folder / item["filename"]) for item in files if "filename" in item]
    return _digest("datasets-folder", hashlib.sha256(state).hexdigest(), sizes)
