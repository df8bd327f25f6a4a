"""Outputs: Parquet shards and text files, each written to a temporary name and moved into place.

A killed run never leaves a file that looks complete: until `close`, a shard is only
`part-00000.parquet.tmp`. The same rows give byte-identical files: they are regrouped into row
groups of `row_group_size` rows and `row_group_bytes` bytes (`sizes.row_sizes`) whatever the
batches' sizes, and nothing time-dependent is written.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from transcript_clean.atomic import AtomicFile, fsync_folder, temp_path
from transcript_clean.errors import OutputError, option_name
from transcript_clean.sizes import first_rows_within, row_sizes, total_size
from transcript_clean.sources.base import hidden_columns

DEFAULT_ROW_GROUP_SIZE = 16384
DEFAULT_ROW_GROUP_BYTES = 128 * 2**20
"""A row group holds at most this many bytes of rows (or one row). Far below the 2 GiB a column
chunk of nested strings may hold before Arrow's readers (`pq.read_table`, `datasets`) fail on it
("Nested data conversions not implemented for chunked array outputs"), and it bounds what a
shard keeps in memory while it fills a row group."""


def shard_name(index: int) -> str:
    """The file name of shard `index`: `part-00000.parquet`."""
    return f"part-{index:05d}.parquet"


class ParquetShard(AtomicFile):
    """One Parquet file written atomically.

    Batches go to `temp_path(path)`; `close()` moves the file into place with `os.replace`.
    `abort()`, or leaving a `with` block by an exception, deletes the temporary file instead.
    The schema's metadata (such as the `huggingface` features) is written into the file.
    A row group ends where the next row would take it past `row_group_size` rows or
    `row_group_bytes` bytes: where depends only on the rows, not on how they were batched.
    """

    def __init__(
        self,
        path: Path,
        schema: pa.Schema,
        *,
        compression: str = "zstd",
        row_group_size: int = DEFAULT_ROW_GROUP_SIZE,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    ) -> None:
        if row_group_size < 1:
            raise ValueError(f"row_group_size must be at least 1, not {row_group_size}")
        if row_group_bytes < 1:
            raise ValueError(f"row_group_bytes must be at least 1, not {row_group_bytes}")
        self.path = Path(path)
        self.schema = schema
        self.rows = 0
        """Rows written so far."""
        self._temp = temp_path(self.path)
        self._row_group_size = row_group_size
        self._row_group_bytes = row_group_bytes
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        # The pending rows' sizes, worked out only once they may not fit in one row group:
        # sizing every batch's rows cost the writer thread more than their sum.
        self._pending_sizes: npt.NDArray[np.int64] | None = None
        self._done = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self._temp, schema, compression=compression)
        except (pa.ArrowException, OSError) as exc:
            raise OutputError(f"cannot write {self.path}: {exc}") from exc

    def columns_for(self, table: pa.Table) -> list[str]:
        """The columns of `table` whose values it writes: its own."""
        return list(self.schema.names)

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        """Append rows; their schema must cast to the shard's (same column names and order)."""
        if self._done:
            raise OutputError(f"{self.path} is already closed")
        left_out = [name for name in hidden_columns(data.schema) if name not in self.schema.names]
        if left_out:  # a JSON Lines source's own columns, which this shard does not hold
            data = data.drop_columns(left_out)
        if not data.schema.equals(self.schema, check_metadata=True):
            try:
                data = data.cast(self.schema)
            except (pa.ArrowException, ValueError) as exc:
                raise OutputError(
                    f"rows for {self.path} do not fit its schema: {exc}\n"
                    f"expected: {self.schema.to_string(show_schema_metadata=False)}\n"
                    f"got: {data.schema.to_string(show_schema_metadata=False)}"
                ) from exc
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            if batch.num_rows:
                self._pending.append(batch)
                self._pending_rows += batch.num_rows
                self._pending_bytes += total_size(batch)
                if self._pending_sizes is not None:
                    self._pending_sizes = np.concatenate([self._pending_sizes, row_sizes(batch)])
                self.rows += batch.num_rows
        while self._pending_rows:
            rows = self._next_group()
            if (
                rows == self._pending_rows
                and rows < self._row_group_size
                and self._pending_bytes <= self._row_group_bytes
            ):
                break  # the group is not full yet: the next rows may still fit in it
            self._flush(rows)

    def _next_group(self) -> int:
        """The rows of the next row group: the pending rows that fit in one, from the first."""
        if self._pending_bytes <= self._row_group_bytes:  # all of them fit in bytes
            return min(self._pending_rows, self._row_group_size)
        if self._pending_sizes is None:
            self._pending_sizes = np.concatenate([row_sizes(b) for b in self._pending])
        return first_rows_within(self._pending_sizes, self._row_group_bytes, self._row_group_size)

    def _flush(self, rows: int) -> None:
        """Write the first `rows` pending rows as one row group."""
        pending = pa.Table.from_batches(self._pending, schema=self.schema)
        group = pending.slice(0, rows)
        if any(column.num_chunks > 1 for column in group.columns):
            # One chunk: Parquet's writer checks a dictionary's size (and falls back to plain
            # encoding) as each chunk comes, so the bytes would depend on the batches.
            group = group.combine_chunks()
        try:
            self._writer.write_table(group, row_group_size=rows)
        except (pa.ArrowException, OSError) as exc:
            raise OutputError(f"cannot write {self.path}: {exc}") from exc
        rest = pending.slice(rows)
        self._pending = rest.to_batches()
        self._pending_rows = rest.num_rows
        self._pending_bytes = total_size(rest)
        if self._pending_sizes is not None:
            self._pending_sizes = self._pending_sizes[rows:]

    def _finish(self) -> None:
        while self._pending_rows:
            self._flush(self._next_group())
        self._writer.close()

    def _discard(self) -> None:
        self._pending = []
        self._writer.close()

    def __repr__(self) -> str:
        return f"ParquetShard({str(self.path)!r}, rows={self.rows})"


