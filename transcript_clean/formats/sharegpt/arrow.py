"""The ShareGPT format's Arrow side: its turns, flattened per batch.

The view reads a row when every turn is one the decoder reads, every call is well formed and
every message with calls is followed by its observations or a human turn. Its possible codes are
then empty assistant turns (R1), orphan observations (R3), a second assistant text turn (R4),
calls a human turn leaves unanswered (R5), calls pending at the end and no assistant turn; it
drops, merges or cuts turns as the per-row path does, and rejects rows with a turn the decoder
cannot read with the decoder's own error. Calls with arguments that are not an object (R2) leave
their rows to the per-row path. Tags are read through the format's `tags`. `function_call` values
are parsed (in Python: they are a small share of the turns), as is the value of an observation
that answers several calls at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Final

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    NOT_SPACE,
    Counts,
    Mask,
    any_of,
    as_mask,
    count,
    field_type,
    first_flagged,
    flatten,
    flattened,
    indices,
    is_text,
    last_of_rows,
    neighbours,
    rows_with,
    shift,
    text_lengths,
)
from transcript_clean.fastpath.base import (
    ArrowRepair,
    ArrowView,
    FastReject,
    Subset,
    agrees,
    text_or_absent,
    with_field,
)
from transcript_clean.fastpath.measures import Measures, RowSums, column_array, turn_classes
from transcript_clean.formats.base import REASONING_KEYS, DecodeError, Format, join_texts
from transcript_clean.formats.sharegpt.codec import ShareGPTFormat, read_calls, split_list
from transcript_clean.rules import (
    CONSECUTIVE_ASSISTANT,
    DUPLICATE_CALL_ID,
    EMPTY_ASSISTANT_TURN,
    INVALID_TOOL_ARGUMENTS,
    MALFORMED_ROW,
    NO_ASSISTANT_TURN,
    ORPHAN_TOOL_RESULT,
    TRAILING_TOOL_CALL,
    UNANSWERED_TOOL_CALL,
    UNKNOWN_ROLE,
)

__all__ = ["REPAIRS", "ShareGPTView", "sharegpt_measures", "sharegpt_view"]

REPAIRS: Final = frozenset(
    {EMPTY_ASSISTANT_TURN, ORPHAN_TOOL_RESULT, CONSECUTIVE_ASSISTANT, UNANSWERED_TOOL_CALL}
)
"""The codes whose repair this format's Arrow side does itself: it drops or merges turns, and
cuts before a message whose calls a human turn leaves unanswered."""

# The codes a row this view reads never has: invalid calls, and consecutive turns it cannot
# merge, leave their rows to the per-row path. ShareGPT holds no call ids: the decoder mints one
# per call, so none is ever repeated.
_NEVER = (DUPLICATE_CALL_ID, INVALID_TOOL_ARGUMENTS)


def sharegpt_view(
    fmt: Format, array: pa.Array, schema: pa.Schema | None = None
) -> ShareGPTView | None:
    """The view of a ShareGPT conversation column: per row, whether it is read, and which of
    empty assistant turns (R1), orphan observations (R3), a second assistant text turn (R4),
    calls pending at the end, or no assistant turn it may have; rows with a turn the decoder
    cannot read may be rejected with the decoder's own error. None when the column or the
    row's `system` column has a shape this does not read."""
    tags: dict[str, str] = dict(getattr(fmt, "tags", {}))
    if not tags or not _sharegpt_shape(array.type):
        return None
    if not text_or_absent(schema, "system"):
        return None  # the decoder would reject what is not text, row by row
    rows = len(array)
    bad, turns, parent = flatten(array)
    n = len(turns)
    if n == 0:  # every row is null or empty, so not read here
        nothing = np.zeros(0, dtype=bool)
        return ShareGPTView(fmt, array, turns, parent, bad, nothing, {}, nothing, {})

    tag = pc.struct_field(turns, "from")
    value = pc.struct_field(turns, "value")
    role = partial(_tagged, tag, tags)
    is_user, is_gpt, is_system = role("user"), role("assistant"), role("system")
    is_call, is_obs = role("function_call"), role("observation")
    flag = ~(is_user | is_gpt | is_system | is_call | is_obs)  # an unknown tag, or no tag
    flag |= as_mask(turns.is_null()) | as_mask(value.is_null())
    unreadable = flag.copy()  # turns the decoder stops at

    same_prev, same_next = neighbours(parent)
    said_turn = is_gpt | is_call  # a turn of an assistant message
    # A function_call right after a gpt or function_call turn is the same assistant message.
    goes_on = is_call & shift(said_turn) & same_prev
    starts = said_turn & ~goes_on
    next_goes_on = np.zeros(n, dtype=bool)
    next_goes_on[:-1] = goes_on[1:]
    ends = said_turn & ~next_goes_on  # the last turn of each assistant message

    # Consecutive assistant messages. R4 is done here for a text turn right after another, when
    # neither makes calls and no third one follows: the second is dropped, and its text appended
    # to the first's unless the two say the same.
    second = is_gpt & shift(said_turn) & same_prev
    next_second = np.zeros(n, dtype=bool)
    next_second[:-1] = second[1:]
    merged = second & shift(is_gpt) & ~next_goes_on & ~shift(second) & ~next_second
    merged = agrees(turns, ("from", "value"), merged)  # R4 merges turns whose `loss_weight` agree
    flag |= second & ~merged

    # Empty assistant turns: text that is blank, with no call after it.
    empty = np.zeros(n, dtype=bool)
    gpt = np.flatnonzero(is_gpt & ~next_goes_on)
    if len(gpt):
        said = as_mask(pc.match_substring_regex(value.take(indices(gpt)), NOT_SPACE))
        empty[gpt[~said]] = True

    # The calls of each assistant message, parsed; a value that is not calls is malformed.
    calls = np.zeros(n, dtype=np.int64)
    call_turns = np.flatnonzero(is_call & ~(bad | rows_with(flag, parent, rows))[parent])
    call_row: list[int] = []  # each call's row, tool name and arguments as JSON text
    call_name: list[str] = []
    call_arguments: list[str] = []
    if len(call_turns):
        texts = value.take(indices(call_turns)).to_pylist()
        for at, text in zip(call_turns.tolist(), texts, strict=True):
            found = _read_calls(text)
            if found is None:
                flag[at] = True
                continue
            calls[at] = len(found)
            call_row.extend([int(parent[at])] * len(found))
            for name, arguments in found:
                call_name.append(name)
                call_arguments.append(arguments)
    message = np.cumsum(starts) - 1
    per_message = np.bincount(message[said_turn], weights=calls[said_turn]).astype(np.int64)
    calling_end = np.zeros(n, dtype=bool)
    calling_end[ends] = per_message[message[ends]] > 0
    pending = np.zeros(n, dtype=np.int64)
    pending[ends] = per_message[message[ends]]

    # Observation runs: right after a message with calls, one result per call, or one value
    # holding a JSON list of one item per call; anything else is orphan or unanswered.
    run_start = is_obs & ~(shift(is_obs) & same_prev)
    run_of = np.cumsum(run_start) - 1
    run_starts = np.flatnonzero(run_start)
    run_len = np.bincount(run_of[is_obs], minlength=len(run_starts))
    before = np.maximum(run_starts - 1, 0)
    answers = np.where(same_prev[run_starts] & calling_end[before], pending[before], 0)
    fits = run_len == answers
    split = np.flatnonzero((run_len == 1) & (answers >= 2))
    if len(split):
        texts = value.take(indices(run_starts[split])).to_pylist()
        fits[split] = [
            split_list(t, int(k)) is not None for t, k in zip(texts, answers[split], strict=True)
        ]
    # Orphans: a run that answers nothing, or the turns of a run past one per call (results
    # pair with calls by position). A whole run between two assistant turns is left alone:
    # dropped, it leaves them consecutive, which the per-row path merges, with a second code.
    run_ends = run_starts + run_len - 1
    after = np.minimum(run_ends + 1, n - 1)
    between = same_prev[run_starts] & said_turn[before] & same_next[run_ends] & said_turn[after]
    orphan_run = (answers == 0) & ~between
    extra_run = (answers >= 1) & (run_len > answers)
    flag[run_starts[~fits & ~orphan_run & ~extra_run]] = True
    obs = np.flatnonzero(is_obs)
    place = obs - run_starts[run_of[obs]]  # each observation's place in its run
    orphan = np.zeros(n, dtype=bool)
    orphan[obs] = orphan_run[run_of[obs]] | (
        extra_run[run_of[obs]] & (place >= answers[run_of[obs]])
    )
    # R3 drops an orphan only where that cannot change a later turn (issue 27, item 4): the
    # view settles the empty ones, and leaves one that says something (a repeat, or a result a
    # later turn may quote) to the per-row path, which tells them apart.
    if orphan.any():
        lost = np.flatnonzero(orphan)
        flag[lost] |= as_mask(pc.match_substring_regex(value.take(indices(lost)), NOT_SPACE))
    next_obs = np.zeros(n, dtype=bool)
    next_obs[:-1] = is_obs[1:]
    next_user = np.zeros(n, dtype=bool)
    next_user[:-1] = is_user[1:]
    # A human turn right after a message with calls closes its window with no results: all its
    # calls are unanswered (R5: a cut before the message). After anything else (a system turn
    # keeps them pending) the per-row path is left to work it out.
    unanswered = calling_end & same_next & next_user
    flag |= calling_end & same_next & ~next_obs & ~next_user
    cut_from = np.zeros(n, dtype=bool)  # the first turn of each message with unanswered calls
    cut_from[np.flatnonzero(starts)[message[unanswered]]] = True
    before_cut = np.arange(n) < first_flagged(cut_from, parent, rows)[parent]
    cut = _Cut(
        cut_from,
        cuttable=count(starts & before_cut, parent, rows) > 0,
        calls=count(unanswered, parent, rows, weights=pending),
    )

    # Turns it drops (R1), whose results it drops (R3) or that it merges into the turn before
    # (R4), in rows that have no other code.
    droppable = {
        EMPTY_ASSISTANT_TURN: empty,
        ORPHAN_TOOL_RESULT: orphan,
        CONSECUTIVE_ASSISTANT: merged,
    }
    bad |= rows_with(flag, parent, rows)
    trailing_calls = last_of_rows(pending, parent, rows)
    nothing = np.zeros(rows, dtype=bool)
    checks = dict.fromkeys(_NEVER, nothing)
    checks.update((code, rows_with(turns_, parent, rows)) for code, turns_ in droppable.items())
    checks[TRAILING_TOOL_CALL] = trailing_calls > 0
    checks[NO_ASSISTANT_TURN] = count(starts, parent, rows) == 0
    unread = rows_with(unreadable, parent, rows)
    checks[MALFORMED_ROW] = checks[UNKNOWN_ROLE] = unread
    checks[UNANSWERED_TOOL_CALL] = rows_with(unanswered, parent, rows)
    view = ShareGPTView(
        fmt, array, turns, parent, bad, unreadable, droppable, trailing_calls, checks, cut
    )
    # The declared-tools checks read the calls (`fastpath.declared`).
    view.calls = (
        np.array(call_row, dtype=np.int64),
        pa.array(call_name, pa.string()),
        pa.array(call_arguments, pa.string()),
    )
    return view


