"""The Arrow-native fast path: which rows are already canonical, decided per batch, not per row.

`fast_verdicts` looks at the flattened messages of a batch with pyarrow.compute and NumPy and
settles the rows it can prove: clean rows (kept unchanged with no code at all), rows whose only
code is calls pending at the end (when the config keeps them), and rows with a single kind of
defect the config repairs and Arrow can repair as the per-row path would: empty assistant turns
(R1), calls with invalid arguments (R2), orphan results (R3) and consecutive assistant text
messages (R4). Those rows never become Python objects; every other row takes the per-row path
(`clean_mask` is the clean part alone). The verdicts are conservative: a row the fast path
cannot prove (an unusual but valid shape, say) is merely left to the per-row path, so the two
paths always agree.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.formats.base import Format, join_texts, loads
from transcript_clean.policy import (
    CONSECUTIVE_ASSISTANT,
    EMPTY_ASSISTANT_TURN,
    INVALID_TOOL_ARGUMENTS,
    ORPHAN_TOOL_RESULT,
)
from transcript_clean.transcript import (
    TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER,
    invalid_arguments_feedback,
)

__all__ = ["FAST_REPAIRS", "FastRepair", "Verdicts", "clean_mask", "fast_verdicts"]

Mask = npt.NDArray[np.bool_]
Counts = npt.NDArray[np.int64]

FAST_REPAIRS = frozenset(
    {EMPTY_ASSISTANT_TURN, INVALID_TOOL_ARGUMENTS, ORPHAN_TOOL_RESULT, CONSECUTIVE_ASSISTANT}
)
"""The codes whose repair the fast path can do itself."""

# A character that `str.strip()` keeps: the text holds something (SPEC section 2's blank test).
# The class lists every character for which Python's `str.isspace()` is true.
_NOT_SPACE = (
    "[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
    "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]"
)


# A flat JSON object (values strings, numbers, true, false or null), in RFC 8259's grammar:
# text it matches is one `json.loads` reads as a dict, so most arguments need no parsing.
_WS = r"[ \t\n\r]*"
_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_MEMBER = f"{_WS}{_STRING}{_WS}:{_WS}(?:{_STRING}|{_NUMBER}|true|false|null){_WS}"
_FLAT_OBJECT = f"^{_WS}\\{{(?:{_MEMBER}(?:,{_MEMBER})*|{_WS})\\}}{_WS}$"


@dataclass(slots=True, frozen=True)
class FastRepair:
    """The rows the fast path repaired for one code, as the stats count them."""

    code: str
    action: str
    """As the stats name it: `dropped` for empty turns, `repaired` for the rest."""
    rows: Mask
    occurrences: Counts
    """Per row, the code's occurrences (turns dropped, calls answered, results dropped...)."""


