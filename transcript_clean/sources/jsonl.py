"""JSON Lines files read as a stream: byte blocks cut at newlines, never the whole file.

Opening a file makes one pass over it (`index_lines`): it counts the rows, notes where each
block starts (so that `read_lines` can seek to a row range: blocks for `--workers`, Ray and
`--resume` are row ranges; a compressed file is decompressed from its start and skipped), checks
that it is UTF-8 and infers its schema. Types are inferred by Arrow's JSON reader in C++, without
Python objects, block by block; the block schemas are unified (`jsontypes.unify`). A block whose
rows are of the types found so far is read in them, and adds nothing; only a block Arrow cannot
read (a line that is not JSON, a field whose type varies) is parsed line by line with orjson.
Reading parses the rows again, with the schema now known: the price of a schema known up front,
which Parquet files store and JSON Lines files do not (docs/formats.md). Unless the open pass
read the block in that schema already and kept it (`ParsedBlocks`): in memory up to
`PARSED_BYTES`, then in Arrow IPC files up to `SPILLED_BYTES`, so that most files are parsed
once, in bounded memory.

Each row keeps its line as it is in the file (`RAW_LINE`), and a line that is not a JSON object
becomes a row of nulls with `LINE_ERROR` saying why: the cleaner rejects it as `malformed_row`,
and nothing is lost. Rows are numbered from 0, blank lines skipped.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import shutil
import stat
import tempfile
import weakref
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from transcript_clean.errors import SourceError
from transcript_clean.sources import jsontypes
from transcript_clean.sources.base import LINE_ERROR, RAW_LINE

BLOCK_BYTES: Final = 8 * 2**20
"""Bytes read at a time (a block ends at a newline: a longer line makes a longer block)."""

HIDDEN_FIELDS: Final = (pa.field(RAW_LINE, pa.string()), pa.field(LINE_ERROR, pa.string()))

_BOM: Final = b"\xef\xbb\xbf"
_MAGIC: Final = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"))
_LINES_SUFFIXES: Final = (".jsonl", ".ndjson")

Offsets = npt.NDArray[np.int64]
Block = bytes | memoryview
"""Whole lines of a file: the file's own pages where it is mapped, else the bytes read."""


PARSED_BYTES: Final = 96 * 2**20
"""Bytes of tables the open pass keeps in memory for the read to take (`ParsedBlocks`): the
first blocks of a file, so that memory stays bounded whatever its size."""
SPILLED_BYTES: Final = 4 * 2**30
"""Bytes of tables the open pass writes to temporary Arrow IPC files past `PARSED_BYTES`, for
the read to map instead of parsing again (a few ms a block, against tens): the disk a file's
open may take, past which blocks are parsed again."""


class ParsedBlocks:
    """Tables the open pass read in the rows' schema, by the offset of their block, for the
    read to take instead of parsing the block again: in memory, or in uncompressed Arrow IPC
    files of a temporary folder (removed with this object, or at exit). Each is taken once
    (its memory, or file, goes with it); they are not pickled: another process parses its
    blocks."""

    __slots__ = ("__weakref__", "files", "folder", "nbytes", "schemas", "tables")

    def __init__(self) -> None:
        self.tables: dict[int, pa.Table] = {}
        self.files: dict[int, Path] = {}
        self.folder: Path | None = None
        self.schemas: dict[int, pa.Schema] = {}
        """Each kept table's schema, in memory or in a file."""
        self.nbytes = 0
        """Bytes kept so far, in memory and in files."""

    def keep(self, at: int, table: pa.Table) -> None:
        """Keep the block's table: in memory while `PARSED_BYTES` allow, then in a file while
        `SPILLED_BYTES` do; past those, or where it cannot be written (no temporary folder, a
        full disk), not at all (the block is parsed again)."""
        size = self.nbytes + table.nbytes
        if size > SPILLED_BYTES:
            return
        if size <= PARSED_BYTES:
            self.tables[at] = table
        elif not self._spill(at, table):
            return
        self.schemas[at] = table.schema
        self.nbytes = size

    def _spill(self, at: int, table: pa.Table) -> bool:
        """Write the table to a file of the temporary folder; False where it cannot."""
        path = None
        try:
            if self.folder is None:
                self.folder = Path(tempfile.mkdtemp(prefix="transcript-clean-parsed-"))
                weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
            path = self.folder / f"{at}.arrow"
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
                out.write_table(table)
        except (OSError, pa.ArrowException):
            if path is not None:
                path.unlink(missing_ok=True)
            return False
        self.files[at] = path
        return True

    def retain(self, schema: pa.Schema) -> None:
        """Drop the tables read in another schema than `schema`: of no use to the read."""
        for at in [at for at, kept in self.schemas.items() if not kept.equals(schema)]:
            self.drop(at)

    def drop(self, at: int) -> None:
        self.schemas.pop(at, None)
        self.tables.pop(at, None)
        if (path := self.files.pop(at, None)) is not None:
            path.unlink(missing_ok=True)

    def take(self, at: int, schema: pa.Schema) -> pa.Table | None:
        """The block's table if it was kept in `schema` (a source of several files may have
        wider types than this file's), else None."""
        self.schemas.pop(at, None)
        table = self.tables.pop(at, None)
        if table is None and (path := self.files.pop(at, None)) is not None:
            try:
                table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
            except (OSError, pa.ArrowException):
                table = None  # the temporary folder was cleaned up under us: parsed again
            path.unlink(missing_ok=True)  # its pages stay mapped while the table lives
        return table if table is not None and table.schema.equals(schema) else None

    def __reduce__(self) -> tuple[type[ParsedBlocks], tuple[()]]:
        return ParsedBlocks, ()


