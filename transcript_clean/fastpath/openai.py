"""The profile's measures of OpenAI columns (`openai_measures`, `openai_parts_measures`), and
the fast path's former view of OpenAI rows, which no batch reads any more: OpenAI rows are
flattened (`formats/openai/flatten.py`) and read by the generic view like every format's. The
view knew the rules' codes and repairs; it stays until the flattener is measured no slower.

The scan flattens a batch's messages and finds, with pyarrow.compute and NumPy, the rows it reads
as the decoder would and, among them, the rows with each code it knows; it repairs R1-R5 (R5 by
a cut) in Arrow, writing the rows back in the column's own type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
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
    list_sizes,
    neighbours,
    objects,
    repeated,
    rows_with,
    run_starts,
    shift,
    text_lengths,
)
from transcript_clean.columnar.edits import Subset, replaced
from transcript_clean.fastpath.base import (
    ORIGIN,
    ArrowRepair,
    ArrowView,
    FastReject,
    Origins,
    agrees,
    decode_rejects,
)
from transcript_clean.fastpath.declared import declared_rejects
from transcript_clean.fastpath.measures import (
    Measures,
    RowSums,
    add_counts,
    classes_of,
    leading_bytes,
    turn_classes,
)
from transcript_clean.fastpath.measures import said as says
from transcript_clean.formats.base import REASONING_KEYS, Format, join_texts
from transcript_clean.model import ToolCall
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
from transcript_clean.rules.invalid_tool_arguments import real_result
from transcript_clean.rules.orphan_tool_result import used_message, used_orphans
from transcript_clean.rules.tool_arguments_schema import CODE as TOOL_ARGUMENTS_SCHEMA
from transcript_clean.rules.unanswered_tool_call import uncuttable
from transcript_clean.rules.unknown_tool import CODE as UNKNOWN_TOOL
from transcript_clean.transcript import (
    TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER,
    invalid_arguments_feedback,
)

if TYPE_CHECKING:
    from transcript_clean.rules.base import RuleConfig

__all__ = [
    "REPAIRS",
    "OpenAIView",
    "openai_measures",
    "openai_parts_measures",
    "openai_view",
    "with_roles",
]

REPAIRS: Final = frozenset(
    {
        EMPTY_ASSISTANT_TURN,
        INVALID_TOOL_ARGUMENTS,
        ORPHAN_TOOL_RESULT,
        CONSECUTIVE_ASSISTANT,
        UNANSWERED_TOOL_CALL,
    }
)
"""The codes whose repair this format's Arrow side does itself (unanswered calls: by a cut)."""

_ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function")
"""The roles the decoder knows; the view reads the first five (`function`, the legacy one, is
the per-row path's)."""
_ROLE_SET: Final = pa.array(_ROLES)
_SYSTEM, _DEVELOPER, _USER, _ASSISTANT, _TOOL, _FUNCTION = range(len(_ROLES))
_ROLE_KIND: Final = np.full(256, _SYSTEM, dtype=np.int64)
_ROLE_KIND[[ord(role[0]) for role in _ROLES[:5]]] = range(5)
"""A role's place in `_ROLES` by its first byte: for the five the view reads, which differ in
theirs (the profile's measures of rows it read, cheaper than matching the strings)."""


def _role_masks(kind: Counts) -> tuple[Mask, Mask, Mask, Mask]:
    """Of roles by their place in `_ROLES`: the assistant, tool, user, and system or developer
    messages."""
    system = (kind == _SYSTEM) | (kind == _DEVELOPER)
    return kind == _ASSISTANT, kind == _TOOL, kind == _USER, system


def with_roles(array: pa.Array, roles: Mapping[str, str]) -> tuple[pa.Array, bool]:
    """A column of OpenAI messages with each role name of `roles` replaced by the role it
    stands for (as the decoder reads it), and whether any was; the column as it is where its
    Arrow type is not one the view reads."""
    if not _openai_shape(array.type):
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


def openai_view(fmt: Format, array: pa.Array, schema: pa.Schema | None = None) -> OpenAIView | None:
    """The view of a column of OpenAI messages held as plain-text structs; None for any other
    shape. Rows that name roles otherwise (`OpenAIFormat.roles`) are read with the roles the
    names stand for; where any does, the rows the view would repair are the per-row path's,
    which writes each message back under its own name."""
    if not _openai_shape(array.type):
        return None
    roles = getattr(fmt, "roles", None)
    if not roles:
        return OpenAIView(fmt, array, _scan(array))
    column, renamed = with_roles(array, roles)
    view = OpenAIView(fmt, column, _scan(column))
    if renamed:
        view.repairs = frozenset()
    return view