@dataclass(slots=True)
class Verdicts:
    """What the fast path decided for each row of a batch (the rest take the per-row path)."""

    clean: Mask
    """Canonical, with no code: kept as it is."""
    trailing: Mask
    """Canonical but for calls pending at the very end: kept as it is, as `trailing_tool_call`."""
    trailing_calls: Counts
    """Per row, the pending calls of that last turn (one per id)."""
    repaired: Mask
    """Canonical once one kind of defect is repaired here: kept as `repaired_column` holds it."""
    repairs: list[FastRepair] = field(default_factory=list)
    repaired_column: pa.Array | None = None
    """The repaired rows' conversations, in order, as they are written."""

    @property
    def handled(self) -> Mask:
        return self.clean | self.trailing | self.repaired


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
) -> Verdicts | None:
    """The rows the fast path settles: always the clean ones; with `keep_trailing`, those whose
    only code is calls pending at the end (for a config that keeps them); and those whose only
    code is one of `repair` (codes of `FAST_REPAIRS` the config repairs). None when this format
    or column shape has no fast path."""
    if fmt.name != "openai":
        return None
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not _openai_shape(array.type):
        return None
    rows = len(array)
    scan = _scan(array)
    kinds = scan.kinds()
    plain = ~scan.bad & ~np.logical_or.reduce(list(kinds.values()))
    verdicts = Verdicts(
        clean=plain & ~scan.trailing,
        trailing=plain & scan.trailing if keep_trailing else np.zeros(rows, dtype=bool),
        trailing_calls=scan.trailing_calls,
        repaired=np.zeros(rows, dtype=bool),
    )
    # Rows with one kind of defect to repair. Empty turns go first (R1), and the per-row path
    # checks what is left: any row with one qualifies, and the scan of the repaired row decides.
    # The other repairs are taken alone, in rows with nothing else to say.
    wanted = {code: rows_ for code, rows_ in kinds.items() if code in repair and rows_.any()}
    if not wanted:
        return verdicts
    others = ~scan.bad & ~scan.trailing
    alone: dict[str, Mask] = {}
    for code, rows_ in wanted.items():
        if code != EMPTY_ASSISTANT_TURN:
            rows_ = rows_ & others
            for other, other_rows in kinds.items():
                if other != code:
                    rows_ = rows_ & ~other_rows
        alone[code] = rows_
    subset = np.flatnonzero(np.logical_or.reduce(list(alone.values())))
    fixed, counts = _repair(array.type, scan, alone, subset)

    # R2 leaves nothing to check (the calls stay invalid, and R6 lets that code pass); the rows
    # whose messages were dropped or merged are scanned again.
    accepted = dict(alone)
    again_rows = np.zeros(rows, dtype=bool)
    for code in (EMPTY_ASSISTANT_TURN, ORPHAN_TOOL_RESULT, CONSECUTIVE_ASSISTANT):
        if code in alone:
            again_rows |= alone[code]
    if again_rows.any():
        within = np.flatnonzero(again_rows[subset])
        again = _scan(fixed.take(_indices(within)))
        fine = ~again.bad & ~again.trailing & ~np.logical_or.reduce(list(again.kinds().values()))
        ok = np.zeros(rows, dtype=bool)
        ok[subset[within[fine]]] = True
        for code in accepted:
            if code != INVALID_TOOL_ARGUMENTS:
                accepted[code] = accepted[code] & ok
    for code, rows_ in accepted.items():
        if rows_.any():
            action = "dropped" if code == EMPTY_ASSISTANT_TURN else "repaired"
            verdicts.repairs.append(FastRepair(code, action, rows_, counts[code]))
            verdicts.repaired |= rows_
    verdicts.repaired_column = fixed.filter(pa.array(verdicts.repaired[subset]))
    return verdicts


def _field_type(struct: pa.DataType, name: str) -> pa.DataType | None:
    index = struct.get_field_index(name)
    return None if index < 0 else struct.field(index).type


def _is_text(type_: pa.DataType | None) -> bool:
    return type_ is not None and (pa.types.is_string(type_) or pa.types.is_large_string(type_))


def _openai_shape(type_: pa.DataType) -> bool:
    """Messages as plain-text OpenAI structs: the shape the fast path reads."""
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    message = type_.value_type
    if not pa.types.is_struct(message):
        return False
    if not _is_text(_field_type(message, "role")) or not _is_text(_field_type(message, "content")):
        return False
    for name in ("tool_call_id", "reasoning_content"):
        kind = _field_type(message, name)
        if kind is not None and not _is_text(kind):
            return False
    calls = _field_type(message, "tool_calls")
    if calls is None:
        return True
    if not pa.types.is_list(calls) or not pa.types.is_struct(calls.value_type):
        return False
    function = _field_type(calls.value_type, "function")
    return (
        _is_text(_field_type(calls.value_type, "id"))
        and function is not None
        and pa.types.is_struct(function)
        and _is_text(_field_type(function, "name"))
        and _field_type(function, "arguments") is not None
    )


def _np(array: pa.Array | pa.ChunkedArray, fill: bool = False) -> Mask:
    """A boolean Arrow array as NumPy, nulls as `fill`."""
    if array.null_count:
        array = pc.fill_null(array, fill)
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def _rows_with(flags: Mask, parent: npt.NDArray[np.int64], rows: int) -> Mask:
    """Rows where any of their elements is flagged."""
    return _count(flags, parent, rows) > 0


def _count(flags: Mask, parent: npt.NDArray[np.int64], rows: int) -> Counts:
    """Per row, its elements flagged."""
    return np.bincount(parent[flags], minlength=rows).astype(np.int64)


def _indices(positions: npt.NDArray[np.int64]) -> pa.Array:
    return pa.array(positions, type=pa.int64())


