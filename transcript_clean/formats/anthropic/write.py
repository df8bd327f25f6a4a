"""Anthropic's writer: the edits the repairs decided over the columnar view, put back into a
column of Anthropic `messages` as `AnthropicFormat.encode` writes the repaired rows.

Whole messages are dropped; a message that others are joined into (R4) keeps its other fields
and, where content is a string, gets their texts joined into it with a blank line (as the
encoder writes texts into a string), where it is a list of blocks, their blocks after its own,
each as it came. It knows no rule: it gets edits, not codes.
"""

from __future__ import annotations

import pyarrow as pa

from transcript_clean.columnar.arrays import field_type, is_text
from transcript_clean.columnar.edits import Edits, write_appended, write_joined

__all__ = ["write_anthropic"]


def write_anthropic(column: pa.Array, edits: Edits) -> pa.Array | None:
    """The rows of `edits`, repaired, as a column of `column`'s type (None: see
    `write_joined`)."""
    if is_text(field_type(column.type.value_type, "content")):
        return write_joined(column, edits, "content")
    return write_appended(column, edits, "content")
