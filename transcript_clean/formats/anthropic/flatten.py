"""Anthropic's flattener: a column of Anthropic `messages`, held as Arrow structs, and the batch's
`system` column, into `Conversations`.

It reads a row as `AnthropicFormat.decode` reads it, or marks it unread: a role other than
`user` or `assistant`, content that is null, a block with no type, or a field the decoder
requires that is null. Content is plain text or a list of blocks: text; from the assistant
tool_use (a call), thinking and redacted_thinking (reasoning); from the user tool_result (a
result, its content text); any other block is media. The system prompt, where the batch has a
text `system` column, is each row's first message. It knows no rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    field_type,
    flattened,
    holds_text,
    indices,
    is_text,
    objects,
    rows_with,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations
from transcript_clean.columnar.edits import item_origins, taken

__all__ = ["flatten_anthropic"]

# The block fields read as text, where the blocks have them: any other type is not read here.
_TEXT_FIELDS: Final = ("type", "text", "thinking", "signature", "data", "id", "name")
_TEXT_FIELDS_OF_RESULTS: Final = ("tool_use_id", "content")


def flatten_anthropic(
    array: pa.Array, schema: pa.Schema | None, side: Mapping[str, pa.Array]
) -> Conversations | None:
    """The rows of an Anthropic `messages` column (and `side["system"]`) as `Conversations`;
    None for a layout this does not read (the per-row path reads every row)."""
    content_type = _content_type(array.type)
    if content_type is None:
        return None
    system = side.get("system")
    if system is None and schema is not None and schema.get_field_index("system") >= 0:
        return None  # the rows hold a system prompt this was not given
    if system is not None and not (is_text(system.type) or pa.types.is_null(system.type)):
        return None  # a system prompt of blocks: the decoder reads them row by row

    rows = len(array)
    items, _, item_row = flattened(array)
    n = len(items)
    role = pc.struct_field(items, "role")
    is_user = as_mask(pc.equal(role, "user"), fill=False)
    is_assistant = as_mask(pc.equal(role, "assistant"), fill=False)
    content = pc.struct_field(items, "content")
    flag = as_mask(items.is_null()) | ~(is_user | is_assistant) | as_mask(content.is_null())

    if is_text(content_type):
        facts = _text_content(content, n)
    else:
        facts = _blocks(content, is_assistant, n)
    flag |= facts.flag

    # The system prompt: a message of its own, first, where the row has one that is not empty.
    if system is None or pa.types.is_null(system.type):
        system = pa.nulls(rows, pa.string())
    system_chars = text_lengths(system)
    system_rows = np.flatnonzero(system_chars > 0)

    # Messages: each row's system prompt, then its items. `order` puts them in row order.
    message_row = np.concatenate([system_rows, item_row])
    item = np.concatenate([np.full(len(system_rows), -1, dtype=np.int64), np.arange(n)])
    order = np.lexsort((item, message_row))
    message_row, item = message_row[order], item[order]
    message_of_item = np.empty(n, dtype=np.int64)
    message_of_item[item[item >= 0]] = np.flatnonzero(item >= 0)

    def per_message(values: Counts | Mask, system_value: Counts | Mask) -> Counts | Mask:
        return np.concatenate([system_value, values])[order]

    nothing = np.zeros(len(system_rows), dtype=bool)
    roles = np.where(is_assistant, ASSISTANT, USER).astype(np.int64)
    role_of = per_message(roles, np.full(len(system_rows), SYSTEM, dtype=np.int64))
    unread = as_mask(array.is_null()) | rows_with(flag, item_row, rows)

    def texts() -> tuple[pa.Array, Counts]:
        pieces, owner = facts.texts()
        said = system.take(indices(system_rows)).cast(pa.large_string())
        system_messages = np.flatnonzero(item < 0)
        return (
            pa.concat_arrays([said, pieces]),
            np.concatenate([system_messages, message_of_item[owner]]),
        )

    messages = len(message_row)

    item_of = np.full(messages, -1, dtype=np.int64)
    item_of[message_of_item] = np.arange(n, dtype=np.int64)

    def message_text(positions: Counts) -> pa.Array:
        return facts.text(item_of[positions])  # null for a system prompt's message

    return Conversations(
        rows=rows,
        unread=unread,
        message_row=message_row,
        role=role_of.astype(np.int8),
        said=per_message(facts.said, nothing).astype(bool),
        thought=per_message(facts.thought, nothing).astype(bool),
        reasoned=per_message(facts.reasoned, nothing).astype(bool),
        spoken=per_message(facts.spoken, nothing).astype(bool),
        chars=per_message(facts.chars, system_chars[system_rows]).astype(np.int64),
        call_message=message_of_item[facts.call_owner],
        call_id=facts.call_id,
        call_name=facts.call_name,
        call_arguments=facts.call_arguments,
        call_object=objects(facts.call_arguments),
        result_message=message_of_item[facts.result_owner],
        result_call=facts.result_call,
        result_blank=facts.result_blank,
        result_text=lambda: facts.result_text,
        result_error=facts.result_error,
        item_message=message_of_item,
        message_text=message_text,
        message_origin=item_origins(items, message_of_item, messages),
        texts=texts,
    )


class _Facts:
    """What the messages' content holds, per message (by item) and per call and result."""

    def __init__(self, n: int) -> None:
        self.flag = np.zeros(n, dtype=bool)
        self.said = np.zeros(n, dtype=bool)
        self.thought = np.zeros(n, dtype=bool)
        self.reasoned = np.zeros(n, dtype=bool)
        self.spoken = np.zeros(n, dtype=bool)
        self.chars = np.zeros(n, dtype=np.int64)
        self.call_owner = np.zeros(0, dtype=np.int64)
        self.call_id: pa.Array = pa.array([], pa.string())
        self.call_name: pa.Array = pa.array([], pa.string())
        self.call_arguments: pa.Array = pa.array([], pa.string())
        self.result_owner = np.zeros(0, dtype=np.int64)
        self.result_call: pa.Array = pa.array([], pa.string())
        self.result_blank = np.zeros(0, dtype=bool)
        self.result_text: pa.Array = pa.array([], pa.string())
        self.result_error = np.zeros(0, dtype=bool)
        self.pieces: list[tuple[pa.Array, Mask, Counts]] = []
        """Where the texts counted in `chars` are: per source of them, its texts, which of
        them count, and each one's item (taken only if `texts` is asked for)."""
        self.text: Callable[[Counts], pa.Array] = lambda at: pa.nulls(len(at), pa.string())
        """Of the items at the positions given (-1: null), each one's text where its content
        is one text (a string, or one text block), null elsewhere
        (`Conversations.message_text`)."""

    def texts(self) -> tuple[pa.Array, Counts]:
        """The texts counted in `chars`, one piece each, and each one's item: a copy of every
        text, made only where tokens are counted."""
        held = [np.flatnonzero(counted & ~as_mask(a.is_null())) for a, counted, _ in self.pieces]
        arrays = [
            a.take(indices(at)).cast(pa.large_string())
            for (a, _, _), at in zip(self.pieces, held, strict=True)
        ]
        owners = [o[at] for (_, _, o), at in zip(self.pieces, held, strict=True)]
        if not arrays:
            return pa.array([], pa.large_string()), np.zeros(0, dtype=np.int64)
        return pa.concat_arrays(arrays), np.concatenate(owners)


