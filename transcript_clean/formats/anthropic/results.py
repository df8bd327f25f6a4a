"""R5's error results written in Arrow into messages of Anthropic's shape (a `content` list of
blocks): Anthropic's `messages` (`item_holders`, `write_error_results`) and the `message` of
Claude Code's events (`item_holders` of their `message`, `with_error_results`). The encoder puts a
call's error result in the user message that answers its turn, after the `tool_result` blocks
it opens with (`rules.base.put_results`), and writes that message's other blocks back as they
came where they are text and `tool_result` blocks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    field_type,
    first_flagged,
    flattened,
    indices,
    is_text,
    lists_of,
    rows_with,
    with_child,
)
from transcript_clean.columnar.conversations import USER
from transcript_clean.columnar.edits import Subset, inserted_lists
from transcript_clean.formats.anthropic.blocks import result_out
from transcript_clean.formats.fields import is_list_of_structs
from transcript_clean.model import Text, ToolResult

if TYPE_CHECKING:
    from transcript_clean.columnar.conversations import Conversations
    from transcript_clean.columnar.edits import Edits

__all__ = [
    "error_block",
    "item_holders",
    "with_error_results",
    "write_error_results",
]


def error_block(call_id: Any, text: str) -> dict[str, Any]:
    """The block the encoder writes for a call's error result (R5's)."""
    return result_out(ToolResult(call_id, (Text(text),), None, "error"))


def plain_holders(messages: pa.Array) -> Mask | None:
    """Per message (a struct with a `content` list of blocks), whether an error result block
    put among its blocks is all the encoder changes: its blocks are text and `tool_result`
    blocks only (another kind, an image, it writes anew). None where the blocks' type cannot
    hold the block the encoder writes (a result's `content` held as blocks): such rows'
    repairs are the per-row path's, which rejects them as `unencodable_row`."""
    message_type = messages.type
    content_type = field_type(message_type, "content") if pa.types.is_struct(message_type) else None
    if content_type is None or not is_list_of_structs(content_type):
        return None
    block_type = content_type.value_type
    if not is_text(field_type(block_type, "type")):
        return None
    try:
        pa.array([error_block("id", "text")], type=block_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return None
    blocks, _, parent = flattened(pc.struct_field(messages, "content"))
    kinds = pc.struct_field(blocks, "type")
    plain = as_mask(pc.is_in(kinds, pa.array(["text", "tool_result"])), fill=False)
    out: Mask = ~rows_with(~plain, parent, len(messages)) & ~as_mask(messages.is_null())
    return out


def _leading_results(content: pa.Array) -> Counts:
    """Per list of blocks, how many `tool_result` blocks it opens with."""
    blocks, sizes, parent = flattened(content)
    kinds = pc.struct_field(blocks, "type")
    other = ~as_mask(pc.equal(kinds, "tool_result"), fill=False)
    out: Counts = first_flagged(other, parent, len(content)) - (np.cumsum(sizes) - sizes)
    return np.minimum(out, sizes)


def with_error_results(messages: pa.Array, at: Counts, call_ids: list[Any], text: str) -> pa.Array:
    """`messages` with an error result block for each call of `call_ids` among the blocks of
    the message `at` gives (ascending), after the `tool_result` blocks it opens with and those
    put there before it, as the encoder writes them."""
    content = pc.struct_field(messages, "content")
    blocks = _error_blocks(content.type.value_type, call_ids, text)
    leading = _leading_results(content.take(indices(at)))  # of the messages receiving one only
    rebuilt = inserted_lists(content, blocks, at, leading)
    return with_child(messages, "content", rebuilt)


def _error_blocks(block_type: pa.DataType, call_ids: list[Any], text: str) -> pa.Array:
    """`error_block` of each call of `call_ids`, as blocks of `block_type`: one block made, and
    its `tool_use_id` (the one field the call changes) set per call."""
    one = pa.array([error_block("", text)], type=block_type)
    blocks = one.take(pa.array(np.zeros(len(call_ids), dtype=np.int64)))
    id_type = field_type(block_type, "tool_use_id")
    if id_type is None:  # a type without the field drops it, as it drops it from each block
        return blocks
    return with_child(blocks, "tool_use_id", pa.array(call_ids, pa.string()).cast(id_type))


def item_holders(
    column: pa.Array, c: Conversations, messages: Counts, field: str | None = None
) -> Mask | None:
    """Of the messages at `messages` of a column whose every message is one of its items
    (Anthropic's `messages`; with `field`, the item's field that holds it: a Claude Code
    event's `message`), whether a new error result is written into it as the encoder does: a
    user message whose blocks `plain_holders` clears. A turn no user message answers (a new
    message: in these rows, only after another code) is the per-row path's."""
    if c.item_message is None or not is_list_of_structs(column.type):
        return None
    if field is not None and field_type(column.type.value_type, field) is None:
        return None
    first = c.first_items()[messages]
    items, _, _ = flattened(column)
    held = items.take(indices(np.maximum(first, 0)))
    plain = plain_holders(held if field is None else pc.struct_field(held, field))
    if plain is None:
        return None
    out: Mask = (c.role[messages] == USER) & (first >= 0) & plain
    return out


def write_error_results(column: pa.Array, written: pa.Array, edits: Edits) -> pa.Array:
    """`written` (the rows of `edits`, their other edits made, as a list column of `column`'s
    type whose items are messages) with the error results of `edits` among the blocks of the
    user messages that answer their calls."""
    c, inserts = edits.conversations, edits.inserts
    assert inserts is not None and c.item_message is not None
    items, _, parent = flattened(column)
    chosen = Subset.of(edits.rows, parent, len(column))
    whole = c.item_message >= 0
    gone = np.zeros(len(items), dtype=bool)
    gone[whole] = edits.removed[c.item_message[whole]]
    kept = chosen.elements[~gone[chosen.elements]]  # the items `written` holds, in order
    at = np.searchsorted(kept, c.first_items()[inserts.into])
    call_ids = c.call_id.take(indices(inserts.call)).to_pylist()
    values, sizes, _ = flattened(written)
    values = with_error_results(values, at, call_ids, inserts.text)
    mask = written.is_null() if written.null_count else None
    return lists_of(written.type, sizes, values, mask)