@dataclass(frozen=True, slots=True)
class LinesIndex:
    """What one pass over a JSON Lines file found: enough to read any row range of it."""

    path: Path
    compression: str | None
    num_rows: int
    schema: pa.Schema
    """The rows' schema, without the hidden columns."""
    digest: str
    """sha256 of the file's (decompressed) bytes."""
    checkpoints: list[tuple[int, int]] = field(default_factory=list)
    """(byte offset, row) where each block starts."""
    parsed: ParsedBlocks = field(default_factory=ParsedBlocks, compare=False, repr=False)
    max_line: int | None = None
    """Bytes of a line at most (`--max-row-bytes`): a longer one is skipped (`TOO_LARGE`)."""


def compression_of(path: Path) -> str | None:
    """ "gzip" or "zstd" as the file's first bytes say, else None."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc}") from exc
    return next((name for magic, name in _MAGIC if head.startswith(magic)), None)


def is_json_lines(path: Path) -> bool:
    """Whether a JSON file holds JSON Lines: by its name (`.jsonl`, `.ndjson`, maybe `.gz` or
    `.zst`), else when its first line is a whole JSON object (a pretty-printed object, or a
    list, is read whole: `json.py`)."""
    if path.name.removesuffix(".gz").removesuffix(".zst").endswith(_LINES_SUFFIXES):
        return True
    head = _head(path, 2**20).removeprefix(_BOM).lstrip()
    if not head.startswith(b"{"):
        return False
    first = head.split(b"\n", 1)[0]
    try:
        return isinstance(orjson.loads(first), dict)
    except orjson.JSONDecodeError:
        return False


HEAD_LINE: Final = 64 * 2**20
"""Bytes of a first line the name-less check (`is_json_lines`) reads at most: past them it is
no row it can read, and the file is read as a whole JSON document (with its own limit)."""


def _head(path: Path, size: int) -> bytes:
    for _, block in _blocks(path, compression_of(path), 0, size, max_line=HEAD_LINE):
        return bytes(block)
    return b""


INDEX_THREADS: Final = 2
"""Blocks looked at together while a file is opened (`index_lines`), each on a thread."""


@dataclass(frozen=True, slots=True)
class _BlockIndex:
    """What `_index_block` found in one block."""

    rows: int
    newlines: int
    schema: pa.Schema | None
    """The block's own types; None when it has no rows, or fits the types found before."""
    table: pa.Table | None = None
    """The block's rows, when it fits the types found before: read in their schema; or when
    its own types were inferred by Arrow's reader: read in them (of use to the read when no
    later block changes them)."""