def _text_content(content: pa.Array, n: int) -> _Facts:
    """Content as plain text: one text part per message."""
    facts = _Facts(n)
    facts.said = holds_text(content)
    facts.chars = text_lengths(content)
    facts.spoken = facts.chars > 0
    facts.pieces = [(content, np.ones(n, dtype=bool), np.arange(n, dtype=np.int64))]
    facts.text = lambda at: taken(content, at)
    return facts


def _blocks(content: pa.Array, is_assistant: Mask, n: int) -> _Facts:
    """Content as lists of blocks."""
    facts = _Facts(n)
    blocks, _, owner = flattened(content)
    kind = _field(blocks, "type")
    by_assistant = is_assistant[owner]

    def of(name: str) -> Mask:
        return as_mask(pc.equal(kind, name), fill=False)

    text_block = of("text")
    use = of("tool_use") & by_assistant
    thinking = of("thinking") & by_assistant
    redacted = of("redacted_thinking") & by_assistant
    result = of("tool_result") & ~by_assistant
    media = ~(text_block | use | thinking | redacted | result)
    text, thought_text = _field(blocks, "text"), _field(blocks, "thinking")
    wrong = as_mask(blocks.is_null()) | as_mask(kind.is_null())
    wrong |= text_block & as_mask(text.is_null())
    wrong |= thinking & as_mask(thought_text.is_null())
    wrong |= redacted & as_mask(_field(blocks, "data").is_null())
    call_id, name = _field(blocks, "id"), _field(blocks, "name")
    wrong |= use & (as_mask(call_id.is_null()) | as_mask(name.is_null()))
    answered = _field(blocks, "tool_use_id")
    wrong |= result & as_mask(answered.is_null())
    facts.flag = rows_with(wrong, owner, n)

    text_said = holds_text(text)
    thought_said = holds_text(thought_text)
    signed = ~as_mask(_field(blocks, "signature").is_null())
    text_chars = text_lengths(text)
    thought_chars = text_lengths(thought_text)
    said_back = _field(blocks, "content")  # a result's content, as text
    result_chars = text_lengths(said_back)

    facts.said = rows_with((text_block & text_said) | media, owner, n)
    facts.thought = rows_with((thinking & (thought_said | signed)) | redacted, owner, n)
    facts.reasoned = rows_with(thinking | redacted, owner, n)
    facts.spoken = rows_with(text_block & (text_chars > 0), owner, n)
    chars = (
        np.where(text_block, text_chars, 0)
        + np.where(thinking, thought_chars, 0)
        + np.where(result, result_chars, 0)
    )
    facts.chars = np.bincount(owner, weights=chars, minlength=n).astype(np.int64)

    calls, results = np.flatnonzero(use), np.flatnonzero(result)
    facts.call_owner = owner[calls]
    facts.call_id = call_id.take(indices(calls))
    facts.call_name = name.take(indices(calls))
    if blocks.type.get_field_index("input") >= 0:
        facts.call_arguments = pc.struct_field(blocks, "input").take(indices(calls))
    else:
        facts.call_arguments = pa.nulls(len(calls), pa.string())  # no arguments: not an object
    facts.result_owner = owner[results]
    facts.result_call = answered.take(indices(results))
    facts.result_text = said_back.take(indices(results))  # a result's content is one text
    facts.result_blank = ~holds_text(facts.result_text)
    facts.result_error = np.zeros(len(results), dtype=bool)
    error_type = field_type(blocks.type, "is_error")
    if error_type is not None and pa.types.is_boolean(error_type):
        is_error = pc.struct_field(blocks, "is_error").take(indices(results))
        facts.result_error = as_mask(is_error, fill=False)

    # An item whose one block is a text block says that block's text.
    single = text_block & (np.bincount(owner, minlength=n)[owner] == 1)
    only = np.full(n + 1, -1, dtype=np.int64)  # the last: for position -1
    only[owner[single]] = np.flatnonzero(single)
    facts.text = lambda at: taken(text, only[at])
    facts.pieces = [(text, text_block, owner), (thought_text, thinking, owner)]
    facts.pieces.append((said_back, result, owner))
    return facts