@dataclass(slots=True)
class _Cut:
    """What R5's cut needs: the first turn of each message whose calls a human turn leaves
    unanswered, the rows with an assistant message before the first of them, and per row the
    calls left unanswered."""

    first_turns: Mask
    cuttable: Mask
    calls: Counts


def _tagged(tag: pa.Array, tags: dict[str, str], role: str) -> Mask:
    """The turns whose tag (`from`) is one of `tags` for `role` (the format's tag -> role)."""
    return as_mask(pc.is_in(tag, pa.array([t for t, r in tags.items() if r == role], tag.type)))


class ShareGPTView(ArrowView):
    """What the scan of a ShareGPT column found. It drops or merges the turns of `REPAIRS` in
    rows with no other code, and rejects rows with a turn the decoder cannot read."""

    repairs = REPAIRS
    rejects = frozenset({MALFORMED_ROW, UNKNOWN_ROLE})

    def __init__(
        self,
        fmt: Format,
        array: pa.Array,
        turns: pa.Array,
        parent: npt.NDArray[np.int64],
        unread: Mask,
        unreadable: Mask,
        droppable: dict[str, Mask],
        trailing_calls: Counts,
        checks: dict[str, Mask],
        cut: _Cut | None = None,
    ) -> None:
        rows = len(array)
        if not len(trailing_calls):
            trailing_calls = np.zeros(rows, dtype=np.int64)
        super().__init__(rows, unread, checks, trailing_calls)
        self.fmt = fmt
        self.array = array
        self.turns = turns
        self.parent = parent
        self.unreadable = unreadable
        """Turns the decoder stops at."""
        self.droppable = droppable
        self.cut = cut

    def again(self, column: pa.Array, rows: Counts) -> ShareGPTView | None:
        return sharegpt_view(self.fmt, column)

    def reject(self, rows: dict[str, Mask]) -> list[FastReject]:
        if not isinstance(self.fmt, ShareGPTFormat):
            return []
        return _reject_unreadable(self.fmt, self.turns, self.parent, self.unreadable, rows)

    def repair(self, rows: dict[str, Mask]) -> ArrowRepair:
        droppable, alone = dict(self.droppable), dict(rows)
        if UNANSWERED_TOOL_CALL in alone:
            # Everything from the first such message on; a row the cut would leave with no
            # assistant turn goes to the per-row path, which words its rejection.
            assert self.cut is not None
            alone[UNANSWERED_TOOL_CALL] &= self.cut.cuttable
            first = first_flagged(self.cut.first_turns, self.parent, self.rows)
            droppable[UNANSWERED_TOOL_CALL] = np.arange(len(self.parent)) >= first[self.parent]
        fixed = _drop_turns(self.array, self.turns, self.parent, droppable, alone)
        if UNANSWERED_TOOL_CALL in alone:
            assert self.cut is not None
            fixed.occurrences[UNANSWERED_TOOL_CALL] = self.cut.calls
        return fixed