def index_lines(path: Path, max_line: int | None = None) -> LinesIndex:
    """One pass over the file: rows, block offsets, schema; stops at text that is not UTF-8.

    Reading and hashing the file stay on this thread, in order; each block's check, lines and
    types (`_index_block`: Arrow and NumPy, which let go of the GIL) go to `INDEX_THREADS`
    threads, so that a file opens on every core, not one. Their answers are taken in the
    file's order, a few blocks behind at most, and so is any error: the first in the file is
    the one raised, as when the blocks are looked at one by one.

    The rows' type grows as the answers come (`jsontypes.unify`). A block is first read in the
    type found so far (`_fitted`); one that fits adds nothing to it, and its table is kept for
    the read (`ParsedBlocks`) while `PARSED_BYTES` allow and the type found does not grow.
    """
    compression = compression_of(path)
    rows = 0
    lines = 0  # physical lines before the block, for error messages
    checkpoints = []
    found: pa.DataType = pa.null()
    parsed = ParsedBlocks()
    digest = hashlib.sha256()
    pending: deque[tuple[int, Future[_BlockIndex]]] = deque()

    def settle() -> None:
        nonlocal rows, lines, found
        at, future = pending.popleft()
        try:
            block = future.result()
        except _NotUtf8 as err:
            raise SourceError(
                f"{path}: not UTF-8 at byte {at + err.start} (line {lines + err.line}): "
                f"{err.reason}"
            ) from None
        checkpoints.append((at, rows))
        if block.schema is not None:
            found = jsontypes.unify(found, jsontypes.row_type(block.schema))
        if block.table is not None:
            parsed.keep(at, block.table)
        rows += block.rows
        lines += block.newlines

    with ThreadPoolExecutor(INDEX_THREADS, "transcript-clean-index") as pool:
        try:
            for at, block in _blocks(path, compression, max_line=max_line):
                digest.update(block)
                while len(pending) >= INDEX_THREADS:
                    settle()  # first, so that the block is read in the types found up to now
                pending.append((at, pool.submit(_index_block, block, at, found)))
        except SourceError:
            # The file breaks further on (a compressed stream cut short): what is wrong before
            # that point is said first.
            while pending:
                settle()
            raise
        while pending:
            settle()
    schema = jsontypes.schema_of([found])
    parsed.retain(schema)  # a table read in a narrower type than the one found in the end
    return LinesIndex(
        path, compression, rows, schema, digest.hexdigest(), checkpoints, parsed, max_line
    )


def _index_block(block: Block, at: int, found: pa.DataType) -> _BlockIndex:
    """A block's rows, newlines and types, or its rows read in the type `found` before when they
    fit it; raises `_NotUtf8` where it is not UTF-8."""
    _check_utf8(block)
    starts, ends, bounds = _lines(block, at)
    if not len(starts):
        return _BlockIndex(0, len(bounds) - 1, None)
    table = _fitted(block, starts, ends, found)
    if table is not None:
        return _BlockIndex(len(starts), len(bounds) - 1, None, table)
    schema, table = _block_schema(block, starts, ends)
    return _BlockIndex(len(starts), len(bounds) - 1, schema, table)


def read_lines(
    index: LinesIndex,
    schema: pa.Schema,
    start: int,
    stop: int,
    renames: Mapping[str, str] | None = None,
) -> Iterator[pa.Table]:
    """Rows [start, stop) of the file, block by block, as tables of `schema` (the rows' own
    schema unified with others', then `HIDDEN_FIELDS`); `renames`: the rows' own keys that
    `schema` names otherwise (`sources.base.hidden_renames`)."""
    if start >= stop:
        return
    back = {new: old for old, new in (renames or {}).items()}
    data = pa.schema(
        [
            f.with_name(back.get(f.name, f.name))
            for f in schema
            if f.name not in (RAW_LINE, LINE_ERROR)
        ]
    )
    offset, row = next((a, r) for a, r in reversed(index.checkpoints) if r <= start)
    for at, block in _blocks(index.path, index.compression, offset, max_line=index.max_line):
        starts, ends, bounds = _lines(block, at)
        first, last = max(start - row, 0), min(stop - row, len(starts))
        if first < last:
            table = index.parsed.take(at, data)
            if table is not None:
                table = table.slice(first, last - first)
                errors = pa.nulls(table.num_rows, pa.string())
            else:
                table, errors = _parse(
                    block, starts[first:last], ends[first:last], data, row + first
                )
            if renames:
                table = table.rename_columns([renames.get(n, n) for n in table.column_names])
            table = table.append_column(
                HIDDEN_FIELDS[0], _raw_lines(block, bounds, starts[first:last])
            )
            yield table.append_column(HIDDEN_FIELDS[1], errors)
        row += len(starts)
        if row >= stop:
            return


