"""The fast path for the ShareGPT format: which rows are canonical, decided on the flattened turns.

A row is settled here when it is clean; when (for a config that keeps them) its only code is
calls pending at the end; when its only code is empty assistant turns (R1), orphan observations
(R3) or a second assistant text turn (R4), which are dropped or merged here where the config
repairs them; or when the config rejects it for having no assistant turn, or a turn the decoder
cannot read (its own error is the message). Every other row takes the per-row path. Tags are
read through the format's `tags`. `function_call` values are parsed (in Python: they are a small
share of the turns), as is the value of an observation that answers several calls at once.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.fastpath.base import (
    NOT_SPACE,
    FastReject,
    FastRepair,
    Mask,
    Verdicts,
    as_mask,
    count,
    drop_elements,
    field_type,
    first_flagged,
    flatten,
    indices,
    is_text,
    neighbours,
    pending_verdicts,
    rows_with,
    shift,
    text_or_absent,
    with_field,
)
from transcript_clean.formats.base import DecodeError, Format, join_texts
from transcript_clean.formats.sharegpt import ShareGPTFormat, read_calls, split_list
from transcript_clean.policy import (
    CONSECUTIVE_ASSISTANT,
    EMPTY_ASSISTANT_TURN,
    MALFORMED_ROW,
    NO_ASSISTANT_TURN,
    ORPHAN_TOOL_RESULT,
    UNKNOWN_ROLE,
)

__all__ = ["sharegpt_verdicts"]


def sharegpt_verdicts(
    fmt: Format,
    array: pa.Array,
    *,
    keep_trailing: bool = False,
    repair: Collection[str] = (),
    reject: Collection[str] = (),
    schema: pa.Schema | None = None,
) -> Verdicts | None:
    """The clean rows (and, with `keep_trailing`, those whose only code is calls pending at the
    end) of a ShareGPT conversation column; the rows whose only code is empty assistant turns
    (R1), orphan observations (R3) or consecutive assistant turns (R4), repaired, for the codes
    in `repair`; and the rows rejected for the codes in `reject`: no assistant turn and nothing
    else to say, or a turn the decoder cannot read (`malformed_row`, `unknown_role`). None when
    the column or the row's `system` column has a shape this does not read."""
    tags: dict[str, str] = dict(getattr(fmt, "tags", {}))
    if not tags or not _sharegpt_shape(array.type):
        return None
    if not text_or_absent(schema, "system"):
        return None  # the decoder would reject what is not text, row by row
    rows = len(array)
    bad, turns, parent = flatten(array)
    n = len(turns)
    if n == 0:  # every row is null or empty, so bad
        return pending_verdicts(bad, parent, np.zeros(0, dtype=np.int64), keep_trailing=False)

    tag = pc.struct_field(turns, "from")
    value = pc.struct_field(turns, "value")

    def role(name: str) -> Mask:
        return as_mask(pc.is_in(tag, pa.array([t for t, r in tags.items() if r == name], tag.type)))

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
    if len(call_turns):
        texts = value.take(indices(call_turns)).to_pylist()
        for at, text in zip(call_turns.tolist(), texts, strict=True):
            found = _count_calls(text)
            if found is None:
                flag[at] = True
            else:
                calls[at] = found
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
    next_obs = np.zeros(n, dtype=bool)
    next_obs[:-1] = is_obs[1:]
    flag |= calling_end & same_next & ~next_obs  # unanswered (or a system turn first)

    # Turns the config drops (R1), whose results it drops (R3) or that it merges into the turn
    # before (R4), which this can drop too.
    droppable = {
        EMPTY_ASSISTANT_TURN: empty,
        ORPHAN_TOOL_RESULT: orphan,
        CONSECUTIVE_ASSISTANT: merged,
    }
    for code, turns_ in droppable.items():
        if code not in repair:
            flag |= turns_
    droppable = {code: turns_ for code, turns_ in droppable.items() if code in repair}
    bad |= rows_with(flag, parent, rows)
    with_code = {code: rows_with(turns_, parent, rows) for code, turns_ in droppable.items()}
    coded = np.logical_or.reduce([np.zeros(rows, dtype=bool), *with_code.values()])
    lacking = count(starts, parent, rows) == 0  # no_assistant_turn
    verdicts = pending_verdicts(bad | lacking | coded, parent, pending, keep_trailing=keep_trailing)
    alone = lacking & ~bad & ~coded
    if NO_ASSISTANT_TURN in reject and alone.any():
        why = ["the transcript has no assistant turn"] * int(alone.sum())
        verdicts.rejects.append(FastReject(NO_ASSISTANT_TURN, alone, alone.astype(np.int64), why))
    bad |= lacking
    unread = [code for code in (MALFORMED_ROW, UNKNOWN_ROLE) if code in reject]
    if unread and unreadable.any() and isinstance(fmt, ShareGPTFormat):
        _reject_unreadable(fmt, turns, parent, unreadable, unread, verdicts)
    if (coded & ~bad).any():
        _drop_turns(fmt, array, turns, parent, droppable, with_code, ~bad, verdicts)
    return verdicts