class OpenAIView(ArrowView):
    """What the scan of an OpenAI column found: per code, the rows that have it, among the rows
    whose every message it reads as the decoder would. It repairs each code of `REPAIRS` as the
    per-row path does."""

    repairs = REPAIRS
    rejects = frozenset({UNKNOWN_TOOL, TOOL_ARGUMENTS_SCHEMA, MALFORMED_ROW, UNKNOWN_ROLE})

    def __init__(self, fmt: Format, array: pa.Array, scan: _Scan) -> None:
        undecodable = np.zeros(scan.rows, dtype=bool)
        if scan.undecodable is not None:
            undecodable = rows_with(scan.undecodable, scan.parent, scan.rows)
        checks = {
            **scan.kinds(),
            TRAILING_TOOL_CALL: scan.trailing,
            NO_ASSISTANT_TURN: scan.unsaid,
            DUPLICATE_CALL_ID: scan.duplicated,
            MALFORMED_ROW: undecodable,
            UNKNOWN_ROLE: undecodable,
        }
        super().__init__(scan.rows, scan.bad, checks, scan.trailing_calls)
        self.fmt = fmt
        self.array = array
        self.scan = scan
        self.calls = scan.calls

    def reject(self, rows: dict[str, Mask]) -> list[FastReject]:
        out = _reject_undecodable(self.fmt, self.scan, rows)
        if self.scan.call_places is not None:
            out += declared_rejects(self, rows, self.scan.call_places)
        return out

    def measures(self, rows: Mask, *, texts: bool = False) -> Measures | None:
        read = self.read()
        return None if read is None else _measures(read, rows, texts)

    def read(self) -> _Read | None:
        """What the measures read, as the scan read it: its messages, their rows, roles and
        calls, measured as they are (the rows it reads have only the five roles of `_ROLES`),
        each call's row and tool name, and what the assistant messages hold. None for a column
        of no messages at all."""
        scan = self.scan
        if scan.roles is None or scan.n_calls is None:
            return None
        sizes = np.bincount(scan.parent, minlength=scan.rows)
        called_by = None if scan.calls is None else scan.calls[:2]
        return _Read(scan.msgs, sizes, scan.parent, scan.roles, scan.n_calls, called_by, scan.turns)

    def again(self, column: pa.Array, rows: Counts) -> OpenAIView:
        # What R2 would answer is no question for rows already repaired: not worked out again.
        return OpenAIView(self.fmt, column, _scan(column, answers=False))

    def repair(self, rows: dict[str, Mask]) -> ArrowRepair:
        alone = dict(rows)
        rejects = []
        if UNANSWERED_TOOL_CALL in alone:
            rejects = _reject_uncuttable(self.scan, alone)
        if INVALID_TOOL_ARGUMENTS in alone and self.scan.real_results:
            rejects += _reject_real_results(self.scan, alone)
        if ORPHAN_TOOL_RESULT in alone and self.scan.used.any():
            rejects += _reject_used_orphans(self.scan, alone, self.config)
        subset = np.flatnonzero(any_of(alone.values(), self.rows))
        if not len(subset):
            return ArrowRepair(subset, self.array.slice(0, 0), {}, rejects)
        column, occurrences, origins = _repair(self.array.type, self.scan, alone, subset)
        return ArrowRepair(subset, column, occurrences, rejects, origins)


def _reject_undecodable(fmt: Format, scan: _Scan, rows: dict[str, Mask]) -> list[FastReject]:
    """Rows with a message the decoder cannot read, rejected as the per-row path rejects them,
    for the decoding codes of `rows` (per code, the rows it may reject). The decoder reads the
    messages in order and stops at its first error, which comes at that message or before it:
    the decoder itself reads each such row up to that message, and says what the error is."""
    wanted: dict[str, Mask] = {c: rows[c] for c in (MALFORMED_ROW, UNKNOWN_ROLE) if c in rows}
    if scan.undecodable is None or not wanted:
        return []
    first = first_flagged(scan.undecodable, scan.parent, scan.rows)
    hit = np.flatnonzero(any_of(wanted.values(), scan.rows) & (first < len(scan.parent)))
    if not len(hit):
        return []
    start = np.searchsorted(scan.parent, hit)  # each row's first message
    sizes = first[hit] - start + 1
    ends = np.cumsum(sizes)
    at = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(start - (ends - sizes), sizes)
    items = scan.msgs.take(indices(at)).to_pylist()
    records = (
        (row, {fmt.column: items[stop - size : stop]})
        for row, stop, size in zip(hit.tolist(), ends.tolist(), sizes.tolist(), strict=True)
    )
    return decode_rejects(fmt, records, wanted)


def _reject_real_results(scan: _Scan, alone: dict[str, Mask]) -> list[FastReject]:
    """R2's rows whose invalid call has a real result are rejected, not repaired, with the
    per-row path's words."""
    wanted = alone[INVALID_TOOL_ARGUMENTS]
    chosen = np.zeros(scan.rows, dtype=bool)
    at = [r for r in sorted(scan.real_results) if wanted[r]]
    if not at:
        return []
    chosen[at] = True
    alone[INVALID_TOOL_ARGUMENTS] = wanted & ~chosen
    messages = [scan.real_results[r] for r in at]
    return [FastReject(INVALID_TOOL_ARGUMENTS, chosen, np.where(chosen, scan.invalid, 0), messages)]