# ---------------------------------------------------------------------------------------------
# blocks and lines


TOO_LARGE: Final = b"\x00too large "
"""How a line longer than `max_line` stands in a block: this, its size and the limit, so that it
is a row (a reject) without its bytes ever being held; no JSON line starts with a NUL."""


def _too_large(size: int, limit: int) -> bytes:
    """The line that stands for a line of `size` bytes, over `limit`, newline included."""
    return TOO_LARGE + f"{size} {limit}\n".encode()


def _blocks(
    path: Path,
    compression: str | None,
    offset: int = 0,
    size: int | None = None,
    max_line: int | None = None,
) -> Iterator[tuple[int, Block]]:
    """The file's bytes from `offset` on, as (offset, block) of whole lines, each block ending
    with a newline (one is added to a last line without), `size` (`BLOCK_BYTES`) at a time.
    An uncompressed file's blocks are its own pages, mapped (`_mapped_blocks`). A line longer
    than `max_line` is skipped as it is read, and stands in its block as `_too_large` (the
    offsets stay the file's)."""
    size = size or BLOCK_BYTES
    at = offset
    carry = b""
    skipped = 0  # bytes of a line over `max_line` read so far, none of them kept
    try:
        mapped = _mapped_blocks(path, offset, size, max_line) if compression is None else None
        if mapped is not None:
            for at, block in mapped:  # `at` kept for the error below
                yield at, block
            return
        raw = pa.OSFile(str(path))
        stream = pa.CompressedInputStream(raw, compression) if compression else raw
        with stream:
            if offset and compression:
                left = offset
                while left:
                    left -= len(skipped_bytes := stream.read(min(left, size))) or left
                    if not skipped_bytes:
                        return
            elif offset:
                raw.seek(offset)
            while True:
                chunk = stream.read(size)
                if not chunk:
                    if skipped:
                        yield at, _too_large(skipped, cast(int, max_line))
                    elif carry:
                        yield at, _bounded(carry + b"\n", max_line)
                    return
                if skipped:  # the rest of a line too long, up to its newline
                    end = chunk.find(b"\n")
                    if end < 0:
                        skipped += len(chunk)
                        continue
                    yield at, _too_large(skipped + end, cast(int, max_line))
                    at += skipped + end + 1
                    skipped = 0
                    chunk = chunk[end + 1 :]
                cut = chunk.rfind(b"\n")
                if cut < 0:
                    carry += chunk
                    if max_line is not None and len(carry) > max_line:
                        skipped, carry = len(carry), b""
                    continue
                block = b"".join((carry, memoryview(chunk)[: cut + 1]))  # one copy, not two
                carry = chunk[cut + 1 :]
                yield at, _bounded(block, max_line)
                at += len(block)
                if max_line is not None and len(carry) > max_line:
                    skipped, carry = len(carry), b""
    except (OSError, pa.ArrowException) as exc:
        where = f"after byte {at + len(carry)} of its {'decompressed ' if compression else ''}data"
        raise SourceError(f"{path}: cannot read {where}: {exc}") from exc


def _bounded(block: Block, max_line: int | None) -> Block:
    """`block` with each line longer than `max_line` (its newline left out) replaced by
    `_too_large`: a copy only where there is one."""
    if max_line is None or len(block) <= max_line:
        return block
    bounds = np.concatenate(([0], np.flatnonzero(np.frombuffer(block, np.uint8) == 10) + 1))
    long = np.flatnonzero(np.diff(bounds) - 1 > max_line)
    if not len(long):
        return block
    pieces: list[bytes | memoryview] = []
    view, done = memoryview(block), 0
    for k in long.tolist():
        start, stop = int(bounds[k]), int(bounds[k + 1])
        pieces += [view[done:start], _too_large(stop - start - 1, max_line)]
        done = stop
    pieces.append(view[done:])
    return b"".join(pieces)


