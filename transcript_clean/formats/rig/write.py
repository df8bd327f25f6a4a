"""rig's writer: the edits the repairs decided over the columnar view, put back into a column
of rig messages as `RigFormat.encode` writes the repaired rows.

Whole messages are dropped; a message that others are joined into (R4) gets their parts after
its own, each as it came, and keeps its other fields (its `id`). It knows no rule: it gets
edits, not codes.
"""

from __future__ import annotations

import pyarrow as pa

from transcript_clean.columnar.edits import Edits, write_appended

__all__ = ["write_rig"]


def write_rig(column: pa.Array, edits: Edits) -> pa.Array:
    """The rows of `edits`, repaired, as a column of `column`'s type."""
    return write_appended(column, edits, "content")
