"""The flattener of rows of string fields (Alpaca, ms-swift's query / response, TRL's prompt /
completion): a batch's columns into the columnar view, as the decoder reads them.

A row is a system prompt where it has a non-empty one, a user and an assistant message per
`history` pair, then the user's text (the first field, and the second joined by a line break
where it is not empty) and the assistant's (`output`). Such rows hold no calls and no results.
A row the decoder rejects (the first field or the output null, a history item that is not a
pair of texts) is unread; a batch whose columns are not of those types has no view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    indices,
    is_text,
    list_sizes,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations, of_texts
from transcript_clean.formats.fields import not_blank


class Fields(Protocol):
    """What the flattener reads of a format of string fields (`codec._FieldsFormat`): which
    fields hold the user's text, the answer, the system prompt and the history."""

    @property
    def user_fields(self) -> tuple[str, ...]: ...
    @property
    def output_field(self) -> str: ...
    @property
    def system_field(self) -> str | None: ...
    @property
    def history_field(self) -> str | None: ...


__all__ = ["flatten_fields", "history_pairs"]


def _text_or_nulls(side: Mapping[str, pa.Array], name: str | None, rows: int) -> pa.Array | None:
    """The text column `name` (nulls where the batch has none); None where it is not text."""
    if name is None or name not in side or pa.types.is_null(side[name].type):
        return pa.nulls(rows, pa.string())
    column = side[name]
    return column if is_text(column.type) else None


def _is_list(kind: pa.DataType) -> bool:
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))


def history_pairs(history: pa.Array) -> tuple[Counts, Mask, pa.Array, Counts] | None:
    """A `history` column of [query, response] lists: per row its pairs and whether the decoder
    rejects it (an item that is no pair of texts), the texts flattened, and per pair the place
    of its query among them. None where the column is not a list of lists of text."""
    kind = history.type
    rows = len(history)
    if pa.types.is_null(kind):
        none = np.zeros(0, np.int64)
        return np.zeros(rows, np.int64), np.zeros(rows, bool), pa.array([], pa.string()), none
    if not _is_list(kind) or not _is_list(kind.value_type):
        return None
    if not is_text(kind.value_type.value_type):
        return None
    pairs_per_row = list_sizes(history)
    pairs = pc.list_flatten(history)
    sizes = pc.list_value_length(pairs)
    texts = pc.list_flatten(pairs)
    pair_row = np.repeat(np.arange(len(history), dtype=np.int64), pairs_per_row)
    bad_pair = ~as_mask(pc.equal(sizes, 2), fill=False)
    text_sizes = list_sizes(pairs)
    text_pair = np.repeat(np.arange(len(pairs), dtype=np.int64), text_sizes)
    bad_text = as_mask(texts.is_null())
    bad = bad_pair.copy()
    if bad_text.any():
        bad[text_pair[bad_text]] = True
    rejected = np.zeros(len(history), dtype=bool)
    if bad.any():
        rejected[pair_row[bad]] = True
    starts = np.cumsum(text_sizes) - text_sizes
    return pairs_per_row, rejected, texts, starts.astype(np.int64)