def _mapped_blocks(
    path: Path, offset: int, size: int, max_line: int | None = None
) -> Iterator[tuple[int, Block]] | None:
    """`_blocks` of an uncompressed file, each a view of the file's pages mapped into memory:
    no copy, and no fresh memory for the kernel to fill (a pass over the bench's 392 MB file
    took 0.36 s instead of 0.5-0.7 s). Each block has its own mapping, gone with the last view
    of it, so that memory stays bounded whatever the file's size. None where the file cannot
    be mapped: it is read instead (as a file that is no regular file is, a pipe say, which is
    not even opened here).

    As with any mapped file, one cut short by another program while it is read ends the run
    with SIGBUS, not an error naming it; the run's output is then left unfinished (`.tmp`), as
    for a killed run."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        handle = path.open("rb")
    except OSError:
        return None
    try:
        length = os.fstat(handle.fileno()).st_size
        if length > offset:
            mmap.mmap(handle.fileno(), 1, access=mmap.ACCESS_READ).close()
    except (OSError, ValueError):
        handle.close()
        return None

    def blocks() -> Iterator[tuple[int, Block]]:
        with handle:
            fileno, at = handle.fileno(), offset
            while at < length:
                start = at - at % mmap.ALLOCATIONGRANULARITY
                stop = min(at + size, length)
                while True:  # a line longer than the block makes a longer block
                    window = mmap.mmap(fileno, stop - start, access=mmap.ACCESS_READ, offset=start)
                    cut = window.rfind(b"\n", at - start)
                    if cut >= 0:
                        break
                    if max_line is not None and stop - at > max_line:
                        window.close()  # a line too long: its end is found, it is not mapped
                        break
                    if stop == length:
                        break
                    window.close()
                    stop = min(start + 2 * (stop - start), length)
                if window.closed:
                    end = _newline_after(fileno, stop, length, size)
                    yield at, _too_large(end - at, cast(int, max_line))
                    at = end + 1
                    continue
                view = memoryview(window)
                if cut < 0:  # the last line, without a newline
                    yield at, _bounded(bytes(view[at - start :]) + b"\n", max_line)
                    return
                yield at, _bounded(view[at - start : cut + 1], max_line)
                at = start + cut + 1

    return blocks()


def _newline_after(fileno: int, at: int, length: int, size: int) -> int:
    """Where the first newline at or after byte `at` of a mapped file is (`length` if none),
    looked for a window of `size` at a time, each let go before the next."""
    while at < length:
        start = at - at % mmap.ALLOCATIONGRANULARITY
        stop = min(at + size, length)
        with mmap.mmap(fileno, stop - start, access=mmap.ACCESS_READ, offset=start) as window:
            cut = window.find(b"\n", at - start)
        if cut >= 0:
            return start + cut
        at = stop
    return length


def _lines(block: Block, at: int) -> tuple[Offsets, Offsets, Offsets]:
    """Where the rows of a block start and end (no newline), blank lines left out; and the
    bounds of every line, newline included."""
    data = np.frombuffer(block, np.uint8)
    bounds = np.concatenate(([0], np.flatnonzero(data == 10) + 1)).astype(np.int64)
    if at == 0 and block[: len(_BOM)] == _BOM:
        bounds[0] = len(_BOM)
    starts, ends = bounds[:-1], bounds[1:] - 1
    keep = ends > starts
    first = data[np.minimum(starts, len(block) - 1)]
    for i in np.flatnonzero(keep & np.isin(first, np.frombuffer(b" \t\r", np.uint8))).tolist():
        keep[i] = bool(bytes(block[starts[i] : ends[i]]).strip())
    return starts[keep], ends[keep], bounds


class _NotUtf8(Exception):
    """Where a block is not UTF-8: a byte offset and line number in the block (from 1)."""

    def __init__(self, start: int, line: int, reason: str) -> None:
        super().__init__(start, line, reason)
        self.start = start
        self.line = line
        self.reason = reason


def _check_utf8(block: Block) -> None:
    """Stop at text that is not UTF-8 (`_NotUtf8`, saying where): Arrow checks the block at
    once, and only a failing block is decoded to find where."""
    offsets = pa.py_buffer(np.array([0, len(block)], np.int64))
    text = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(block)])
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        try:
            bytes(block).decode("utf-8")
        except UnicodeDecodeError as err:
            line = bytes(block[: err.start]).count(b"\n") + 1
            raise _NotUtf8(err.start, line, err.reason) from None


def _raw_lines(block: Block, bounds: Offsets, starts: Offsets) -> pa.Array:
    """The rows' lines as in the file, without their newlines (nor a byte-order mark)."""
    lines = pa.Array.from_buffers(
        pa.large_binary(), len(bounds) - 1, [None, pa.py_buffer(bounds), pa.py_buffer(block)]
    )
    where = np.searchsorted(bounds, starts, side="right") - 1
    # Every line a row (no blank line): no `take`, one copy of the block's bytes, not two.
    rows = lines if len(starts) == len(lines) else lines.take(pa.array(where))
    raw = pc.binary_slice(rows, 0, -1)
    if len(starts) and starts[0] != bounds[where[0]]:  # the file's byte-order mark
        first = pc.binary_slice(lines.take(pa.array(where[:1])), int(starts[0] - bounds[0]), -1)
        raw = pa.concat_arrays([first, raw.slice(1)])
    return raw.view(pa.large_string()).cast(pa.string())


