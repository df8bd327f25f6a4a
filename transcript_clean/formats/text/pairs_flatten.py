"""The flattener of ms-swift's `{human, assistant}` pairs (`codec.PairsFormat`): per pair a user
message and the assistant's, after a system message where the `system` column holds a text
that is not empty.

A row is read where its list holds at least one pair and each pair is an object whose `human`
and `assistant` are texts; any other row (null, empty, a null pair or text) is unread: the
decoder rejects it. A batch whose pairs are not structs of those two texts has no view. Such
rows hold no calls and no results.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    as_mask,
    field_type,
    indices,
    is_text,
    list_sizes,
    rows_with,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, USER, Conversations, of_texts
from transcript_clean.formats.fields import not_blank, prepend_system

__all__ = ["flatten_pairs"]


def flatten_pairs(column: pa.Array, side: Mapping[str, pa.Array]) -> Conversations | None:
    """The rows of `column` (a list of pairs) and `side`'s `system` as `Conversations`; None
    where the types are not those the decoder reads row by row."""
    kind = column.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return None
    pair = kind.value_type
    if not pa.types.is_struct(pair):
        return None
    if not (is_text(field_type(pair, "human")) and is_text(field_type(pair, "assistant"))):
        return None
    rows = len(column)
    system = side.get("system")
    if system is not None and pa.types.is_null(system.type):
        system = None
    if system is not None and not is_text(system.type):
        return None

    sizes = list_sizes(column)
    items = pc.list_flatten(column)
    item_row = np.repeat(np.arange(rows, dtype=np.int64), sizes)
    human, assistant = pc.struct_field(items, "human"), pc.struct_field(items, "assistant")
    bad = as_mask(items.is_null()) | as_mask(human.is_null()) | as_mask(assistant.is_null())
    unread = as_mask(column.is_null()) | (sizes == 0) | rows_with(bad, item_row, rows)
    kept = np.flatnonzero(~unread[item_row])
    # per pair read, its user message then the assistant's
    said = pa.concat_arrays(
        [human.take(indices(kept)).cast(pa.large_string()),
         assistant.take(indices(kept)).cast(pa.large_string())]
    )  # fmt: skip
    interleaved = np.empty(2 * len(kept), dtype=np.int64)
    interleaved[0::2] = np.arange(len(kept))
    interleaved[1::2] = np.arange(len(kept)) + len(kept)
    texts = said.take(indices(interleaved))
    total = len(texts)
    role = np.tile(np.array([USER, ASSISTANT], dtype=np.int8), len(kept))
    chars = text_lengths(texts)

    def texts_and_owners() -> tuple[pa.Array, Counts]:
        return texts, np.arange(total, dtype=np.int64)

    view = of_texts(
        rows=rows,
        unread=unread,
        message_row=np.repeat(item_row[kept], 2),
        role=role,
        said=not_blank(texts),
        chars=chars,
        texts=texts_and_owners,
    )
    if system is None:
        return view
    present = (text_lengths(system) > 0) & ~unread
    return prepend_system(view, system, present, np.zeros(rows, dtype=bool))