def _content_type(type_: pa.DataType) -> pa.DataType | None:
    """The `content` type of messages this reads: text, or a list of blocks whose fields have
    the types the decoder expects (a result's content as text); None for any other shape."""
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return None
    message = type_.value_type
    if not pa.types.is_struct(message) or not is_text(field_type(message, "role")):
        return None
    content = field_type(message, "content")
    if content is None or is_text(content):
        return content
    if not (pa.types.is_list(content) or pa.types.is_large_list(content)):
        return None
    block = content.value_type
    if not pa.types.is_struct(block) or not is_text(field_type(block, "type")):
        return None
    for name in (*_TEXT_FIELDS, *_TEXT_FIELDS_OF_RESULTS):
        kind = field_type(block, name)
        if kind is not None and not (is_text(kind) or pa.types.is_null(kind)):
            return None
    error = field_type(block, "is_error")
    if error is not None and not (pa.types.is_boolean(error) or pa.types.is_null(error)):
        return None
    return content


def _field(blocks: pa.Array, name: str) -> pa.Array:
    """A field of the blocks as text, all null where their type has no such field."""
    if blocks.type.get_field_index(name) < 0:
        return pa.nulls(len(blocks), pa.string())
    values = pc.struct_field(blocks, name)
    if pa.types.is_null(values.type):
        return pa.nulls(len(blocks), pa.string())
    return values
