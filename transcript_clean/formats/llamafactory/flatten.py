"""LLaMA-Factory v1's flattener: a column of `messages` whose `content` is a list of
`{type, value}` items, held as Arrow structs, into `Conversations`.

It reads a row as `LlamaFactoryFormat.decode` reads it, or marks it unread: a null message,
role, content or item, a role other than system / user / assistant / tool, an item without a
type, a text, reasoning or call item without a value, an item the decoder refuses where it
stands (anything but text in a system message, reasoning or a call outside an assistant
message, a media item without a value), a call whose value is not the JSON text of an object
with a name. Messages are as the decoder makes them: each system, user or assistant message
one, a run of tool messages one user message of results, the k-th answering the k-th call of
the message before it (system messages aside), and one tool message whose one text is a JSON
list of one item per call answering them all. The format has no ids: calls and results get the
ids the decoder mints (`call_{message}_{item}`, `result_{message}`). Call values are read over
the whole column where they are in the common layout, else one by one (`calls.py`); the few
tool messages that may hold such a list are parsed in Python. A result's text, which R3's
rejects compare (`result_text`), is its tool message's one text item, or its piece of such a
list. It knows no rule.
"""

from __future__ import annotations

from typing import Any, Final

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
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations
from transcript_clean.columnar.edits import item_origins, taken
from transcript_clean.formats.fields import (
    end_to_end,
    field,
    fits,
    is_list_of_structs,
    not_blank,
)
from transcript_clean.formats.llamafactory.calls import read_calls
from transcript_clean.formats.llamafactory.values import MEDIA_KINDS
from transcript_clean.formats.sharegpt.lists import split_lists

__all__ = ["flatten_llamafactory"]

_OWN_TYPES: Final = ("text", "reasoning", "tool_call")
_TOOL_ROLE: Final = 3  # a tool message's role among the items, before runs become messages


