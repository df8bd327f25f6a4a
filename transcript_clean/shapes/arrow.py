"""The fast path for dataset types: a row's parts read as the conversations the per-row path
cleans (`shapes.clean`), by the one fast path of its inner format.

The per-row path cleans the prompt alone with the prompt's config (`prompt_config`: what a
prompt has by design, `PROMPT_CODES`, is forgotten), then each candidate as prompt + candidate
after the repaired prompt, with the run's config; a candidate's repair that changes the prompt
makes the row a reject. Here the same conversations are put together in Arrow (the prompt's
list and each candidate's, row by row) and handed to `fast_verdicts`, which knows every rule:
this module knows none. A row is clean when the prompt alone and every prompt + candidate are;
it is repaired here when each is clean or repaired in Arrow, each candidate's repaired
conversation starts with the prompt exactly as it was, and every repaired part is a column
the row holds at the top level (a list of messages, or one message where one is left). Every
other row takes the per-row path.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    flattened,
    indices,
    joined_lists,
    list_sizes,
    lists_of,
    whole,
)
from transcript_clean.columnar.edits import replaced
from transcript_clean.fastpath import FastReject, FastRepair, Verdicts, arrow_view, fast_verdicts
from transcript_clean.fastpath.base import Measurer
from transcript_clean.fastpath.declared import declared_per_row
from transcript_clean.fastpath.measures import Measures, column_array
from transcript_clean.policy import Config
from transcript_clean.rules import Rule, rules
from transcript_clean.shapes import ShapedFormat
from transcript_clean.shapes.shape import PROMPT_CODES, prompt_config

__all__ = ["first_conversation", "message_counts", "shaped_verdicts", "with_parts"]


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
    if pa.types.is_null(column.type):  # null in every row: lists of no type
        return pa.nulls(len(column), pa.list_(pa.null()))
    if pa.types.is_struct(column.type):
        offsets = pa.array(np.arange(len(column) + 1, dtype=np.int32))
        mask = column.is_null() if column.null_count else None
        return pa.ListArray.from_arrays(offsets, column, mask=mask)
    return None


def first_conversation(table: pa.Table, fmt: ShapedFormat) -> pa.Array | None:
    """Each row as its inner format reads one conversation (`ShapedFormat.decode`): the prompt
    followed by the first candidate, put together in Arrow (`joined_lists`); None where a part
    is no list of messages."""
    parts = [part_column(table, path) for path in fmt.shape.first_conversation]
    if parts[0] is None or parts[-1] is None:
        return None
    return parts[0] if len(parts) == 1 else joined_lists(parts[0], parts[1])


def message_counts(table: pa.Table, fmt: ShapedFormat) -> npt.NDArray[np.int64]:
    """Per row, the messages of its prompt and candidates, as the per-row path counts them."""
    total = np.zeros(table.num_rows, dtype=np.int64)
    for path in fmt.shape.paths:
        column = part_column(table, path)
        if column is not None:
            total += list_sizes(column)
    return total


class _Read:
    """What the fast path made of one conversation of each row (the prompt alone, or prompt +
    a candidate): the rows clean, and those repaired in Arrow with their conversations."""

    __slots__ = ("clean", "column", "repaired", "repairs", "view")

    def __init__(self, verdicts: Verdicts, written: Mask) -> None:
        self.view = verdicts.view
        """What read them (the profile measures the rows as they came in from it)."""
        self.clean: Mask = verdicts.clean & written
        self.repaired: Mask = verdicts.repaired & written
        column = verdicts.repaired_column
        if column is not None and not written[verdicts.repaired].all():
            column = column.filter(pa.array(written[verdicts.repaired]))
        self.column: pa.Array | None = column
        """The conversations of the rows `repaired`, in order."""
        self.repairs: list[FastRepair] = verdicts.repairs


def _read(
    fmt: ShapedFormat,
    column: pa.Array,
    table: pa.Table,
    config: Config,
    enabled: Sequence[Rule],
    repair: Collection[str],
    tools: Sequence[pa.Array],
    declared: tuple[npt.NDArray[np.int64], list[Any]] | None,
) -> _Read | None:
    """One conversation of each row (`column`, in the inner format's layout) read by the fast
    path, beside the batch's other columns as the per-row path reads them; a row whose part
    is null is neither clean nor repaired (the decoder says what is wrong with it)."""
    verdicts = fast_verdicts(
        fmt.inner,
        column,
        repair=repair,
        schema=table.schema,
        enabled=enabled,
        tools=tools,
        declared=declared,
        side=fmt.inner.side(table),
        config=config,
    )
    return None if verdicts is None else _Read(verdicts, ~_null(column))


def shaped_verdicts(
    table: pa.Table,
    fmt: ShapedFormat,
    config: Config,
    unread: Sequence[int] = (),
    repair: Collection[str] = (),
    tools: Sequence[pa.Array] = (),
) -> Verdicts | None:
    """The rows clean as a whole, and those repaired in Arrow for the codes of `repair` (module
    doc): `repaired_column` is a struct of the part columns they rewrite; `unread`, rows never
    settled here. None when a part's column or the inner format has no fast path."""
    shape = fmt.shape
    rows = table.num_rows
    # Every part of a row has the row's declarations: read once for all of them.
    declared = declared_per_row(tuple(tools), rows) if tools else None
    settled = np.ones(rows, dtype=bool)
    settled[list(unread)] = False
    clean = settled.copy()
    fixes: dict[str, tuple[pa.Array, Mask, pa.Array]] = {}
    repairs: list[FastRepair] = []
    prompt: pa.Array | None = None
    first: _Read | None = None  # what read the first conversation of each row
    if shape.prompt is not None:
        prompt = part_column(table, shape.prompt)
        if prompt is None:
            return None
        settled &= ~_null(prompt)  # (joined to a candidate, it would read as no prompt)
        alone = prompt_config(config)
        enabled = [r for r in rules() if r.enabled(alone) and r.code not in PROMPT_CODES]
        listed = _held_as(table, shape.prompt, prompt) == "list"
        read = _read(fmt, prompt, table, alone, enabled, repair if listed else (), tools, declared)
        if read is None:
            return None
        clean &= read.clean
        settled &= read.clean | read.repaired
        first = read
        if read.column is not None and read.repaired.any():
            fixes[shape.prompt] = (prompt, read.repaired, read.column)
            repairs += read.repairs
            # Each candidate is read after the prompt as repaired, as on the per-row path.
            prompt = replaced(prompt, np.flatnonzero(read.repaired), read.column)
    enabled = [r for r in rules() if r.enabled(config)]
    candidates = {name: part_column(table, name) for name in shape.candidates}
    # Every part written: else the per-row path rejects the row before reading any of it.
    whole_row = settled.copy()
    for found in candidates.values():
        if found is None:
            return None
        whole_row &= ~_null(found)
    before = whole_row & clean  # the parts read so far are clean (the prompt's, here)
    rejects: list[FastReject] = []
    for name, candidate in candidates.items():
        assert candidate is not None
        conversation = candidate if prompt is None else joined_lists(prompt, candidate)
        if conversation is None:
            return None
        held = _held_as(table, name, candidate)
        mine = repair if held is not None else ()
        read = _read(fmt, conversation, table, config, enabled, mine, tools, declared)
        if read is None:
            return None
        if name == shape.candidates[0]:
            first = read
        written = ~_null(candidate)
        clean &= read.clean & written
        fixed = np.zeros(rows, dtype=bool)
        if held is not None and read.column is not None and read.repaired.any():
            skip = np.zeros(rows, dtype=np.int64) if prompt is None else list_sizes(prompt)
            at = np.flatnonzero(read.repaired & written)
            kind = whole(table.column(name)).type
            kept, values, misfit = _candidates(prompt, read, at, skip, kind)
            fixed[at[kept]] = True
            if fixed.any():
                fixes[name] = (whole(table.column(name)), fixed, values)
                repairs += read.repairs
            rejects += _misfits(name, read, at, misfit, before)
        settled &= (read.clean & written) | fixed
        before &= read.clean & written
    repaired = settled & ~clean
    out = Verdicts(
        clean=clean,
        trailing=np.zeros(rows, dtype=bool),
        trailing_calls=np.zeros(rows, dtype=np.int64),
        repaired=repaired,
        rejects=rejects,
    )
    if repaired.any():
        out.repaired_column = _rewritten(repaired, fixes)
        out.repairs = _combined(repairs, repaired)
    if first is not None and first.view is not None:
        # Its prompt as repaired here was read with the first candidate: those rows are
        # measured again as they came in.
        again = fixes[shape.prompt][1] if shape.prompt in fixes else np.zeros(rows, dtype=bool)
        out.view = _FirstConversations(first.view, again, table, fmt)
    return out


class _FirstConversations:
    """What measures a dataset type's settled rows for the profile, as the per-row path reads a
    row (`ShapedFormat.decode`: its prompt and first candidate as they came in): the view that
    read them so, but for the rows of `again`, whose prompt it read as repaired here; those are
    read again, alone (the view of the whole batch is not made twice)."""

    def __init__(self, view: Measurer, again: Mask, table: pa.Table, fmt: ShapedFormat) -> None:
        self.view, self.again, self.table, self.fmt = view, again, table, fmt

    def measures(self, rows: Mask, *, texts: bool = False) -> Measures | None:
        if texts:  # (tokens are counted from the batch: `profile_batch`)
            return None
        mine = self.view.measures(rows & ~self.again)
        other = rows & self.again
        if mine is None or not other.any():
            return mine
        table = self.table.take(indices(np.flatnonzero(other)))
        joined = first_conversation(table, self.fmt)
        if joined is None:
            return None
        inner = self.fmt.inner
        view = arrow_view(inner, joined, table.schema, inner.side(table))
        theirs = None if view is None else view.measures(np.ones(table.num_rows, dtype=bool))
        return None if theirs is None else mine.joined(theirs)


def _misfits(name: str, read: _Read, at: Counts, misfit: Counts, before: Mask) -> list[FastReject]:
    """The rows of `at` whose candidate `name`, held as one message, was repaired in Arrow into
    `misfit` messages (not one), rejected as the per-row path rejects them (`shapes.clean`:
    the repair's code decides, in words that say so): where the prompt and every candidate
    before it are clean (`before`: else the row's codes are more than this part's) and one
    code was repaired (else more than one decides; those rows stay the per-row path's)."""
    rows = np.zeros(len(before), dtype=bool)
    rows[at[misfit >= 0]] = True
    rows &= before
    if not rows.any():
        return []
    codes = np.zeros(len(before), dtype=np.int64)
    for fix in read.repairs:
        codes += fix.rows
    rows &= codes == 1
    left = np.zeros(len(before), dtype=np.int64)
    left[at] = misfit
    out = []
    for fix in read.repairs:
        mine = rows & fix.rows
        if mine.any():
            words = [
                f"{name}: its repair leaves {n} messages where the column holds one"
                for n in left[mine].tolist()
            ]
            occurrences = np.where(mine, fix.occurrences, 0)
            out.append(FastReject(fix.code, mine, occurrences, words))
    return out


def _held_as(table: pa.Table, path: str, column: pa.Array) -> str | None:
    """How a part repaired in Arrow is written back: "list" for a top-level column of lists
    of messages, "one" for one of single messages; None where it is not (nested in another
    column's structs, JSON text)."""
    if "." in path:
        return None
    kind = table.schema.field(path).type
    if kind == column.type:
        return "list"
    return "one" if pa.types.is_struct(kind) else None


def _candidates(
    prompt: pa.Array | None,
    read: _Read,
    at: npt.NDArray[np.int64],
    skip: npt.NDArray[np.int64],
    kind: pa.DataType,
) -> tuple[Mask, pa.Array, Counts]:
    """Of the rows `at` (some of those whose prompt + candidate was repaired in Arrow), those
    whose repair leaves the prompt as it was and the candidate what its column (of type
    `kind`) can hold: `kept`, per row of `at`; those rows' candidates as repaired, in that
    type; and per row of `at`, how many messages a repair that leaves the prompt as it was
    leaves where the column holds one message and that is not one (else -1)."""
    assert read.column is not None
    rank = np.cumsum(read.repaired) - 1  # each repaired row's place in `read.column`
    column = read.column.take(indices(rank[at]))
    skip = skip[at]
    everything, sizes, parent = flattened(column)
    place = np.arange(len(everything), dtype=np.int64) - (np.cumsum(sizes) - sizes)[parent]
    after = place >= skip[parent]  # the items each row's repair left after its prompt
    kept = sizes >= skip
    if prompt is not None:
        heads = everything.filter(pa.array(~after))
        kept &= _starts_with(heads, everything, sizes, prompt.take(indices(at)), skip)
    one = pa.types.is_struct(kind)
    items = everything.filter(pa.array(after))
    try:
        values = items.cast(kind if one else kind.value_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        values = None
    # A cast that loses a value (a field the candidate's column has no place for) leaves the
    # rows to the per-row path, which says why.
    none = np.full(len(at), -1, dtype=np.int64)
    if values is None or not values.cast(items.type).equals(items):
        return np.zeros(len(at), dtype=bool), pa.array([], kind), none
    left = np.maximum(sizes - skip, 0)
    if one:
        misfit = np.where(kept & (left != 1), left, -1)
        kept &= left == 1
        starts = np.cumsum(left) - left
        return kept, values.take(indices(starts[kept])), misfit
    tails = lists_of(pa.list_(values.type), left, values)
    return kept, tails.filter(pa.array(kept)).cast(kind), none


def _starts_with(
    heads: pa.Array, items: pa.Array, sizes: Counts, prompt: pa.Array, skip: Counts
) -> Mask:
    """Per row of a list column (its `items`, `sizes` per row), whether its first `skip[row]`
    items (`heads`, each row's in order) are the items of `prompt`'s row (of as many), exactly."""
    given = pc.list_flatten(prompt).cast(items.type)
    if heads.equals(given):
        return np.ones(len(sizes), dtype=bool)
    # A repair reached into the prompt somewhere: find where, a row at a time (they are few).
    starts, begins = np.cumsum(sizes) - sizes, np.cumsum(skip) - skip
    return np.array(
        [
            sizes[row] >= skip[row]
            and items.slice(int(starts[row]), int(skip[row])).equals(
                given.slice(int(begins[row]), int(skip[row]))
            )
            for row in range(len(sizes))
        ],
        dtype=bool,
    )


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
