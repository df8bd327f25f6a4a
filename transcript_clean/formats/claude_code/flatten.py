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

`write_events` writes a repair as the encoder does: a message read from several events becomes
its first event, holding the blocks of all, and so does a message others are joined into (R4),
holding theirs after its own (`unmerged` says where the view cannot tell what R4 does); an event
holding no message stays after the message event before it, and moves to the end where that
event is no longer written (the encoder places it by that event's `uuid`). A row where that is
not all the encoder does is `reencoded`, its repairs the per-row path's: a streamed answer whose
content is text (joined with blank lines), or with reasoning after its first event (written over
the first event's reasoning blocks); an event holding no message after a message event whose
`uuid` is null (the encoder puts it first) or shared by another message event of the row; two
answers apart with one `message.id` (a drop between them would make them one when the row is
read again). A result made by a repair (R5's error result) goes into the `tool_result` blocks of
the user event that answers its call, after those it opens with, as the encoder writes it
(`result_holders` says which events it can go into).
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
    lists_of,
    repeated,
    rows_with,
    run_starts,
    with_child,
)
from transcript_clean.columnar.conversations import ASSISTANT, Conversations
from transcript_clean.columnar.edits import Edits, Merges, Subset, appended_lists
from transcript_clean.formats.anthropic.flatten import flatten_anthropic
from transcript_clean.formats.anthropic.results import item_holders, with_error_results

__all__ = ["content_blocks", "flatten_claude_code", "result_holders", "unmerged", "write_events"]


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
    read, pick = _read(array, message, said, is_assistant, event_row)
    if read is None:
        return None
    position = np.full(read.messages, -1, dtype=np.int64)  # an Anthropic message's event
    position[pick] = np.arange(len(pick), dtype=np.int64)

    # Each event is one Anthropic message (no system prompt here): join the streamed ones.
    row_of, roles = read.message_row[pick], read.role[pick]
    ids = (
        pc.struct_field(message, "id").take(indices(at))
        if id_type is not None and not pa.types.is_null(id_type)
        else pa.nulls(len(at), pa.string())
    )
    streamed = np.zeros(len(at), dtype=bool)
    if len(at) > 1:
        same_id = as_mask(pc.equal(ids[1:], ids[:-1]), fill=False)
        both = (roles[1:] == ASSISTANT) & (roles[:-1] == ASSISTANT)
        streamed[1:] = same_id & both & (row_of[1:] == row_of[:-1])
    new = np.cumsum(~streamed) - 1
    starts = np.flatnonzero(~streamed)
    new_of = np.append(new, -1)[position]  # per Anthropic message, its message here

    def joined(values: Mask) -> Mask:
        values = values[pick]
        out: Mask = np.logical_or.reduceat(values, starts) if len(starts) else values[:0]
        return out

    chars = np.add.reduceat(read.chars[pick], starts) if len(starts) else read.chars[:0]
    item_message = np.full(len(events), -1, dtype=np.int64)
    item_message[at] = new
    # Where the encoder writes more than whole events dropped (see the module's docstring).
    later_reasoning = streamed & read.reasoned[pick]
    reencoded = rows_with(later_reasoning, row_of, rows)
    if is_text(field_type(message_type, "content")):
        reencoded |= rows_with(streamed, row_of, rows)
    # Two answers of a row with one `message.id` but apart: a repair dropping what stands
    # between them (R1's empty turn) makes them one streamed answer when the row is read again.
    opening = np.flatnonzero(~streamed & (roles == ASSISTANT))
    opening = opening[~as_mask(ids.is_null(), fill=True)[opening]]
    if len(opening) > 1:
        codes = pc.dictionary_encode(ids.take(indices(opening))).indices
        key = row_of[opening] * (len(at) + 1) + np.asarray(codes, dtype=np.int64)
        reencoded |= rows_with(repeated(key), row_of[opening], rows)
    anchor = _anchors(said, event_row)
    follows = ~said & (anchor >= 0)
    if follows.any():
        uuid = _uuids(events)
        unplaced = as_mask(uuid.is_null(), fill=True)[anchor[follows]]
        reencoded |= rows_with(unplaced, event_row[follows], rows)
        # A uuid shared by two message events matters only in a row with such events: the
        # others' uuids are not compared (most rows have none).
        following = rows_with(follows, event_row, rows)
        keyed = said & following[event_row] & ~as_mask(uuid.is_null(), fill=True)
        codes = pc.dictionary_encode(uuid.filter(pa.array(keyed))).indices
        key = event_row[keyed] * (len(at) + 1) + np.asarray(codes, dtype=np.int64)
        reencoded |= rows_with(repeated(key), event_row[keyed], rows)
    texts = read.texts

    def said_texts() -> tuple[pa.Array, Counts]:
        assert texts is not None
        pieces, owner = texts()
        return pieces, new_of[owner]

    result_text: Callable[[], pa.Array] | None = read.result_text
    message_text: Callable[[Counts], pa.Array] | None = None
    if read.message_text is not None:
        one_event = np.diff(np.append(starts, len(at))) == 1
        anthropic_text = read.message_text

        def message_text(positions: Counts) -> pa.Array:
            # A streamed answer (several events) is never one text here: null.
            text = anthropic_text(pick[starts[positions]])
            return pc.if_else(pa.array(one_event[positions]), text, pa.nulls(len(text), text.type))

    def message_origin(positions: Counts) -> pa.Array:
        return events.take(indices(at[starts[positions]]))  # the decoder's: its first event

    return Conversations(
        rows=rows,
        unread=read.unread | rows_with(doubt, event_row, rows),
        message_row=row_of[starts],
        role=roles[starts],
        said=joined(read.said),
        thought=joined(read.thought),
        reasoned=joined(read.reasoned),
        spoken=joined(read.spoken),
        chars=chars.astype(np.int64),
        call_message=new_of[read.call_message],
        call_id=read.call_id,
        call_name=read.call_name,
        call_arguments=read.call_arguments,
        call_object=read.call_object,
        result_message=new_of[read.result_message],
        result_call=read.result_call,
        result_blank=read.result_blank,
        result_text=result_text,
        result_error=read.result_error,
        item_message=item_message,
        reencoded=reencoded,
        message_text=message_text,
        message_origin=message_origin,
        texts=said_texts if texts is not None else None,
    )


def _read(
    array: pa.Array, message: pa.Array, said: Mask, is_assistant: Mask, event_row: Counts
) -> tuple[Conversations | None, Counts]:
    """The message events read by Anthropic's flattener, as `messages` whose role is the
    event's type, and the position of each one's message among what it read. Where the content
    is lists and every event holding no message has none, every event is one of those messages
    (those holding none: empty user messages, set aside), so that no content is copied;
    elsewhere the message events' content is taken out."""
    rows = len(array)
    content = pc.struct_field(message, "content")
    at = np.flatnonzero(said)
    whole = isinstance(content, pa.ListArray | pa.LargeListArray)
    if whole:
        offsets = content.offsets.to_numpy()
        whole = not (np.diff(offsets)[~said] > 0).any()
    if whole:
        kind = type(content)
        keep_null = pa.array(as_mask(content.is_null()) & said)
        # Offsets anew: Arrow takes no null mask beside offsets sliced from a larger array.
        content = kind.from_arrays(pa.array(offsets), content.values, content.type, mask=keep_null)
        role = pc.if_else(pa.array(is_assistant & said), "assistant", "user")
        counts = np.bincount(event_row, minlength=rows)
        pick = at
    else:
        content = content.take(indices(at))
        role = pc.if_else(pa.array(is_assistant[at]), "assistant", "user")
        counts = np.bincount(event_row[at], minlength=rows)
        pick = np.arange(len(at), dtype=np.int64)
    items = pa.StructArray.from_arrays([role, content], names=["role", "content"])
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    mask = array.is_null() if array.null_count else None
    as_messages = pa.ListArray.from_arrays(pa.array(offsets), items, mask=mask)
    return flatten_anthropic(as_messages, None, {}), pick


def _anchors(said: Mask, event_row: Counts) -> Counts:
    """Per event, the position of the last message event at or before it in its row (-1:
    none)."""
    positions = np.arange(len(said), dtype=np.int64)
    last = np.maximum.accumulate(np.where(said, positions, -1)) if len(said) else positions
    starts = run_starts(event_row)
    out: Counts = np.where(last >= starts, last, -1)
    return out


def _uuids(events: pa.Array) -> pa.Array:
    """The events' `uuid`, null where they have none or it is no text (then not placed)."""
    kind = field_type(events.type, "uuid")
    if not is_text(kind):
        return pa.nulls(len(events), pa.string())
    return pc.struct_field(events, "uuid")


def write_events(column: pa.Array, edits: Edits) -> pa.Array:
    """The rows of `edits` written as `ClaudeCodeFormat.encode` writes them (see the module's
    docstring): the events of the messages dropped left out, a streamed answer's events one
    (the first, holding the blocks of all), and so a message's with those joined into it (R4),
    an event holding no message whose message event is no longer written moved to the end of
    its row, a new error result (R5's) among the blocks
    of the user event that answers its call. For rows not `reencoded`."""
    c = edits.conversations
    item_message = c.item_message
    assert item_message is not None
    events, _, parent = flattened(column)
    chosen = Subset.of(edits.rows, parent, len(column))
    mine = chosen.elements
    message = item_message[mine]
    said = message >= 0
    # Per event, whether it is the first of its message (events holding none may come between
    # a streamed answer's events).
    at = np.flatnonzero(said)
    first = np.zeros(len(mine), dtype=bool)
    first[at] = np.concatenate([[True], message[at[1:]] != message[at[:-1]]])[: len(at)]
    removed = np.append(edits.removed, False)  # the last: for an event holding no message
    written = said & first & ~removed[np.where(said, message, len(removed) - 1)]
    anchor = _anchors(said, chosen.parent)
    moved = ~said & (anchor >= 0)
    moved[moved] = ~written[anchor[moved]]
    keep = written | ~said
    order = np.lexsort((np.arange(len(mine)), moved, chosen.parent))
    order = order[keep[order]]
    values = events.take(indices(mine))
    owner = np.arange(len(mine), dtype=np.int64)  # a streamed answer's blocks: its first event's
    owner[said] = np.flatnonzero(said & first)[np.cumsum(first[said]) - 1]
    merges = edits.merges
    if merges is not None and len(merges.grown):
        # R4: the blocks of a message joined into another go to that one's first event, after
        # its own (those of a message that repeats it go with its events).
        adding = merges.adds & merges.joined
        moves = np.flatnonzero(said)
        moves = moves[adding[message[moves]]]
        into_first = c.first_items()[merges.into[message[moves]]]
        owner[moves] = np.searchsorted(mine, into_first)
    if (owner != np.arange(len(mine))).any():
        values = _with_content(values, owner)
    if edits.inserting:
        values = _with_results(values, mine, edits)
    counts = np.bincount(chosen.parent[order], minlength=len(chosen.rows))
    return lists_of(column.type, counts, values.take(indices(order)))


def content_blocks(array: pa.Array) -> bool:
    """Whether the events' `message.content` is a list of blocks (not text) in `array`."""
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        return False
    event_type = array.type.value_type
    message_type = field_type(event_type, "message") if pa.types.is_struct(event_type) else None
    if message_type is None or not pa.types.is_struct(message_type):
        return False
    content = field_type(message_type, "content")
    return content is not None and (pa.types.is_list(content) or pa.types.is_large_list(content))


def unmerged(array: pa.Array, c: Conversations, merges: Merges) -> Mask:
    """Per row, whether `write_events` does not write its R4 merges as the encoder does: where
    a message others are joined into is a streamed answer with an event holding no block (its
    text, which R4 compares, is not read here: see `message_text`)."""
    out = np.zeros(c.rows, dtype=bool)
    grown = merges.grown
    if not len(grown) or c.item_message is None:
        return out
    events, _, _ = flattened(array)
    sizes = np.diff(pc.struct_field(pc.struct_field(events, "message"), "content").offsets)
    held = np.flatnonzero(np.isin(c.item_message, grown))
    empty = np.asarray(sizes)[held] == 0
    return rows_with(empty, c.message_row[c.item_message[held]], c.rows)


def result_holders(array: pa.Array, c: Conversations, messages: Counts) -> Mask | None:
    """Of the messages at `messages`, whether `write_events` writes a new error result into it
    as the encoder does: a user event whose blocks are text and `tool_result` blocks only
    (`anthropic.results.item_holders` of the events' `message`). A turn no user event answers
    (a new event, in a session only after another code) is the per-row path's."""
    if not pa.types.is_list(array.type) or not pa.types.is_struct(array.type.value_type):
        return None
    if not is_text(field_type(array.type.value_type, "type")):
        return None
    return item_holders(array, c, messages, "message")


def _with_results(events: pa.Array, mine: Counts, edits: Edits) -> pa.Array:
    """Events (those at `mine` among the column's) with the error results of `edits` among the
    blocks of the user events that answer their calls (`anthropic.results`)."""
    c, inserts = edits.conversations, edits.inserts
    assert inserts is not None and c.item_message is not None
    at = np.searchsorted(mine, c.first_items()[inserts.into])
    call_ids = c.call_id.take(indices(inserts.call)).to_pylist()
    message = with_error_results(pc.struct_field(events, "message"), at, call_ids, inserts.text)
    return with_child(events, "message", message)


def _with_content(events: pa.Array, owner: Counts) -> pa.Array:
    """Events whose `message.content` blocks go to the event `owner` gives (after its own)."""
    message = pc.struct_field(events, "message")
    return with_child(events, "message", appended_lists(message, "content", owner))