def flatten_llamafactory(array: pa.Array) -> Conversations | None:
    """The rows of a LLaMA-Factory v1 `messages` column as `Conversations`; None for a column
    whose Arrow type this does not read (the per-row path reads every row)."""
    if not is_list_of_structs(array.type):
        return None
    message_type = array.type.value_type
    content_type = field_type(message_type, "content")
    if content_type is None or not is_list_of_structs(content_type):
        return None
    if not fits(message_type, "role", is_text):
        return None
    item_type = content_type.value_type
    if not (fits(item_type, "type", is_text) and fits(item_type, "value", is_text)):
        return None

    rows = len(array)
    msgs, msgs_per_row, msg_row = flattened(array)
    n = len(msgs)
    kind = _lookup(field(msgs, "role"), ("system", "user", "assistant", "tool"))
    is_system, is_tool = kind == SYSTEM, kind == _TOOL_ROLE
    content = field(msgs, "content")
    flag = (kind < 0) | as_mask(msgs.is_null()) | as_mask(content.is_null())

    items, items_per_msg, item_msg = flattened(content)
    type_ = field(items, "type")
    value = field(items, "value")
    no_value = as_mask(value.is_null())
    type_kind = _lookup(type_, _OWN_TYPES)
    is_text_item, is_reasoning, is_call = type_kind == 0, type_kind == 1, type_kind == 2
    is_media = (type_kind < 0) & ~as_mask(type_.is_null())
    item_kind = kind[item_msg]
    flag_item = as_mask(items.is_null()) | as_mask(type_.is_null())
    flag_item |= (is_text_item | is_reasoning | is_call) & no_value
    flag_item |= is_media & no_value & as_mask(pc.is_in(type_, pa.array(list(MEDIA_KINDS))))
    flag_item |= (item_kind == SYSTEM) & ~is_text_item
    flag_item |= (item_kind != ASSISTANT) & (is_reasoning | is_call)

    # Calls, read from their values, in order.
    call_items = np.flatnonzero(is_call & ~flag_item & (item_kind == ASSISTANT))
    found = read_calls(value.take(indices(call_items)))
    flag_item[call_items[~found.read]] = True
    calls = call_items[found.read]
    flag |= rows_with(flag_item, item_msg, n)
    unread = as_mask(array.is_null()) | rows_with(flag, msg_row, rows)

    # Messages: a run of tool messages of one row is one user message.
    same_row = np.zeros(n, dtype=bool)
    same_row[1:] = msg_row[1:] == msg_row[:-1]
    goes_on = np.zeros(n, dtype=bool)
    goes_on[1:] = is_tool[1:] & is_tool[:-1]
    goes_on &= same_row
    msg_message = np.cumsum(~goes_on) - 1  # each message item's canonical message
    starts = np.flatnonzero(~goes_on)
    m = len(starts)
    message_row = msg_row[starts]
    role_of = np.where(kind[starts] == _TOOL_ROLE, USER, np.maximum(kind[starts], 0))
    role_of = np.where(kind[starts] < 0, USER, role_of).astype(np.int8)
    results_message = is_tool[starts]

    # The message a run of results answers: the one before it, system messages aside, when
    # that is an assistant message of the same row.
    call_message_item = item_msg[calls]  # the message item of each call
    call_message = msg_message[call_message_item]
    calls_per = np.bincount(call_message, minlength=m).astype(np.int64)
    first_call = np.cumsum(calls_per) - calls_per
    positions = np.arange(m, dtype=np.int64)
    last_said = np.full(m, -1, dtype=np.int64)
    if m:
        running = np.maximum.accumulate(np.where(role_of != SYSTEM, positions, -1))
        last_said[1:] = running[:-1]
    valid = last_said >= 0
    valid[valid] &= message_row[last_said[valid]] == message_row[valid]
    valid[valid] &= role_of[last_said[valid]] == ASSISTANT
    answered_by = np.where(valid & results_message, last_said, -1)

    # Call ids as the decoder mints them: `call_{i}_{k}`, i the message item's place in its
    # row, k the item's place in its message.
    row_start = np.cumsum(msgs_per_row) - msgs_per_row  # each row's first message item
    item_start = np.cumsum(items_per_msg) - items_per_msg  # each message item's first item
    call_at = call_message_item - row_start[msg_row[call_message_item]]
    call_k = calls - item_start[call_message_item]
    call_ids = end_to_end("call_", call_at, "_", call_k)

    # Results: each tool message answers the call at its place, or one message all of them.
    tools = np.flatnonzero(is_tool)
    run = msg_message[tools]
    place = tools - starts[run]
    window = answered_by[run]
    answers = np.where(window >= 0, calls_per[np.maximum(window, 0)], 0)
    run_length = np.bincount(run, minlength=m)[run]
    items_per = np.bincount(item_msg, minlength=n).astype(np.int64)
    one_text = np.zeros(n, dtype=bool)
    texts_at = np.flatnonzero(is_text_item & ~no_value)
    one_text[item_msg[texts_at]] = True
    one_text &= items_per == 1
    # A tool message alone answering two calls or more may be a JSON list of one item each
    # (`sharegpt.lists.split_lists`: over the column where it is a list of flat objects as
    # `json.dumps` writes them, else one by one): its items are then the results.
    maybe = np.flatnonzero((run_length == 1) & (answers >= 2) & one_text[tools] & ~flag[tools])
    split_tool = np.zeros(len(tools), dtype=bool)
    split_pieces = pa.array([], pa.large_string())  # the split messages' texts, in order
    if len(maybe):
        first_item = item_start[tools[maybe]]
        read, split_pieces = split_lists(value.take(indices(first_item)), answers[maybe])
        split_tool[maybe[read]] = True

    # Per result: one per tool message, or one per piece of a split one (as many as it answers).
    per_tool = np.where(split_tool, answers, 1).astype(np.int64)
    owner = np.repeat(np.arange(len(tools), dtype=np.int64), per_tool)  # its tool message
    result_at = tools[owner]
    is_split = split_tool[owner]
    piece = np.arange(len(owner), dtype=np.int64) - (np.cumsum(per_tool) - per_tool)[owner]
    first_answered = first_call[np.maximum(window, 0)][owner] if m else owner
    p = place[owner]
    numbers = np.where(
        is_split, first_answered + piece, np.where(p < answers[owner], first_answered + p, -1)
    )
    orphans = end_to_end("result_", result_at - row_start[msg_row[result_at]])
    result_ids = orphans
    answered_mask = numbers >= 0
    if answered_mask.any():
        answers_of = call_ids.take(indices(np.where(answered_mask, numbers, 0)))
        result_ids = pc.if_else(pa.array(answered_mask), answers_of, orphans)

    # What each item says, and each message.
    says = not_blank(value)
    chars = text_lengths(value)
    item_said = (is_text_item & says) | is_media
    message_item_said = rows_with(item_said, item_msg, n)
    own_blank = ~message_item_said  # a tool message's result: no part but blank text
    result_blank = own_blank[result_at]
    result_blank[is_split] = ~not_blank(split_pieces)
    split_chars = np.zeros(len(result_at), dtype=np.int64)
    split_chars[is_split] = text_lengths(split_pieces)

    texts_counted = (is_text_item | is_reasoning) & ~no_value
    item_chars = np.where(texts_counted, chars, 0)
    msg_chars = np.bincount(item_msg, weights=item_chars, minlength=n).astype(np.int64)
    split_items = tools[split_tool]  # in order, as `tools` is
    msg_chars[split_items] = np.bincount(
        result_at[is_split], weights=split_chars[is_split], minlength=n
    ).astype(np.int64)[split_items]
    # A system message's content is its texts joined with a blank line, blank ones left out.
    sys_items = is_text_item & (item_kind == SYSTEM)
    said_texts = np.bincount(item_msg, weights=sys_items & says, minlength=n).astype(np.int64)
    said_chars = np.bincount(
        item_msg, weights=np.where(sys_items & says, chars, 0), minlength=n
    ).astype(np.int64)
    joined = np.where(said_texts > 0, said_chars + 2 * np.maximum(said_texts - 1, 0), msg_chars)
    msg_chars = np.where(is_system, joined, msg_chars)

    per_message_chars = np.bincount(msg_message, weights=msg_chars, minlength=m).astype(np.int64)
    assistant_items = item_kind == ASSISTANT
    # A tool message's texts are its results': not what the user message says.
    own = item_kind != _TOOL_ROLE
    item_message = msg_message[item_msg]  # each content item's canonical message
    said = rows_with(item_said & own, item_message, m)
    said[is_system[starts]] = said_texts[starts][is_system[starts]] > 0
    thought = rows_with(is_reasoning & says, item_message, m)
    reasoned = rows_with(is_reasoning & assistant_items, item_message, m)
    spoken = rows_with(is_text_item & own & (chars > 0), item_message, m)

    def result_text() -> pa.Array:
        """Per result, its one text: a split message's piece, or its tool message's one text
        item; null for a tool message of other items."""
        one = one_text[result_at] & ~is_split
        at = np.where(one, item_start[result_at], 0)
        own = value.cast(pa.large_string()).take(pa.array(at, pa.int64(), mask=~one))
        if not is_split.any():
            return own
        place = np.arange(len(result_at), dtype=np.int64)
        place[is_split] = len(result_at) + np.arange(int(is_split.sum()), dtype=np.int64)
        return pa.concat_arrays([own, split_pieces]).take(indices(place))

    # An assistant message of one item, a text, says its value.
    plain = np.flatnonzero(one_text & (kind == ASSISTANT))
    text_item = np.full(m, -1, dtype=np.int64)
    text_item[msg_message[plain]] = item_start[plain]

    def texts() -> tuple[pa.Array, Counts]:
        plain = np.flatnonzero(texts_counted & ~np.isin(item_msg, split_items))
        other = plain[item_kind[plain] != SYSTEM]
        sys_msgs = np.flatnonzero(is_system)
        sys_text = _system_texts(value, item_msg, sys_items, sys_msgs)
        pieces = [
            sys_text,
            value.take(indices(other)).cast(pa.large_string()),
            split_pieces,
        ]
        owners = [
            msg_message[sys_msgs],
            msg_message[item_msg[other]],
            msg_message[result_at[is_split]],
        ]
        return pa.concat_arrays(pieces), np.concatenate(owners).astype(np.int64)

    return Conversations(
        rows=rows,
        unread=unread,
        message_row=message_row.astype(np.int64),
        role=role_of,
        said=said,
        thought=thought,
        reasoned=reasoned,
        spoken=spoken,
        chars=per_message_chars,
        call_message=call_message.astype(np.int64),
        call_id=call_ids,
        call_name=found.name,
        call_arguments=found.arguments,
        call_object=found.object,
        result_message=msg_message[result_at].astype(np.int64),
        result_call=result_ids,
        result_blank=result_blank,
        result_error=np.zeros(len(result_at), dtype=bool),  # a tool message is no error
        item_message=msg_message.astype(np.int64),
        pairs_by_position=True,
        result_text=result_text,
        message_text=lambda positions: taken(value, text_item[positions]),
        message_origin=item_origins(msgs, msg_message, m),
        texts=texts,
    )


def _lookup(texts: pa.Array, names: tuple[str, ...]) -> Counts:
    """Per text, its place in `names`; -1 for a null text or any other."""
    found = pc.index_in(texts, value_set=pa.array(names, texts.type))
    return np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _system_texts(value: pa.Array, item_msg: Counts, sys_items: Mask, sys_msgs: Counts) -> Any:
    """Each system message's content, as the decoder joins its texts (few: made in Python)."""
    from transcript_clean.formats.base import join_texts

    at = np.flatnonzero(sys_items)
    by_message: dict[int, list[str]] = {int(k): [] for k in sys_msgs.tolist()}
    for k, text in zip(item_msg[at].tolist(), value.take(indices(at)).to_pylist(), strict=True):
        by_message[k].append(text or "")
    return pa.array([join_texts(by_message[k]) for k in sys_msgs.tolist()], pa.large_string())
