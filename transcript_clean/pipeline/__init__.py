"""Cleaning one record batch (`clean_batch`): what every engine runs.

Rows the Arrow fast path settles stay Arrow data; the others go through `clean_row` (rows.py,
SPEC section 5 for one row); the batch comes back split into kept rows, rejects and stats.

`batch.py` cleans a batch, with the fast path's answer from `verdicts.py`, counted by
`settle.py`; `stored.py` reads rows as the batch stores them, `assemble.py` puts the kept rows
and the rejects together, `lines.py` writes anew the lines of JSON Lines rows repaired in Arrow.
"""

from __future__ import annotations

from transcript_clean.pipeline.assemble import (
    REJECT_FIELDS,
    previous_names,
    reject_schema,
    written_schema,
)
from transcript_clean.pipeline.batch import (
    BatchResult,
    CleanedBatch,
    clean_batch,
    clean_batch_parts,
)
from transcript_clean.pipeline.settle import settled_profile
from transcript_clean.pipeline.stored import (
    clean_stored_row,
    holds_json_text,
    line_errors,
    not_utf8,
    stored_as_json,
)
from transcript_clean.pipeline.verdicts import batch_verdicts
from transcript_clean.rows import RepairStep, RowResult, Violation, clean_row

__all__ = [
    "REJECT_FIELDS",
    "BatchResult",
    "CleanedBatch",
    "RepairStep",
    "RowResult",
    "Violation",
    "batch_verdicts",
    "clean_batch",
    "clean_batch_parts",
    "clean_row",
    "clean_stored_row",
    "holds_json_text",
    "line_errors",
    "not_utf8",
    "previous_names",
    "reject_schema",
    "settled_profile",
    "stored_as_json",
    "written_schema",
]
