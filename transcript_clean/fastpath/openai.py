"""The profile's measures of OpenAI columns (`openai_measures`, and `openai_parts_measures` for
a dataset type's prompt and first candidate), read from the column's messages in Arrow, and
`with_roles`, a column whose rows name roles otherwise read with the roles the names stand for.
OpenAI rows are read by their flattener (`formats/openai/flatten.py`) and the generic view
(`fastpath/columnar.py`), like every format's; the profile of a batch or of a dataset type's
parts measured part by part is read here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    flattened,
    indices,
    list_sizes,
    neighbours,
    shift,
    text_lengths,
)
from transcript_clean.fastpath.measures import (
    Measures,
    RowSums,
    add_counts,
    leading_bytes,
    turn_classes,
)
from transcript_clean.formats.base import REASONING_KEYS
from transcript_clean.formats.openai.flatten import openai_shape

__all__ = ["openai_measures", "openai_parts_measures", "with_roles"]

_ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function")
"""The roles the decoder knows; the flattener reads the first five (`function`, the legacy
one, is the per-row path's)."""
_SYSTEM, _DEVELOPER, _USER, _ASSISTANT, _TOOL, _FUNCTION = range(len(_ROLES))
_ROLE_KIND: Final = np.full(256, _SYSTEM, dtype=np.int64)
_ROLE_KIND[[ord(role[0]) for role in _ROLES[:5]]] = range(5)
"""A role's place in `_ROLES` by its first byte: for the five the flattener reads, which differ
in theirs (the profile's measures of rows it read, cheaper than matching the strings)."""


def _role_masks(kind: Counts) -> tuple[Mask, Mask, Mask, Mask]:
    """Of roles by their place in `_ROLES`: the assistant, tool, user, and system or developer
    messages."""
    system = (kind == _SYSTEM) | (kind == _DEVELOPER)
    return kind == _ASSISTANT, kind == _TOOL, kind == _USER, system


def with_roles(array: pa.Array, roles: Mapping[str, str]) -> tuple[pa.Array, bool]:
    """A column of OpenAI messages with each role name of `roles` replaced by the role it
    stands for (as the decoder reads it), and whether any was; the column as it is where its
    Arrow type is not one the flattener reads (`openai_shape`)."""
    if not openai_shape(array.type):
        return array, False
    msgs = array.values
    role = msgs.field("role")
    names = pa.array(list(roles), role.type)
    at = pc.index_in(role, names)
    if at.null_count == len(at):
        return array, False
    meant = pa.array(list(roles.values()), role.type).take(at)
    new_role = pc.if_else(at.is_valid(), meant, role)
    fields = [new_role if f.name == "role" else msgs.field(k) for k, f in enumerate(msgs.type)]
    new_msgs = pa.StructArray.from_arrays(
        fields, fields=list(msgs.type), mask=msgs.is_null() if msgs.null_count else None
    )
    list_type = type(array)
    mask = array.is_null() if array.null_count else None
    return list_type.from_arrays(array.offsets, new_msgs, type=array.type, mask=mask), True


def openai_measures(array: pa.Array, rows: Mask, *, texts: bool = False) -> Measures:
    """The profile's measures of the rows of `rows`, which must be rows the view reads as the
    decoder would (the fast path's settled rows): what `measure_transcripts` makes of their
    decoded transcripts, computed in Arrow. A run of tool messages is one user message (the
    decoder's), and no user turn."""
    return _measures(_messages(array), rows, texts)


class _Read(NamedTuple):
    """What the measures read of a column: its messages, each row's number of them, each
    message's row, role (its place in `_ROLES`) and calls."""

    msgs: pa.Array
    sizes: Counts
    parent: Counts
    kind: Counts
    n_calls: Counts


def _messages(array: pa.Array) -> _Read:
    """`_Read` of a column, read anew (`_ROLE_KIND`: the rows measured have only the five roles
    the view reads). Every message is looked at, and the measured rows' picked out in NumPy:
    cheaper than copying them out first."""
    msgs, sizes, parent = flattened(array)
    kind = _ROLE_KIND[leading_bytes(pc.struct_field(msgs, "role"))]
    n_calls = np.zeros(len(msgs), dtype=np.int64)
    if msgs.type.get_field_index("tool_calls") >= 0:
        n_calls = list_sizes(pc.struct_field(msgs, "tool_calls"))
    return _Read(msgs, sizes, parent, kind, n_calls)


def openai_parts_measures(parts: Sequence[pa.Array], rows: Mask) -> Measures:
    """`openai_measures` of conversations made of each row's `parts` one after the other (a
    dataset type's prompt and first candidate), measured part by part instead of on a column of
    them put together: per-row counts add up, but for a run of tool messages carried on from one
    part into the next, which is one user message (the decoder's)."""
    measured: dict[str, Counts] = {}
    turn_chars: list[Counts] = []
    classes: list[npt.NDArray[np.int8]] = []
    tools: dict[str, int] = {}
    said = np.zeros(int(rows.sum()), dtype=bool)  # the row's messages so far: any, ...
    on_tool = np.zeros(int(rows.sum()), dtype=bool)  # ... and the last one is a tool's
    for given in parts:
        read = _messages(given)
        part = _measures(read, rows, False)
        sizes, kind = read.sizes, read.kind
        some = sizes > 0
        ends = np.cumsum(sizes)
        first_tool, last_tool = np.zeros(len(sizes), dtype=bool), np.zeros(len(sizes), dtype=bool)
        first_tool[some] = kind[(ends - sizes)[some]] == _TOOL
        last_tool[some] = kind[ends[some] - 1] == _TOOL
        for name, values in part.rows.items():
            if name == "system":
                measured[name] = np.maximum(measured.get(name, 0), values)
            else:
                measured[name] = measured.get(name, 0) + values
        measured["messages"] = measured["messages"] - (said & on_tool & first_tool[rows])
        on_tool = np.where(some[rows], last_tool[rows], on_tool)
        said |= some[rows]
        turn_chars.append(part.turn_chars)
        classes.append(part.turn_classes)
        add_counts(tools, part.tools)
    return Measures(measured, np.concatenate(turn_chars), np.concatenate(classes), tools)


def _measures(read: _Read, rows: Mask, texts: bool) -> Measures:
    """`openai_measures` of what was read of a column's messages."""
    msgs, sizes, parent, kind, n_calls = read
    is_assistant, is_tool, is_user, is_system = _role_masks(kind)
    keep = rows[parent]
    message_type = msgs.type
    content = pc.struct_field(msgs, "content")
    lengths = text_lengths(content)
    # An assistant message's reasoning, in each field the decoder reads it from (text fields,
    # in the rows measured here: `_openai_shape`).
    reasoning = [
        pc.struct_field(msgs, key)
        for key in REASONING_KEYS
        if message_type.get_field_index(key) >= 0
    ]
    for thoughts in reasoning:
        lengths += np.where(is_assistant, text_lengths(thoughts), 0)
    calls = None
    if message_type.get_field_index("tool_calls") >= 0:
        calls = pc.struct_field(msgs, "tool_calls")
    same_prev, _ = neighbours(parent)
    run_start = is_tool & ~(shift(is_tool) & same_prev)

    sums = RowSums(sizes, rows)

    def per_row(flags: Mask, weights: Counts | None = None) -> Counts:
        return sums(flags if weights is None else np.where(flags, weights, 0))

    measured = {
        "messages": per_row(~is_tool | run_start),
        "user_turns": per_row(is_user),
        "assistant_turns": per_row(is_assistant),
        "tool_calls": per_row(is_assistant, n_calls),
        "chars": per_row(keep, lengths),
        "system": (per_row(is_system) > 0).astype(np.int64),
    }
    turn = is_assistant & keep
    at = np.flatnonzero(turn)
    tools: dict[str, int] = {}
    if calls is not None and n_calls[turn].any():
        names = pc.struct_field(pc.struct_field(pc.list_flatten(calls), "function"), "name")
        called = np.repeat(np.arange(len(n_calls), dtype=np.int64), n_calls)
        names = names.filter(pa.array(turn[called]))
        for item in pc.value_counts(names).to_pylist():
            tools[item["values"]] = int(item["counts"])
    classes = turn_classes(content, reasoning, at, n_calls)
    measures = Measures(measured, lengths[turn], classes, tools)
    if texts:
        _texts(measures, content, reasoning, turn, keep, parent, rows)
    return measures


def _texts(
    measures: Measures,
    content: pa.Array,
    reasoning: list[pa.Array],
    turns: Mask,
    keep: Mask,
    parent: Counts,
    rows: Mask,
) -> None:
    """The text pieces of the measured messages, for counting tokens: each message's content,
    and an assistant turn's reasoning (`turns`: the measured assistant messages)."""
    turn = np.where(turns, np.cumsum(turns) - 1, -1)
    row = np.cumsum(rows) - 1  # a row's position among the measured rows
    mine = np.flatnonzero(keep)
    pieces = [content.take(indices(mine))]
    where = [mine]
    thinking = np.flatnonzero(turns)
    for thoughts in reasoning:
        pieces.append(thoughts.take(indices(thinking)))
        where.append(thinking)
    at = np.concatenate(where)
    texts = pa.concat_arrays([p.cast(pa.large_string()) for p in pieces])
    valid = as_mask(texts.is_valid())
    measures.texts = texts.filter(pa.array(valid)).to_pylist()
    measures.text_row = row[parent[at[valid]]]
    measures.text_turn = turn[at[valid]]
