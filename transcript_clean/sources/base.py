"""What every source shares: the `Source` ABC, `Part`, and the helpers its kinds read rows with.

It is its own module, not `sources/__init__.py`, so that the kinds (`parquet`, `json`, `hf`) can
import it while the package's `__init__` imports them.
"""

from __future__ import annotations

import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow as pa

from transcript_clean.errors import SourceError
from transcript_clean.sizes import cut_by_bytes

DEFAULT_BATCH_SIZE = 4096
DEFAULT_BATCH_BYTES = 64 * 2**20
DEFAULT_MAX_ROW_BYTES = 64 * 2**20
"""A JSON Lines line longer than this is a reject, skipped as it is read (`--max-row-bytes`): a
row past the batch budget is what memory cannot be bounded by, and a megabyte of gzip can hold
a line of a GiB."""
"""A batch holds at most this many bytes of rows (`sizes.row_sizes`), or one row: with long
rows (agent traces of 200 KB each), 4,096 rows would be 800 MB."""
JSON_COLUMNS_KEY = b"transcript_clean.json_columns"
"""Schema metadata key: the comma-separated columns that hold JSON text instead of typed values
(what outputs of older versions have; JSON sources now type values, `pa.json_()` where needed)."""
RAW_LINE = "_raw_line"
"""A JSON Lines source's last columns but one: each row's line exactly as in the file, without
its newline. Rejects keep it (nothing is lost); `data/` in Parquet does not."""
LINE_ERROR = "_line_error"
"""A JSON Lines source's last column: null, or why the line is not a row (then every other
column of the row but `RAW_LINE` is null): the row is a `malformed_row` reject."""

GLOB_CHARS = re.compile(r"[*?\[]")
_JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")


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
        self.note: str | None = None
        """What the user should know about how the source was read, said beside its name."""

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
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> Iterator[pa.RecordBatch]:
        """Rows [start, stop) of `part`, in order, in batches of at most `batch_size` rows and
        `batch_bytes` bytes (or one row), every batch with `self.schema`."""

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


class FileSource(Source):
    """Files under one local root, one part each."""

    uses_pandas = False

    _parts: list[Part]
    _root: Path

    def parts(self) -> list[Part]:
        return list(self._parts)

    def local_roots(self) -> list[Path]:
        return [self._root]


def json_columns(schema: pa.Schema) -> list[str]:
    """The columns of `schema` that hold JSON text to decode (see `JSON_COLUMNS_KEY`)."""
    value = (schema.metadata or {}).get(JSON_COLUMNS_KEY, b"")
    return [name for name in value.decode().split(",") if name]


PREVIOUS = "_prev"
"""The prefix a column of the data's own takes where the tool writes its name (`moved_down`)."""


def moved_down(names: list[str], ours: Iterable[str]) -> dict[str, str]:
    """The columns of `names` named as one of `ours` (names the tool itself writes), each with
    the name it is kept under: each chain `_x`, `_prev_x`, `_prev_prev_x` ... that `names` holds
    is moved one `_prev` down, so that no name is written twice and no value is lost; a column
    whose name is not taken keeps it."""
    held = set(names)
    renames: dict[str, str] = {}
    for name in ours:
        chain = [name]
        while chain[-1] in held:
            chain.append(PREVIOUS + chain[-1])
        renames.update(pairwise(chain))
    return renames


def hidden_renames(names: list[str]) -> dict[str, str]:
    """The data's own columns named as the hidden ones (the tool's JSON Lines rejects hold
    `_raw_line`), each with the name it is read as (`moved_down`: `_prev_raw_line` ...)."""
    return moved_down(names, (RAW_LINE, LINE_ERROR))


def hidden_columns(schema: pa.Schema) -> list[str]:
    """Which of `RAW_LINE` and `LINE_ERROR` `schema` has: columns a source adds, not the data's."""
    return [name for name in (RAW_LINE, LINE_ERROR) if name in schema.names]


def output_schema(schema: pa.Schema, rejects: bool) -> pa.Schema:
    """The schema of Parquet shards written from rows of `schema` (with the reject columns, for
    `rejects`): `data/` without the hidden columns, `rejects/` with `RAW_LINE` (the line as the
    file had it) and without `LINE_ERROR` (its words are the reject message)."""
    drop = [name for name in hidden_columns(schema) if not (rejects and name == RAW_LINE)]
    for name in drop:
        schema = schema.remove(schema.get_field_index(name))
    return schema


def output_table(table: pa.Table, rejects: bool) -> pa.Table:
    """`table`'s columns as `output_schema` has them."""
    drop = [name for name in hidden_columns(table.schema) if not (rejects and name == RAW_LINE)]
    return table.drop_columns(drop) if drop else table


def hidden(relative: Path) -> bool:
    """Whether a path below a folder is skipped when reading the folder: a name starts with `.`
    or `_` (caches, `_delta_log`, `_SUCCESS`)."""
    return any(part.startswith((".", "_")) for part in relative.parts)


def is_json_name(name: str) -> bool:
    return name.removesuffix(".gz").removesuffix(".zst").endswith(_JSON_SUFFIXES)


def is_json_file(path: Path) -> bool:
    """Whether `path` holds JSON or JSON Lines rather than Parquet: by its name where the name
    says (`.json`, `.jsonl`, `.ndjson`, maybe `.gz`; `.parquet`), else by its first bytes, so
    that an agent harness's `.traj` or `.log` file, or one with no extension, reads too."""
    if is_json_name(path.name):
        return True
    if path.name.endswith(".parquet"):
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc}") from exc
    if head.startswith(b"PAR1"):
        return False
    if head.startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd")):
        return True  # gzip or zstd: Parquet files are not compressed whole
    if head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"[", b"{"):
        return True
    raise SourceError(
        f"{path}: neither Parquet (it does not start with PAR1) nor JSON (it starts with "
        f"{head[:16]!r}); a Parquet, JSON or JSON Lines file is expected"
    )


def label(file: Path, root: Path) -> str:
    """The name of `file` in a fingerprint: relative to the folder, so a copy is the same input."""
    if file == root:
        return file.name
    try:
        return file.relative_to(root).as_posix()
    except ValueError:
        return file.name


def check_range(
    start: int, stop: int | None, batch_size: int, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> None:
    if start < 0 or (stop is not None and stop < 0):
        raise ValueError(f"row range [{start}, {stop}) has a negative bound")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if batch_bytes < 1:
        raise ValueError(f"batch_bytes must be at least 1, not {batch_bytes}")


def row_range(
    part: Part,
    start: int,
    stop: int | None,
    batch_size: int,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> tuple[int, int]:
    """`[start, stop)` checked and clipped to the rows of `part`, whose length is known."""
    check_range(start, stop, batch_size, batch_bytes)
    assert part.num_rows is not None
    return start, part.num_rows if stop is None else min(stop, part.num_rows)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with exactly `schema`, metadata included (same types, maybe other list names)."""
    if batch.schema.equals(schema, check_metadata=True):
        return batch
    return batch.cast(schema)


def table_batches(
    table: pa.Table,
    schema: pa.Schema,
    batch_size: int,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> Iterator[pa.RecordBatch]:
    """`table` in batches of at most `batch_size` rows and `batch_bytes` bytes, with `schema`."""
    for batch in cut_by_bytes(table.to_batches(max_chunksize=batch_size), batch_size, batch_bytes):
        yield conform(batch, schema)


def digest(*items: object) -> str:
    return hashlib.sha256(json.dumps(items, default=str).encode()).hexdigest()[:16]