def _reject_unreadable(
    fmt: ShareGPTFormat,
    turns: pa.Array,
    parent: npt.NDArray[np.int64],
    unreadable: Mask,
    rows: dict[str, Mask],
) -> list[FastReject]:
    """Rows with a turn the decoder cannot read (no tag or an unknown one, no value), rejected
    as the per-row path rejects them, for the codes of `rows` (per code, the rows it may
    reject). The decoder reads every turn, in order, before anything else, so a row's error is
    its first such turn's: the decoder's own `read_turn` says what it is, for that one turn."""
    count_rows = len(next(iter(rows.values())))
    first = first_flagged(unreadable, parent, count_rows)
    hit = np.flatnonzero(first < len(parent))
    at = first[hit]
    place = at - np.searchsorted(parent, hit)  # the turn's index in its row
    found = {code: (np.zeros(count_rows, dtype=bool), list[str]()) for code in rows}
    items = turns.take(indices(at)).to_pylist()
    for row, i, item in zip(hit.tolist(), place.tolist(), items, strict=True):
        try:
            fmt.read_turn(item, f"{fmt.column}[{i}]")
        except DecodeError as err:
            if err.code in found and rows[err.code][row]:
                found[err.code][0][row] = True
                found[err.code][1].append(str(err))
    return [
        FastReject(code, rejected, rejected.astype(np.int64), messages)
        for code, (rejected, messages) in found.items()
        if rejected.any()
    ]


