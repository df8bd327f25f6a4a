"""Bytes per row of Arrow data: what batches and row groups are cut by, besides rows.

A row's size is the bytes its values hold in Arrow: the width of each fixed-width value, each
string's bytes and offset, summed through lists and structs (validity bits left out). It depends
only on the row, never on the batch it came in, so cuts made by it are the same however the rows
were batched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["cut_by_bytes", "first_rows_within", "row_sizes", "total_size"]

Sizes = npt.NDArray[np.int64]


def row_sizes(data: pa.RecordBatch | pa.Table) -> Sizes:
    """The size in bytes of each row of `data`."""
    total = np.zeros(data.num_rows, dtype=np.int64)
    for column in data.columns:
        total += _sizes(column)
    return total


def total_size(data: pa.RecordBatch | pa.Table) -> int:
    """`row_sizes(data).sum()`, worked out from the ends of the offsets alone where it can be
    (a dictionary's values are still counted row by row): what tells a writer its rows fit
    without each row's size."""
    return sum(_total(column) for column in data.columns)


def _total(array: pa.Array | pa.ChunkedArray) -> int:
    if isinstance(array, pa.ChunkedArray):
        return sum(_total(chunk) for chunk in array.chunks)
    if isinstance(array, pa.ExtensionArray):
        return _total(array.storage)
    kind = array.type
    large = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
    if large or pa.types.is_string(kind) or pa.types.is_binary(kind):
        first, last = _ends(array, large)
        return last - first + (8 if large else 4) * len(array)
    large = pa.types.is_large_list(kind)
    if large or pa.types.is_list(kind) or pa.types.is_map(kind):
        first, last = _ends(array, large)
        return _total(array.values.slice(first, last - first)) + (8 if large else 4) * len(array)
    if pa.types.is_struct(kind):
        return sum(_total(field) for field in array.flatten())
    return int(_sizes(array).sum())  # dictionaries, fixed widths, the rest: as each row counts


def _ends(array: pa.Array, large: bool) -> tuple[int, int]:
    """The first and last of a string, binary or list array's offsets, slice applied."""
    buffer = array.buffers()[1]
    if buffer is None:  # an empty array may have none
        return 0, 0
    offsets = np.frombuffer(buffer, dtype=np.int64 if large else np.int32)
    return int(offsets[array.offset]), int(offsets[array.offset + len(array)])


def _sizes(array: pa.Array | pa.ChunkedArray) -> Sizes:
    # From the offsets and buffers, without pyarrow's compute functions or conversions: those
    # that take a Python value (even a 0) import pandas, which `pandas_free` keeps out of the
    # cleaner's processes, and sizes are taken before it does (the rows read to detect the
    # format). A null's range counts, as the bytes are held all the same.
    if isinstance(array, pa.ChunkedArray):
        return np.concatenate([_empty(), *(_sizes(chunk) for chunk in array.chunks)])
    kind = array.type
    if isinstance(array, pa.ExtensionArray):
        return _sizes(array.storage)
    if isinstance(array, pa.DictionaryArray):
        indices = _indices(array.indices)
        values = _sizes(array.dictionary)
        if not len(values):  # every index is null
            return _sizes(array.indices)
        return _sizes(array.indices) + values[np.clip(indices, 0, len(values) - 1)]
    large = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
    if large or pa.types.is_string(kind) or pa.types.is_binary(kind):
        return np.diff(_offsets(array, large)) + (8 if large else 4)
    large = pa.types.is_large_list(kind)
    if large or pa.types.is_list(kind) or pa.types.is_map(kind):
        offsets = _offsets(array, large)
        child = array.values.slice(offsets[0], offsets[-1] - offsets[0])
        inner = np.concatenate([_empty(1), np.cumsum(_sizes(child))])
        sizes: Sizes = np.diff(inner[offsets - offsets[0]]) + (8 if large else 4)
        return sizes
    if pa.types.is_fixed_size_list(kind):
        width = kind.list_size
        child = array.values.slice(array.offset * width, len(array) * width)
        return _sizes(child).reshape(len(array), width).sum(axis=1) if width else _empty(len(array))
    if pa.types.is_struct(kind):
        total = _empty(len(array))
        for field in array.flatten():
            total += _sizes(field)
        return total
    if pa.types.is_null(kind):
        return _empty(len(array))
    try:
        width = max(kind.bit_width // 8, 1)
    except ValueError:  # unions, views, ...: no fixed width; counted as their buffers, evenly
        width = array.nbytes // max(len(array), 1)
    return np.full(len(array), width, dtype=np.int64)


def _offsets(array: pa.Array, large: bool) -> Sizes:
    """The `len(array) + 1` offsets of a string, binary or list array, slice applied."""
    buffer = array.buffers()[1]
    dtype = np.int64 if large else np.int32
    if buffer is None:  # an empty array may have none
        return _empty(len(array) + 1)
    offsets = np.frombuffer(buffer, dtype=dtype)[array.offset : array.offset + len(array) + 1]
    return offsets.astype(np.int64)


def _indices(indices: pa.Array) -> Sizes:
    """A dictionary's indices as integers (a null's is whatever its slot holds)."""
    buffer = indices.buffers()[1]
    if buffer is None:
        return _empty(len(indices))
    sign = "u" if pa.types.is_unsigned_integer(indices.type) else "i"
    dtype = np.dtype(f"{sign}{indices.type.bit_width // 8}")
    values = np.frombuffer(buffer, dtype=dtype)[indices.offset : indices.offset + len(indices)]
    return values.astype(np.int64)


def _empty(size: int = 0) -> Sizes:
    return np.zeros(size, dtype=np.int64)


def first_rows_within(sizes: Sizes, nbytes: int, rows: int) -> int:
    """How many of the rows, from the first, make the next cut: as many as fit in `nbytes` and
    `rows`, and at least one."""
    fit = int(np.searchsorted(np.cumsum(sizes[:rows]), nbytes, side="right"))
    return min(max(fit, 1), rows, len(sizes))


def cut_by_bytes(
    batches: Iterable[pa.RecordBatch], rows: int, nbytes: int | None
) -> Iterator[pa.RecordBatch]:
    """`batches`, each cut (by zero-copy slices) into pieces of at most `rows` rows and `nbytes`
    bytes, or one row. `nbytes=None`: the batches fit in the bytes asked already (a source's,
    read within them), so they are cut by rows alone, without the rows' sizes."""
    for batch in batches:
        if batch.num_rows <= 1:
            if batch.num_rows:
                yield batch
            continue
        if nbytes is None:
            for start in range(0, batch.num_rows, rows):
                yield batch.slice(start, rows)
            continue
        if batch.num_rows <= rows and total_size(batch) <= nbytes:
            yield batch  # fits whole, as most do: each row's size is not needed
            continue
        sizes = row_sizes(batch)
        start = 0
        while start < batch.num_rows:
            take = first_rows_within(sizes[start:], nbytes, rows)
            yield batch.slice(start, take)
            start += take