class Shard(Protocol):
    """What the engines write a block's rows through: a `ParquetShard` or a `JsonlShard`."""

    path: Path
    rows: int

    def columns_for(self, table: pa.Table) -> list[str]:
        """The columns of `table` (a batch with its hidden columns) it writes rows from: those
        `write` must be given, of `table`'s rows."""
        ...

    def write(self, data: pa.RecordBatch | pa.Table) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


OUTPUT_FORMATS = ("parquet", "jsonl")
PARQUET_CODECS = ("none", "snappy", "gzip", "brotli", "lz4", "zstd")


@dataclass(frozen=True, slots=True)
class OutputFormat:
    """How a run writes data/ and rejects/: `parquet` (compressed with `compression`, zstd by
    default) or `jsonl` (JSON Lines, `none`, `gzip` or `zstd`; none by default). It names the
    shards, opens them and counts their rows back for the accounting."""

    name: str = "parquet"
    compression: str | None = None
    """None: the format's default."""
    written: pa.Schema | None = None
    """The data shards' schema where it is not the input's: rows written in another format
    (`--to`, `convert.ConvertingFormat.written_schema`), or calls' arguments as objects in a
    column of text (`--arguments-as`, `pipeline.written_schema`)."""

    def __post_init__(self) -> None:
        from transcript_clean.jsonl_sink import JSONL_CODECS

        if self.name not in OUTPUT_FORMATS:
            raise OutputError(
                f"the output format is one of {', '.join(OUTPUT_FORMATS)}, not {self.name!r}"
            )
        allowed = PARQUET_CODECS if self.name == "parquet" else tuple(JSONL_CODECS)
        if self.compression is not None and self.compression not in allowed:
            raise OutputError(
                f"{option_name('compression')} for {self.name} output is one of "
                f"{', '.join(allowed)}, not {self.compression!r}"
            )

    @property
    def codec(self) -> str:
        """The compression, the default filled in."""
        if self.compression is not None:
            return self.compression
        return "zstd" if self.name == "parquet" else "none"

    @property
    def suffix(self) -> str:
        """What a shard's name ends with: `.parquet`, `.jsonl`, `.jsonl.gz`, `.jsonl.zst`."""
        from transcript_clean.jsonl_sink import JSONL_CODECS

        return ".parquet" if self.name == "parquet" else ".jsonl" + JSONL_CODECS[self.codec]

    def shard_name(self, index: int) -> str:
        """The file name of shard `index`: `part-00000.parquet`, `part-00000.jsonl.gz`, ..."""
        return f"part-{index:05d}{self.suffix}"

    def open(
        self,
        path: Path,
        schema: pa.Schema,
        *,
        rejects: bool = False,
        row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES,
    ) -> Shard:
        """A shard at `path` for rows of `schema` (a rejects table's with `rejects`). A Parquet
        shard leaves out the columns a JSON Lines source adds (`sources.output_schema`); a JSON
        Lines shard needs them, to write each unchanged row's own line."""
        if self.written is not None and not rejects:
            schema = self.written
        if self.name == "parquet":
            from transcript_clean.sources import output_schema

            return ParquetShard(
                path,
                output_schema(schema, rejects),
                compression=self.codec,
                row_group_bytes=row_group_bytes,
            )
        from transcript_clean.jsonl_sink import JsonlShard

        return JsonlShard(path, schema, compression=self.codec, rejects=rejects)

    def rows(self, path: Path | BinaryIO) -> int:
        """The rows a shard holds, read back from the file (a path, or one open for reading):
        the Parquet file opened and read as a reader would (`parquet_rows`), or the JSON Lines
        file's lines (all of it read: a file cut short fails)."""
        if self.name == "parquet":
            return parquet_rows(path)
        from transcript_clean.jsonl_sink import count_lines

        return count_lines(path, self.codec)

    def is_empty(self, path: Path) -> bool:
        """Whether a shard holds no rows (read no further than needed)."""
        if self.name == "parquet":
            return int(pq.ParquetFile(path).metadata.num_rows) == 0
        from transcript_clean.jsonl_sink import is_empty

        return is_empty(path, self.codec)


def parquet_rows(path: Path | BinaryIO) -> int:
    """The rows of a Parquet file as a reader finds them: its footer read (a file cut short has
    none), a column written twice, which `pq.read_table` and `datasets` refuse, a `ValueError`,
    and the rows of its row groups summed, which must agree with the footer's count.

    The row groups are not decoded again: the shard was just written from the rows counted,
    so a read would come from the page cache and check only Arrow's writer, at the price of
    decoding the whole output a second time (0.25-0.3 s of a 200,000-row OpenAI run, as much
    as a sixth of it)."""
    file = pq.ParquetFile(path)
    names = file.schema_arrow.names
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(
            f"it has the column(s) {', '.join(twice)} twice, which no Parquet reader opens"
        )
    metadata = file.metadata
    rows = sum(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))
    if rows != metadata.num_rows:
        raise ValueError(f"its row groups hold {rows} rows, its footer says {metadata.num_rows}")
    return int(rows)


def write_table_atomic(path: Path, table: pa.Table, **kw: Any) -> None:
    """Write `table` to the Parquet file `path` atomically (`kw` as for `ParquetShard`)."""
    with ParquetShard(path, table.schema, **kw) as shard:
        shard.write(table)


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` (UTF-8, newlines as given) to `path`: a temporary file, fsync, `os.replace`."""
    path = Path(path)
    temp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with temp.open("w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a folder that could not be made has no temp file
            temp.unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {exc}") from exc
    fsync_folder(path.parent)
