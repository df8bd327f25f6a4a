"""The Arrow-native fast path: which rows are already canonical, decided per batch, not per row.

`clean_mask` looks at the flattened messages of a batch with pyarrow.compute and NumPy and marks
the rows it can prove clean: rows the per-row path would keep unchanged with no code at all. Those
rows are written from the input's Arrow data and never become Python objects; every other row
takes the per-row path. The mask is conservative: a row it cannot prove clean (an unusual but
valid shape, say) is merely left to the per-row path, so the two paths always agree.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.formats.base import Format, loads

__all__ = ["clean_mask"]

Mask = npt.NDArray[np.bool_]

# A character that `str.strip()` keeps: the text holds something (SPEC section 2's blank test).
# The class lists every character for which Python's `str.isspace()` is true.
_NOT_SPACE = (
    "[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}"
    "\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]"
)


def clean_mask(fmt: Format, column: pa.Array | pa.ChunkedArray) -> Mask | None:
    """For each row, whether it is provably canonical with no code; None when this format or
    column shape has no fast path (then every row takes the per-row path)."""
    if fmt.name != "openai":
        return None
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not _openai_shape(array.type):
        return None
    return _openai_mask(array)


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


def _openai_mask(array: pa.Array) -> Mask:
    rows = len(array)
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy()
    bad: Mask = _np(array.is_null()) | (lengths == 0)

    msgs = pc.list_flatten(array)
    if len(msgs) == 0:
        return np.logical_not(bad)
    parent = pc.list_parent_indices(array).to_numpy().astype(np.int64)
    n = len(msgs)
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
    for name in ("function_call",):  # the legacy shape: left to the per-row path
        if message_type.get_field_index(name) >= 0:
            flag |= ~_np(pc.is_null(pc.struct_field(msgs, name)))

    # An assistant turn says something: text, a call, or reasoning (SPEC section 2).
    said = _np(pc.match_substring_regex(content, _NOT_SPACE)) | (n_calls > 0)
    if message_type.get_field_index("reasoning_content") >= 0:
        said |= _np(
            pc.match_substring_regex(pc.struct_field(msgs, "reasoning_content"), _NOT_SPACE)
        )
    flag |= is_assistant & ~said

    # Neighbours within a row.
    same_prev = np.zeros(n, dtype=bool)
    same_prev[1:] = parent[1:] == parent[:-1]
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
    flag |= calling & ~next_tool  # unanswered or trailing
    answered = np.flatnonzero(calling & next_tool)
    flag[answered] |= run_len[run_id[answered + 1]] != n_calls[answered]

    bad |= _rows_with(flag, parent, rows)
    bad |= np.bincount(parent[is_assistant], minlength=rows) == 0  # no_assistant_turn
    if calling.any():
        bad |= _calls_bad(msgs, parent, rows, bad, is_tool)
    return np.logical_not(bad)


def _calls_bad(
    msgs: pa.Array, parent: npt.NDArray[np.int64], rows: int, bad: Mask, is_tool: Mask
) -> Mask:
    """Rows whose calls are not all well formed and answered, in order, by their own ids.

    Only rows that passed the structural checks are looked at: in those, the k-th call of a
    turn is followed by its run's k-th tool message, so the calls of all such rows, flattened in
    order, line up one to one with their tool messages.
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
    tool_ids = pc.struct_field(msgs.filter(pa.array(is_tool & good_msg)), "tool_call_id")
    same_id = _np(pc.equal(ids, tool_ids))
    both_missing = _np(ids.is_null()) & _np(tool_ids.is_null())
    flag |= ~(same_id | both_missing)

    # A repeated id in one turn is one pending call answered twice.
    named = np.flatnonzero(~both_missing)
    named_ids = pc.fill_null(ids, "").take(pa.array(named))
    codes = pc.dictionary_encode(named_ids).indices.to_numpy().astype(np.int64)
    keys = call_msg[named] * (int(codes.max(initial=0)) + 1) + codes
    order = np.argsort(keys, kind="stable")
    repeated = np.zeros(len(keys), dtype=bool)
    repeated[order[1:]] = keys[order[1:]] == keys[order[:-1]]
    flag[named[repeated]] = True
    return _rows_with(flag, call_row, rows)


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
