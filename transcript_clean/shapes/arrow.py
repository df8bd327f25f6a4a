"""The fast path for dataset types: rows clean for every candidate settled in Arrow.

The inner format's view reads the prompt column and each candidate column as they are (no
Python objects, no copy of the messages). A row is clean as a whole when its prompt holds no
code but having no assistant turn, each candidate alone holds none, and no candidate starts with
an assistant message where the prompt ends with one. The walk of SPEC section 3 then finds
nothing in prompt + candidate either: after such a prompt no call is pending, so a candidate is
walked as it is alone, and the only state left, an assistant message just before, is the edge
compared. So, too, a candidate with an empty turn or two assistant messages in a row is repaired
in Arrow alone as it would be after the prompt (`ARROW_REPAIRS`). A prompt whose calls the
candidates answer, and every other row with a code, take the per-row path (`shapes.clean`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Mask, as_mask, indices, list_sizes, whole
from transcript_clean.fastpath import FastRepair, Verdicts, fast_verdicts
from transcript_clean.fastpath.declared import declared_per_row
from transcript_clean.fastpath.measures import column_array
from transcript_clean.formats.base import Format
from transcript_clean.rules import (
    CONSECUTIVE_ASSISTANT,
    EMPTY_ASSISTANT_TURN,
    NO_ASSISTANT_TURN,
    TRAILING_TOOL_CALL,
    Rule,
)
from transcript_clean.shapes import ShapedFormat

__all__ = ["ARROW_REPAIRS", "message_counts", "shaped_verdicts", "with_parts"]


def shape_declarations(table: pa.Table, prompt: str) -> list[pa.Array] | None:
    """The declared tools beside a prompt at a path (`input.tools` beside `input.messages`),
    as the per-row path reads them (`shapes.clean.conversation_row`): none when the field is
    absent, None when it is there but not a list this path reads."""
    parent = prompt.rsplit(".", 1)[0]
    head, *rest = parent.split(".")
    kind = table.schema.field(head).type
    for step in rest:
        if not pa.types.is_struct(kind) or kind.get_field_index(step) < 0:
            return []
        kind = kind.field(step).type
    if not pa.types.is_struct(kind) or kind.get_field_index("tools") < 0:
        return []
    found = part_column(table, f"{parent}.tools")
    return None if found is None else [found]


def part_column(table: pa.Table, path: str) -> pa.Array | None:
    """The column at `path` (`input.messages` is the `messages` field of the `input` structs)
    as a list column: one message object per row is a list of one. None for other types."""
    head, *rest = path.split(".")
    column = column_array(table, head)
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


def message_counts(table: pa.Table, fmt: ShapedFormat) -> npt.NDArray[np.int64]:
    """Per row, the messages of its prompt and candidates, as the per-row path counts them."""
    total = np.zeros(table.num_rows, dtype=np.int64)
    for path in fmt.shape.paths:
        column = part_column(table, path)
        if column is not None:
            total += list_sizes(column)
    return total


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
    lengths = list_sizes(column)
    starts = np.cumsum(lengths) - lengths
    some = lengths > 0
    first = np.zeros(len(lengths), dtype=bool)
    last = np.zeros(len(lengths), dtype=bool)
    first[some] = assistant[starts[some]]
    last[some] = assistant[(starts + lengths - 1)[some]]
    return first, last


ARROW_REPAIRS: Final = (EMPTY_ASSISTANT_TURN, CONSECUTIVE_ASSISTANT)
"""The repairs a candidate gets in Arrow: they act on the candidate alone as they would after
the prompt (which ends with no call pending and, by the edge compared, does not meet it with
an assistant message). Other codes take the per-row path."""


class _Part(NamedTuple):
    """What the fast path makes of one part (the prompt or a candidate) of a batch's rows."""

    ok: Mask
    """Holds no code (but those a prompt may have)."""
    fixed: Mask
    """Holds no code once repaired in Arrow."""
    first: Mask
    """Starts with an assistant message, as written (repaired, where it is)."""
    last: Mask
    repaired: Mask
    """The rows `column` holds, in order."""
    column: pa.Array | None
    repairs: list[FastRepair]
    source: pa.Array
    """The part's column as read (in one chunk)."""


def _part(
    table: pa.Table,
    fmt: ShapedFormat,
    name: str,
    enabled: Sequence[Rule],
    repair: Collection[str],
    schema: pa.Schema | None,
    tools: Sequence[pa.Array] = (),
    declared: tuple[npt.NDArray[np.int64], list[Any]] | None = None,
) -> _Part | None:
    """The part at `name` read by the inner format's view: which rows hold no code, and, for
    the codes of `repair` among `ARROW_REPAIRS` in a top-level list column, which hold none once
    repaired in Arrow. None when the column or format has no view."""
    column = part_column(table, name)
    if column is None:
        return None
    top = "." not in name and table.column(name).type == column.type
    codes = [c for c in ARROW_REPAIRS if c in repair] if top else []
    # The prompt is read with the batch's other columns (its `system`); a candidate alone.
    side = {}
    if schema is not None:
        side = {n: whole(table.column(n)) for n in fmt.inner.side_columns if n in schema.names}
    verdicts = fast_verdicts(
        fmt.inner,
        column,
        repair=codes,
        enabled=enabled,
        schema=schema,
        tools=tools,
        declared=declared,
        side=side,
    )
    if verdicts is None:  # a `pa.json_()` field among them, say: Arrow cannot flatten all
        return None
    edges = _assistant_at_edges(fmt.inner, column)
    if edges is None:
        return None
    first, last = edges
    written = ~_null(column)
    fixed = verdicts.repaired & written
    if fixed.any():
        assert verdicts.repaired_column is not None
        now = _assistant_at_edges(fmt.inner, verdicts.repaired_column)
        assert now is not None  # the repaired column has the part's type
        first, last = first.copy(), last.copy()
        first[verdicts.repaired], last[verdicts.repaired] = now
    return _Part(
        verdicts.clean & written,
        fixed,
        first,
        last,
        verdicts.repaired,
        verdicts.repaired_column,
        verdicts.repairs,
        column,
    )


