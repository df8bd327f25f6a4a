"""Parquet files: local files, folders and globs, and the same over URIs.

Over a URI (`s3://`, `gs://`, `file://`, and whatever else pyarrow or fsspec reach), so that a
cluster's workers can read the same input.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from transcript_clean.errors import SourceError
from transcript_clean.sizes import cut_by_bytes
from transcript_clean.sources.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    GLOB_CHARS,
    FileSource,
    Part,
    conform,
    digest,
    hidden,
    is_json_name,
    label,
    row_range,
)
from transcript_clean.storage import StorageError, Store, arrow_filesystem, scheme


class ParquetSource(FileSource):
    """Parquet files, one part each. Reads only the row groups a range touches."""

    kind = "parquet"

    def __init__(self, name: str, files: Sequence[Path], root: Path) -> None:
        self._root = root
        self._open_parts(name, [(str(file), str(file), label(file, root)) for file in files])

    def _open_parts(self, name: str, files: Sequence[tuple[str, str, str]]) -> None:
        """Read the footers of `files`, each (part name, key for `_open`, fingerprint label)."""
        self._parts: list[Part] = []
        self._labels: list[str] = []
        first: tuple[str, pa.Schema] | None = None
        for part_name, key, file_label in files:
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
            self._labels.append(file_label)
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
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> Iterator[pa.RecordBatch]:
        start, stop = row_range(part, start, stop, batch_size, batch_bytes)
        if start >= stop:
            return
        try:
            with self._open(part.key) as parquet:
                metadata = parquet.metadata
                groups, position = _row_groups(metadata, start, stop)
                density = _Density()
                for window in _windows(metadata, groups, batch_bytes):
                    rows = sum(metadata.row_group(g).num_rows for g in window)
                    if position < stop:
                        window_rows = _read_window(
                            parquet, window, position, start, stop, batch_size, batch_bytes, density
                        )
                        for piece in cut_by_bytes(window_rows, batch_size, batch_bytes):
                            yield conform(piece, self.schema)
                    position += rows
        except (pa.ArrowException, OSError) as exc:
            raise SourceError(f"cannot read {part.name}: {exc}") from exc

    def fingerprint(self) -> str:
        """From each file's name (relative to the folder), size and footer bytes."""
        items = []
        for part, file_label in zip(self._parts, self._labels, strict=True):
            size, footer = self._size_and_footer(part.key)
            items.append((file_label, size, hashlib.sha256(footer).hexdigest()))
        return digest("parquet", items)


class UriParquetSource(ParquetSource):
    """Parquet files on the filesystem a URI names (`s3://`, `gs://`, `file://`, ...).

    It pickles as its URI and storage options: each process re-creates the filesystem (and
    its credentials) itself.
    """

    def __init__(
        self,
        name: str,
        uri: str,
        paths: Sequence[str],
        root: str,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """`paths` are paths on the filesystem of `uri`, below `root` (the path `uri` names)."""
        self._uri = uri
        self._options = dict(options or {})
        self._root_path = root
        self._filesystem: pafs.FileSystem | None = None
        files = []
        for path in paths:
            relative = path[len(root) :].strip("/")
            file_label = relative or path.rstrip("/").rsplit("/", 1)[-1]
            files.append((f"{uri.rstrip('/')}/{relative}" if relative else uri, path, file_label))
        self._open_parts(name, files)

    @property
    def filesystem(self) -> pafs.FileSystem:
        if self._filesystem is None:
            self._filesystem = _uri_filesystem(self._uri, self._options)[0]
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


def open_uri(spec: str, options: Mapping[str, Any] | None = None) -> UriParquetSource:
    """A Parquet file, a folder of them (recursively) or a glob, on the filesystem of a URI;
    `options` are the filesystem's (`storage.parse_storage_options`)."""
    scheme_end = spec.index("://") + 3
    wildcard = GLOB_CHARS.search(spec, scheme_end)
    # a glob: list the folder before the first wildcard, and match the rest against each path
    uri = spec if wildcard is None else spec[: spec.rfind("/", scheme_end, wildcard.start())]
    filesystem, root = _uri_filesystem(uri, options)
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
                if path.endswith(".parquet") and not hidden(Path(_relative(path, root)))
            ]
            if not paths:
                raise SourceError(f"no Parquet files in folder {spec}")
        else:
            raise SourceError(f"no such file or folder: {spec}")
    except (pa.ArrowException, OSError) as exc:
        raise SourceError(f"cannot list {spec}: {exc}") from exc
    json_file = next((path for path in paths if is_json_name(path)), None)
    if json_file is not None:
        raise SourceError(
            f"{spec}: JSON is read from local files only ({json_file}); over a URI, use Parquet"
        )
    return UriParquetSource(spec, uri, paths, root, options)


def _uri_filesystem(
    uri: str, options: Mapping[str, Any] | None = None
) -> tuple[pafs.FileSystem, str]:
    """The filesystem `uri` names and the path on it: pyarrow's own where it has one that takes
    `options` (it reads Parquet faster: `storage.arrow_filesystem`), else fsspec's."""
    options = options or {}
    try:
        found = arrow_filesystem(uri, options)  # s3://, with its timeouts
        # pyarrow's own GCS filesystem waits for a metadata server that is not there offline,
        # for minutes: gs:// goes through gcsfs (or says which extra it needs) instead.
        if found is None and not options and scheme(uri) not in ("gs", "gcs"):
            try:
                found = pafs.FileSystem.from_uri(uri)
            except pa.ArrowInvalid as exc:
                if "Unrecognized filesystem type" not in str(exc):
                    raise
                found = None
        if found is None:  # memory://, hf://, options only fsspec knows, ...
            store = Store(uri, options)
            found = pafs.PyFileSystem(pafs.FSSpecHandler(store.fs)), store.path
        filesystem, path = found
    except StorageError as exc:
        raise SourceError(str(exc)) from exc
    except (pa.ArrowException, OSError, ValueError, ImportError) as exc:
        raise SourceError(f"cannot reach {uri}: {exc}") from exc
    return filesystem, str(path)


