"""rig's flattener: a column of rig histories, held as Arrow structs, into `Conversations`.

It reads a row as `RigFormat.decode` reads it, or marks it unread: a message whose role is not
`user` or `assistant` (a system message's text content cannot share a column of part lists), a
part of a type the decoder does not take for its role, or a field the decoder requires that is
null. It knows no rule: what the rows may have is the rules' to say, over the view.
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
    count,
    field_type,
    flattened,
    holds_text,
    indices,
    is_text,
    objects,
    rows_with,
    sole,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, USER, Conversations
from transcript_clean.columnar.edits import taken as taken_at
from transcript_clean.model import MEDIA_KINDS

__all__ = ["flatten_rig"]

_USER_PARTS: Final = frozenset({"text", "toolresult", *MEDIA_KINDS})
_ASSISTANT_PARTS: Final = frozenset({"text", "toolcall", "reasoning", "image"})
_RESULT_PARTS: Final = frozenset({"text", "image"})

# The fields read as text, where a struct has them: any other type is not read here.
_TEXT_FIELDS: Final = ("type", "text", "id", "call", "name", "signature", "status", "data", "role")


def flatten_rig(array: pa.Array) -> Conversations | None:
    """The rows of a rig `messages` column as `Conversations`; None for a column whose Arrow
    type this does not read (the per-row path reads every row)."""
    if not _is_list_of_structs(array.type):
        return None
    message_type = array.type.value_type
    if not is_text(field_type(message_type, "role")):
        return None
    content_type = field_type(message_type, "content")
    if content_type is None or not _is_list_of_structs(content_type):
        return None
    part_type = content_type.value_type
    if not _text_fields_are_text(message_type) or not _text_fields_are_text(part_type):
        return None
    if not _opaque_or_absent(part_type, "additional_params"):
        return None
    function_type = field_type(part_type, "function")
    if function_type is not None and not (
        pa.types.is_struct(function_type)
        and is_text(field_type(function_type, "name"))
        and field_type(function_type, "arguments") is not None
    ):
        return None
    pieces_type = field_type(part_type, "content")
    if pieces_type is not None and not (
        _is_list_of_structs(pieces_type) and _text_fields_are_text(pieces_type.value_type)
    ):
        return None

    rows = len(array)
    msgs, _, message_row = flattened(array)
    role = _field(msgs, "role")
    is_user = as_mask(pc.equal(role, "user"), fill=False)
    is_assistant = as_mask(pc.equal(role, "assistant"), fill=False)
    flag = as_mask(msgs.is_null()) | ~(is_user | is_assistant)

    content = _field(msgs, "content")
    flag |= as_mask(content.is_null())
    parts, _, part_message = flattened(content)
    kind = _field(parts, "type")
    flag_part = as_mask(parts.is_null()) | as_mask(kind.is_null())
    user_part = is_user[part_message]
    taken = np.where(
        user_part,
        as_mask(pc.is_in(kind, pa.array(sorted(_USER_PARTS)))),
        as_mask(pc.is_in(kind, pa.array(sorted(_ASSISTANT_PARTS)))),
    )
    flag_part |= ~taken
    of = {name: as_mask(pc.equal(kind, name), fill=False) for name in ("text", "toolcall")}
    is_text_part = of["text"]
    is_call = of["toolcall"] & ~user_part
    is_result = as_mask(pc.equal(kind, "toolresult"), fill=False) & user_part
    is_reasoning = as_mask(pc.equal(kind, "reasoning"), fill=False) & ~user_part

    # Text parts: their text is required; an assistant's `additional_params` is an object.
    text = _field(parts, "text")
    flag_part |= is_text_part & as_mask(text.is_null())
    said = holds_text(text)
    annotated = _present(parts, "additional_params")
    # Blank parts are what R1 reads: an assistant's text is blank when it is white space and
    # carries no annotations; media are never blank.
    part_said = (is_text_part & (said | (annotated & ~user_part))) | ~(
        is_text_part | is_reasoning | is_call | is_result
    )
    text_chars = text_lengths(text)

    # Reasoning: its pieces are required; text and summary pieces need their text, encrypted
    # ones their data. Blank when unsigned and every piece is blank text.
    signed = _present(parts, "signature")
    pieces, piece_part = _pieces(parts)
    piece_kind = _field(pieces, "type")
    piece_text = _field(pieces, "text")
    textual = as_mask(pc.is_in(piece_kind, pa.array(["text", "summary"])), fill=False)
    encrypted = as_mask(pc.equal(piece_kind, "encrypted"), fill=False)
    piece_flag = as_mask(pieces.is_null()) | ~(textual | encrypted)
    piece_flag |= textual & as_mask(piece_text.is_null())
    piece_flag |= encrypted & ~_present(pieces, "data")
    piece_blank = ~holds_text(piece_text)
    piece_said = encrypted | (textual & ~piece_blank)
    parts_n = len(parts)
    has_pieces = _present(parts, "content")
    reasoning_said = rows_with(piece_said, piece_part, parts_n)
    part_thought = is_reasoning & (signed | reasoning_said)
    # The pieces read as reasoning or as a result's parts, as the part's type says.
    flag_part |= (is_reasoning | is_result) & ~has_pieces
    flag_part |= is_reasoning & rows_with(piece_flag, piece_part, parts_n)

    # Results: the call they answer, a status of success or error, and parts of text or image.
    call = _field(parts, "call")
    flag_part |= is_result & as_mask(call.is_null())
    status = _field(parts, "status")
    known = as_mask(pc.is_in(status, pa.array(["success", "error"])))
    flag_part |= is_result & ~(known | as_mask(status.is_null()))
    result_piece_ok = as_mask(pc.is_in(piece_kind, pa.array(sorted(_RESULT_PARTS))), fill=False)
    piece_is_text = as_mask(pc.equal(piece_kind, "text"), fill=False)
    result_piece_ok &= ~(piece_is_text & as_mask(piece_text.is_null()))
    flag_part |= is_result & rows_with(~result_piece_ok, piece_part, parts_n)
    result_says = count(
        piece_said | as_mask(pc.equal(piece_kind, "image"), fill=False), piece_part, parts_n
    )

    # Calls: an id, and a function with a name.
    call_id = _field(parts, "id")
    function = _field(parts, "function")
    name = _field(function, "name")
    flag_part |= is_call & (
        as_mask(call_id.is_null()) | as_mask(function.is_null()) | as_mask(name.is_null())
    )

    # The texts the profile counts: text parts, results' text parts, reasoning's text pieces.
    piece_is_read = np.where(
        is_reasoning[piece_part], textual, piece_is_text & is_result[piece_part]
    )
    piece_chars = np.where(piece_is_read, text_lengths(piece_text), 0)
    part_chars = np.where(is_text_part, text_chars, 0) + np.bincount(
        piece_part, weights=piece_chars, minlength=parts_n
    ).astype(np.int64)

    def texts() -> tuple[pa.Array, Counts]:
        own = np.flatnonzero(is_text_part)
        inner = np.flatnonzero(piece_is_read)
        pieces_text = pa.concat_arrays(
            [
                text.take(pa.array(own)).cast(pa.large_string()),
                piece_text.take(pa.array(inner)).cast(pa.large_string()),
            ]
        )
        return pieces_text, np.concatenate([part_message[own], part_message[piece_part[inner]]])

    def result_text() -> pa.Array:
        # A result of one piece that is text says that text; any other, no one text.
        pieces = np.bincount(piece_part, minlength=parts_n)[results]
        first = np.minimum(np.searchsorted(piece_part, results), max(len(piece_part) - 1, 0))
        one = (pieces == 1) & (piece_is_text[first] if len(piece_part) else False)
        if not one.any():
            return pa.nulls(len(results), pa.string())
        texts = piece_text.take(pa.array(np.where(one, first, 0), pa.int64()))
        return pc.if_else(pa.array(one), texts, pa.scalar(None, texts.type))

    messages_n = len(msgs)
    flag |= rows_with(flag_part, part_message, messages_n)
    unread = as_mask(array.is_null()) | rows_with(flag, message_row, rows)

    calls = np.flatnonzero(is_call)
    results = np.flatnonzero(is_result)
    call_positions = pa.array(calls, pa.int64())
    arguments = _field(function, "arguments").take(call_positions)
    role_number = np.where(is_assistant, ASSISTANT, USER).astype(np.int8)

    # An assistant message of one part, a text with no annotations, says that text.
    only = sole(is_text_part & ~annotated & ~user_part, part_message, messages_n)

    return Conversations(
        rows=rows,
        unread=unread,
        message_row=message_row,
        role=role_number,
        said=rows_with(part_said, part_message, messages_n),
        thought=rows_with(part_thought, part_message, messages_n),
        reasoned=rows_with(is_reasoning, part_message, messages_n),
        spoken=rows_with(is_text_part & (text_chars > 0), part_message, messages_n),
        chars=np.bincount(part_message, weights=part_chars, minlength=messages_n).astype(np.int64),
        call_message=part_message[calls],
        call_id=call_id.take(call_positions),
        call_name=name.take(call_positions),
        call_arguments=arguments,
        call_object=objects(arguments),
        result_message=part_message[results],
        result_call=call.take(pa.array(results, pa.int64())),
        result_blank=result_says[results] == 0,
        result_text=result_text,
        result_error=as_mask(pc.equal(status, "error"), fill=False)[results],
        item_message=np.arange(messages_n, dtype=np.int64),
        message_text=lambda positions: taken_at(text, only[positions]),
        message_origin=lambda positions: msgs.take(indices(positions)),
        texts=texts,
    )


def _is_list_of_structs(type_: pa.DataType) -> bool:
    listed = pa.types.is_list(type_) or pa.types.is_large_list(type_)
    return listed and bool(pa.types.is_struct(type_.value_type))


def _text_fields_are_text(struct: pa.DataType) -> bool:
    """Whether each field of `_TEXT_FIELDS` that `struct` has holds text (or only nulls)."""
    for name in _TEXT_FIELDS:
        kind = field_type(struct, name)
        if kind is not None and not (is_text(kind) or pa.types.is_null(kind)):
            return False
    return True


def _opaque_or_absent(struct: pa.DataType, name: str) -> bool:
    """Whether the field `name` is absent, only nulls, or an object (a struct)."""
    kind = field_type(struct, name)
    return kind is None or pa.types.is_null(kind) or pa.types.is_struct(kind)


def _pieces(parts: pa.Array) -> tuple[pa.Array, Counts]:
    """The items of each part's `content` list (a reasoning part's pieces, a result's parts),
    and each one's part."""
    if parts.type.get_field_index("content") < 0:
        return pa.array([], pa.struct([("type", pa.string())])), np.zeros(0, dtype=np.int64)
    pieces, _, piece_part = flattened(pc.struct_field(parts, "content"))
    return pieces, piece_part


def _field(structs: pa.Array, name: str) -> pa.Array:
    """The field `name` of a struct array; all nulls where the structs have no such field."""
    if not pa.types.is_struct(structs.type) or structs.type.get_field_index(name) < 0:
        return pa.nulls(len(structs), pa.string())
    values = pc.struct_field(structs, name)
    if pa.types.is_null(values.type):
        return pa.nulls(len(structs), pa.string())
    return values


def _present(structs: pa.Array, name: str) -> Mask:
    """Per struct, whether its field `name` holds a value."""
    if not pa.types.is_struct(structs.type) or structs.type.get_field_index(name) < 0:
        return np.zeros(len(structs), dtype=bool)
    return ~as_mask(pc.struct_field(structs, name).is_null())
