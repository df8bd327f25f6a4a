"""The flattener of hh-rlhf transcripts (`hh.py`): each row's one text split into its turns in
Arrow, as `parse_hh` splits it.

A row is read where its text starts, after ASCII white space, with a `Human:` or `Assistant:`
marker, and holds no NUL character (the mark the split cuts at). Its turns are then exactly
`parse_hh`'s: a marker opens a turn at the start or after a blank line, found by one regex
scan from left to right as Python's `finditer` finds them, and the one space after it is the
marker's. Any other text is unread: the decoder rejects most of them (no marker, text before
the first) and reads the few that start with other white space; the per-row path decides them.
A null is unread too. Such rows hold no calls and no results.
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
    is_text,
    list_sizes,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, USER, Conversations
from transcript_clean.formats.fields import not_blank

__all__ = ["flatten_hh", "hh_turn_counts"]

_LEAD: Final = " \t\n\r\f\v"
"""The white space a read row may start with (all of it white space to Python's `\\s`)."""
_START: Final = r"^[ \t\n\r\f\v]*(?:Human|Assistant):"
_MARKER: Final = r"(^|\n\n)(Human|Assistant):"
"""A marker in a text whose leading white space is trimmed (`^`: the text's start only)."""
_CUT: Final = "\x00"


def _read(column: pa.Array) -> tuple[Mask, pa.Array]:
    """Per row, whether it is read; the texts of the rows read, their leading white space
    trimmed (so that each starts with its first marker)."""
    read = as_mask(pc.match_substring_regex(column, _START), fill=False)
    read &= ~as_mask(pc.match_substring(column, _CUT), fill=False)
    body = pc.utf8_ltrim(column.filter(pa.array(read)), characters=_LEAD)
    return read, body


def hh_turn_counts(column: pa.Array) -> tuple[Mask, Counts] | None:
    """Per row, whether it is unread, and its turns (0 for a row unread), without splitting
    the texts; None where the column is not text."""
    if not is_text(column.type):
        return None
    read, body = _read(column)
    counts = np.zeros(len(column), dtype=np.int64)
    counts[read] = pc.count_substring_regex(body, _MARKER).to_numpy(zero_copy_only=False)
    return ~read, counts


def flatten_hh(column: pa.Array) -> Conversations | None:
    """The transcripts of `column` as `Conversations`; None where the column is not text."""
    if not is_text(column.type):
        return None
    rows = len(column)
    read, body = _read(column)
    # each marker at a cut: the first piece of a row is the nothing before its first marker
    pieces = pc.split_pattern(pc.replace_substring_regex(body, _MARKER, _CUT + r"\2:"), _CUT)
    sizes = list_sizes(pieces)
    items = pc.list_flatten(pieces)
    turn = np.ones(len(items), dtype=bool)
    turn[np.cumsum(sizes) - sizes] = False
    marked = items.filter(pa.array(turn))
    texts = pc.replace_substring_regex(
        marked, r"^(?:Human|Assistant): ?", "", max_replacements=1
    ).cast(pa.large_string())
    total = len(texts)
    message_row = np.repeat(np.flatnonzero(read).astype(np.int64), sizes - 1)
    role = np.where(as_mask(pc.starts_with(marked, "Human:")), USER, ASSISTANT).astype(np.int8)
    chars = text_lengths(texts)

    def texts_and_owners() -> tuple[pa.Array, Counts]:
        return texts, np.arange(total, dtype=np.int64)

    none = np.zeros(0, dtype=np.int64)
    return Conversations(
        rows=rows,
        unread=~read,
        message_row=message_row,
        role=role,
        said=not_blank(texts),
        thought=np.zeros(total, dtype=bool),
        reasoned=np.zeros(total, dtype=bool),
        spoken=chars > 0,
        chars=chars,
        call_message=none,
        call_id=pa.array([], pa.string()),
        call_name=pa.array([], pa.string()),
        call_arguments=pa.array([], pa.string()),
        call_object=np.zeros(0, dtype=bool),
        result_message=none,
        result_call=pa.array([], pa.string()),
        result_blank=np.zeros(0, dtype=bool),
        texts=texts_and_owners,
    )
