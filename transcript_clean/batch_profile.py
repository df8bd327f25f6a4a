"""A batch's profile as it came in (`profile_batch`): the rows the fast path settled measured from
the format's flattened `Conversations` (one profile for every format: `conversation_measures`),
the others from their decoded transcripts. The profile itself, its histograms and what a
transcript measures, is `profile.py`'s; measuring a batch needs the fast path and the dataset
types, which sit above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from transcript_clean.fastpath.measures import Measures
from transcript_clean.model import Message
from transcript_clean.profile import Profile, measure_transcripts
from transcript_clean.sources import jsontypes

if TYPE_CHECKING:
    from transcript_clean.formats.base import Format

__all__ = ["arrow_measures", "profile_batch"]


def arrow_measures(
    fmt: Format, table: pa.Table, rows: npt.NDArray[np.bool_], *, texts: bool = False
) -> tuple[Measures, npt.NDArray[np.bool_]] | None:
    """The measures of the rows of `rows` that `fmt`'s flattener reads as the decoder would,
    from its columnar view (`conversation_measures`), and the rows it measured; the others are
    decoded. None for a format with no flattener."""
    from transcript_clean.fastpath.measures import column_array, conversation_measures
    from transcript_clean.formats.base import Format as Base

    if type(fmt).flatten is Base.flatten:
        return None

    conversations = fmt.flatten(column_array(table, fmt.column), table.schema, fmt.side(table))
    if conversations is None:
        return measure_transcripts([]), np.zeros_like(rows)
    measured = rows & conversations.read
    return conversation_measures(conversations, measured, texts=texts), measured


def _first_conversation(table: pa.Table, fmt: Any) -> tuple[Format, pa.Table] | None:
    """A dataset type's batch as its inner format reads one conversation: the prompt followed
    by the first candidate (`ShapedFormat.decode`), put together in Arrow in the inner format's
    column. None where a part is no list of messages, or holds a `pa.json_()` field (then each
    row is decoded: in Arrow, such a field is its JSON text, which the decoder reads as
    values)."""
    from transcript_clean.shapes.arrow import first_conversation

    joined = first_conversation(table, fmt)
    if joined is None or jsontypes.has_json(joined.type):
        return None
    inner = fmt.inner
    at = table.schema.get_field_index(inner.column)
    if at >= 0:
        return inner, table.set_column(at, inner.column, joined)
    return inner, table.append_column(inner.column, joined)


def _decoded(fmt: Format, row: Mapping[str, Any]) -> Sequence[Message] | None:
    """A settled row's transcript (the fast path settles only rows that decode: None is a
    safeguard, an unread row)."""
    from transcript_clean.formats.base import DecodeError

    try:
        return fmt.decode(row).messages
    except (DecodeError, RecursionError):
        return None


def profile_batch(
    table: pa.Table,
    fmt: Format,
    settled: npt.NDArray[np.bool_] | None,
    decoded: Mapping[int, Sequence[Message] | None],
    *,
    tokenizer: str | None = None,
) -> Profile:
    """The profile of one batch as it came in: `settled` (the rows the fast path settled) are
    measured in Arrow where the format can (else decoded here: the per-row cost), `decoded`
    holds the per-row path's transcripts by position (None: it could not be read)."""
    from transcript_clean.shapes import ShapedFormat
    from transcript_clean.tokens import token_counts

    profile = Profile(rows=table.num_rows)
    tokens = None if tokenizer is None else partial(token_counts, tokenizer)
    texts = tokenizer is not None
    transcripts = [m for m in decoded.values() if m is not None]
    if settled is not None and settled.any():
        # A dataset type's row is profiled as the per-row path reads it, its prompt and first
        # candidate (`ShapedFormat.decode`), put together into one column
        # (`_first_conversation`).
        read_as: tuple[Format, pa.Table] | None = (fmt, table)
        if isinstance(fmt, ShapedFormat):
            read_as = _first_conversation(table, fmt)
        found = None if read_as is None else arrow_measures(*read_as, settled, texts=texts)
        if found is not None:
            measures, measured = found
            profile.add(measures, tokens)
            settled = settled & ~measured
        rows = table.filter(pa.array(settled)).to_pylist() if settled.any() else []
        transcripts += [m for m in map(partial(_decoded, fmt), rows) if m is not None]
    if transcripts:
        profile.add(measure_transcripts(transcripts, texts=texts), tokens)
    return profile