def _reject_used_orphans(
    scan: _Scan, alone: dict[str, Mask], config: RuleConfig | None
) -> list[FastReject]:
    """R3's rows with an orphan a later turn may have used: where the config drops such
    orphans, repaired with the others; where it rejects them, rejected with the per-row path's
    words, which name the first one by its place among the canonical messages and its id. A
    row whose orphan has no id (the decoder makes one up), or whose config is not known, is
    left to the per-row path."""
    wanted = alone[ORPHAN_TOOL_RESULT]
    used = wanted & rows_with(scan.used, scan.parent, scan.rows)
    if not used.any() or (config is not None and config.orphan_result == "drop"):
        return []
    alone[ORPHAN_TOOL_RESULT] = wanted & ~used
    if (
        config is None
        or scan.canonical is None
        or scan.msgs.type.get_field_index("tool_call_id") < 0
    ):
        return []
    hit = np.flatnonzero(used)
    first = first_flagged(scan.used, scan.parent, scan.rows)[hit]
    ids = pc.struct_field(scan.msgs, "tool_call_id").take(indices(first)).to_pylist()
    # An orphan without an id is named as the decoder names it, `result_{i}` by its place in
    # the row, unless a real id of the row could have taken that name first.
    start = np.searchsorted(scan.parent, hit)
    taken = _ids_like(scan, "result_")[hit]
    rejected = np.zeros(scan.rows, dtype=bool)
    words = []
    for row, at, call_id, place, clash in zip(
        hit.tolist(), first.tolist(), ids, (first - start).tolist(), taken.tolist(), strict=True
    ):
        if call_id is None:
            if clash:
                continue
            call_id = f"result_{place}"
        rejected[row] = True
        words.append(used_message(int(scan.canonical[at]), call_id))
    if not rejected.any():
        return []
    occurrences = np.where(rejected, count(scan.orphan, scan.parent, scan.rows), 0)
    return [FastReject(ORPHAN_TOOL_RESULT, rejected, occurrences, words)]


def _ids_like(scan: _Scan, prefix: str) -> Mask:
    """Rows holding a real id (a call's, or a tool message's `tool_call_id`) that starts with
    `prefix`."""
    found = np.zeros(scan.rows, dtype=bool)
    if "tool_call_id" in scan.msgs.type.names:
        named = pc.starts_with(pc.struct_field(scan.msgs, "tool_call_id"), prefix)
        found |= rows_with(as_mask(named), scan.parent, scan.rows)
    if "tool_calls" in scan.msgs.type.names:
        calls, _, owner = flattened(pc.struct_field(scan.msgs, "tool_calls"))
        named = pc.starts_with(pc.struct_field(calls, "id"), prefix)
        found |= rows_with(as_mask(named), scan.parent[owner], scan.rows)
    return found


def _reject_uncuttable(scan: _Scan, alone: dict[str, Mask]) -> list[FastReject]:
    """R5's rows whose cut would leave no assistant turn are rejected, with the per-row path's
    message: the first unanswered turn's place among the canonical messages (before it, in
    such a row, are system and user messages only, one each) and its first call's id. A row
    whose call has no id (the decoder makes one up) is left to the per-row path."""
    first = first_flagged(scan.unanswered, scan.parent, scan.rows)
    before = np.arange(len(scan.parent)) < first[scan.parent]
    cut = alone[UNANSWERED_TOOL_CALL]
    empty = cut & (count(scan.assistant & before, scan.parent, scan.rows) == 0)
    if not empty.any():
        return []
    start = np.searchsorted(scan.parent, np.arange(scan.rows))
    messages, kept = [], np.zeros(scan.rows, dtype=bool)
    for row in np.flatnonzero(empty).tolist():
        call_id = scan.first_ids.get(int(first[row]))
        if call_id is None:
            continue
        kept[row] = True
        messages.append(uncuttable(int(first[row] - start[row]), call_id))
    alone[UNANSWERED_TOOL_CALL] = cut & ~empty
    if not kept.any():
        return []
    occurrences = np.where(kept, scan.unanswered_calls, 0)
    return [FastReject(UNANSWERED_TOOL_CALL, kept, occurrences, messages)]


def _openai_shape(type_: pa.DataType) -> bool:
    """Messages as plain-text OpenAI structs: the shape the fast path reads."""
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    message = type_.value_type
    if not pa.types.is_struct(message):
        return False
    if not is_text(field_type(message, "role")) or not is_text(field_type(message, "content")):
        return False
    for name in ("tool_call_id", *REASONING_KEYS):
        kind = field_type(message, name)
        if kind is not None and not is_text(kind):
            return False
    calls = field_type(message, "tool_calls")
    if calls is None:
        return True
    if not pa.types.is_list(calls) or not pa.types.is_struct(calls.value_type):
        return False
    function = field_type(calls.value_type, "function")
    return (
        is_text(field_type(calls.value_type, "id"))
        and function is not None
        and pa.types.is_struct(function)
        and is_text(field_type(function, "name"))
        and field_type(function, "arguments") is not None
    )


