"""The fast path for dataset types: rows clean for every candidate settled in Arrow.

The inner format's view reads the prompt column and each candidate column as they are (no
Python objects, no copy of the messages). A row is clean as a whole when its prompt holds no
code but having no assistant turn, each candidate alone holds none, and no candidate starts with
an assistant message where the prompt ends with one. The walk of SPEC section 3 then finds
nothing in prompt + candidate either: after such a prompt no call is pending, so a candidate is
walked as it is alone, and the only state left, an assistant message just before, is the edge
compared. A prompt whose calls the candidates answer, and every row with a code, take the
per-row path (`shapes.clean`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.fastpath import Verdicts, possible_codes
from transcript_clean.fastpath.base import Mask, as_mask
from transcript_clean.formats.base import Format
from transcript_clean.rules import NO_ASSISTANT_TURN, TRAILING_TOOL_CALL, Rule
from transcript_clean.shapes import ShapedFormat

__all__ = ["message_counts", "shaped_verdicts"]


def _at(table: pa.Table, path: str) -> pa.Array | None:
    """The column at `path` (`input.messages` is the `messages` field of the `input` structs)
    as a list column: one message object per row is a list of one. None for other types."""
    head, *rest = path.split(".")
    column = table.column(head).combine_chunks()
    for step in rest:
        if not pa.types.is_struct(column.type) or column.type.get_field_index(step) < 0:
            return None
        column = pc.struct_field(column, step)
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        return column
    if pa.types.is_struct(column.type):
        offsets = pa.array(np.arange(len(column) + 1, dtype=np.int32))
        mask = column.is_null() if column.null_count else None
        return pa.ListArray.from_arrays(offsets, column, mask=mask)
    return None


def _lengths(column: pa.Array) -> npt.NDArray[np.int64]:
    lengths: npt.NDArray[np.int64] = pc.fill_null(pc.list_value_length(column), 0).to_numpy()
    return lengths.astype(np.int64)


def message_counts(table: pa.Table, fmt: ShapedFormat) -> npt.NDArray[np.int64]:
    """Per row, the messages of its prompt and candidates, as the per-row path counts them."""
    shape = fmt.shape
    total = np.zeros(table.num_rows, dtype=np.int64)
    for path in ([shape.prompt] if shape.prompt else []) + list(shape.candidates):
        column = _at(table, path)
        if column is not None:
            total += _lengths(column)
    return total


def _settles(
    fmt: Format,
    column: pa.Array,
    schema: pa.Schema | None,
    enabled: Sequence[Rule],
    allowed: set[str],
) -> Mask | None:
    """The rows of `column` its format's view reads with no code but those `allowed`; None when
    the format or column has no view."""
    view = fmt.arrow_view(column, schema)
    if view is None:
        return None
    may = possible_codes(view, fmt, enabled)
    ok: Mask = ~view.unread
    for code, rows in may.items():
        if code not in allowed:
            ok &= ~rows
    return ok


def _assistant_at_edges(fmt: Format, column: pa.Array) -> tuple[Mask, Mask] | None:
    """Per row, whether its first and its last message is the assistant's (a ShareGPT
    `function_call` turn is); None for messages without a role or tag."""
    values = column.flatten()
    if not pa.types.is_struct(values.type):
        return None
    if values.type.get_field_index("role") >= 0:
        assistant: Mask = as_mask(pc.equal(pc.struct_field(values, "role"), "assistant"))
    elif values.type.get_field_index("from") >= 0:
        tags = getattr(fmt, "tags", {})
        said = [t for t, role in tags.items() if role in ("assistant", "function_call")]
        assistant = as_mask(pc.is_in(pc.struct_field(values, "from"), pa.array(said, pa.string())))
    else:
        return None
    lengths = _lengths(column)
    starts = np.cumsum(lengths) - lengths
    some = lengths > 0
    first = np.zeros(len(lengths), dtype=bool)
    last = np.zeros(len(lengths), dtype=bool)
    first[some] = assistant[starts[some]]
    last[some] = assistant[(starts + lengths - 1)[some]]
    return first, last


def shaped_verdicts(
    table: pa.Table, fmt: ShapedFormat, enabled: Sequence[Rule], unread: Sequence[int] = ()
) -> Verdicts | None:
    """The rows clean as a whole (module doc); `unread`: rows never settled here. None when a
    column's type or the format has no view."""
    shape, inner = fmt.shape, fmt.inner
    rows = table.num_rows
    clean = np.ones(rows, dtype=bool)
    prompt_ends_on_assistant = np.zeros(rows, dtype=bool)
    if shape.prompt is not None:
        prompt = _at(table, shape.prompt)
        # A prompt needs no assistant turn; calls pending at its end are its normal end only
        # when nothing follows (the candidates answering them take the per-row path).
        allowed = {NO_ASSISTANT_TURN} | ({TRAILING_TOOL_CALL} if not shape.candidates else set())
        ok = None if prompt is None else _settles(inner, prompt, table.schema, enabled, allowed)
        edges = None if prompt is None else _assistant_at_edges(inner, prompt)
        if ok is None or edges is None:
            return None
        clean &= ok & ~_null(prompt)
        prompt_ends_on_assistant = edges[1]
    for name in shape.candidates:
        candidate = _at(table, name)
        if candidate is None:
            return None
        # Alone (no `system` column before it: that would hide an assistant message at the
        # prompt's end from the one starting the candidate, which the edges compare here).
        ok = _settles(inner, candidate, None, enabled, set())
        edges = _assistant_at_edges(inner, candidate)
        if ok is None or edges is None:
            return None
        clean &= ok & ~_null(candidate) & ~(prompt_ends_on_assistant & edges[0])
    clean[list(unread)] = False
    nothing = np.zeros(rows, dtype=bool)
    return Verdicts(
        clean=clean,
        trailing=nothing,
        trailing_calls=np.zeros(rows, dtype=np.int64),
        repaired=nothing.copy(),
    )


def _null(column: pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
