"""Claude Code's flattener: a column of session events (`events`), held as Arrow structs, into
`Conversations`.

It reads a row as `ClaudeCodeFormat.decode` reads it, or marks it unread. The events that hold
a message (`type` user or assistant, with a `message`) are read by Anthropic's flattener over
their `message` structs, each with the event's type as its role (the decoder reads the role
from the event, never from `message.role`); every other event is passed over. Consecutive
assistant events with one `message.id` are one message, as the decoder joins the content
blocks of a streamed answer. Unread: a null event, or a user or assistant event whose
`message` is null (Arrow cannot tell it from one without the key, which the decoder passes
over), and whatever Anthropic's flattener leaves unread. It knows no rule.

A row whose repaired form the encoder writes otherwise than dropping its events (a message read
from several events becomes one event; events holding no message move after the messages
left) is `reencoded`: its repairs are the per-row path's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    field_type,
    flattened,
    indices,
    is_text,
    rows_with,
)
from transcript_clean.columnar.conversations import ASSISTANT, Conversations
from transcript_clean.formats.anthropic.flatten import flatten_anthropic

__all__ = ["flatten_claude_code"]


def flatten_claude_code(array: pa.Array) -> Conversations | None:
    """The rows of a Claude Code `events` column as `Conversations`; None for a layout this does
    not read (the per-row path reads every row)."""
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        return None  # events kept as JSON text (a session file's rows), or no list at all
    event_type = array.type.value_type
    if not pa.types.is_struct(event_type) or not is_text(field_type(event_type, "type")):
        return None
    message_type = field_type(event_type, "message")
    if message_type is None or not pa.types.is_struct(message_type):
        return None
    id_type = field_type(message_type, "id")
    if id_type is not None and not (is_text(id_type) or pa.types.is_null(id_type)):
        return None  # an id that is no text: the decoder reads it as none, row by row
    if field_type(message_type, "content") is None:
        return None

    rows = len(array)
    events, _, event_row = flattened(array)
    kind = pc.struct_field(events, "type")
    message = pc.struct_field(events, "message")
    is_user = as_mask(pc.equal(kind, "user"), fill=False)
    is_assistant = as_mask(pc.equal(kind, "assistant"), fill=False)
    has_message = ~as_mask(message.is_null())
    said = (is_user | is_assistant) & has_message
    # A null event, or a message event whose `message` is null or missing: the decoder fails
    # on the first and on a null, and passes over a missing one, which Arrow does not tell.
    doubt = as_mask(events.is_null()) | ((is_user | is_assistant) & ~has_message)

    # The messages' events, as Anthropic `messages` of one row each: role from the event.
    at = np.flatnonzero(said)
    taken = indices(at)
    content = pc.struct_field(message, "content").take(taken)
    role = pc.if_else(pa.array(is_assistant[at]), "assistant", "user")
    items = pa.StructArray.from_arrays([role, content], names=["role", "content"])
    counts = np.bincount(event_row[at], minlength=rows)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    mask = array.is_null() if array.null_count else None
    as_messages = pa.ListArray.from_arrays(pa.array(offsets), items, mask=mask)
    read = flatten_anthropic(as_messages, None, {})
    if read is None:
        return None

    # Each event is one Anthropic message (no system prompt here): join the streamed ones.
    row_of = read.message_row
    ids = (
        pc.struct_field(message, "id").take(taken)
        if id_type is not None and not pa.types.is_null(id_type)
        else pa.nulls(len(at), pa.string())
    )
    streamed = np.zeros(len(at), dtype=bool)
    if len(at) > 1:
        same_id = as_mask(pc.equal(ids[1:], ids[:-1]), fill=False)
        both = (read.role[1:] == ASSISTANT) & (read.role[:-1] == ASSISTANT)
        streamed[1:] = same_id & both & (row_of[1:] == row_of[:-1])
    new = np.cumsum(~streamed) - 1
    starts = np.flatnonzero(~streamed)

    def joined(values: Mask) -> Mask:
        out: Mask = np.logical_or.reduceat(values, starts) if len(starts) else values[:0]
        return out

    chars = np.add.reduceat(read.chars, starts) if len(starts) else read.chars[:0]
    item_message = np.full(len(events), -1, dtype=np.int64)
    item_message[at] = new
    reencoded = rows_with(streamed, row_of, rows) | rows_with(~said, event_row, rows)
    texts = read.texts

    def said_texts() -> tuple[pa.Array, Counts]:
        assert texts is not None
        pieces, owner = texts()
        return pieces, new[owner]

    result_text: Callable[[], pa.Array] | None = read.result_text
    return Conversations(
        rows=rows,
        unread=read.unread | rows_with(doubt, event_row, rows),
        message_row=row_of[starts],
        role=read.role[starts],
        said=joined(read.said),
        thought=joined(read.thought),
        reasoned=joined(read.reasoned),
        spoken=joined(read.spoken),
        chars=chars.astype(np.int64),
        call_message=new[read.call_message],
        call_id=read.call_id,
        call_name=read.call_name,
        call_arguments=read.call_arguments,
        call_object=read.call_object,
        result_message=new[read.result_message],
        result_call=read.result_call,
        result_blank=read.result_blank,
        result_text=result_text,
        result_error=read.result_error,
        item_message=item_message,
        reencoded=reencoded,
        texts=said_texts if texts is not None else None,
    )
