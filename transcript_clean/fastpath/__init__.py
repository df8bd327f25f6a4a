"""The Arrow-native fast path: which rows are already canonical, decided per batch, not per row.

`fast_verdicts` looks at the flattened messages of a batch with pyarrow.compute and NumPy and
settles the rows it can prove: clean rows (kept unchanged with no code at all) and rows whose
only code is calls pending at the end (when the config keeps them), in the OpenAI, ShareGPT and
Anthropic formats; and, in the OpenAI format, rows with a single kind of defect the config
repairs and Arrow can repair as the per-row path would: empty assistant turns (R1), calls with
invalid arguments (R2), orphan results (R3), consecutive assistant text messages (R4) and
unanswered calls, by a cut before the first (R5, where an assistant turn remains); and two
kinds of reject, rows with no assistant message and rows R5's cut would leave with none; in
the ShareGPT format, rows whose only code is empty assistant turns (R1), orphan observations
(R3) or consecutive assistant turns (R4), and rows with no assistant turn or a turn the decoder
cannot read, rejected. Those
rows never become Python objects; every other row takes the per-row path (`clean_mask` is the
clean part alone). The verdicts are conservative: a row the fast path cannot prove (an unusual
but valid shape, say) is merely left to the per-row path, so the two paths always agree.
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa

from transcript_clean.fastpath.anthropic import anthropic_verdicts
from transcript_clean.fastpath.base import (
    FAST_REJECTS,
    FAST_REPAIRS,
    FastReject,
    FastRepair,
    Mask,
    Verdicts,
)
from transcript_clean.fastpath.openai import openai_verdicts
from transcript_clean.fastpath.sharegpt import sharegpt_verdicts
from transcript_clean.formats.base import Format

__all__ = [
    "FAST_REJECTS",
    "FAST_REPAIRS",
    "FastReject",
    "FastRepair",
    "Verdicts",
    "clean_mask",
    "fast_verdicts",
]


def clean_mask(fmt: Format, column: pa.Array | pa.ChunkedArray) -> Mask | None:
    """For each row, whether it is provably canonical with no code; None when this format or
    column shape has no fast path (then every row takes the per-row path)."""
    verdicts = fast_verdicts(fmt, column)
    return None if verdicts is None else verdicts.clean


def fast_verdicts(
    fmt: Format,
    column: pa.Array | pa.ChunkedArray,
    *,
    keep_trailing: bool = False,
    repair: Collection[str] = (),
    reject: Collection[str] = (),
    schema: pa.Schema | None = None,
) -> Verdicts | None:
    """The rows the fast path settles: always the clean ones; with `keep_trailing`, those whose
    only code is calls pending at the end (for a config that keeps them); those whose only code
    is one of `repair` (codes of `FAST_REPAIRS` the config repairs: all of them for the OpenAI
    format, R1, R3 and R4 for ShareGPT); and, for those two formats, rows it can reject as the
    per-row path would (`reject`: codes of `FAST_REJECTS` the config rejects). `schema` is the
    batch's, when other columns matter to the format (the `system` column of ShareGPT and
    Anthropic). None when this format or column shape has no fast path."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if fmt.name == "openai":
        return openai_verdicts(array, keep_trailing=keep_trailing, repair=repair, reject=reject)
    if fmt.name == "sharegpt":
        return sharegpt_verdicts(
            fmt, array, keep_trailing=keep_trailing, repair=repair, reject=reject, schema=schema
        )
    if fmt.name == "anthropic":
        return anthropic_verdicts(array, keep_trailing=keep_trailing, schema=schema)
    return None
