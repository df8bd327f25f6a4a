"""Bedrock Converse's flattener: a column of `messages`, held as Arrow structs, into
`Conversations`.

It reads a row as `BedrockFormat.decode` reads it, or marks it unread: a null message, role,
`content` or block, a role other than `user` or `assistant`, a block that holds nothing, a
call without its `toolUseId` or `name`, a result without its `toolUseId` or with a status
other than success or error, a result's null or empty block, reasoning without its text. A
block is of the kind of its first key that holds a value, as the decoder finds it (a struct's
fields come in its type's order). A layout it does not read as the decoder would is not
flattened at all (None): a field of another type than the decoder takes. Calls and results
carry their own ids (`toolUseId`), which the view takes as they are.

Each message is one item of the column (`item_message`), so R1 and R5's cut drop items in
Arrow, but for a row whose kept messages the encoder writes anew (`reencoded`: redacted
reasoning that holds a `reasoningText` too); a result whose content is one text (or one `json`
block) has that text in `result_text`, which R3's rejects compare.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    count,
    field_type,
    flattened,
    indices,
    is_text,
    objects,
    rows_with,
    sole,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, USER, Conversations
from transcript_clean.columnar.edits import item_origins, taken
from transcript_clean.formats.fields import (
    field,
    fits,
    is_list_of_structs,
    joined_texts,
    not_blank,
    prepend_system,
    present,
)

__all__ = ["flatten_bedrock", "reads_schema"]

_KNOWN: Final = ("text", "toolUse", "toolResult", "reasoningContent")


def reads_schema(schema: pa.Schema | None, tools_column: str | None) -> bool:
    """Whether the batch's other columns leave the rows to the conversation column and the
    `system` column (`BedrockFormat.side_columns`, which the flattener is given): a
    `toolConfig` that is an object, which the fast path's declared-tools check never takes for
    declarations (so it leaves each row that has one to the per-row path)."""
    if schema is None:
        return True
    columns = pa.struct(list(schema))
    return tools_column is not None or fits(columns, "toolConfig", pa.types.is_struct)


def _blocks_read(type_: pa.DataType) -> bool:
    """Whether a list of content blocks has fields of the types the decoder reads."""
    if not is_list_of_structs(type_):
        return False
    block = type_.value_type
    use = pa.struct([]) if field_type(block, "toolUse") is None else block.field("toolUse").type
    result = field_type(block, "toolResult")
    reasoning = field_type(block, "reasoningContent")
    return (
        fits(block, "text", is_text)
        and fits(block, "toolUse", pa.types.is_struct)
        and fits(use, "toolUseId", is_text)
        and fits(use, "name", is_text)
        and fits(use, "input", lambda t: is_text(t) or pa.types.is_struct(t))
        and fits(block, "toolResult", pa.types.is_struct)
        and (result is None or pa.types.is_null(result) or _result_read(result))
        and fits(block, "reasoningContent", pa.types.is_struct)
        and (reasoning is None or pa.types.is_null(reasoning) or _reasoning_read(reasoning))
    )


def _result_read(result: pa.DataType) -> bool:
    content = field_type(result, "content")
    return (
        fits(result, "toolUseId", is_text)
        and fits(result, "status", is_text)
        and (
            content is None
            or pa.types.is_null(content)
            or (is_list_of_structs(content) and fits(content.value_type, "text", is_text))
        )
    )


def _reasoning_read(reasoning: pa.DataType) -> bool:
    text = field_type(reasoning, "reasoningText")
    return fits(reasoning, "redactedContent", is_text) and (
        text is None
        or pa.types.is_null(text)
        or (
            pa.types.is_struct(text)
            and fits(text, "text", is_text)
            and fits(text, "signature", is_text)
        )
    )


def flatten_bedrock(
    array: pa.Array, schema: pa.Schema | None, side: Mapping[str, pa.Array]
) -> Conversations | None:
    """The rows of a Bedrock `messages` column, and of its `system` column (`side`), as
    `Conversations`; None for columns whose Arrow types this does not read (the per-row path
    reads every row)."""
    if schema is not None and "system" in schema.names and "system" not in side:
        return None  # the rows hold a system prompt this was not given
    system = _system(side.get("system"), len(array))
    if system is None:
        return None
    conversations = _messages(array)
    if conversations is None:
        return None
    return prepend_system(conversations, *system)


def _system(column: pa.Array | None, rows: int) -> tuple[pa.Array, Mask, Mask] | None:
    """Per row, the system prompt's text as the decoder reads it (its text blocks joined),
    whether the row has one (the decoder makes a system message of a text that is not empty),
    and the rows it does not read; None for a layout this does not read."""
    none = np.zeros(rows, dtype=bool)
    if column is None or pa.types.is_null(column.type):
        return pa.nulls(rows, pa.large_string()), none, none
    if is_text(column.type):
        text, unread = column.cast(pa.large_string()), none
    elif is_list_of_structs(column.type):
        text, unread = joined_texts(column, required=False)
    else:
        return None
    return text, text_lengths(text) > 0, unread


def _messages(array: pa.Array) -> Conversations | None:
    if not is_list_of_structs(array.type):
        return None
    message_type = array.type.value_type
    content_type = field_type(message_type, "content")
    if content_type is None or not fits(message_type, "role", is_text):
        return None
    if not _blocks_read(content_type):
        return None

    rows = len(array)
    msgs, _, message_row = flattened(array)
    messages_n = len(msgs)
    role = field(msgs, "role")
    is_assistant = as_mask(pc.equal(role, "assistant"))
    is_user = as_mask(pc.equal(role, "user"))
    content = field(msgs, "content")
    flag = as_mask(msgs.is_null()) | ~(is_assistant | is_user) | as_mask(content.is_null())

    blocks, _, block_message = flattened(content)
    kind, empty = _kinds(blocks)
    by_user = is_user[block_message]
    flag_block = as_mask(blocks.is_null()) | empty
    is_text_block = kind == 0
    is_call = (kind == 1) & ~by_user
    is_result = (kind == 2) & by_user
    is_reasoning = (kind == 3) & ~by_user
    is_media = ~(is_text_block | is_call | is_result | is_reasoning)

    text = field(blocks, "text")
    says = not_blank(text)
    text_chars = text_lengths(text)

    # Calls: an id and a name, arguments as the block holds them (`parse_arguments`).
    calls = np.flatnonzero(is_call)
    uses = field(blocks, "toolUse").take(indices(calls))
    call_id, name = field(uses, "toolUseId"), field(uses, "name")
    flag_block[calls] |= as_mask(call_id.is_null()) | as_mask(name.is_null())
    arguments = field(uses, "input")

    # Reasoning: redacted (never blank) or a text with its signature.
    reasoning = field(blocks, "reasoningContent")
    redacted = present(reasoning, "redactedContent")
    reasoning_text = field(reasoning, "reasoningText")
    thought_text = field(reasoning_text, "text")
    flag_block |= is_reasoning & ~redacted & as_mask(thought_text.is_null())
    read_thought = is_reasoning & ~redacted
    signed = present(reasoning_text, "signature")
    part_thought = is_reasoning & (redacted | signed | not_blank(thought_text))
    thought_chars = np.where(read_thought, text_lengths(thought_text), 0)

    # Results: an id, a status the decoder knows, and blocks of text, JSON or media.
    results = np.flatnonzero(is_result)
    answers = field(blocks, "toolResult").take(indices(results))
    result_call = field(answers, "toolUseId")
    status = field(answers, "status")
    known = as_mask(pc.is_in(status, pa.array(["success", "error"]))) | as_mask(status.is_null())
    flag_block[results] |= as_mask(result_call.is_null()) | ~known
    inner = field(answers, "content")
    if not is_list_of_structs(inner.type):  # no result has any
        inner = pa.nulls(len(answers), pa.list_(pa.struct([("text", pa.string())])))
    pieces, _, piece_result = flattened(inner)
    piece_kind, piece_empty = _kinds(pieces)
    piece_text = _piece_texts(pieces, piece_kind)
    flag_piece = as_mask(pieces.is_null()) | piece_empty
    flag_piece |= (piece_kind == 0) & as_mask(piece_text.is_null())
    flag_block[results] |= rows_with(flag_piece, piece_result, len(results))
    textual = (piece_kind == 0) | (piece_kind == _JSON)
    piece_says = ~textual | not_blank(piece_text)
    result_blank = count(piece_says, piece_result, len(results)) == 0
    piece_chars = np.where(textual, text_lengths(piece_text), 0)
    result_chars = np.bincount(piece_result, weights=piece_chars, minlength=len(results))
    # Per result, the text of its one block, of text or JSON (what the decoder reads as one text
    # part); null where it has any other content.
    result_text = taken(piece_text, sole(textual, piece_result, len(results)))

    block_chars = np.where(is_text_block, text_chars, 0) + thought_chars
    block_chars[results] += result_chars.astype(np.int64)
    block_said = (is_text_block & says) | is_media

    unread = as_mask(array.is_null())
    unread |= rows_with(flag, message_row, rows)
    unread |= rows_with(flag_block, message_row[block_message], rows)
    # Rows the encoder writes anew (`Conversations.reencoded`): redacted reasoning that holds a
    # `reasoningText` too loses it.
    both = is_reasoning & redacted & ~as_mask(reasoning_text.is_null())
    reencoded = rows_with(both, message_row[block_message], rows)

    # A message of one text block says that text (what R4 compares and joins).
    one_text = sole(is_text_block, block_message, messages_n)

    def texts() -> tuple[pa.Array, Counts]:
        own = np.flatnonzero(is_text_block)
        thoughts = np.flatnonzero(read_thought)
        inner = np.flatnonzero(textual)
        pieces_text = pa.concat_arrays(
            [
                text.take(indices(own)).cast(pa.large_string()),
                thought_text.take(indices(thoughts)).cast(pa.large_string()),
                piece_text.take(indices(inner)).cast(pa.large_string()),
            ]
        )
        inner_message = block_message[results[piece_result[inner]]]
        at = np.concatenate([block_message[own], block_message[thoughts], inner_message])
        return pieces_text, at

    return Conversations(
        rows=rows,
        unread=unread,
        message_row=message_row,
        role=np.where(is_assistant, ASSISTANT, USER).astype(np.int8),
        said=rows_with(block_said, block_message, messages_n),
        thought=rows_with(part_thought, block_message, messages_n),
        reasoned=rows_with(is_reasoning, block_message, messages_n),
        spoken=rows_with(is_text_block & (text_chars > 0), block_message, messages_n),
        chars=np.bincount(block_message, weights=block_chars, minlength=messages_n).astype(
            np.int64
        ),
        call_message=block_message[calls],
        call_id=call_id,
        call_name=name,
        call_arguments=arguments,
        call_object=objects(arguments),
        result_message=block_message[results],
        result_call=result_call,
        result_blank=result_blank,
        item_message=np.arange(messages_n, dtype=np.int64),
        reencoded=reencoded,
        result_text=lambda: result_text,
        result_error=as_mask(pc.equal(status, "error"), fill=False),
        texts=texts,
        message_text=lambda positions: taken(text, one_text[positions]),
        message_origin=item_origins(msgs, np.arange(messages_n, dtype=np.int64), messages_n),
    )


_JSON: Final = len(_KNOWN)


def _kinds(blocks: pa.Array) -> tuple[Counts, Mask]:
    """Each block's kind, by the first of its fields that holds a value: its place in `_KNOWN`,
    `_JSON` for `json`, or past them for any other (media); and whether it holds none."""
    n = len(blocks)
    kind = np.full(n, -1, dtype=np.int64)
    if pa.types.is_struct(blocks.type):
        for f in blocks.type:
            if pa.types.is_null(f.type):
                continue
            holds = ~as_mask(pc.struct_field(blocks, f.name).is_null()) & (kind < 0)
            place = _KNOWN.index(f.name) if f.name in _KNOWN else _JSON + (f.name != "json")
            kind[holds] = place
    empty: Mask = (kind < 0) & ~as_mask(blocks.is_null())
    return kind, empty


def _piece_texts(pieces: pa.Array, kind: Counts) -> pa.Array:
    """A result block's text: its `text`, or its `json` value's JSON (made in Python, for the
    JSON blocks alone); null for any other block."""
    text = field(pieces, "text").cast(pa.large_string())
    text = pc.if_else(pa.array(kind == 0), text, pa.nulls(len(text), pa.large_string()))
    json_at = np.flatnonzero(kind == _JSON)
    if not len(json_at):
        return text
    values = field(pieces, "json").take(indices(json_at)).to_pylist()
    made = pa.array([json.dumps(v, ensure_ascii=False) for v in values], pa.large_string())
    at = np.arange(len(text), dtype=np.int64)
    at[json_at] = len(text) + np.arange(len(json_at), dtype=np.int64)
    return pa.concat_arrays([text, made]).take(indices(at))