class _Turns:
    """Of each assistant message (`at`, their positions among the messages): whether its text
    says something, whether it has any, whether a reasoning field of it says something, and
    whether it has any reasoning field (`assistant_turn_class`'s facts)."""

    __slots__ = ("at", "reasoning", "says", "spoken", "thought")

    def __init__(self, at: Counts) -> None:
        self.at = at
        self.says = np.zeros(len(at), dtype=bool)
        self.spoken = np.zeros(len(at), dtype=bool)
        self.thought = np.zeros(len(at), dtype=bool)
        self.reasoning = np.zeros(len(at), dtype=bool)

    def classes(self, keep: Mask, n_calls: Counts) -> npt.NDArray[np.int8]:
        """The class of each assistant message of `keep` (a mask of the messages), in order,
        as `turn_classes` finds it."""
        k = np.flatnonzero(keep[self.at])
        facts = (self.thought[k], self.says[k], self.reasoning[k], self.spoken[k])
        return classes_of(n_calls[self.at[k]] > 0, *facts)


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
    used: Mask
    """Of those, the ones a later turn may have used (R3 rejects the row, unless the config
    drops them anyway)."""
    second: Mask
    """Assistant text messages right after another one (R4 merges them into it)."""
    after_empty: Mask
    """Assistant messages that follow another one once the empty turns between them are gone:
    R4's question after R1, which the scan of the row R1 repaired answers."""
    unanswered: Mask
    """Assistant turns whose calls no result answers (R5 cuts the transcript before the
    first)."""
    unanswered_calls: Counts
    """Per row, the calls of those turns (a repeated id once per turn)."""
    first_ids: dict[int, str | None]
    """The first call's id of each of those turns, by the turn's position."""
    assistant: Mask
    """Assistant messages."""
    unsaid: Mask
    """Rows with no assistant message that says anything (none once R1 has run)."""
    invalid: Counts
    """Per row, calls whose arguments are text that is not a JSON object."""
    answers: dict[int, str]
    """The tool messages answering a turn with an invalid call, and what R2 makes them say."""
    names: dict[int, str]
    """Of those, the ones answering a call without an id: the tool's name they are written with
    (as TRL's rows name their results)."""
    duplicated: Mask
    """Rows with a turn where two calls share an id (`duplicate_call_id`)."""
    calls: tuple[Counts, pa.Array, pa.Array] | None = None
    """Each call's row, name and arguments, of the rows it reads (the declared-tools checks)."""
    call_places: tuple[Counts, Counts] | None = None
    """Each of those calls' message index in the canonical transcript, and its place among its
    turn's calls: what a declared-tools reject message names."""
    canonical: Counts | None = None
    """Each message's index in its row's canonical transcript (a run of tool messages is one
    user message there)."""
    real_results: dict[int, str] = field(default_factory=dict)
    """Rows whose invalid call has a real result, which R2 never writes over: the per-row
    path's words for them, by row."""
    roles: Counts | None = None
    """Each message's role, by its place in `_ROLES` (-1: another, or none)."""
    turns: _Turns | None = None
    """What each assistant message's text and reasoning hold."""
    undecodable: Mask | None = None
    """Messages the decoder cannot read (null, or without a role it knows)."""
    n_calls: Counts | None = None
    """Each message's calls."""

    def kinds(self) -> dict[str, Mask]:
        """Per code the fast path repairs, the rows that have it."""
        return {
            EMPTY_ASSISTANT_TURN: rows_with(self.blank, self.parent, self.rows),
            INVALID_TOOL_ARGUMENTS: self.invalid > 0,
            ORPHAN_TOOL_RESULT: rows_with(self.orphan, self.parent, self.rows),
            CONSECUTIVE_ASSISTANT: rows_with(
                self.second | self.after_empty, self.parent, self.rows
            ),
            UNANSWERED_TOOL_CALL: rows_with(self.unanswered, self.parent, self.rows),
        }


