"""R5's error results written in Arrow into messages of Anthropic's shape (a `content` list of
blocks): Anthropic's `messages` and the `message` of Claude Code's events. The encoder puts a
call's error result in the user message that answers its turn, after the `tool_result` blocks
it opens with (`rules.base.put_results`), and writes that message's other blocks back as they
came where they are text and `tool_result` blocks."""

from __future__ import annotations

from typing import Any

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
    is_text,
    rows_with,
)
from transcript_clean.columnar.edits import inserted_lists
from transcript_clean.formats.anthropic.blocks import result_out
from transcript_clean.formats.fields import is_list_of_structs
from transcript_clean.model import Text, ToolResult

__all__ = ["plain_holders", "with_error_results"]


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
    blocks = pa.array([error_block(c, text) for c in call_ids], type=content.type.value_type)
    rebuilt = inserted_lists(content, blocks, at, _leading_results(content)[at])
    children = [
        rebuilt if child.name == "content" else values
        for child, values in zip(messages.type, messages.flatten(), strict=True)
    ]
    mask = messages.is_null() if messages.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(messages.type), mask=mask)
