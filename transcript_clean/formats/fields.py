"""What the flatteners of the Gemini, Bedrock and Hermes formats share: a struct array's fields
read whether or not the batch's Arrow type has them, the type tests that decide whether a
flattener reads a layout at all (`Format.flatten` returns None for one it does not), and a
system prompt read from a column beside the conversation, put first in each row."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import orjson
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
    rows_with,
    text_lengths,
)
from transcript_clean.columnar.conversations import SYSTEM, Conversations

__all__ = [
    "alias",
    "end_to_end",
    "field",
    "fits",
    "is_list_of_structs",
    "joined_texts",
    "not_blank",
    "prepend_system",
    "present",
    "text_or_null",
]

TypeTest = Callable[[pa.DataType], bool]


def is_list_of_structs(type_: pa.DataType | None) -> bool:
    if type_ is None or not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    return bool(pa.types.is_struct(type_.value_type))


def text_or_null(type_: pa.DataType) -> bool:
    return is_text(type_) or pa.types.is_null(type_)


def fits(struct: pa.DataType, name: str, test: TypeTest) -> bool:
    """Whether the field `name` of `struct` is absent, holds only nulls, or passes `test`."""
    kind = field_type(struct, name)
    return kind is None or pa.types.is_null(kind) or test(kind)


def alias(struct: pa.DataType, names: tuple[str, ...]) -> str:
    """The one of `names` (a key and its snake_case twin) that `struct` holds values under;
    `names[0]` when it holds none. Raises LookupError when it holds both: the decoder takes
    the first that is not null, element by element, which a flattener does not follow."""
    held = [n for n in names if not pa.types.is_null(field_type(struct, n) or pa.null())]
    if len(held) > 1:
        raise LookupError(f"both {' and '.join(held)}")
    return held[0] if held else names[0]


def field(structs: pa.Array, name: str) -> pa.Array:
    """The field `name` of a struct array; nulls (as text) where the structs have no such
    field, or only nulls in it. Null where the struct itself is."""
    if not pa.types.is_struct(structs.type) or structs.type.get_field_index(name) < 0:
        return pa.nulls(len(structs), pa.string())
    values = pc.struct_field(structs, name)
    if pa.types.is_null(values.type):
        return pa.nulls(len(structs), pa.string())
    return values


def present(structs: pa.Array, name: str) -> Mask:
    """Per struct, whether its field `name` holds a value."""
    return ~as_mask(field(structs, name).is_null())


def not_blank(text: pa.Array) -> Mask:
    """Per text, whether it holds something besides white space (`str.strip()`'s); null: no."""
    return holds_text(text)


def end_to_end(*pieces: str | Counts) -> pa.Array:
    """Per element, the text of `pieces` end to end, texts as they are and numbers in decimal:
    how the decoders' minted ids are spelled (`end_to_end("call_", turn, "_", k)`)."""
    columns = [
        p if isinstance(p, str) else pc.cast(pa.array(p, pa.int64()), pa.string()) for p in pieces
    ]
    joined: pa.Array = pc.binary_join_element_wise(*columns, "")
    return joined


def joined_texts(items: pa.Array, required: bool) -> tuple[pa.Array, Mask]:
    """Per row of a column of lists of `{text}` structs (a system prompt's blocks or parts),
    its items' texts joined as the decoder joins them (`base.join_texts`; "" for none), and the
    rows the decoder does not read: a null item, or an item whose text is null (with
    `required`, also one whose type has no text field: the decoder requires the key). A null
    row joins to null."""
    from transcript_clean.formats.base import join_texts

    rows = len(items)
    values, sizes, item_row = flattened(items)
    text = field(values, "text")
    flag = as_mask(values.is_null()) | as_mask(text.is_null())
    if not required and field_type(values.type, "text") is None:
        # No item has a text: the decoder skips every item, and joins nothing.
        unread = rows_with(as_mask(values.is_null()), item_row, rows)
        empty = pa.array([""] * rows, pa.large_string())
        return pc.if_else(items.is_null(), pa.nulls(rows, pa.large_string()), empty), unread
    unread = rows_with(flag, item_row, rows)
    single = sizes == 1
    first = np.searchsorted(item_row, np.arange(rows))
    one = np.flatnonzero(single & ~unread)
    pieces = [
        text.take(indices(first[one])).cast(pa.large_string()),
        pa.array([""] * int(((sizes == 0) & ~as_mask(items.is_null())).sum()), pa.large_string()),
    ]
    none = np.flatnonzero((sizes == 0) & ~as_mask(items.is_null()))
    many = np.flatnonzero((sizes > 1) & ~unread)
    texts = text.take(indices(np.flatnonzero(np.isin(item_row, many)))).to_pylist()
    made, k = [], 0
    for row in many.tolist():
        made.append(join_texts(texts[k : k + int(sizes[row])]))
        k += int(sizes[row])
    pieces.append(pa.array(made, pa.large_string()))
    at = np.full(rows, -1, dtype=np.int64)
    at[np.concatenate([one, none, many])] = np.arange(len(one) + len(none) + len(many))
    where = pa.array(np.maximum(at, 0), pa.int64(), mask=at < 0)  # null: no text
    return pa.concat_arrays(pieces).take(where), unread


def prepend_system(
    conversations: Conversations, text: pa.Array, present: Mask, unread: Mask
) -> Conversations:
    """`conversations` with a system message first in each row of `present`, saying `text`
    (per row), and the rows of `unread` unread too: what a flattener makes of a system
    prompt the decoder reads from a column beside the conversation (`Format.side_columns`)."""
    c = conversations
    m = c.messages
    system_rows = np.flatnonzero(present)
    message_row = np.concatenate([system_rows, c.message_row])
    own = np.concatenate([np.full(len(system_rows), -1, dtype=np.int64), np.arange(m)])
    order = np.lexsort((own, message_row))
    new_of_old = np.empty(m, dtype=np.int64)
    new_of_old[own[order][own[order] >= 0]] = np.flatnonzero(own[order] >= 0)
    system_text = text.take(indices(system_rows)).cast(pa.large_string())
    system_chars = text_lengths(system_text)
    nothing = np.zeros(len(system_rows), dtype=bool)

    def put(values: Any, first: Any) -> Any:
        return np.concatenate([first, values])[order]

    item_message = c.item_message
    if item_message is not None:
        item_message = np.where(item_message >= 0, new_of_old[np.maximum(item_message, 0)], -1)
    inner_texts = c.texts

    def texts() -> tuple[pa.Array, Counts]:
        if inner_texts is None:
            raise ValueError("no texts")
        pieces, owners = inner_texts()
        system_messages = np.flatnonzero(own[order] < 0)
        return (
            pa.concat_arrays([system_text, pieces.cast(pa.large_string())]),
            np.concatenate([system_messages, new_of_old[owners]]),
        )

    old_of_new = np.full(len(order), -1, dtype=np.int64)
    old_of_new[new_of_old] = np.arange(m, dtype=np.int64)

    def moved(
        inner: Callable[[Counts], pa.Array] | None,
    ) -> Callable[[Counts], pa.Array] | None:
        # Asked by the new positions: the old messages' answers, null for the system ones.
        if inner is None:
            return None

        def at(positions: Counts) -> pa.Array:
            old = old_of_new[positions]
            found = old >= 0
            place = np.cumsum(found) - 1
            got = inner(old[found])
            return got.take(pa.array(np.maximum(place, 0), pa.int64(), mask=~found))

        return at

    # Every field the system messages do not change (the calls, the results, what the
    # flattener says of them) passes through as it is.
    return replace(
        c,
        unread=c.unread | unread,
        message_row=message_row[order],
        role=put(c.role, np.full(len(system_rows), SYSTEM, dtype=np.int8)).astype(np.int8),
        said=put(c.said, nothing).astype(bool),
        thought=put(c.thought, nothing).astype(bool),
        reasoned=put(c.reasoned, nothing).astype(bool),
        spoken=put(c.spoken, nothing).astype(bool),
        chars=put(c.chars, system_chars).astype(np.int64),
        call_message=new_of_old[c.call_message],
        result_message=new_of_old[c.result_message],
        item_message=item_message,
        message_text=moved(c.message_text),
        merge_text=moved(c.merge_text),
        message_origin=moved(c.message_origin),
        texts=texts if inner_texts is not None else None,
    )


def arguments_json(arguments: Any) -> str | None:
    """A call's arguments read from a text (a ShareGPT `function_call`, a Hermes `<tool_call>`)
    as JSON text for the view: orjson's, the standard library's for what orjson cannot write
    (an integer past 64 bits), None where JSON cannot write them."""
    try:
        return orjson.dumps(arguments).decode()
    except (TypeError, orjson.JSONEncodeError):
        try:
            return json.dumps(arguments)
        except (TypeError, ValueError):
            return None