def _scan(array: pa.Array, *, answers: bool = True) -> _Scan:
    rows = len(array)
    nothing = np.zeros(rows, dtype=bool)
    none = np.zeros(rows, dtype=np.int64)
    bad, msgs, parent = flatten(array)
    n = len(msgs)
    if n == 0:  # every row is null or empty, so bad
        empty = np.zeros(0, dtype=bool)
        return _Scan(
            rows,
            bad,
            nothing,
            none,
            parent,
            msgs,
            empty,
            empty,
            empty,
            empty,
            empty,
            empty,
            none,
            {},
            empty,
            nothing,
            none,
            {},
            {},
            nothing,
        )
    message_type = msgs.type

    role = pc.struct_field(msgs, "role")
    content = pc.struct_field(msgs, "content")
    # Each role's place among the five the view reads (-1: another, or none), in one pass.
    kind = pc.fill_null(pc.index_in(role, _ROLE_SET), -1).to_numpy(zero_copy_only=False)
    is_assistant, is_tool = kind == _ASSISTANT, kind == _TOOL
    # A message that is null, or has no role or one the decoder does not know, is where the
    # decoder stops, if not before (`_reject_undecodable`).
    undecodable = (kind < 0) | as_mask(msgs.is_null())
    flag = undecodable | (kind == _FUNCTION)

    n_calls = np.zeros(n, dtype=np.int64)
    if message_type.get_field_index("tool_calls") >= 0:
        calls_list = pc.struct_field(msgs, "tool_calls")
        n_calls = list_sizes(calls_list)
    if message_type.get_field_index("function_call") >= 0:  # legacy: left to the per-row path
        flag |= ~as_mask(pc.is_null(pc.struct_field(msgs, "function_call")))

    # An assistant turn says something: text, a call, or reasoning (SPEC section 2). What its
    # text and reasoning hold is also what the profile's turn classes are made of (`_Turns`).
    has_reasoning = np.zeros(n, dtype=bool)
    turns = _Turns(np.flatnonzero(is_assistant))
    turns.says, turns.spoken = says(content, turns.at)
    for key in REASONING_KEYS:  # each a text field (`_openai_shape`)
        if message_type.get_field_index(key) < 0:
            continue
        reasoning = pc.struct_field(msgs, key)
        holds = ~as_mask(reasoning.is_null())
        has_reasoning |= holds
        held = holds[turns.at]
        turns.reasoning |= held
        look = held & ~turns.thought  # most turns have no reasoning: only the others looked at
        turns.thought[look] = says(reasoning, turns.at[look])[0]
    said = n_calls > 0
    said[turns.at] |= turns.says | turns.thought
    blank = is_assistant & ~said

    same_prev, same_next = neighbours(parent)
    is_last = ~same_next

    # Two assistant messages in a row: R4 merges the second into the first when both are plain
    # text (no calls, no reasoning) and there is no third; anything else is the per-row path's.
    # R1 drops the empty turns first, so an empty turn is no message of the pair, and a pair
    # with empty turns between them is left to the scan of the row R1 repaired (`after_empty`):
    # a row with an empty turn is settled only by that repair, whatever else it may have.
    consecutive = is_assistant & shift(is_assistant) & same_prev & ~blank & ~shift(blank)
    text_only = is_assistant & (n_calls == 0) & ~has_reasoning & ~as_mask(content.is_null())
    mergeable = consecutive & text_only & shift(text_only) & ~shift(consecutive)
    mergeable = agrees(msgs, _MERGED_FIELDS, mergeable)
    second = consecutive & mergeable
    flag |= consecutive & ~mergeable
    after_empty = np.zeros(n, dtype=bool)
    if blank.any():
        said_at = np.flatnonzero(~blank)
        gap = np.zeros(n, dtype=bool)
        gap[said_at[1:]] = said_at[1:] - said_at[:-1] > 1
        before = np.zeros(n, dtype=np.int64)  # the message before, empty turns left out
        before[said_at[1:]] = said_at[:-1]
        after_empty = gap & is_assistant & is_assistant[before] & (parent[before] == parent)

    calling = is_assistant & (n_calls > 0)
    flag |= ~is_assistant & (n_calls > 0)  # calls on another role: left to the per-row path
    # Runs of tool messages. A run right after a calling turn answers it, one result per call
    # in call order (checked in `_calls`); results past its calls answer nothing (R3), and nor
    # does any other run: a calling turn followed by anything but its results is flagged as
    # unanswered below, so no pending call is left for it.
    run_start = is_tool & ~(shift(is_tool) & same_prev)
    starts = np.flatnonzero(run_start)
    tool = np.flatnonzero(is_tool)
    run_of_tool = (np.cumsum(run_start) - 1)[tool]
    before = np.maximum(starts - 1, 0)
    after_call = same_prev[starts] & calling[before]
    run_calls = np.where(after_call, n_calls[before], 0)
    place = tool - starts[run_of_tool]
    orphan = np.zeros(n, dtype=bool)
    orphan[tool] = ~after_call[run_of_tool] | (place >= run_calls[run_of_tool])
    # R3 drops an orphan only where that cannot change a later turn (issue 27, item 4): one a
    # later turn may have used is the repair's to reject, or to drop where the config says so.
    used = np.zeros(n, dtype=bool)
    if orphan.any():
        last_turn = np.full(rows, -1, dtype=np.int64)
        at_turn = np.flatnonzero(is_assistant)
        np.maximum.at(last_turn, parent[at_turn], at_turn)
        speaks = says(content, tool)[0]
        used[tool] = used_orphans(
            parent[tool],
            orphan[tool],
            speaks,
            content.take(indices(tool)),
            tool < last_turn[parent[tool]],
        )

    pending_at_end = calling & is_last  # trailing_tool_call
    next_tool = shift(is_tool[::-1])[::-1] & ~is_last
    # A user message right after a calling turn closes its window with no results: all its
    # calls are unanswered (R5). After anything else (a system message keeps them pending, to
    # the end of the history perhaps; an assistant one is R4's too) the per-row path is left
    # to work it out.
    next_user = shift((kind == _USER)[::-1])[::-1] & ~is_last
    unanswered = calling & next_user
    flag |= calling & ~next_tool & ~next_user & ~is_last
    run_len = np.bincount(run_of_tool, minlength=len(starts))
    answered = np.flatnonzero(calling & next_tool)
    next_run = np.searchsorted(starts, answered + 1)
    flag[answered] |= run_len[next_run] < n_calls[answered]  # calls without results

    bad |= rows_with(flag, parent, rows)
    # Canonical indexes: a tool message that continues a run joins the user message before it.
    joins = np.cumsum(is_tool & shift(is_tool) & same_prev)
    row_start = run_starts(parent)
    canonical = np.arange(n) - row_start - (joins - joins[row_start])
    scan = _Scan(
        rows=rows,
        bad=bad,
        trailing=rows_with(pending_at_end, parent, rows),
        trailing_calls=none,
        parent=parent,
        msgs=msgs,
        blank=blank,
        orphan=orphan,
        used=used,
        second=second,
        after_empty=after_empty,
        unanswered=unanswered,
        unanswered_calls=none,
        first_ids={},
        assistant=is_assistant,
        unsaid=count(is_assistant & ~blank, parent, rows) == 0,
        invalid=none,
        answers={},
        names={},
        duplicated=nothing,
        canonical=canonical,
        roles=kind,
        turns=turns,
        n_calls=n_calls,
        undecodable=undecodable,
    )
    _calls(scan, is_tool, pending_at_end, answers)
    return scan