# ---------------------------------------------------------------------------------------------
# parsing


def _block_schema(
    block: Block, starts: Offsets, ends: Offsets
) -> tuple[pa.Schema, pa.Table | None]:
    """The types of a block's rows: Arrow's JSON reader, else line by line (`_line_values`);
    and where Arrow's reader read them, the rows in the schema those types alone make, kept
    for the read should no later block change them (the file's first blocks, mostly)."""
    table = _arrow_read(block, starts, ends, None)
    if table is not None and not jsontypes.too_deep(pa.struct(list(table.schema))):
        own = jsontypes.schema_of([jsontypes.row_type(table.schema)])
        try:
            return table.schema, table.cast(own)
        except (pa.ArrowException, ValueError):  # kept only as the open pass read it
            return table.schema, None
    values = [v for v, error in _line_values(block, starts, ends, 0) if error is None]
    return jsontypes.schema_of(jsontypes.type_of(v) for v in values), None


def _fitted(block: Block, starts: Offsets, ends: Offsets, found: pa.DataType) -> pa.Table | None:
    """The block's rows in the row type `found` (finished: lists of `element`s), when every row
    is of that type, so that unifying the block's own type with it would change nothing: Arrow's
    reader refuses any field `found` does not have (at any depth), a value of another kind and
    a number that does not fit (an int64's `1.5`); null fits any type, an int a float64, and a
    field left out is null. None when a row does not fit, or `found` is no struct or finishes
    with `json_` (which Arrow's reader cannot read)."""
    if not pa.types.is_struct(found):
        return None
    schema = jsontypes.schema_of([found])
    if any(jsontypes.has_json(f.type) for f in schema):
        return None
    return _arrow_read(block, starts, ends, schema, exact=True, threads=False)


def _arrow_read(
    block: Block,
    starts: Offsets,
    ends: Offsets,
    schema: pa.Schema | None,
    *,
    exact: bool = False,
    threads: bool = True,
) -> pa.Table | None:
    """The rows by Arrow's JSON reader (in C++), None when it cannot read them all (a line is
    not a JSON object, a type varies; `exact`: a field is not in `schema`) or not exactly (an
    integer outside int64, which it reads as a double). `threads`: on
    Arrow's threads (`index_lines` reads blocks side by side instead)."""
    begin, end = int(starts[0]), int(ends[-1]) + 1
    longest = int((ends - starts).max()) + 2
    # With a schema, fields it leaves out (those holding `json_`, filled in apart) are skipped.
    others = "infer" if schema is None else "error" if exact else "ignore"
    # Inferring, the reader's threads would unify their chunks' fields in the order they finish,
    # so that a struct's fields could come in another order from run to run: one thread reads
    # the block, in order.
    threads = threads and schema is not None
    try:
        table = pj.read_json(
            pa.BufferReader(pa.py_buffer(block).slice(begin, end - begin)),
            read_options=pj.ReadOptions(block_size=max(2**20, longest), use_threads=threads),
            parse_options=pj.ParseOptions(
                explicit_schema=schema, newlines_in_values=False, unexpected_field_behavior=others
            ),
        )
    except pa.ArrowException:
        return None
    if table.num_rows != len(starts) or any(_past_int64(c) for c in table.columns):
        return None
    return table if schema is None else table.select(schema.names)