def shaped_verdicts(
    table: pa.Table,
    fmt: ShapedFormat,
    enabled: Sequence[Rule],
    unread: Sequence[int] = (),
    repair: Collection[str] = (),
    tools: Sequence[pa.Array] = (),
) -> Verdicts | None:
    """The rows clean as a whole (module doc), and, for the codes of `repair` among
    `ARROW_REPAIRS`, rows clean but for those codes in a prompt or candidates held as lists,
    repaired there (`repaired_column`: a struct of those columns written anew); `unread`: rows
    never settled here. None when a column's type or the format has no view."""
    shape = fmt.shape
    rows = table.num_rows
    clean = np.ones(rows, dtype=bool)
    settled = np.ones(rows, dtype=bool)  # clean, or clean once repaired here
    prompt_last = np.zeros(rows, dtype=bool)  # the prompt ends on an assistant message
    parts: list[tuple[str, _Part]] = []
    # Every part of a row has the row's declarations: read once for all of them.
    declared = declared_per_row(tuple(tools), rows) if tools else None
    if shape.prompt is not None:
        # A prompt needs no assistant turn; calls pending at its end are its normal end only
        # when nothing follows (the candidates answering them take the per-row path).
        allowed = {NO_ASSISTANT_TURN} | ({TRAILING_TOOL_CALL} if not shape.candidates else set())
        rules = [r for r in enabled if r.code not in allowed]
        fix = repair if shape.candidates else ()
        part = _part(table, fmt, shape.prompt, rules, fix, table.schema, tools, declared)
        if part is None:
            return None
        clean &= part.ok
        settled &= part.ok | part.fixed
        prompt_last = part.last
        parts.append((shape.prompt, part))
    for name in shape.candidates:
        # Alone (no `system` column before it: that would hide an assistant message at the
        # prompt's end from the one starting the candidate, which the edges compare here).
        part = _part(table, fmt, name, enabled, repair, None, tools, declared)
        if part is None:
            return None
        meets = prompt_last & part.first
        clean &= part.ok & ~meets
        settled &= (part.ok | part.fixed) & ~meets
        parts.append((name, part))
    clean[list(unread)] = False
    settled[list(unread)] = False
    repaired = settled & ~clean
    nothing = np.zeros(rows, dtype=bool)
    out = Verdicts(
        clean=clean,
        trailing=nothing,
        trailing_calls=np.zeros(rows, dtype=np.int64),
        repaired=repaired,
    )
    if repaired.any():
        fixes = {n: (p.source, p.repaired, p.column) for n, p in parts if p.column is not None}
        out.repaired_column = _rewritten(repaired, fixes)
        out.repairs = _combined([r for _, p in parts for r in p.repairs], repaired)
    return out


def _rewritten(repaired: Mask, fixes: dict[str, tuple[pa.Array, Mask, pa.Array]]) -> pa.StructArray:
    """The part columns of the rows `repaired` (per column: as read, the rows repaired, their
    repaired values), each row's repaired value where its part was repaired, else its own: one
    struct field per column."""
    at = np.flatnonzero(repaired)
    fields, arrays = [], []
    for name, (source, rows, fixed) in fixes.items():
        # Only the rows settled repaired are copied: the column's own values of those, then
        # the part's repaired values in place where its part was repaired.
        column = source.take(indices(at))
        rank = np.cumsum(rows) - 1  # where each repaired row's value is in `fixed`
        index = np.where(rows[at], len(at) + rank[at], np.arange(len(at)))
        arrays.append(pa.concat_arrays([column, fixed]).take(indices(index)))
        fields.append(pa.field(name, column.type))
    return pa.StructArray.from_arrays(arrays, fields=fields)


def _combined(repairs: list[FastRepair], repaired: Mask) -> list[FastRepair]:
    """Per code, the candidates' repairs of the rows settled repaired: a row counts once, its
    occurrences in every candidate."""
    out: dict[str, FastRepair] = {}
    for fix in repairs:
        rows = fix.rows & repaired
        occurrences = np.where(rows, fix.occurrences, 0)
        was = out.get(fix.code)
        if was is not None:
            rows, occurrences = rows | was.rows, occurrences + was.occurrences
        out[fix.code] = FastRepair(fix.code, fix.action, rows, occurrences)
    return [fix for fix in out.values() if fix.rows.any()]


def with_parts(rows: pa.Table, parts: pa.StructArray) -> pa.Table:
    """`rows` with each column `parts` holds replaced by its values (`shaped_verdicts`)."""
    for f, values in zip(parts.type, parts.flatten(), strict=True):
        at = rows.schema.get_field_index(f.name)
        rows = rows.set_column(at, rows.schema.field(at), values)
    return rows


def _null(column: pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