def _calls(scan: _Scan, is_tool: Mask, pending_at_end: Mask, answers: bool) -> None:
    """Check the calls of the rows that passed the structural checks: each well formed and
    answered, in order, by its own id; count per row the calls pending at the end (one per id)
    and the calls with invalid arguments, and (with `answers`) write down R2's answers to those.

    In such rows the k-th call of an answered turn is followed by its run's k-th tool message,
    so the calls of all such turns, flattened in order, line up one to one with their tool
    messages that are not orphans. The calls of a turn that ends the history have none.
    """
    msgs, parent, rows = scan.msgs, scan.parent, scan.rows
    # No call at all (a candidate of plain answers, say): none to check against the declared
    # tools either, which `calls` being None would leave to the per-row path.
    no_calls = (np.empty(0, np.int64), pa.array([], pa.string()), pa.array([], pa.string()))
    if msgs.type.get_field_index("tool_calls") < 0:
        scan.calls = no_calls
        return
    good_msg = ~scan.bad[parent]
    calls_list = pc.struct_field(msgs, "tool_calls")
    call_msg = pc.list_parent_indices(calls_list).to_numpy().astype(np.int64)
    if len(call_msg) == 0:
        scan.calls = no_calls
        return
    calls = pc.list_flatten(calls_list)
    place = np.arange(len(call_msg)) - run_starts(call_msg)
    keep = good_msg[call_msg]
    calls = calls.filter(pa.array(keep))
    call_msg = call_msg[keep]
    place = place[keep]
    call_row = parent[call_msg]
    ids = pc.struct_field(calls, "id")
    function = pc.struct_field(calls, "function")
    flag = as_mask(calls.is_null()) | as_mask(function.is_null())
    names = pc.struct_field(function, "name")
    flag |= as_mask(names.is_null())
    arguments = pc.struct_field(function, "arguments")
    invalid = ~objects(arguments)
    if is_text(arguments.type):
        flag |= invalid & as_mask(arguments.is_null())  # no arguments at all: the per-row path's
        invalid &= ~as_mask(arguments.is_null())
    else:
        flag |= invalid
        invalid[:] = False

    # Each call is answered by its own id, or, with no ids on either side (TRL's shape), by
    # position, which the decoder pairs the same way; a mix is left to the per-row path.
    at_end = pending_at_end[call_msg]
    unanswered = scan.unanswered[call_msg]
    answered = np.flatnonzero(~at_end & ~unanswered)
    answered_ids = ids.take(indices(answered))
    answering = np.flatnonzero(is_tool & good_msg & ~scan.orphan)
    if "tool_call_id" in msgs.type.names:
        tool_ids = pc.struct_field(msgs, "tool_call_id").take(indices(answering))
    else:
        tool_ids = pa.nulls(len(answering), pa.string())
    same_id = as_mask(pc.equal(answered_ids, tool_ids))
    both_missing = as_mask(answered_ids.is_null()) & as_mask(tool_ids.is_null())
    flag[answered] |= ~(same_id | both_missing)

    # A repeated id in an answered turn is one pending call answered twice; in a turn that ends
    # the history, or in one no result answers, it is one pending call. A call without an id
    # gets one of its own.
    named = np.flatnonzero(~as_mask(ids.is_null()))
    codes = pc.dictionary_encode(ids.take(indices(named))).indices.to_numpy().astype(np.int64)
    keys = call_msg[named] * (int(codes.max(initial=0)) + 1) + codes
    twice = repeated(keys)
    scan.duplicated = rows_with(twice, call_row[named], rows)
    flag[named[twice & ~at_end[named] & ~unanswered[named]]] = True
    distinct = np.ones(len(call_msg), dtype=bool)
    distinct[named[twice]] = False
    scan.trailing_calls = count(at_end & distinct, call_row, rows)
    scan.unanswered_calls = count(unanswered & distinct, call_row, rows)
    turns, firsts = np.unique(call_msg[unanswered], return_index=True)
    if len(turns):
        first_calls = np.flatnonzero(unanswered)[firsts]
        scan.first_ids = dict(
            zip(turns.tolist(), ids.take(indices(first_calls)).to_pylist(), strict=True)
        )
    # An empty call id is no id to the decoder (it mints one), while a result's empty id names
    # no call: what such a row pairs with is the per-row path's to find out.
    flag |= as_mask(pc.equal(ids, ""))
    scan.bad |= rows_with(flag, call_row, rows)
    name_type = field_type(msgs.type, "name")
    if name_type is not None and not is_text(name_type):
        # A result made for a call without an id is written with the tool's name, which such
        # a column cannot hold: the per-row path's to find out.
        scan.bad |= rows_with(invalid, call_row, rows) & rows_with(
            as_mask(ids.is_null()), call_row, rows
        )
    scan.invalid = count(invalid, call_row, rows)
    scan.calls = (call_row, names, arguments)
    assert scan.canonical is not None
    scan.call_places = (scan.canonical[call_msg], place)
    if not answers:
        return

    # R2's answers: in a turn with an invalid call, that call's result becomes feedback and its
    # peers' `not_executed`, each in the place of the call's own result.
    turn_invalid = np.zeros(len(msgs), dtype=bool)
    turn_invalid[call_msg[invalid]] = True
    replaced = np.flatnonzero(turn_invalid[call_msg[answered]] & ~scan.bad[call_row[answered]])
    if len(replaced):
        which = answered[replaced]
        tools = names.take(indices(which)).to_pylist()
        texts = [
            invalid_arguments_feedback(name, raw) if bad else TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER
            for name, raw, bad in zip(
                tools,
                arguments.take(indices(which)).to_pylist(),
                invalid[which].tolist(),
                strict=True,
            )
        ]
        at = answering[replaced].tolist()
        # R2 never writes over a real result: a row whose invalid call's result is anything
        # but the feedback R2 would write cannot be repaired. Its first such call is named in
        # the per-row path's words (`real_result`).
        current = pc.struct_field(msgs, "content").take(indices(answering[replaced]))
        real = invalid[which] & ~as_mask(pc.equal(current, pa.array(texts, current.type)))
        real_ids = ids.take(indices(which)).to_pylist()
        # A call without an id gets one the decoder makes up from its place, `call_<message>_
        # <call>`, unless the row holds real ids it could collide with: such a row is the
        # per-row path's.
        has_ids = rows_with(as_mask(ids.is_valid()), call_row, rows)
        if "tool_call_id" in msgs.type.names:
            answer_ids = as_mask(pc.struct_field(msgs, "tool_call_id").is_valid())
            has_ids |= rows_with(answer_ids, parent, rows)
        for k in np.flatnonzero(real).tolist():
            row = int(call_row[which[k]])
            if scan.bad[row] or row in scan.real_results:
                continue
            message = int(call_msg[which[k]])
            call_id = real_ids[k]
            if call_id is None:
                if has_ids[row]:
                    scan.bad[row] = True
                    continue
                start = int(np.searchsorted(parent, row))  # the row's first message
                call_id = f"call_{message - start}_{int(place[which[k]])}"
            assert scan.canonical is not None
            scan.real_results[row] = real_result(
                int(scan.canonical[message]),
                ToolCall(call_id, tools[k], None),
                int(scan.canonical[answering[replaced][k]]),
            )
        scan.answers = dict(zip(at, texts, strict=True))
        unnamed = as_mask(ids.take(indices(which)).is_null()).tolist()
        scan.names = {i: tool for i, tool, no_id in zip(at, tools, unnamed, strict=True) if no_id}