@dataclass(slots=True)
class _Scan:
    rows: int
    bad: Mask
    """Rows with anything the fast path does not settle (besides the defects it repairs)."""
    trailing: Mask
    """Rows whose last message is an assistant turn with calls (pending at the end)."""
    trailing_calls: Counts
    parent: npt.NDArray[np.int64]
    msgs: pa.Array
    blank: Mask
    """Empty assistant turns (R1 drops them)."""
    orphan: Mask
    """Tool messages that answer no pending call (R3 drops them)."""
    second: Mask
    """Assistant text messages right after another one (R4 merges them into it)."""
    invalid: Counts
    """Per row, calls whose arguments are text that is not a JSON object."""
    answers: dict[int, str]
    """The tool messages answering a turn with an invalid call, and what R2 makes them say."""
    names: dict[int, str]
    """Of those, the ones answering a call without an id: the tool's name they are written with
    (as TRL's rows name their results)."""

    def kinds(self) -> dict[str, Mask]:
        """Per code the fast path repairs, the rows that have it."""
        return {
            EMPTY_ASSISTANT_TURN: _rows_with(self.blank, self.parent, self.rows),
            INVALID_TOOL_ARGUMENTS: self.invalid > 0,
            ORPHAN_TOOL_RESULT: _rows_with(self.orphan, self.parent, self.rows),
            CONSECUTIVE_ASSISTANT: _rows_with(self.second, self.parent, self.rows),
        }


def _shift(values: Mask) -> Mask:
    """`values` moved one place on: each element sees its predecessor's (the first, False)."""
    out = np.zeros(len(values), dtype=bool)
    out[1:] = values[:-1]
    return out


def _scan(array: pa.Array) -> _Scan:
    rows = len(array)
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy()
    bad: Mask = _np(array.is_null()) | (lengths == 0)
    nothing = np.zeros(rows, dtype=bool)
    none = np.zeros(rows, dtype=np.int64)

    msgs = pc.list_flatten(array)
    parent = pc.list_parent_indices(array).to_numpy().astype(np.int64)
    n = len(msgs)
    if n == 0:
        empty = np.zeros(0, dtype=bool)
        return _Scan(
            rows, bad | True, nothing, none, parent, msgs, empty, empty, empty, none, {}, {}
        )
    message_type = msgs.type

    role = pc.struct_field(msgs, "role")
    content = pc.struct_field(msgs, "content")
    is_assistant = _np(pc.equal(role, "assistant"))
    is_tool = _np(pc.equal(role, "tool"))
    known = _np(pc.is_in(role, pa.array(["system", "developer", "user", "assistant", "tool"])))
    flag = ~known | _np(msgs.is_null())

    n_calls = np.zeros(n, dtype=np.int64)
    if message_type.get_field_index("tool_calls") >= 0:
        calls_list = pc.struct_field(msgs, "tool_calls")
        n_calls = pc.fill_null(pc.list_value_length(calls_list), 0).to_numpy().astype(np.int64)
    if message_type.get_field_index("function_call") >= 0:  # legacy: left to the per-row path
        flag |= ~_np(pc.is_null(pc.struct_field(msgs, "function_call")))

    # An assistant turn says something: text, a call, or reasoning (SPEC section 2). Only the
    # assistant messages without calls need their text looked at.
    has_reasoning = np.zeros(n, dtype=bool)
    look = np.flatnonzero(is_assistant & (n_calls == 0))
    said = n_calls > 0
    if len(look):
        said[look] = _np(pc.match_substring_regex(content.take(_indices(look)), _NOT_SPACE))
    if message_type.get_field_index("reasoning_content") >= 0:
        reasoning = pc.struct_field(msgs, "reasoning_content")
        has_reasoning = ~_np(reasoning.is_null())
        thought = np.flatnonzero(is_assistant & ~said & has_reasoning)
        if len(thought):
            said[thought] = _np(
                pc.match_substring_regex(reasoning.take(_indices(thought)), _NOT_SPACE)
            )
    blank = is_assistant & ~said

    # Neighbours within a row.
    same_prev = np.zeros(n, dtype=bool)
    same_prev[1:] = parent[1:] == parent[:-1]
    is_last = np.ones(n, dtype=bool)
    is_last[:-1] = ~same_prev[1:]

    # Two assistant messages in a row: R4 merges the second into the first when both are plain
    # text (no calls, no reasoning) and there is no third; anything else is the per-row path's.
    consecutive = is_assistant & _shift(is_assistant) & same_prev
    text_only = is_assistant & (n_calls == 0) & ~has_reasoning & ~_np(content.is_null())
    mergeable = text_only & _shift(text_only) & ~_shift(consecutive)
    second = consecutive & mergeable
    flag |= consecutive & ~mergeable

    calling = is_assistant & (n_calls > 0)
    flag |= ~is_assistant & (n_calls > 0)  # calls on another role: left to the per-row path
    # Runs of tool messages. A run right after a calling turn answers it, one result per call
    # in call order (checked in `_calls`); results past its calls answer nothing (R3), and nor
    # does any other run: a calling turn followed by anything but its results is flagged as
    # unanswered below, so no pending call is left for it.
    run_start = is_tool & ~(_shift(is_tool) & same_prev)
    starts = np.flatnonzero(run_start)
    tool = np.flatnonzero(is_tool)
    run_of_tool = (np.cumsum(run_start) - 1)[tool]
    before = np.maximum(starts - 1, 0)
    after_call = same_prev[starts] & calling[before]
    run_calls = np.where(after_call, n_calls[before], 0)
    place = tool - starts[run_of_tool]
    orphan = np.zeros(n, dtype=bool)
    orphan[tool] = ~after_call[run_of_tool] | (place >= run_calls[run_of_tool])

    pending_at_end = calling & is_last  # trailing_tool_call
    next_tool = _shift(is_tool[::-1])[::-1] & ~is_last
    flag |= calling & ~next_tool & ~is_last  # unanswered
    run_len = np.bincount(run_of_tool, minlength=len(starts))
    answered = np.flatnonzero(calling & next_tool)
    next_run = np.searchsorted(starts, answered + 1)
    flag[answered] |= run_len[next_run] < n_calls[answered]  # calls without results

    bad |= _rows_with(flag, parent, rows)
    bad |= _count(is_assistant & ~blank, parent, rows) == 0  # no_assistant_turn
    scan = _Scan(
        rows=rows,
        bad=bad,
        trailing=_rows_with(pending_at_end, parent, rows),
        trailing_calls=none,
        parent=parent,
        msgs=msgs,
        blank=blank,
        orphan=orphan,
        second=second,
        invalid=none,
        answers={},
        names={},
    )
    _calls(scan, is_tool, pending_at_end)
    return scan


