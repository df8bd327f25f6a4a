"""The flattener of hh-rlhf transcripts (`hh.py`): each row's one text split into its turns in
Arrow and NumPy, as `parse_hh` splits it.

A row is read where its text starts, after ASCII white space, with a `Human:` or `Assistant:`
marker. Its turns are then exactly `parse_hh`'s: that first marker opens one, and so does each
`\\n\\nHuman:` or `\\n\\nAssistant:` after it (no two of them can overlap, so every one is a
match of Python's left-to-right scan), found in the column's bytes; the one space after a
marker is the marker's. Any other text is unread: the decoder rejects most of them (no marker,
text before the first) and reads the few that start with other white space; the per-row path
decides them. A null is unread too. Such rows hold no calls and no results.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    indices,
    is_text,
    text_bytes,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, USER, Conversations, Roles, of_texts
from transcript_clean.columnar.edits import Edits, merged_texts
from transcript_clean.formats.fields import not_blank

__all__ = ["flatten_hh", "hh_turn_counts", "write_hh"]

_LEAD: Final = " \t\n\r\f\v"
"""The white space a read row may start with (all of it white space to Python's `\\s`)."""
_HUMAN: Final = int.from_bytes(b"Human:", "little")
_ASSISTANT: Final = int.from_bytes(b"Assistan", "little"), int.from_bytes(b"t:", "little")


def _words(data: npt.NDArray[np.uint8], at: Counts) -> tuple[Counts, Counts]:
    """The 16 bytes at each of the positions `at` of `data` (zeros past its end), as two
    little-endian 64-bit words: a marker told by two comparisons, not one per byte."""
    windows = np.empty((len(at), 16), dtype=np.uint8)
    inside = at + 16 <= len(data)
    windows[inside] = sliding_window_view(data, 16)[at[inside]] if len(data) >= 16 else 0
    if not inside.all():  # the last few positions: from the end's bytes, padded
        tail = np.zeros(32, dtype=np.uint8)
        last = data[-16:]
        tail[16 - len(last) : 16] = last
        windows[~inside] = sliding_window_view(tail, 16)[at[~inside] - (len(data) - 16)]
    words = windows.view(np.uint64)
    return words[:, 0].astype(np.int64), words[:, 1].astype(np.int64)


def _names(data: npt.NDArray[np.uint8], at: Counts) -> Roles:
    """Per position of `at`, the role whose marker starts there (`Human:`, `Assistant:`), or
    -1 for none."""
    one, two = _words(data, at)
    human = (one & 0xFFFF_FFFF_FFFF) == _HUMAN
    assistant = (one == _ASSISTANT[0]) & ((two & 0xFFFF) == _ASSISTANT[1])
    out: Roles = np.where(human, USER, np.where(assistant, ASSISTANT, -1)).astype(np.int8)
    return out


def _markers(column: pa.Array) -> tuple[Mask, Counts, Counts, Counts, Roles]:
    """Per row, whether it is read; per turn of the rows read (in order), its row, where its
    text starts and ends in the column's bytes (from the first value's), and its role."""
    offsets, data = text_bytes(column)
    offsets = offsets - offsets[0]
    ends = offsets[1:]
    # The first marker: right after the white space a row starts with, whole within the row.
    trimmed = pc.fill_null(pc.binary_length(pc.ascii_ltrim(column, characters=_LEAD)), 0)
    first = ends - trimmed.to_numpy().astype(np.int64)
    first_role = _names(data, first)
    read = (first_role >= 0) & (first + np.where(first_role == USER, 6, 10) <= ends)
    read &= ~as_mask(column.is_null())
    at = np.flatnonzero(read)
    # every `\n\n` + name, the name's place; in a row read, after its first marker's
    lines = np.flatnonzero(data == ord("\n"))
    blank = lines[:-1][np.diff(lines) == 1] + 2
    blank = blank[blank < len(data)]
    blank = blank[(data[blank] == ord("H")) | (data[blank] == ord("A"))]
    role = _names(data, blank)
    name_at = blank[role >= 0]
    role = role[role >= 0]
    row = np.searchsorted(ends, name_at, side="right")
    keep = (
        read[row] & (name_at > first[row]) & (name_at + np.where(role == USER, 6, 10) <= ends[row])
    )
    row, name_at, role = row[keep], name_at[keep], role[keep]
    # Each row's first marker, then the others of its row: both in the column's order.
    place = np.arange(len(at), dtype=np.int64) + np.searchsorted(row, at, side="left")
    total = len(at) + len(row)
    is_first = np.zeros(total, dtype=bool)
    is_first[place] = True
    rows, names, roles = (np.empty(total, dtype=np.int64) for _ in range(3))
    rows[place], names[place], roles[place] = at, first[at], first_role[at]
    rows[~is_first], names[~is_first], roles[~is_first] = row, name_at, role
    row, name_at, role = rows, names, roles.astype(np.int8)
    start = name_at + np.where(role == USER, 6, 10)
    space = start < ends[row]
    space[space] = data[start[space]] == ord(" ")
    start = start + space
    # a turn ends where the next one's blank line starts, or at its row's end
    end = ends[row].copy()
    same = row[1:] == row[:-1]
    end[:-1][same] = name_at[1:][same] - 2
    return read, row, start, end, role


def hh_turn_counts(column: pa.Array) -> tuple[Mask, Counts] | None:
    """Per row, whether it is unread, and its turns (0 for a row unread); None where the
    column is not text."""
    if not is_text(column.type):
        return None
    read, row, *_ = _markers(column)
    return ~read, np.bincount(row, minlength=len(column)).astype(np.int64)


def _texts(column: pa.Array, start: Counts, end: Counts) -> pa.Array:
    """The texts at [start, end) of the column's bytes: taken from one array of those pieces
    and the gaps between them."""
    _, data = text_bytes(column)
    if not len(start):
        return pa.array([], pa.large_string())
    cuts = np.empty(2 * len(start), dtype=np.int64)
    cuts[0::2], cuts[1::2] = start, end
    pieces = pa.LargeStringArray.from_buffers(len(cuts) - 1, pa.py_buffer(cuts), pa.py_buffer(data))
    return pieces.take(indices(np.arange(0, len(cuts), 2, dtype=np.int64)))


def flatten_hh(column: pa.Array) -> Conversations | None:
    """The transcripts of `column` as `Conversations`; None where the column is not text.
    Every message is one text (`message_text` gives it, for R4) with no fields beside it (an
    empty `message_origin`: the decoder keeps none)."""
    if not is_text(column.type):
        return None
    read, row, start, end, role = _markers(column)
    texts = _texts(column, start, end)
    total = len(texts)
    chars = text_lengths(texts)

    def texts_and_owners() -> tuple[pa.Array, Counts]:
        return texts, np.arange(total, dtype=np.int64)

    def message_text(positions: Counts) -> pa.Array:
        return texts.take(indices(positions))

    def message_origin(positions: Counts) -> pa.Array:
        return pa.array([{}] * len(positions), pa.struct([]))

    view = of_texts(
        rows=len(column),
        unread=~read,
        message_row=row,
        role=role,
        said=not_blank(texts),
        chars=chars,
        texts=texts_and_owners,
    )
    view.message_text = message_text
    view.message_origin = message_origin
    return view


# What opens a turn as `render_hh` writes it: a blank line (or, for the first, the row's own
# white space before its first marker), the marker, and a space where the turn says anything.
_OPENINGS: Final = ("\n\n", "Human:", "Human: ", "Assistant:", "Assistant: ")


def write_hh(column: pa.Array, edits: Edits) -> pa.Array:
    """The rows of `edits` written anew as the encoder writes a repaired transcript
    (`render_hh` of the turns kept, the row's white space before the first): each kept turn
    its opening and its text, a turn others are joined into (R4) the texts joined
    (`merged_texts`). Only the texts come from the column, as the flattener read them."""
    c = edits.conversations
    assert c.message_text is not None
    chosen = np.zeros(c.rows, dtype=bool)
    chosen[edits.rows] = True
    kept = np.flatnonzero(chosen[c.message_row] & ~edits.removed)
    texts = c.message_text(kept).cast(pa.large_string())
    if edits.merges is not None and len(edits.merges.grown):
        grown, joined = merged_texts(edits.merges, c.message_text)
        at = np.searchsorted(kept, grown)
        index = np.arange(len(kept), dtype=np.int64)
        index[at] = len(kept) + np.arange(len(grown), dtype=np.int64)
        texts = pa.concat_arrays([texts, joined.cast(pa.large_string())]).take(indices(index))
    # each row's white space before its first marker, what `str.lstrip` takes off
    rows = column.take(indices(edits.rows))
    trimmed = pc.binary_length(pc.ascii_ltrim(rows, characters=_LEAD))
    lengths = pc.binary_length(rows).to_numpy()
    leads = _prefixes(rows, (lengths - trimmed.to_numpy()).astype(np.int64))
    owner = np.searchsorted(edits.rows, c.message_row[kept])
    first = np.ones(len(kept), dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    says = pc.binary_length(texts).to_numpy(zero_copy_only=False) > 0
    marker = np.where(c.role[kept] == USER, 1, 3) + says
    opening = np.where(first, len(_OPENINGS) + owner, 0)
    base = len(_OPENINGS) + len(edits.rows)
    pieces = np.empty(3 * len(kept), dtype=np.int64)
    pieces[0::3], pieces[1::3], pieces[2::3] = opening, marker, base + np.arange(len(kept))
    every = pa.concat_arrays([pa.array(_OPENINGS, pa.large_string()), leads, texts])
    counts = 3 * np.bincount(owner, minlength=len(edits.rows))
    offsets = np.zeros(len(edits.rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    lists = pa.LargeListArray.from_arrays(pa.array(offsets), every.take(indices(pieces)))
    written = pc.binary_join(lists, pa.scalar("", pa.large_string()))
    return written.cast(column.type)


def _prefixes(texts: pa.Array, lengths: Counts) -> pa.Array:
    """Each text's first `lengths` bytes (ASCII white space: as many characters)."""
    if not len(texts):
        return pa.array([], pa.large_string())
    offsets, data = text_bytes(texts)
    offsets = offsets - offsets[0]
    cuts = np.empty(2 * len(texts), dtype=np.int64)
    cuts[0::2], cuts[1::2] = offsets[:-1], offsets[:-1] + lengths
    pieces = pa.LargeStringArray.from_buffers(len(cuts) - 1, pa.py_buffer(cuts), pa.py_buffer(data))
    return pieces.take(indices(np.arange(0, len(cuts), 2, dtype=np.int64)))