# The fields R4 may merge: what the message says. Any other field (`weight`, `name`) must agree.
_MERGED_FIELDS: Final = frozenset({"role", "content", "tool_calls", *REASONING_KEYS})


def _repair(
    type_: pa.DataType, scan: _Scan, rows_by_code: dict[str, Mask], subset: Counts
) -> tuple[pa.Array, dict[str, Counts], Origins]:
    """The rows at `subset`, each with its code's repair done, per code its occurrences per
    row, and where each message of theirs came from: R1 drops the empty turns, R2 answers the
    invalid calls, R3 drops the orphans, R4 appends each second assistant message's text to
    the first's (or drops it when the two say the same) and R5 drops everything from the first
    turn with unanswered calls on."""
    parent, rows = scan.parent, scan.rows
    nowhere = np.zeros(rows, dtype=bool)

    def where(code: str) -> Mask:
        return rows_by_code.get(code, nowhere)[parent]

    drop = scan.blank & where(EMPTY_ASSISTANT_TURN)
    drop |= scan.orphan & where(ORPHAN_TOOL_RESULT)
    cut = scan.unanswered & where(UNANSWERED_TOOL_CALL)
    if cut.any():  # everything from each row's first unanswered turn on
        drop |= np.arange(len(parent)) >= first_flagged(cut, parent, rows)[parent]
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
        firsts = content.take(indices(seconds - 1)).to_pylist()
        for i, first, then in zip(
            seconds.tolist(), firsts, content.take(indices(seconds)).to_pylist(), strict=True
        ):
            if then != first:
                texts[i - 1] = join_texts([first, then])
    counts = {
        EMPTY_ASSISTANT_TURN: count(scan.blank, parent, rows),
        INVALID_TOOL_ARGUMENTS: scan.invalid,
        ORPHAN_TOOL_RESULT: count(scan.orphan, parent, rows),
        CONSECUTIVE_ASSISTANT: count(scan.second, parent, rows),
        UNANSWERED_TOOL_CALL: scan.unanswered_calls,
    }

    # Only the subset's messages are rewritten: their positions among the batch's, renumbered.
    chosen = Subset.of(subset, parent, rows)
    rewritten = chosen.renumbered(texts)
    made = chosen.renumbered({i: scan.names.get(i) for i in fresh})
    values = _rewrite(scan.msgs.take(indices(chosen.elements)), rewritten, made)
    at = chosen.places()
    at[list(made)] = -1
    changed = np.zeros(len(at), dtype=bool)
    changed[list(rewritten)] = True
    where = pa.StructArray.from_arrays([pa.array(at), pa.array(changed)], fields=list(ORIGIN))
    origins = Origins(chosen.column(pa.list_(ORIGIN), where, drop), "content")
    return chosen.column(type_, values, drop), counts, origins