def _merged_texts(turns: pa.Array, merged: Mask) -> dict[int, str]:
    """The new text of each turn a merged one follows (R4), where the two say different things."""
    if not merged.any():
        return {}
    value = pc.struct_field(turns, "value")
    seconds = np.flatnonzero(merged)
    firsts = value.take(indices(seconds - 1)).to_pylist()
    thens = value.take(indices(seconds)).to_pylist()
    return {
        i - 1: join_texts([first, then])
        for i, first, then in zip(seconds.tolist(), firsts, thens, strict=True)
        if then != first
    }


def _drop_turns(
    array: pa.Array,
    turns: pa.Array,
    parent: npt.NDArray[np.int64],
    droppable: dict[str, Mask],
    alone: dict[str, Mask],
) -> ArrowRepair:
    """R1, R3 and R4 for the rows of `alone` (per code, rows to repair for it): drop their empty
    assistant turns, orphan observations, or assistant turns to merge into the one before
    (appending a merged turn's text to the turn before), writing the other turns back
    unchanged, as the per-row path would."""
    rows = len(array)
    drop = np.zeros(len(parent), dtype=bool)
    for code, rows_ in alone.items():
        drop |= droppable[code] & rows_[parent]
    chosen = Subset.of(np.flatnonzero(any_of(alone.values(), rows)), parent, rows)
    values = turns.take(indices(chosen.elements))
    merged = alone.get(CONSECUTIVE_ASSISTANT)
    if merged is not None:
        texts = _merged_texts(turns, droppable[CONSECUTIVE_ASSISTANT] & merged[parent])
        values = with_field(values, "value", chosen.renumbered(texts))
    fixed = chosen.column(array.type, values, drop)
    occurrences = {code: count(droppable[code], parent, rows) for code in alone}
    return ArrowRepair(chosen.rows, fixed, occurrences)