def _calls(scan: _Scan, is_tool: Mask, pending_at_end: Mask) -> None:
    """Check the calls of the rows that passed the structural checks: each well formed and
    answered, in order, by its own id; count per row the calls pending at the end (one per id)
    and the calls with invalid arguments, and write down R2's answers to those.

    In such rows the k-th call of an answered turn is followed by its run's k-th tool message,
    so the calls of all such turns, flattened in order, line up one to one with their tool
    messages that are not orphans. The calls of a turn that ends the history have none.
    """
    msgs, parent, rows = scan.msgs, scan.parent, scan.rows
    if msgs.type.get_field_index("tool_calls") < 0:
        return
    good_msg = ~scan.bad[parent]
    calls_list = pc.struct_field(msgs, "tool_calls")
    call_msg = pc.list_parent_indices(calls_list).to_numpy().astype(np.int64)
    if len(call_msg) == 0:
        return
    calls = pc.list_flatten(calls_list)
    keep = good_msg[call_msg]
    calls = calls.filter(pa.array(keep))
    call_msg = call_msg[keep]
    call_row = parent[call_msg]
    ids = pc.struct_field(calls, "id")
    function = pc.struct_field(calls, "function")
    flag = _np(calls.is_null()) | _np(function.is_null())
    names = pc.struct_field(function, "name")
    flag |= _np(names.is_null())
    arguments = pc.struct_field(function, "arguments")
    invalid = ~_objects(arguments)
    if _is_text(arguments.type):
        flag |= invalid & _np(arguments.is_null())  # no arguments at all: the per-row path's
        invalid &= ~_np(arguments.is_null())
    else:
        flag |= invalid
        invalid[:] = False

    # Each call is answered by its own id, or, with no ids on either side (TRL's shape), by
    # position, which the decoder pairs the same way; a mix is left to the per-row path.
    at_end = pending_at_end[call_msg]
    answered = np.flatnonzero(~at_end)
    answered_ids = ids.take(_indices(answered))
    answering = np.flatnonzero(is_tool & good_msg & ~scan.orphan)
    if "tool_call_id" in msgs.type.names:
        tool_ids = pc.struct_field(msgs, "tool_call_id").take(_indices(answering))
    else:
        tool_ids = pa.nulls(len(answering), pa.string())
    same_id = _np(pc.equal(answered_ids, tool_ids))
    both_missing = _np(answered_ids.is_null()) & _np(tool_ids.is_null())
    flag[answered] |= ~(same_id | both_missing)

    # A repeated id in an answered turn is one pending call answered twice; in a turn that ends
    # the history it is one pending call. A call without an id gets one of its own.
    named = np.flatnonzero(~_np(ids.is_null()))
    codes = pc.dictionary_encode(ids.take(_indices(named))).indices.to_numpy().astype(np.int64)
    keys = call_msg[named] * (int(codes.max(initial=0)) + 1) + codes
    order = np.argsort(keys, kind="stable")
    repeated = np.zeros(len(keys), dtype=bool)
    repeated[order[1:]] = keys[order[1:]] == keys[order[:-1]]
    flag[named[repeated & ~at_end[named]]] = True
    distinct = np.ones(len(call_msg), dtype=bool)
    distinct[named[repeated]] = False
    scan.trailing_calls = _count(at_end & distinct, call_row, rows)
    # An empty call id is no id to the decoder (it mints one), while a result's empty id names
    # no call: what such a row pairs with is the per-row path's to find out.
    flag |= _np(pc.equal(ids, ""))
    scan.bad |= _rows_with(flag, call_row, rows)
    name_type = _field_type(msgs.type, "name")
    if name_type is not None and not _is_text(name_type):
        # A result made for a call without an id is written with the tool's name, which such
        # a column cannot hold: the per-row path's to find out.
        scan.bad |= _rows_with(invalid, call_row, rows) & _rows_with(
            _np(ids.is_null()), call_row, rows
        )
    scan.invalid = _count(invalid, call_row, rows)

    # R2's answers: in a turn with an invalid call, that call's result becomes feedback and its
    # peers' `not_executed`, each in the place of the call's own result.
    turn_invalid = np.zeros(len(msgs), dtype=bool)
    turn_invalid[call_msg[invalid]] = True
    replaced = np.flatnonzero(turn_invalid[call_msg[answered]] & ~scan.bad[call_row[answered]])
    if len(replaced):
        which = answered[replaced]
        tools = names.take(_indices(which)).to_pylist()
        texts = [
            invalid_arguments_feedback(name, raw) if bad else TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER
            for name, raw, bad in zip(
                tools,
                arguments.take(_indices(which)).to_pylist(),
                invalid[which].tolist(),
                strict=True,
            )
        ]
        at = answering[replaced].tolist()
        scan.answers = dict(zip(at, texts, strict=True))
        unnamed = _np(ids.take(_indices(which)).is_null()).tolist()
        scan.names = {i: tool for i, tool, no_id in zip(at, tools, unnamed, strict=True) if no_id}


