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
import pyarrow as pa
import pyarrow.compute as pc

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
_START: Final = r"^[ \t\n\r\f\v]*(?:Human|Assistant):"
_NAMES: Final = {b"Human:": USER, b"Assistant:": ASSISTANT}


def _markers(column: pa.Array) -> tuple[Mask, Counts, Counts, Counts, Roles]:
    """Per row, whether it is read; per turn of the rows read (in order), its row, where its
    text starts and ends in the column's bytes (from the first value's), and its role."""
    read = as_mask(pc.match_substring_regex(column, _START), fill=False)
    offsets, data = text_bytes(column)
    offsets = offsets - offsets[0]
    ends = offsets[1:]
    at = np.flatnonzero(read)
    trimmed = pc.fill_null(pc.binary_length(pc.ascii_ltrim(column, characters=_LEAD)), 0)
    first = ends - trimmed.to_numpy().astype(np.int64)  # the first marker's name, if read
    # every `\n\n` + name, the name's place; in a row read, after its first marker's
    lines = np.flatnonzero(data == ord("\n"))
    blank = lines[:-1][np.diff(lines) == 1] + 2
    blank = blank[blank < len(data)]
    window = data[np.minimum(blank[:, None] + np.arange(10), len(data) - 1)]
    names, roles = [], []
    for name, kind in _NAMES.items():
        found = blank[(window[:, : len(name)] == np.frombuffer(name, np.uint8)).all(axis=1)]
        names.append(found)
        roles.append(np.full(len(found), kind, dtype=np.int8))
    name_at = np.concatenate(names)
    role = np.concatenate(roles)
    row = np.searchsorted(ends, name_at, side="right")
    length = np.where(role == USER, 6, 10)
    keep = read[row] & (name_at > first[row]) & (name_at + length <= ends[row])
    # the first marker of each row read
    opens = data[np.minimum(first[at], max(len(data) - 1, 0))]
    first_role = np.where(opens == ord("H"), USER, ASSISTANT).astype(np.int8)
    row = np.concatenate([at, row[keep]])
    name_at = np.concatenate([first[at], name_at[keep]])
    role = np.concatenate([first_role, role[keep]])
    order = np.argsort(name_at, kind="stable")
    row, name_at, role = row[order], name_at[order], role[order]
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