def _reject_unreadable(
    fmt: ShareGPTFormat,
    turns: pa.Array,
    parent: npt.NDArray[np.int64],
    unreadable: Mask,
    codes: list[str],
    verdicts: Verdicts,
) -> None:
    """Rows with a turn the decoder cannot read (no tag or an unknown one, no value), rejected
    as the per-row path rejects them, for the codes in `codes`. The decoder reads every turn, in
    order, before anything else, so a row's error is its first such turn's: the decoder's own
    `read_turn` says what it is, for that one turn."""
    rows = len(verdicts.clean)
    first = first_flagged(unreadable, parent, rows)
    hit = np.flatnonzero(first < len(parent))
    at = first[hit]
    place = at - np.searchsorted(parent, hit)  # the turn's index in its row
    found: dict[str, tuple[Mask, list[str]]] = {c: (np.zeros(rows, dtype=bool), []) for c in codes}
    items = turns.take(indices(at)).to_pylist()
    for row, i, item in zip(hit.tolist(), place.tolist(), items, strict=True):
        try:
            fmt.read_turn(item, f"{fmt.column}[{i}]")
        except DecodeError as err:
            if err.code in found:
                found[err.code][0][row] = True
                found[err.code][1].append(str(err))
    for code, (rejected, messages) in found.items():
        if rejected.any():
            verdicts.rejects.append(FastReject(code, rejected, rejected.astype(np.int64), messages))


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
    fmt: Format,
    array: pa.Array,
    turns: pa.Array,
    parent: npt.NDArray[np.int64],
    droppable: dict[str, Mask],
    with_code: dict[str, Mask],
    unflagged: Mask,
    verdicts: Verdicts,
) -> None:
    """R1, R3 and R4 for the rows whose only flagged turns are empty assistant ones, orphan
    observations, or assistant turns to merge into the one before (one code a row): drop those
    (appending a merged turn's text to the turn before), and settle the rows the scan of what
    is left finds clean, as the per-row path would (it writes the other turns back
    unchanged). Another code the drop reveals, or one the row had besides (calls pending at the
    end), leaves the row to the per-row path."""
    rows = len(array)
    alone: dict[str, Mask] = {}
    drop = np.zeros(len(parent), dtype=bool)
    for code, rows_ in with_code.items():
        alone[code] = rows_ & unflagged
        for other, other_rows in with_code.items():
            if other != code:
                alone[code] &= ~other_rows
        drop |= droppable[code] & alone[code][parent]
    candidates = np.flatnonzero(np.logical_or.reduce(list(alone.values())))
    if not len(candidates):
        return
    row_at = np.full(rows, -1, dtype=np.int64)
    row_at[candidates] = np.arange(len(candidates), dtype=np.int64)
    chosen = np.flatnonzero(row_at[parent] >= 0)
    values = turns.take(indices(chosen))
    merged = droppable.get(CONSECUTIVE_ASSISTANT)
    texts = (
        {}
        if merged is None
        else _merged_texts(turns, merged & alone[CONSECUTIVE_ASSISTANT][parent])
    )
    if texts:
        at = np.full(len(parent), -1, dtype=np.int64)
        at[chosen] = np.arange(len(chosen), dtype=np.int64)
        mine = {int(at[i]): text for i, text in texts.items() if at[i] >= 0}
        values = with_field(values, "value", mine)
    fixed = drop_elements(array.type, len(candidates), values, drop[chosen], row_at[parent[chosen]])
    again = sharegpt_verdicts(fmt, fixed)
    assert again is not None  # the same type as `array`
    ok = np.zeros(rows, dtype=bool)
    ok[candidates[again.clean]] = True
    for code, rows_ in alone.items():
        if (rows_ & ok).any():
            action = "dropped" if code == EMPTY_ASSISTANT_TURN else "repaired"
            occurrences = count(droppable[code], parent, rows)
            verdicts.repairs.append(FastRepair(code, action, rows_ & ok, occurrences))
    if ok.any():
        verdicts.repaired |= ok
        verdicts.repaired_column = fixed.filter(pa.array(again.clean))


def _sharegpt_shape(type_: pa.DataType) -> bool:
    """Turns as structs with text `from` and `value`: the shape the fast path reads."""
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    turn = type_.value_type
    return (
        pa.types.is_struct(turn)
        and is_text(field_type(turn, "from"))
        and is_text(field_type(turn, "value"))
    )


def _count_calls(text: str) -> int | None:
    """How many well-formed calls a `function_call` value holds (a name, and arguments that are
    a JSON object); None when it holds anything else (the decoder would call it malformed, or
    the calls invalid)."""
    calls = read_calls(text)
    if not calls:
        return None
    for name, arguments, _ in calls:
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return None
    return len(calls)