def _past_int64(values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a double of `values` (at any depth) is as large as an integer outside int64:
    Arrow's reader reads such an integer as a double, where the lines read one by one keep it
    exact (`jsontypes.type_of` gives it `json_`)."""
    if isinstance(values, pa.ChunkedArray):
        return any(_past_int64(chunk) for chunk in values.chunks)
    type_ = values.type
    if pa.types.is_floating(type_):
        largest = pc.max(pc.abs(values)).as_py()
        return largest is not None and largest >= 2**63
    if pa.types.is_struct(type_):
        return any(_past_int64(child) for child in values.flatten())
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return _past_int64(values.flatten())
    return False


def _line_values(
    block: Block, starts: Offsets, ends: Offsets, first_row: int
) -> list[tuple[Any, str | None]]:
    """Each line's row object, or why there is none."""
    out: list[tuple[Any, str | None]] = []
    for k, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        row = first_row + k
        if block[s : s + len(TOO_LARGE)] == TOO_LARGE:
            line, limit = bytes(block[s + len(TOO_LARGE) : e]).split()
            out.append((None, f"line {row}: {int(line):,} bytes, over --max-row-bytes "
                        f"({int(limit):,}): not read"))  # fmt: skip
            continue
        try:
            value = jsontypes.loads(block[s:e])
        except RecursionError:
            out.append((None, f"line {row}: not JSON: nested too deep to parse"))
            continue
        except ValueError as err:  # JSONDecodeError, orjson's and the standard library's
            out.append((None, f"line {row}: not JSON: {err}"))
            continue
        if not isinstance(value, dict):
            out.append((None, f"line {row}: not a JSON object but {_kind(value)}"))
            continue
        out.append((value, None))
    return out


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def _parse(
    block: Block, starts: Offsets, ends: Offsets, schema: pa.Schema, first_row: int
) -> tuple[pa.Table, pa.Array]:
    """Rows of a block as a table of `schema`, and each row's `LINE_ERROR`: Arrow's reader
    where the lines are all good (the columns holding `json_`, which it cannot read, filled in
    from the lines: `_with_json_columns`), else line by line."""
    typed = pa.schema([f for f in schema if not jsontypes.has_json(f.type)])
    table = _arrow_read(block, starts, ends, typed)
    if table is not None and len(typed) < len(schema):
        table = _with_json_columns(table, block, starts, ends, schema)
    if table is not None:
        return table, pa.nulls(table.num_rows, pa.string())
    pairs = _line_values(block, starts, ends, first_row)
    errors = [error for _, error in pairs]
    values = [value for value, _ in pairs]
    try:
        table = jsontypes.to_table(values, schema)
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        table = None
    if table is None:  # a row that does not fit the types: found one by one
        tables = []
        for k, value in enumerate(values):
            try:
                tables.append(jsontypes.to_table([value], schema))
            except (pa.ArrowException, OverflowError, TypeError, ValueError) as err:
                errors[k] = f"line {first_row + k}: does not fit the column types: {err}"
                tables.append(jsontypes.to_table([None], schema))
        table = pa.concat_tables(tables)
    return table, pa.array(errors, pa.string())


def _with_json_columns(
    typed: pa.Table, block: Block, starts: Offsets, ends: Offsets, schema: pa.Schema
) -> pa.Table | None:
    """`typed` (the columns Arrow read) with the columns of `schema` that hold `json_` added,
    their values taken from the lines (orjson) and converted once per distinct value (tool
    lists repeat from row to row); None where a line needs the line-by-line path (a value
    nested too deep, a lone surrogate, one that does not fit the types)."""
    wanted = [f for f in schema if f.name not in typed.schema.names]
    columns: dict[str, pa.Array] = {}
    try:
        rows = [
            jsontypes.loads(block[s:e]) for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
        ]
        for f in wanted:
            seen: dict[bytes, int] = {}
            distinct: list[Any] = []
            at = []
            for row in rows:
                value = row.get(f.name)
                key = orjson.dumps(value)
                if (k := seen.get(key)) is None:
                    k = seen[key] = len(distinct)
                    distinct.append(value)
                at.append(k)
            columns[f.name] = jsontypes.to_array(distinct, f.type).take(pa.array(at, pa.int32()))
    except (RecursionError, pa.ArrowException, OverflowError, TypeError, ValueError):
        return None
    arrays = [columns[f.name] if f.name in columns else typed.column(f.name) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)