def _sharegpt_shape(type_: pa.DataType) -> bool:
    """Turns as structs with text `from` and `value`, and no reasoning field: the shape the
    fast path reads."""
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    turn = type_.value_type
    return (
        pa.types.is_struct(turn)
        and is_text(field_type(turn, "from"))
        and is_text(field_type(turn, "value"))
        # A turn's reasoning is the per-row path's: a turn with only reasoning is not empty.
        and not any(field_type(turn, key) is not None for key in REASONING_KEYS)
    )


def _read_calls(text: str) -> list[tuple[str, str]] | None:
    """The well-formed calls a `function_call` value holds (a name, and arguments that are a
    JSON object), each as its name and its arguments as JSON text (as written, or written
    anew from the object); None when it holds anything else (the decoder would call it
    malformed, or the calls invalid) or arguments JSON cannot write back (the per-row path's)."""
    calls = read_calls(text)
    if not calls:
        return None
    out = []
    for name, arguments, raw in calls:
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return None
        if raw is None:
            try:
                raw = orjson.dumps(arguments).decode()
            except (TypeError, orjson.JSONEncodeError):
                return None
        out.append((name, raw))
    return out


# ---------------------------------------------------------------------------------------------
# the profile's measures (`transcript_clean.profile`)


def sharegpt_measures(
    fmt: Format, table: pa.Table, rows: Mask, *, texts: bool = False
) -> tuple[Measures, Mask]:
    """The profile's measures of the rows of `rows` (rows the view reads as the decoder would)
    that hold no call or observation, computed in Arrow as `measure_transcripts` makes them of
    their decoded transcripts: each turn one message, and a `system` column that says anything
    one more. Returns them and those rows; the others are the caller's to decode."""
    tags: dict[str, str] = dict(getattr(fmt, "tags", {}))
    array = column_array(table, fmt.column)
    turns, sizes, parent = flattened(array)
    tag = pc.struct_field(turns, "from")
    value = pc.struct_field(turns, "value")
    role = partial(_tagged, tag, tags)
    is_user, is_gpt, is_system = role("user"), role("assistant"), role("system")
    tools = count(role("function_call") | role("observation"), parent, len(array)) > 0
    mine = rows & ~tools
    keep = mine[parent]
    per_row = RowSums(sizes, mine)

    system_chars = np.zeros(len(array), dtype=np.int64)
    if "system" in table.column_names:  # the decoder reads a system column that says anything
        system_chars = text_lengths(column_array(table, "system"))
    prompt = system_chars[mine]
    lengths = text_lengths(value)
    measured = {
        "messages": sizes[mine] + (prompt > 0),
        "user_turns": per_row(is_user),
        "assistant_turns": per_row(is_gpt),
        "tool_calls": np.zeros(int(mine.sum()), dtype=np.int64),
        "chars": per_row(lengths) + prompt,
        "system": ((per_row(is_system) + prompt) > 0).astype(np.int64),
    }
    at = np.flatnonzero(is_gpt & keep)
    classes = turn_classes(value, (), at, np.zeros(len(value), dtype=np.int64))
    measures = Measures(measured, lengths[at], classes, {})
    if texts:
        row = np.cumsum(mine) - 1  # a row's position among the measured rows
        turn = np.where(is_gpt & keep, np.cumsum(is_gpt & keep) - 1, -1)
        kept = np.flatnonzero(keep)
        pieces = value.take(indices(kept)).to_pylist()
        measures.texts = pieces
        measures.text_row = row[parent[kept]]
        measures.text_turn = turn[kept]
        if "system" in table.column_names:
            said = np.flatnonzero(mine & (system_chars > 0))
            measures.texts += table.column("system").take(indices(said)).to_pylist()
            measures.text_row = np.concatenate([measures.text_row, row[said]])
            measures.text_turn = np.concatenate([measures.text_turn, np.full(len(said), -1)])
    return measures, mine
