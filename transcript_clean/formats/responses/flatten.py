"""The Responses API's flattener: a column of items, and the batch's `instructions` column, into
`Conversations`.

It reads a row as `ResponsesFormat.decode` reads it, or marks it unread: a null item, a message
item without its role or with a role the decoder does not know, a null content part or one
without its `type` or its text, a call without its `call_id` or `name`, an output without its
`call_id`, a reasoning piece without its text, a system message of several parts or of media.
Items make messages as the decoder gathers them: a system or user message item is a message of
its own, and each run of assistant-side items (assistant messages, reasoning, calls, other
items) or of outputs is one message. A layout it does not read as the decoder would is not
flattened at all (None): `input` as text, a content or an output that is text in some items
and parts in others (Arrow's JSON type), fields of another type than the decoder takes.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    list_sizes,
    objects,
    rows_with,
    text_lengths,
    with_nulls,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations
from transcript_clean.formats.fields import field, fits, is_list_of_structs, not_blank, present

__all__ = ["flatten_responses"]

_SYSTEM_SIDE: Final = 0
_USER_SIDE: Final = 1
_ASSISTANT_SIDE: Final = 2
_RESULTS_SIDE: Final = 3


def _parts_read(type_: pa.DataType) -> bool:
    """Whether content parts (or reasoning pieces) have fields of the types the decoder reads
    (a list of nulls: lists that are empty, or hold nulls the decoder does not read)."""
    if _nulls_list(type_):
        return True
    if not is_list_of_structs(type_):
        return False
    part = type_.value_type
    return (
        fits(part, "type", is_text)
        and fits(part, "text", is_text)
        and fits(part, "refusal", is_text)
    )


def _nulls_list(type_: pa.DataType) -> bool:
    listed = pa.types.is_list(type_) or pa.types.is_large_list(type_)
    return bool(listed and pa.types.is_null(type_.value_type))


def _content_read(type_: pa.DataType | None) -> bool:
    return type_ is None or pa.types.is_null(type_) or is_text(type_) or _parts_read(type_)


def _items_read(item: pa.DataType) -> bool:
    summary, pieces = field_type(item, "summary"), field_type(item, "content")
    return (
        fits(item, "type", is_text)
        and fits(item, "role", is_text)
        and _content_read(pieces)
        and (summary is None or pa.types.is_null(summary) or _parts_read(summary))
        and fits(item, "call_id", is_text)
        and fits(item, "name", is_text)
        and fits(item, "arguments", lambda t: is_text(t) or pa.types.is_struct(t))
        and fits(item, "output", is_text)
        and fits(item, "encrypted_content", is_text)
        and fits(item, "id", is_text)
    )


def flatten_responses(
    array: pa.Array, side: Mapping[str, pa.Array], schema: pa.Schema | None
) -> Conversations | None:
    """The rows of a column of Responses items (and `side["instructions"]`) as
    `Conversations`; None for a column whose Arrow type this does not read."""
    instructions = side.get("instructions")
    if instructions is None and schema is not None and schema.get_field_index("instructions") >= 0:
        return None  # the rows hold a system prompt this was not given
    if instructions is not None and not (
        is_text(instructions.type) or pa.types.is_null(instructions.type)
    ):
        return None
    if instructions is None or pa.types.is_null(instructions.type):
        instructions = pa.nulls(len(array), pa.string())
    if not is_list_of_structs(array.type) or not _items_read(array.type.value_type):
        return None

    rows = len(array)
    items, _, item_row = flattened(array)
    n = len(items)
    kind = field(items, "type")
    role = field(items, "role")
    is_message = as_mask(kind.is_null()) | as_mask(pc.equal(kind, "message"), fill=False)
    is_call = as_mask(pc.equal(kind, "function_call"), fill=False)
    is_output = as_mask(pc.equal(kind, "function_call_output"), fill=False)
    is_reasoning = as_mask(pc.equal(kind, "reasoning"), fill=False)
    is_other = ~(is_message | is_call | is_output | is_reasoning)
    other_output = is_other & as_mask(pc.ends_with(kind, "_output"), fill=False)
    by_system = is_message & as_mask(pc.is_in(role, pa.array(["system", "developer"])))
    by_user = is_message & as_mask(pc.equal(role, "user"), fill=False)
    by_assistant = is_message & as_mask(pc.equal(role, "assistant"), fill=False)
    flag = as_mask(items.is_null()) | (is_message & ~(by_system | by_user | by_assistant))

    side_of = np.full(n, _ASSISTANT_SIDE, dtype=np.int64)
    side_of[by_system] = _SYSTEM_SIDE
    side_of[by_user] = _USER_SIDE
    side_of[is_output | other_output] = _RESULTS_SIDE
    starts = np.ones(n, dtype=bool)
    if n > 1:
        same_row = item_row[1:] == item_row[:-1]
        same_run = (side_of[1:] == side_of[:-1]) & (side_of[1:] >= _ASSISTANT_SIDE)
        starts[1:] = ~(same_row & same_run)
    item_message = np.cumsum(starts, dtype=np.int64) - 1
    first_item = np.flatnonzero(starts)
    m_items = len(first_item)
    message_side = side_of[first_item]

    # Message content: one text, or parts of text (input_text, output_text, text, refusal),
    # else media.
    content = field(items, "content")
    said_item, spoken_item, chars_item, joins_apart, media_item, item_texts, text_own, text_item = (
        _content(content, is_message, flag)
    )

    # Calls: an id and a name; arguments as the item holds them (`parse_arguments`).
    calls = np.flatnonzero(is_call)
    call_items = items.take(indices(calls))
    call_id, name = field(call_items, "call_id"), field(call_items, "name")
    flag[calls] |= as_mask(call_id.is_null()) | as_mask(name.is_null())
    arguments = field(call_items, "arguments")

    # Outputs: an id, and the output's text (or none).
    results = np.flatnonzero(is_output)
    result_items = items.take(indices(results))
    result_call = field(result_items, "call_id")
    flag[results] |= as_mask(result_call.is_null())
    output = field(result_items, "output")
    result_blank = ~not_blank(output) | as_mask(output.is_null())
    output_chars = text_lengths(output)

    # Reasoning: its summary and content pieces' texts, its encrypted content.
    thought_item = np.zeros(n, dtype=bool)
    thought_chars = np.zeros(n, dtype=np.int64)
    thought_texts: list[tuple[pa.Array, Counts]] = []  # taken only where tokens are counted
    thought_owner: list[Counts] = []
    for key in ("summary", "content"):
        at = np.flatnonzero(is_reasoning)
        pieces_of = field(items.take(indices(at)), key)
        if _nulls_list(pieces_of.type):  # only null pieces, which the decoder does not read
            flag[at] |= list_sizes(pieces_of) > 0
        if not is_list_of_structs(pieces_of.type):
            continue
        pieces, _, piece_item = flattened(pieces_of)
        text = field(pieces, "text")
        bad = as_mask(pieces.is_null()) | as_mask(text.is_null())
        flag[at] |= rows_with(bad, piece_item, len(at))
        thought_item[at] |= rows_with(not_blank(text), piece_item, len(at))
        thought_chars[at] += np.bincount(
            piece_item, weights=text_lengths(text), minlength=len(at)
        ).astype(np.int64)
        held = np.flatnonzero(~as_mask(text.is_null()))
        thought_texts.append((text, held))
        thought_owner.append(at[piece_item[held]])
    thought_item |= is_reasoning & present(items, "encrypted_content")

    # A system message is one text, its parts joined as `join_texts` joins them: where that is
    # not the parts' texts end to end (two said, or a blank one left out that has characters),
    # this does not follow; media has no place in it.
    flag |= by_system & (joins_apart | media_item)

    item_chars = chars_item + thought_chars
    item_chars[results] += output_chars
    item_said = said_item | is_other

    message_row = item_row[first_item]
    unread = as_mask(array.is_null()) | rows_with(flag, item_row, rows)

    # Messages: each row's instructions, then the items' messages, in row order.
    system_chars = text_lengths(instructions)
    system_rows = np.flatnonzero(system_chars > 0)
    all_row = np.concatenate([system_rows, message_row])
    first = np.concatenate([np.full(len(system_rows), -1, dtype=np.int64), first_item])
    by_row = np.lexsort((first, all_row))
    place_of = np.empty(len(by_row), dtype=np.int64)
    place_of[by_row] = np.arange(len(by_row), dtype=np.int64)
    of_message = place_of[len(system_rows) :]

    def per_message(values: Any, system_value: Any) -> Any:
        return np.concatenate([system_value, values])[by_row]

    roles = np.where(
        message_side == _SYSTEM_SIDE,
        SYSTEM,
        np.where(message_side == _ASSISTANT_SIDE, ASSISTANT, USER),
    )
    said = rows_with(item_said, item_message, m_items)
    spoken = rows_with(spoken_item, item_message, m_items)
    chars = np.bincount(item_message, weights=item_chars, minlength=m_items).astype(np.int64)
    system_said = not_blank(instructions)[system_rows]
    none = np.zeros(len(system_rows), dtype=bool)

    def texts() -> tuple[pa.Array, Counts]:
        said_outputs = np.flatnonzero(~as_mask(output.is_null()))
        pieces = [
            instructions.take(indices(system_rows)).cast(pa.large_string()),
            item_texts.take(indices(text_own)).cast(pa.large_string()),
            *(t.take(indices(held)).cast(pa.large_string()) for t, held in thought_texts),
            output.take(indices(said_outputs)).cast(pa.large_string()),
        ]
        owners = [
            np.flatnonzero(first[by_row] < 0),
            of_message[item_message[text_item]],
            *(of_message[item_message[o]] for o in thought_owner),
            of_message[item_message[results[said_outputs]]],
        ]
        return pa.concat_arrays(pieces), np.concatenate(owners).astype(np.int64)

    return Conversations(
        rows=rows,
        unread=unread,
        message_row=per_message(message_row, system_rows).astype(np.int64),
        role=per_message(roles, np.full(len(system_rows), SYSTEM)).astype(np.int8),
        said=per_message(said, system_said).astype(bool),
        thought=per_message(rows_with(thought_item, item_message, m_items), none).astype(bool),
        reasoned=per_message(rows_with(is_reasoning, item_message, m_items), none).astype(bool),
        spoken=per_message(spoken, system_chars[system_rows] > 0).astype(bool),
        chars=per_message(chars, system_chars[system_rows]).astype(np.int64),
        call_message=of_message[item_message[calls]],
        call_id=call_id,
        call_name=name,
        call_arguments=arguments,
        call_object=objects(arguments),
        result_message=of_message[item_message[results]],
        result_call=result_call,
        result_blank=result_blank,
        result_text=lambda: output,  # an output of text is that one text part
        result_error=np.zeros(len(results), dtype=bool),  # an output is no error
        item_message=of_message[item_message],
        texts=texts,
    )


def _content(
    content: pa.Array, is_message: Mask, flag: Mask
) -> tuple[Mask, Mask, Counts, Mask, Mask, pa.Array, Counts, Counts]:
    """Per item, from a message's content: whether it says something (a text not blank,
    media), whether a text of it is not empty, its texts' characters, whether `join_texts` of
    its texts is other than their concatenation, and whether a part is media; and its texts:
    an array holding them, their positions in it and each one's item (taken from it only where
    tokens are counted). Flags parts the decoder cannot read."""
    n = len(content)
    if is_text(content.type) or pa.types.is_null(content.type):
        text = content if is_text(content.type) else pa.nulls(n, pa.string())
        text = pc.if_else(pa.array(is_message), text, pa.nulls(n, text.type))
        chars = text_lengths(text)
        has = ~as_mask(text.is_null())
        own = np.flatnonzero(has)
        return (
            not_blank(text),
            has & (chars > 0),
            chars,
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=bool),
            text,
            own,
            own,
        )
    at = np.flatnonzero(is_message)
    parts, _, part_item = flattened(content.take(indices(at)))
    kind = field(parts, "type")
    is_text_part = as_mask(pc.is_in(kind, pa.array(["input_text", "output_text", "text"])))
    is_refusal = as_mask(pc.equal(kind, "refusal"), fill=False)
    textual = is_text_part | is_refusal
    text, refusal = field(parts, "text"), field(parts, "refusal")
    if is_refusal.any() or refusal.type != text.type:
        said_text = pc.if_else(pa.array(is_refusal), refusal, text)
    else:  # the texts as they are (what `if_else` would copy)
        said_text = text
    said_text = with_nulls(said_text, textual)
    bad = as_mask(parts.is_null()) | as_mask(kind.is_null())
    bad |= textual & as_mask(said_text.is_null())
    flag[at] |= rows_with(bad, part_item, len(at))
    media = ~textual & ~as_mask(parts.is_null())
    part_chars = text_lengths(said_text)

    def per_item_of(values: Mask) -> Mask:
        out = np.zeros(n, dtype=bool)
        out[at] = rows_with(values, part_item, len(at))
        return out

    chars = np.zeros(n, dtype=np.int64)
    chars[at] = np.bincount(part_item, weights=part_chars, minlength=len(at)).astype(np.int64)
    said = textual & not_blank(said_text)
    said_n = np.bincount(part_item[said], minlength=len(at))
    left_out = textual & ~said & (part_chars > 0)
    joins_apart = np.zeros(n, dtype=bool)
    joins_apart[at] = (said_n > 1) | ((said_n > 0) & rows_with(left_out, part_item, len(at)))
    own = np.flatnonzero(textual)
    return (
        per_item_of(said | media),
        per_item_of(textual & (part_chars > 0)),
        chars,
        joins_apart,
        per_item_of(media),
        said_text,
        own,
        at[part_item[own]],
    )
