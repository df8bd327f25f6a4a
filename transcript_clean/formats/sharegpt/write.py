"""ShareGPT's writer: the edits the repairs decided over the columnar view, put back into a
column of `{from, value}` turns as `ShareGPTFormat.encode` writes the repaired rows.

Whole turns are dropped; a gpt turn that others are joined into (R4) gets their texts in its
`value`, joined with a blank line, as the encoder joins an assistant message's texts, and keeps
its other fields. It knows no rule: it gets edits, not codes.
"""

from __future__ import annotations

import pyarrow as pa

from transcript_clean.columnar.edits import Edits, write_joined

__all__ = ["write_sharegpt"]


def write_sharegpt(column: pa.Array, edits: Edits) -> pa.Array | None:
    """The rows of `edits`, repaired, as a column of `column`'s type (None: see
    `write_joined`)."""
    return write_joined(column, edits, "value")
