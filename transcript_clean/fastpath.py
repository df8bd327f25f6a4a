"""The Arrow-native fast path: which rows are already canonical, decided per batch, not per row.

`fast_verdicts` looks at the flattened messages of a batch with pyarrow.compute and NumPy and
settles the rows it can prove: clean rows (kept unchanged with no code at all), and, where the
config allows, rows whose only code is calls pending at the end or empty assistant turns. Those
rows never become Python objects; every other row takes the per-row path (`clean_mask` is the
clean part alone). The mask is conservative: a row it cannot prove clean (an unusual but
valid shape, say) is merely left to the per-row path, so the two paths always agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.formats.base import Format, loads

__all__ = ["Verdicts", "clean_mask", "fast_verdicts"]

Mask = npt.NDArray[np.bool_]

# A character that `str.strip()` keeps: the text holds something (SPEC section 2's blank test).
# The class lists every character for which Python's `str.isspace()` is true.
_NOT_SPACE = (
    "[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
    "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]"
)


@dataclass(slots=True)
class Verdicts:
    """What the fast path decided for each row of a batch (the rest take the per-row path)."""

    clean: Mask
    """Canonical, with no code: kept as it is."""
    trailing: Mask
    """Canonical but for calls pending at the very end: kept as it is, as `trailing_tool_call`."""
    trailing_calls: npt.NDArray[np.int64]
    """Per row, the pending calls of that last turn (one per id)."""
    emptied: Mask
    """Canonical once its empty assistant turns are dropped: repaired (R1) here."""
    dropped: npt.NDArray[np.int64]
    """Per row, the empty assistant turns dropped."""
    emptied_column: pa.Array | None
    """The conversation column with every empty assistant turn dropped (for the emptied rows)."""

    @property
    def handled(self) -> Mask:
        return self.clean | self.trailing | self.emptied


def clean_mask(fmt: Format, column: pa.Array | pa.ChunkedArray) -> Mask | None:
    """For each row, whether it is provably canonical with no code; None when this format or
    column shape has no fast path (then every row takes the per-row path)."""
    verdicts = fast_verdicts(fmt, column)
    return None if verdicts is None else verdicts.clean


def fast_verdicts(
    fmt: Format,
    column: pa.Array | pa.ChunkedArray,
    *,
    trailing: bool = False,
    emptied: bool = False,
) -> Verdicts | None:
    """The rows the fast path settles: always the clean ones; with `trailing`, those whose only
    code is calls pending at the end (for a config that keeps them); with `emptied`, those whose
    only code is empty assistant turns (for a config that repairs them). None when this format
    or column shape has no fast path."""
    if fmt.name != "openai":
        return None
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not _openai_shape(array.type):
        return None
    rows = len(array)
    scan = _scan(array)
    pending = scan.trailing if trailing else np.zeros(rows, dtype=bool)
    plain = ~scan.bad & ~scan.blank
    verdicts = Verdicts(
        clean=plain & ~scan.trailing,
        trailing=plain & pending,
        trailing_calls=scan.trailing_calls,
        emptied=np.zeros(rows, dtype=bool),
        dropped=scan.dropped,
        emptied_column=None,
    )
    if emptied and scan.blank.any():
        # R1 first, then the checks, as the per-row path does: scan the rows that had empty
        # turns again without them.
        without = _drop_messages(array, scan.blank_messages, scan.parent)
        blank_rows = np.flatnonzero(scan.blank)
        again = _scan(without.take(pa.array(blank_rows)))
        verdicts.emptied[blank_rows] = ~again.bad & ~again.blank & ~again.trailing
        verdicts.emptied_column = without
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
    return np.asarray(pc.fill_null(array, fill).to_numpy(zero_copy_only=False), dtype=bool)


def _rows_with(flags: Mask, parent: npt.NDArray[np.int64], rows: int) -> Mask:
    """Rows where any of their elements is flagged."""
    return np.bincount(parent[flags], minlength=rows) > 0


@dataclass(slots=True)
class _Scan:
    bad: Mask
    """Rows with anything the fast path does not settle (besides empty turns and trailing calls)."""
    blank: Mask
    """Rows with an empty assistant turn."""
    trailing: Mask
    """Rows whose last message is an assistant turn with calls (pending at the end)."""
    trailing_calls: npt.NDArray[np.int64]
    dropped: npt.NDArray[np.int64]
    blank_messages: Mask
    parent: npt.NDArray[np.int64]


def _scan(array: pa.Array) -> _Scan:
    rows = len(array)
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy()
    bad: Mask = _np(array.is_null()) | (lengths == 0)
    nothing = np.zeros(rows, dtype=bool)

    msgs = pc.list_flatten(array)
    parent = pc.list_parent_indices(array).to_numpy().astype(np.int64)
    n = len(msgs)
    if n == 0:
        empty = np.zeros(0, dtype=bool)
        counts = np.zeros(rows, dtype=np.int64)
        return _Scan(bad | True, nothing, nothing.copy(), counts, counts, empty, parent)
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

    # An assistant turn says something: text, a call, or reasoning (SPEC section 2).
    said = _np(pc.match_substring_regex(content, _NOT_SPACE)) | (n_calls > 0)
    if message_type.get_field_index("reasoning_content") >= 0:
        reasoning = pc.struct_field(msgs, "reasoning_content")
        said |= _np(pc.match_substring_regex(reasoning, _NOT_SPACE))
    blank = is_assistant & ~said

    # Neighbours within a row.
    same_prev = np.zeros(n, dtype=bool)
    same_prev[1:] = parent[1:] == parent[:-1]
    is_last = np.ones(n, dtype=bool)
    is_last[:-1] = ~same_prev[1:]
    prev_assistant = np.zeros(n, dtype=bool)
    prev_assistant[1:] = is_assistant[:-1]
    flag |= is_assistant & prev_assistant & same_prev  # consecutive_assistant

    calling = is_assistant & (n_calls > 0)
    flag |= ~is_assistant & (n_calls > 0)  # calls on another role: left to the per-row path
    # Runs of tool messages: each must follow a calling turn and hold one result per call.
    run_start = is_tool & ~(np.roll(is_tool, 1) & same_prev)
    run_id = np.cumsum(run_start) - 1
    run_len = np.bincount(run_id[is_tool], minlength=int(run_start.sum()))
    prev_calling = np.zeros(n, dtype=bool)
    prev_calling[1:] = calling[:-1]
    flag |= run_start & ~(prev_calling & same_prev)  # orphan results
    next_tool = np.zeros(n, dtype=bool)
    next_tool[:-1] = is_tool[1:] & same_prev[1:]
    pending_at_end = calling & is_last  # trailing_tool_call
    flag |= calling & ~next_tool & ~is_last  # unanswered
    answered = np.flatnonzero(calling & next_tool)
    flag[answered] |= run_len[run_id[answered + 1]] != n_calls[answered]

    bad |= _rows_with(flag, parent, rows)
    bad |= np.bincount(parent[is_assistant & ~blank], minlength=rows) == 0  # no_assistant_turn
    trailing_calls = np.zeros(rows, dtype=np.int64)
    if calling.any():
        calls_bad, pending_ids = _calls_bad(msgs, parent, rows, bad, is_tool, pending_at_end)
        bad |= calls_bad
        trailing_calls = pending_ids
    return _Scan(
        bad=bad,
        blank=_rows_with(blank, parent, rows),
        trailing=_rows_with(pending_at_end, parent, rows),
        trailing_calls=trailing_calls,
        dropped=np.bincount(parent[blank], minlength=rows).astype(np.int64),
        blank_messages=blank,
        parent=parent,
    )


def _drop_messages(array: pa.Array, drop: Mask, parent: npt.NDArray[np.int64]) -> pa.Array:
    """The list column without the flagged messages (null rows stay null)."""
    keep = ~drop
    counts = np.bincount(parent[keep], minlength=len(array))
    offsets = np.zeros(len(array) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    values = pc.list_flatten(array).filter(pa.array(keep))
    mask = array.is_null() if array.null_count else None
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=array.type, mask=mask)


def _calls_bad(
    msgs: pa.Array,
    parent: npt.NDArray[np.int64],
    rows: int,
    bad: Mask,
    is_tool: Mask,
    pending_at_end: Mask,
) -> tuple[Mask, npt.NDArray[np.int64]]:
    """Rows whose calls are not all well formed and answered, in order, by their own ids; and,
    per row, the number of distinct calls still pending at the end.

    Only rows that passed the structural checks are looked at: in those, the k-th call of an
    answered turn is followed by its run's k-th tool message, so the calls of all such turns,
    flattened in order, line up one to one with their tool messages. The calls of a turn that
    ends the history have no results to line up with.
    """
    good_msg = ~bad[parent]
    calls_list = pc.struct_field(msgs, "tool_calls")
    call_msg = pc.list_parent_indices(calls_list).to_numpy().astype(np.int64)
    calls = pc.list_flatten(calls_list)
    keep = good_msg[call_msg]
    calls = calls.filter(pa.array(keep))
    call_msg = call_msg[keep]
    call_row = parent[call_msg]
    ids = pc.struct_field(calls, "id")
    function = pc.struct_field(calls, "function")
    flag = _np(calls.is_null()) | _np(function.is_null())
    flag |= _np(pc.struct_field(function, "name").is_null())
    flag |= ~_objects(pc.struct_field(function, "arguments"))

    # Each call is answered by its own id, or, with no ids on either side (TRL's shape), by
    # position, which the decoder pairs the same way; a mix is left to the per-row path.
    at_end = pending_at_end[call_msg]
    answered = np.flatnonzero(~at_end)
    answered_ids = ids.take(pa.array(answered))
    tool_ids = pc.struct_field(msgs.filter(pa.array(is_tool & good_msg)), "tool_call_id")
    same_id = _np(pc.equal(answered_ids, tool_ids))
    both_missing = _np(answered_ids.is_null()) & _np(tool_ids.is_null())
    flag[answered] |= ~(same_id | both_missing)

    # A repeated id in an answered turn is one pending call answered twice; in a turn that ends
    # the history it is one pending call. A call without an id gets one of its own.
    named = np.flatnonzero(~_np(ids.is_null()))
    codes = pc.dictionary_encode(ids.take(pa.array(named))).indices.to_numpy().astype(np.int64)
    keys = call_msg[named] * (int(codes.max(initial=0)) + 1) + codes
    order = np.argsort(keys, kind="stable")
    repeated = np.zeros(len(keys), dtype=bool)
    repeated[order[1:]] = keys[order[1:]] == keys[order[:-1]]
    flag[named[repeated & ~at_end[named]]] = True
    distinct = np.ones(len(call_msg), dtype=bool)
    distinct[named[repeated]] = False
    pending = np.bincount(call_row[at_end & distinct], minlength=rows).astype(np.int64)
    return _rows_with(flag, call_row, rows), pending


def _objects(arguments: pa.Array) -> Mask:
    """Whether each call's arguments are a JSON object (a struct is one; text must parse)."""
    if pa.types.is_struct(arguments.type) or pa.types.is_map(arguments.type):
        return ~_np(arguments.is_null())
    if not _is_text(arguments.type):
        return np.zeros(len(arguments), dtype=bool)
    # Only text that looks like an object is parsed; the rest cannot be one.
    looks = _np(pc.match_substring_regex(arguments, r"^\s*\{"))
    out = np.zeros(len(arguments), dtype=bool)
    candidates = np.flatnonzero(looks)
    if len(candidates):
        texts = arguments.take(pa.array(candidates)).to_pylist()
        out[candidates] = [_is_object(t) for t in texts]
    return out


def _is_object(text: str) -> bool:
    try:
        return isinstance(loads(text), dict)
    except (ValueError, RecursionError):
        return False
