"""LLaMA-Factory v1's writer: the edits the repairs decided over the columnar view, put back
into a column of `messages` as `LlamaFactoryFormat.encode` writes the repaired rows.

Whole messages are dropped; a message that others are joined into (R4) gets their `{type,
value}` items after its own, each as it came, and keeps its other fields (its `loss_weight`,
which R4 requires the joined ones to share). It knows no rule: it gets edits, not codes.
"""

from __future__ import annotations

import pyarrow as pa

from transcript_clean.columnar.edits import Edits, write_appended

__all__ = ["write_llamafactory"]


def write_llamafactory(column: pa.Array, edits: Edits) -> pa.Array:
    """The rows of `edits`, repaired, as a column of `column`'s type."""
    return write_appended(column, edits, "content")