def _repair(
    type_: pa.DataType, scan: _Scan, rows_by_code: dict[str, Mask], subset: Counts
) -> tuple[pa.Array, dict[str, Counts]]:
    """The rows at `subset`, each with its code's repair done, and per code its occurrences per
    row: R1 drops the empty turns, R2 answers the invalid calls, R3 drops the orphans and R4
    appends each second assistant message's text to the first's (or drops it when the two say
    the same)."""
    parent, rows = scan.parent, scan.rows
    nowhere = np.zeros(rows, dtype=bool)

    def where(code: str) -> Mask:
        return rows_by_code.get(code, nowhere)[parent]

    drop = scan.blank & where(EMPTY_ASSISTANT_TURN)
    drop |= scan.orphan & where(ORPHAN_TOOL_RESULT)
    seconds = np.flatnonzero(scan.second & where(CONSECUTIVE_ASSISTANT))
    drop[seconds] = True
    texts: dict[int, str] = {}
    fresh: list[int] = []
    in_rows = rows_by_code.get(INVALID_TOOL_ARGUMENTS)
    if in_rows is not None:
        fresh = [i for i in scan.answers if in_rows[parent[i]]]
        texts.update((i, scan.answers[i]) for i in fresh)
    if len(seconds):
        content = pc.struct_field(scan.msgs, "content")
        firsts = content.take(_indices(seconds - 1)).to_pylist()
        for i, first, then in zip(
            seconds.tolist(), firsts, content.take(_indices(seconds)).to_pylist(), strict=True
        ):
            if then != first:
                texts[i - 1] = join_texts([first, then])
    counts = {
        EMPTY_ASSISTANT_TURN: _count(scan.blank, parent, rows),
        INVALID_TOOL_ARGUMENTS: scan.invalid,
        ORPHAN_TOOL_RESULT: _count(scan.orphan, parent, rows),
        CONSECUTIVE_ASSISTANT: _count(scan.second, parent, rows),
    }

    # Only the subset's messages are rewritten: their positions among the batch's, renumbered.
    row_at = np.full(rows, -1, dtype=np.int64)
    row_at[subset] = np.arange(len(subset), dtype=np.int64)
    chosen = np.flatnonzero(row_at[parent] >= 0)
    at = np.full(len(parent), -1, dtype=np.int64)
    at[chosen] = np.arange(len(chosen), dtype=np.int64)
    values = _rewrite(
        scan.msgs.take(_indices(chosen)),
        {int(at[i]): text for i, text in texts.items()},
        {int(at[i]): scan.names.get(i) for i in fresh},
    )
    column = _drop_messages(type_, len(subset), values, drop[chosen], row_at[parent[chosen]])
    return column, counts


