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
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.fastpath import FastRepair, Verdicts, fast_verdicts, possible_codes
from transcript_clean.fastpath.base import Mask, as_mask
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


ARROW_REPAIRS: Final = (EMPTY_ASSISTANT_TURN, CONSECUTIVE_ASSISTANT)
"""The repairs a candidate gets in Arrow: they act on the candidate alone as they would after
the prompt (which ends with no call pending and, by the edge compared, does not meet it with
an assistant message). Other codes take the per-row path."""


def shaped_verdicts(
    table: pa.Table,
    fmt: ShapedFormat,
    enabled: Sequence[Rule],
    unread: Sequence[int] = (),
    repair: Collection[str] = (),
) -> Verdicts | None:
    """The rows clean as a whole (module doc), and, for the codes of `repair` among
    `ARROW_REPAIRS`, rows clean but for those codes in a prompt or candidates held as lists,
    repaired there (`repaired_column`: a struct of those columns written anew); `unread`: rows
    never settled here. None when a column's type or the format has no view."""
    shape, inner = fmt.shape, fmt.inner
    rows = table.num_rows
    clean = np.ones(rows, dtype=bool)
    settled = np.ones(rows, dtype=bool)  # clean, or repaired in a candidate
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
        settled &= clean
        prompt_ends_on_assistant = edges[1]
    fixes: dict[str, tuple[Mask, pa.Array]] = {}  # column -> its repaired rows, their values
    repairs: list[FastRepair] = []
    if shape.prompt is not None and shape.candidates and repair:
        assert prompt is not None
        mended_prompt = _prompt_repaired(table, fmt, prompt, enabled, repair)
        if mended_prompt is not None:
            rows_fixed, fixed, fix_repairs, last = mended_prompt
            settled |= rows_fixed
            prompt_ends_on_assistant = np.where(rows_fixed, last, prompt_ends_on_assistant)
            fixes[shape.prompt] = (rows_fixed, fixed)
            repairs += fix_repairs
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
        fine = ~_null(candidate) & ~(prompt_ends_on_assistant & edges[0])
        clean &= ok & fine
        codes = [c for c in ARROW_REPAIRS if c in repair] if "." not in name else []
        if not codes or table.column(name).type != candidate.type:
            settled &= ok & fine
            continue
        verdicts = fast_verdicts(inner, candidate, repair=codes, enabled=enabled)
        fixed = None if verdicts is None else verdicts.repaired_column
        if verdicts is None or fixed is None or not verdicts.repaired.any():
            settled &= ok & fine
            continue
        fixed_edges = _assistant_at_edges(inner, fixed)
        assert fixed_edges is not None  # the repaired column has the candidate's type
        starts = edges[0].copy()
        starts[verdicts.repaired] = fixed_edges[0]
        mended = verdicts.repaired & ~_null(candidate) & ~(prompt_ends_on_assistant & starts)
        settled &= (ok & fine) | mended
        fixes[name] = (verdicts.repaired, fixed)
        repairs += verdicts.repairs
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
        out.repaired_column = _rewritten(table, repaired, fixes)
        out.repairs = _combined(repairs, repaired)
    return out


def _prompt_repaired(
    table: pa.Table,
    fmt: ShapedFormat,
    prompt: pa.Array,
    enabled: Sequence[Rule],
    repair: Collection[str],
) -> tuple[Mask, pa.Array, list[FastRepair], Mask] | None:
    """The prompts (a column of lists) whose only codes are among `repair` and
    `ARROW_REPAIRS`, repaired in Arrow as the per-row path repairs a prompt (it needs no
    assistant turn; calls pending at its end are left to the per-row path): which rows, their
    repaired prompts, the repairs, and whether each ends on an assistant message. None when
    there is none."""
    name = fmt.shape.prompt
    codes = [c for c in ARROW_REPAIRS if c in repair]
    if name is None or "." in name or not codes or table.column(name).type != prompt.type:
        return None
    rules = [r for r in enabled if r.code != NO_ASSISTANT_TURN]
    verdicts = fast_verdicts(fmt.inner, prompt, repair=codes, enabled=rules, schema=table.schema)
    if verdicts is None or verdicts.repaired_column is None or not verdicts.repaired.any():
        return None
    edges = _assistant_at_edges(fmt.inner, verdicts.repaired_column)
    assert edges is not None  # the repaired column has the prompt's type
    last = np.zeros(table.num_rows, dtype=bool)
    last[verdicts.repaired] = edges[1]
    rows = verdicts.repaired & ~_null(prompt)
    return rows, verdicts.repaired_column, verdicts.repairs, last


def _rewritten(
    table: pa.Table, repaired: Mask, fixes: dict[str, tuple[Mask, pa.Array]]
) -> pa.StructArray:
    """The candidate columns of the rows `repaired`, each row's repaired value where its
    candidate was repaired, else its own: one struct field per column."""
    at = np.flatnonzero(repaired)
    fields, arrays = [], []
    for name, (rows, fixed) in fixes.items():
        column = table.column(name).combine_chunks()
        rank = np.cumsum(rows) - 1  # where each repaired row's value is in `fixed`
        index = np.where(rows[at], len(column) + rank[at], at)
        arrays.append(pa.concat_arrays([column, fixed]).take(pa.array(index)))
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