def flatten_fields(
    fmt: Fields, column: pa.Array, side: Mapping[str, pa.Array]
) -> Conversations | None:
    """The rows of `fmt` (`column`, its first user field, and `side`, the batch's other fields)
    as `Conversations`; None where a field's type is not one the decoder reads row by row."""
    rows = len(column)
    if not is_text(column.type):
        return None
    second = fmt.user_fields[1] if len(fmt.user_fields) > 1 else None
    extra = _text_or_nulls(side, second, rows)
    output = _text_or_nulls(side, fmt.output_field, rows)
    system = _text_or_nulls(side, fmt.system_field, rows)
    if extra is None or output is None or system is None or fmt.output_field not in side:
        return None
    if fmt.history_field is not None and fmt.history_field in side:
        found = history_pairs(side[fmt.history_field])
        if found is None:
            return None
        pairs, bad_history, texts, query_at = found
    else:
        pairs, bad_history = np.zeros(rows, np.int64), np.zeros(rows, bool)
        texts, query_at = pa.array([], pa.string()), np.zeros(0, np.int64)

    unread, has_system, system_chars, counts = _counted(column, output, system, pairs, bad_history)
    read = ~unread
    pairs = np.where(read, pairs, 0)
    starts = np.cumsum(counts) - counts
    total = int(counts.sum())
    message_row = np.repeat(np.arange(rows, dtype=np.int64), counts)
    k = np.arange(total, dtype=np.int64) - starts[message_row]
    j = k - has_system[message_row]
    role = np.where(j < 0, SYSTEM, np.where(j % 2 == 0, USER, ASSISTANT)).astype(np.int8)

    chars = np.zeros(total, dtype=np.int64)
    said = np.zeros(total, dtype=bool)
    owners: list[Counts] = []
    pieces: list[pa.Array] = []

    def place(at: Counts, values: pa.Array, lengths: Counts, blankless: Mask) -> None:
        chars[at] += lengths
        said[at] |= blankless
        owners.append(at)
        pieces.append(values.cast(pa.large_string()))

    rows_system = np.flatnonzero(has_system)
    place(
        starts[rows_system],
        system.take(indices(rows_system)),
        system_chars[rows_system],
        not_blank(system.take(indices(rows_system))),
    )
    # history: the pairs of the rows read, each query then its response
    pair_row = np.repeat(np.arange(rows, dtype=np.int64), list_sizes_or(side, fmt, rows))
    kept = read[pair_row] if len(pair_row) else np.zeros(0, dtype=bool)
    pair_k = np.arange(len(pair_row), dtype=np.int64) - np.searchsorted(pair_row, pair_row)
    first_message = starts[pair_row] + has_system[pair_row] + 2 * pair_k
    for offset in (0, 1):
        chosen = np.flatnonzero(kept)
        values = texts.take(indices(query_at[chosen] + offset))
        place(first_message[chosen] + offset, values, text_lengths(values), not_blank(values))
    # the last user message: the first field, and the second after a line break
    read_rows = np.flatnonzero(read)
    last = starts[read_rows] + has_system[read_rows] + 2 * pairs[read_rows]
    first_text = column.take(indices(read_rows))
    extra_text = extra.take(indices(read_rows))
    extra_chars = text_lengths(extra_text)
    chars[last] += text_lengths(first_text) + np.where(extra_chars > 0, 1 + extra_chars, 0)
    said[last] |= not_blank(first_text) | not_blank(extra_text)
    owners += [last, last[extra_chars > 0]]
    pieces += [
        first_text.cast(pa.large_string()),
        pc.binary_join_element_wise("\n", extra_text.filter(pa.array(extra_chars > 0)), "").cast(
            pa.large_string()
        ),
    ]
    answers = output.take(indices(read_rows))
    place(last + 1, answers, text_lengths(answers), not_blank(answers))

    def pieces_and_owners() -> tuple[pa.Array, Counts]:
        return pa.concat_arrays(pieces), np.concatenate(owners)

    return of_texts(
        rows=rows,
        unread=unread,
        message_row=message_row,
        role=role,
        said=said,
        chars=chars,
        texts=pieces_and_owners,
    )


def _counted(
    column: pa.Array, output: pa.Array, system: pa.Array, pairs: Counts, bad_history: Mask
) -> tuple[Mask, Mask, Counts, Counts]:
    """Per row: unread, whether it has a system message, the system prompt's characters, and
    its messages (none for a row unread)."""
    unread = as_mask(column.is_null()) | as_mask(output.is_null()) | bad_history
    system_chars = text_lengths(system)
    has_system = (system_chars > 0) & ~unread
    counts = np.where(unread, 0, has_system + 2 * pairs + 2).astype(np.int64)
    return unread, has_system, system_chars, counts


def field_message_counts(
    fmt: Fields, column: pa.Array, side: Mapping[str, pa.Array]
) -> Counts | None:
    """Per row, its messages as `flatten_fields` has them, without reading the texts; None
    where it has no view."""
    rows = len(column)
    output = _text_or_nulls(side, fmt.output_field, rows)
    system = _text_or_nulls(side, fmt.system_field, rows)
    if not is_text(column.type) or output is None or system is None:
        return None
    pairs, bad_history = np.zeros(rows, np.int64), np.zeros(rows, bool)
    if fmt.history_field is not None and fmt.history_field in side:
        found = history_pairs(side[fmt.history_field])
        if found is None:
            return None
        pairs, bad_history = found[0], found[1]
    return _counted(column, output, system, pairs, bad_history)[3]


def list_sizes_or(side: Mapping[str, pa.Array], fmt: Fields, rows: int) -> Counts:
    """Per row, its history pairs (none where the batch has no history column)."""
    if fmt.history_field is None or fmt.history_field not in side:
        return np.zeros(rows, dtype=np.int64)
    history = side[fmt.history_field]
    return np.zeros(rows, np.int64) if pa.types.is_null(history.type) else list_sizes(history)