def _rewrite(msgs: pa.Array, texts: dict[int, str], fresh: dict[int, str | None]) -> pa.Array:
    """The messages with new `content` at the positions of `texts`; those in `fresh` are tool
    results made anew (R2): their role, id (or, for a call without one, the tool's name) and
    content, and no other field."""
    if not texts:
        return msgs
    fresh_positions = np.array(sorted(fresh), dtype=np.int64)
    children = []
    for child_field, child in zip(msgs.type, msgs.flatten(), strict=True):
        new: pa.Array | None = None
        positions = fresh_positions
        if child_field.name == "content":
            positions = np.array(sorted(texts), dtype=np.int64)
            new = pa.array([texts[int(p)] for p in positions], child.type)
        elif child_field.name == "name" and is_text(child.type):
            new = pa.array([fresh[int(p)] for p in positions], child.type)
        elif child_field.name not in ("role", "tool_call_id"):
            new = pa.nulls(len(positions), child.type)
        if new is not None and len(positions):
            child = replaced(child, positions, new)
        children.append(child)
    mask = msgs.is_null() if msgs.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(msgs.type), mask=mask)


# ---------------------------------------------------------------------------------------------
# the profile's measures (`transcript_clean.profile`)


def openai_measures(array: pa.Array, rows: Mask, *, texts: bool = False) -> Measures:
    """The profile's measures of the rows of `rows`, which must be rows the view reads as the
    decoder would (the fast path's settled rows): what `measure_transcripts` makes of their
    decoded transcripts, computed in Arrow. A run of tool messages is one user message (the
    decoder's), and no user turn."""
    return _measures(_messages(array), rows, texts)


class _Read(NamedTuple):
    """What the measures read of a column: its messages, each row's number of them, each
    message's row, role (its place in `_ROLES`) and calls; where a view knows them, each
    call's row and tool name (of the rows it reads at least) and what the assistant messages
    hold."""

    msgs: pa.Array
    sizes: Counts
    parent: Counts
    kind: Counts
    n_calls: Counts
    called_by: tuple[Counts, pa.Array] | None = None
    turns: _Turns | None = None


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


def openai_parts_measures(parts: Sequence[pa.Array | OpenAIView], rows: Mask) -> Measures:
    """`openai_measures` of conversations made of each row's `parts` one after the other (a
    dataset type's prompt and first candidate), measured part by part instead of on a column of
    them put together: per-row counts add up, but for a run of tool messages carried on from one
    part into the next, which is one user message (the decoder's). A part is a column, or the
    view that read it (`rows` must then be rows it reads as the decoder would): what it has
    read already is not read again."""
    measured: dict[str, Counts] = {}
    turn_chars: list[Counts] = []
    classes: list[npt.NDArray[np.int8]] = []
    tools: dict[str, int] = {}
    said = np.zeros(int(rows.sum()), dtype=bool)  # the row's messages so far: any, ...
    on_tool = np.zeros(int(rows.sum()), dtype=bool)  # ... and the last one is a tool's
    for given in parts:
        read = given.read() if isinstance(given, OpenAIView) else _messages(given)
        if read is None:  # a view of no messages at all: its column read anew
            assert isinstance(given, OpenAIView)
            read = _messages(given.array)
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
    msgs, sizes, parent, kind, n_calls, called_by, turns = read
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
        if called_by is None:
            names = pc.struct_field(pc.struct_field(pc.list_flatten(calls), "function"), "name")
            called = np.repeat(np.arange(len(n_calls), dtype=np.int64), n_calls)
            names = names.filter(pa.array(turn[called]))
        else:  # only assistant turns have calls in the rows measured
            names = called_by[1].filter(pa.array(rows[called_by[0]]))
        for item in pc.value_counts(names).to_pylist():
            tools[item["values"]] = int(item["counts"])
    if turns is None:
        classes = turn_classes(content, reasoning, at, n_calls)
    else:
        classes = turns.classes(keep, n_calls)
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