def _rewrite(msgs: pa.Array, texts: dict[int, str], fresh: dict[int, str | None]) -> pa.Array:
    """The messages with new `content` at the positions of `texts`; those in `fresh` are tool
    results made anew (R2): their role, id (or, for a call without one, the tool's name) and
    content, and no other field."""
    if not texts:
        return msgs
    n = len(msgs)
    fresh_positions = np.array(sorted(fresh), dtype=np.int64)
    children = []
    for child_field, child in zip(msgs.type, msgs.flatten(), strict=True):
        new: pa.Array | None = None
        positions = fresh_positions
        if child_field.name == "content":
            positions = np.array(sorted(texts), dtype=np.int64)
            new = pa.array([texts[int(p)] for p in positions], child.type)
        elif child_field.name == "name" and _is_text(child.type):
            new = pa.array([fresh[int(p)] for p in positions], child.type)
        elif child_field.name not in ("role", "tool_call_id"):
            new = pa.nulls(len(positions), child.type)
        if new is not None and len(positions):
            index = np.arange(n, dtype=np.int64)
            index[positions] = n + np.arange(len(positions), dtype=np.int64)
            child = pa.concat_arrays([child, new]).take(_indices(index))
        children.append(child)
    mask = msgs.is_null() if msgs.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(msgs.type), mask=mask)


def _drop_messages(
    type_: pa.DataType, rows: int, values: pa.Array, drop: Mask, parent: Counts
) -> pa.Array:
    """A list column of `rows` rows from their flattened messages `values` (`parent` gives each
    one's row; no row is null), without the flagged ones."""
    keep = ~drop
    counts = np.bincount(parent[keep], minlength=rows)
    large = pa.types.is_large_list(type_)
    offsets = np.zeros(rows + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(counts, out=offsets[1:])
    kind = pa.LargeListArray if large else pa.ListArray
    return kind.from_arrays(pa.array(offsets), values.filter(pa.array(keep)), type=type_)


def _objects(arguments: pa.Array) -> Mask:
    """Whether each call's arguments are a JSON object (a struct is one; text must parse)."""
    if pa.types.is_struct(arguments.type) or pa.types.is_map(arguments.type):
        return ~_np(arguments.is_null())
    if not _is_text(arguments.type):
        return np.zeros(len(arguments), dtype=bool)
    # A flat object is one for sure; of the rest, only text that looks like one is parsed.
    out = _np(pc.match_substring_regex(arguments, _FLAT_OBJECT))
    rest = np.flatnonzero(~out)
    if len(rest):
        texts = arguments.take(_indices(rest))
        candidates = rest[_np(pc.match_substring_regex(texts, r"^\s*\{"))]
        out[candidates] = [_is_object(t) for t in arguments.take(_indices(candidates)).to_pylist()]
    return out


def _is_object(text: str) -> bool:
    try:
        return isinstance(loads(text), dict)
    except (ValueError, RecursionError):
        return False