def _list_files(filesystem: pafs.FileSystem, root: str, *, recursive: bool) -> list[str]:
    selector = pafs.FileSelector(root, recursive=recursive)
    infos = filesystem.get_file_info(selector)
    return sorted(info.path for info in infos if info.type == pafs.FileType.File)


def _relative(path: str, root: str) -> str:
    return path[len(root) :].lstrip("/") if path.startswith(root) else path


# Not fsspec's `glob`: its wildcards match names that start with a dot (its `glob_translate` fixes
# include_hidden=True), which a local glob (`glob.glob`) skips, and its `**` rules differ (a
# trailing `**` spans folders, `a**b` is an error), so a URI glob would read other files.
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


def _windows(metadata: pq.FileMetaData, groups: list[int], batch_bytes: int) -> list[list[int]]:
    """`groups` in runs of consecutive row groups of about `batch_bytes` (at least one each).

    Each run is read by a reader of its own: a reader keeps every column chunk it has read
    (pyarrow's `pre_buffer`, on by default, which reads a row group's columns at once), so one
    reader over a whole file holds as much memory as the file, compressed."""
    windows: list[list[int]] = []
    size = 0
    for group in groups:
        group_size = metadata.row_group(group).total_byte_size
        if not windows or size + group_size > batch_bytes:
            windows.append([])
            size = 0
        windows[-1].append(group)
        size += group_size
    return windows


PROBE_ROWS = 64
"""Rows of a part's first read, before the size of its rows is known: a Parquet footer gives
encoded sizes, and a column of long texts repeated (dictionary-encoded) decodes to a hundred
times what the footer says."""


@dataclass(slots=True)
class _Density:
    """Bytes per row of the last batch read from a file, once one is read."""

    measured: float | None = None


def _read_window(
    parquet: pq.ParquetFile,
    window: list[int],
    first: int,
    start: int,
    stop: int,
    batch_size: int,
    batch_bytes: int,
    density: _Density,
) -> Iterator[pa.RecordBatch]:
    """The rows of [start, stop) in `window`, a run of row groups whose first row is `first`,
    read in batches of about `batch_bytes` by the sizes the rows turn out to have.

    The first batch of a file is a probe of at most `PROBE_ROWS`, then read again with the step
    its bytes per row ask; and whenever a batch holds more than twice `batch_bytes`, the rest
    of the window is read again from the next row, with a step fitted to the bytes per row
    seen: what is decoded at once stays near `batch_bytes` even where the footer's sizes are
    far below the rows'."""
    metadata = parquet.metadata
    starts = [first]
    for group in window:
        starts.append(starts[-1] + metadata.row_group(group).num_rows)
    at, end = max(start, first), min(stop, starts[-1])
    probing = density.measured is None
    while at < end:
        step = _rows_within(metadata, window, batch_size, batch_bytes, density.measured)
        probe = probing and step > PROBE_ROWS
        step = PROBE_ROWS if probe else step
        k = max(i for i in range(len(window)) if starts[i] <= at)
        position, again = starts[k], False
        for batch in parquet.iter_batches(batch_size=step, row_groups=window[k:]):
            low, high = max(at - position, 0), min(end - position, batch.num_rows)
            if batch.num_rows:
                density.measured = batch.nbytes / batch.num_rows
            fitted = _rows_within(metadata, window, batch_size, batch_bytes, density.measured)
            if probe and fitted > step and position + high < end:
                # Only measured: its rows are read again in the first batch of the step
                # fitted, so that the window's batches (and a verdict group) are one chunk.
                probing, again = False, True
                break
            if high > low:
                yield batch.slice(low, high - low)
                at = position + high
            position += batch.num_rows
            if at >= end:
                return
            again = step > 1 and batch.nbytes > 2 * batch_bytes
            probing = probe = False
            if again:
                break  # a new reader from row `at`, with a step fitted to the rows
        if not again:
            return


def _rows_within(
    metadata: pq.FileMetaData,
    groups: list[int],
    batch_size: int,
    batch_bytes: int,
    measured: float | None = None,
) -> int:
    """Rows per read: `batch_size`, or fewer where the densest of `groups` would put more than
    `batch_bytes` in a batch, by the footer's uncompressed sizes or the bytes per row
    `measured` on the rows, whichever is larger."""
    densest = max(
        (
            metadata.row_group(g).total_byte_size / metadata.row_group(g).num_rows
            for g in groups
            if metadata.row_group(g).num_rows
        ),
        default=0.0,
    )
    densest = max(densest, measured or 0.0)
    if densest <= 0:
        return batch_size
    return max(1, min(batch_size, int(batch_bytes // densest)))


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


# The fingerprint hashes the footer's bytes as the file holds them, not `pq.read_metadata`'s
# FileMetaData written out again: pyarrow drops the fields it does not know when it writes it
# out, so that digest would change with the pyarrow version, and miss a change in those fields.
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
