"""Cleaning one row (`clean_row`) and one record batch (`clean_batch`): what every engine runs.

`clean_row` is SPEC section 5 in order: R0 decode, R1 empty turns, the codes found in the
R1-cleaned transcript, each code's action from the config, the repairs R2-R5, R6 validation and
R7 encoding. `clean_batch` runs it over an Arrow batch and splits the rows into kept and rejected.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.errors import FormatError
from transcript_clean.fastpath import Verdicts, fast_verdicts
from transcript_clean.formats.base import Decoded, DecodeError, Format, Row
from transcript_clean.model import AssistantMessage, Message
from transcript_clean.policy import (
    CONSECUTIVE_ASSISTANT,
    DEFAULT,
    EMPTY_ASSISTANT_TURN,
    INVALID_TOOL_ARGUMENTS,
    MALFORMED_ROW,
    NO_ASSISTANT_TURN,
    ORPHAN_TOOL_RESULT,
    TRAILING_TOOL_CALL,
    UNANSWERED_TOOL_CALL,
    UNENCODABLE_ROW,
    Config,
)
from transcript_clean.repair import (
    Unrepairable,
    answer_invalid_calls,
    answer_unanswered_calls,
    cut_before_unanswered,
    drop_empty_turns,
    drop_orphan_results,
    has_invalid_arguments,
    merge_consecutive_assistant,
    raw_arguments,
    trailing_calls,
)
from transcript_clean.sources import json_columns
from transcript_clean.stats import Stats
from transcript_clean.transcript import transcript_errors

__all__ = [
    "REJECT_FIELDS",
    "BatchResult",
    "RepairStep",
    "RowResult",
    "Violation",
    "clean_batch",
    "clean_row",
    "holds_json_text",
    "reject_schema",
]

REJECT_FIELDS = (
    pa.field("_reject_codes", pa.list_(pa.string())),
    pa.field("_reject_message", pa.string()),
    pa.field("_source", pa.string()),
    pa.field("_source_row", pa.int64()),
)

Status = Literal["unchanged", "repaired", "rejected"]


@dataclass(slots=True, frozen=True)
class Violation:
    """One problem found in a row. `index` is the message's index in the decoded transcript."""

    code: str
    index: int | None
    call_id: str | None
    message: str


@dataclass(slots=True, frozen=True)
class RepairStep:
    """What one repair did, for `explain` and audit reports."""

    code: str
    before: tuple[Message, ...]
    after: tuple[Message, ...]


@dataclass(slots=True)
class RowResult:
    """The fate of one row."""

    status: Status
    violations: list[Violation] = field(default_factory=list)
    actions: dict[str, str] = field(default_factory=dict)
    """code -> what was done: repaired, rejected, kept or dropped (empty turns)."""
    decoded: Decoded | None = None
    messages: list[Message] | None = None
    """The transcript as written (or as it was when the row was rejected)."""
    row: Row | None = None
    """The re-encoded row, when repaired."""
    reject_message: str | None = None
    steps: list[RepairStep] = field(default_factory=list)
    messages_in: int = 0
    """Messages in the row's conversation column as it came in, and as written."""
    messages_out: int = 0

    @property
    def codes(self) -> list[str]:
        return sorted(self.actions)

    def occurrences(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for v in self.violations:
            counts[v.code] = counts.get(v.code, 0) + 1
        return counts


def _describe_invalid(index: int, call_id: str, name: str, raw: str) -> str:
    shown = raw if len(raw) <= 60 else raw[:60] + "…"
    return (
        f"message {index}: tool call {call_id!r} to {name!r} has arguments that are not a JSON "
        f"object: {shown!r}"
    )


def find_violations(messages: Sequence[Message]) -> list[Violation]:
    """The codes of R2-R6 found in a transcript (whose empty turns are already set aside)."""
    found: list[Violation] = []
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if has_invalid_arguments(call):
                    found.append(
                        Violation(
                            INVALID_TOOL_ARGUMENTS,
                            index,
                            call.id,
                            _describe_invalid(index, call.id, call.name, raw_arguments(call)),
                        )
                    )
    trailing = trailing_calls(messages)
    for error in transcript_errors(messages):
        code, words = error.code, str(error)
        if code == UNANSWERED_TOOL_CALL and trailing is not None and error.index == trailing[0]:
            code = TRAILING_TOOL_CALL
            words = f"message {error.index}: tool call {error.call_id!r} ends the history"
        found.append(Violation(code, error.index, error.call_id, words))
    if not any(isinstance(m, AssistantMessage) for m in messages):
        found.append(
            Violation(NO_ASSISTANT_TURN, None, None, "the transcript has no assistant turn")
        )
    return found


def _reject(result: RowResult, message: str | None = None) -> RowResult:
    result.status = "rejected"
    result.actions = dict.fromkeys(result.actions, "rejected")
    result.row = None
    result.messages_out = 0
    if message is not None:
        result.reject_message = message
    elif result.violations:
        result.reject_message = result.violations[0].message
    return result


def clean_row(row: Row, fmt: Format, config: Config = DEFAULT, *, trace: bool = False) -> RowResult:
    """Clean one row (SPEC section 5). Never raises for bad data: a bad row is a rejection.

    With `trace`, `steps` records each repair's before and after.
    """
    messages_in = _message_count(row.get(fmt.column))
    try:
        decoded = fmt.decode(row)
    except DecodeError as err:
        return rejected_row(err.code, str(err), messages_in)
    original = decoded.messages
    result = RowResult(
        "unchanged",
        decoded=decoded,
        messages=list(original),
        messages_in=messages_in,
        messages_out=messages_in,
    )

    # R1, and the codes of the R1-cleaned transcript, with indexes into the decoded transcript.
    cleaned, dropped = drop_empty_turns(original)
    empty_action = config.action(EMPTY_ASSISTANT_TURN) if dropped else None
    work = list(original) if empty_action == "keep" else cleaned
    positions = list(range(len(original)))
    if empty_action != "keep":
        positions = [i for i in positions if i not in set(dropped)]
    for index in dropped:
        result.violations.append(
            Violation(EMPTY_ASSISTANT_TURN, index, None, f"message {index}: empty assistant turn")
        )
    for v in find_violations(work):
        at = positions[v.index] if v.index is not None else None
        message = v.message
        if v.index is not None and at != v.index:
            message = message.replace(f"message {v.index}:", f"message {at}:", 1)
        result.violations.append(Violation(v.code, at, v.call_id, message))
    result.violations.sort(key=lambda v: -1 if v.index is None else v.index)

    actions = {v.code: config.action(v.code) for v in result.violations}
    result.actions = {
        code: {"repair": "repaired", "keep": "kept", "reject": "rejected"}[a]
        for code, a in actions.items()
    }
    if dropped and empty_action == "repair":
        result.actions[EMPTY_ASSISTANT_TURN] = "dropped"
    if "reject" in actions.values():
        rejected = next(v for v in result.violations if actions[v.code] == "reject")
        return _reject(result, rejected.message)

    current = work
    if "repair" in actions.values():
        if dropped and empty_action == "repair" and trace:
            result.steps.append(RepairStep(EMPTY_ASSISTANT_TURN, tuple(original), tuple(work)))
        try:
            current = _repair(current, config, result, trace)
        except Unrepairable as err:
            result.actions[err.code] = "rejected"
            return _reject(result, str(err))

    # R6: nothing invalid is ever written. A repaired invalid call keeps its arguments (the
    # repair answers it), so that code never blocks; nor does any code the config keeps. A
    # transcript no repair touched holds just the codes found, each of them kept.
    remaining = []
    if current is not work:
        remaining = [
            v
            for v in find_violations(current)
            if v.code != INVALID_TOOL_ARGUMENTS and config.action(v.code) != "keep"
        ]
    if remaining:
        for v in remaining:
            result.actions[v.code] = "rejected"
            if v.code not in {w.code for w in result.violations}:
                result.violations.append(v)
        return _reject(result, remaining[0].message)

    result.messages = current
    if current == original:
        return result
    try:
        result.row = fmt.encode(decoded, current)
    except Exception as err:  # an encoder bug must cost one row, not the run
        return unencodable(result, f"the repaired row cannot be written in its format: {err}")
    result.status = "repaired"
    result.messages_out = _message_count(result.row.get(fmt.column))
    return result


def rejected_row(code: str, message: str, messages_in: int = 0) -> RowResult:
    """A row rejected before it could be decoded."""
    return RowResult(
        "rejected",
        [Violation(code, None, None, message)],
        {code: "rejected"},
        reject_message=message,
        messages_in=messages_in,
    )


def unencodable(result: RowResult, message: str) -> RowResult:
    """Reject a repaired row that cannot be written back (`unencodable_row`)."""
    result.actions[UNENCODABLE_ROW] = "rejected"
    result.violations.append(Violation(UNENCODABLE_ROW, None, None, message))
    return _reject(result, message)


_Repair = Callable[[list[Message]], list[Message]]


def _repair(
    messages: list[Message], config: Config, result: RowResult, trace: bool
) -> list[Message]:
    """R2-R5, each where its code's action is `repair`. A repair may uncover a code that was not
    found before (dropping an orphan's message can make two assistant messages meet): it counts."""
    include_trailing = config.action(TRAILING_TOOL_CALL) == "repair"
    interrupted: _Repair
    if config.interrupted_call == "cut":

        def interrupted(m: list[Message]) -> list[Message]:
            return cut_before_unanswered(m, include_trailing=include_trailing)
    else:

        def interrupted(m: list[Message]) -> list[Message]:
            return answer_unanswered_calls(m, include_trailing=include_trailing)

    chain: list[tuple[str, _Repair]] = [
        (INVALID_TOOL_ARGUMENTS, answer_invalid_calls),
        (ORPHAN_TOOL_RESULT, drop_orphan_results),
        (CONSECUTIVE_ASSISTANT, merge_consecutive_assistant),
        (UNANSWERED_TOOL_CALL, interrupted),
    ]
    changed = False  # a repair that changed nothing cannot have uncovered a new code
    for code, repair in chain:
        runs = config.action(code) == "repair"
        wanted = code in result.actions
        if code == UNANSWERED_TOOL_CALL:
            runs = runs or include_trailing
            wanted = wanted or (include_trailing and TRAILING_TOOL_CALL in result.actions)
        if not runs or not (wanted or changed):
            continue
        after = repair(messages)
        if after == messages:
            continue
        changed = True
        if trace:
            result.steps.append(RepairStep(code, tuple(messages), tuple(after)))
        fixed = [code]
        if code == UNANSWERED_TOOL_CALL and include_trailing:
            fixed = [c for c in (code, TRAILING_TOOL_CALL) if c in result.actions] or fixed
        for c in fixed:
            if c not in result.actions:
                # Uncovered by an earlier repair (an orphan's message dropped, say): it counts.
                result.violations.append(Violation(c, None, None, f"{c} after an earlier repair"))
            result.actions[c] = "repaired"
        messages = after
    return messages


# ---------------------------------------------------------------------------------------------
# batches


class BatchResult(NamedTuple):
    """What `clean_batch` returns: kept rows (the input's schema), rejects, and their stats."""

    kept: pa.Table
    rejects: pa.Table
    stats: Stats


def holds_json_text(schema: pa.Schema, column: str) -> bool:
    """Whether the conversation column holds JSON as text (some datasets store it so, and
    `sources` falls back to it for JSON that Arrow cannot type): decoded before cleaning."""
    return column in json_columns(schema) or pa.types.is_string(schema.field(column).type)


def reject_schema(schema: pa.Schema) -> pa.Schema:
    """The rejects' schema: the input's columns and the four reject columns."""
    out = schema
    for f in REJECT_FIELDS:
        out = out.append(f)
    return out


def _message_count(value: Any) -> int:
    return len(value) if isinstance(value, list) else 0


def clean_batch(
    batch: pa.RecordBatch | pa.Table,
    config: Config = DEFAULT,
    *,
    format: Format | str = "auto",
    source: str = "",
    first_row: int = 0,
    on_row: Callable[[int, Row, RowResult], None] | None = None,
    fast: bool = True,
) -> BatchResult:
    """Clean one Arrow batch: `(kept, rejects, stats)`.

    `kept` has the input's schema and its rows in input order, an unchanged row value for value;
    `rejects` holds rejected rows as they came in plus `_reject_codes`, `_reject_message`,
    `_source` and `_source_row` (`first_row` + the row's position in the batch).

    Rows the Arrow fast path proves clean skip the per-row path (`fast=False` sends every row
    through it: the same result, slower); `on_row` sees every row that takes the per-row path,
    which includes every row with a code.
    """
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    fmt = _resolve_format(format, table)
    if fmt.column not in table.column_names:
        raise FormatError(
            f"no column {fmt.column!r} for format {fmt.name}; the columns are "
            f"{', '.join(table.column_names)}"
        )
    as_json = holds_json_text(table.schema, fmt.column)
    stats = Stats()

    # Rows the fast path settles never become Python objects: clean ones are kept as they are,
    # and, where the config keeps or repairs them, rows whose only code is calls pending at the
    # end or empty assistant turns. `on_row` must see every row with a code, so with it only
    # clean rows are settled here.
    verdicts = None
    if fast and not as_json:
        verdicts = fast_verdicts(
            fmt,
            table.column(fmt.column),
            trailing=on_row is None and config.action(TRAILING_TOOL_CALL) == "keep",
            emptied=on_row is None and config.action(EMPTY_ASSISTANT_TURN) == "repair",
        )
    settled: dict[int, pa.Table] = {}
    if verdicts is None:
        slow = np.arange(table.num_rows)
    else:
        slow = np.flatnonzero(~verdicts.handled)
        settled = _settle(table, fmt.column, verdicts, stats, source, first_row)

    positions: list[int] = slow.tolist()
    with _cyclic_gc_paused():
        rows = table.take(pa.array(slow)).to_pylist() if positions else []
        results = [_clean_row_of(row, fmt, config, as_json) for row in rows]
    repaired = {i: r for i, r in zip(positions, results, strict=True) if r.status == "repaired"}
    fitted = _fit_repaired(repaired, table.schema, fmt.column if as_json else None)
    fitted.update(settled)

    kept = np.ones(table.num_rows, dtype=bool)
    rejected: list[tuple[int, RowResult]] = []
    for i, row, result in zip(positions, rows, results, strict=True):
        if result.status == "rejected":
            kept[i] = False
            rejected.append((i, result))
        stats.add_row(result, source, first_row + i)
        if on_row is not None:
            on_row(first_row + i, row, result)
    return BatchResult(
        _assemble_kept(table, kept, fitted),
        _assemble_rejects(table, rejected, source, first_row),
        stats,
    )


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The per-row path makes hundreds of thousands of small objects and no reference cycles
    (refcounting frees them). Python's cyclic collector would scan all of them again and again
    while they live: pausing it for one batch cut the per-row path's time by about a third
    (124 to 86 us a row on the bench's defective rows). Whatever cycle a batch does leave is
    collected once the collector runs again."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _settle(
    table: pa.Table, column: str, verdicts: Verdicts, stats: Stats, source: str, first_row: int
) -> dict[int, pa.Table]:
    """Count the rows the fast path settled, as the per-row path would have; returns the rows it
    repaired (empty turns dropped), as one-row tables of the input's schema."""
    lengths = pc.fill_null(pc.list_value_length(table.column(column)), 0).to_numpy()
    clean, trailing, emptied = verdicts.clean, verdicts.trailing, verdicts.emptied
    stats.add_clean_rows(int(clean.sum()), int(lengths[clean].sum()))
    if trailing.any():
        messages = int(lengths[trailing].sum())
        stats.add_kept_rows(int(trailing.sum()), messages, messages)
        first = int(np.flatnonzero(trailing)[0])
        calls = int(verdicts.trailing_calls[trailing].sum())
        stats.add_code(
            TRAILING_TOOL_CALL, "kept", int(trailing.sum()), calls, source, first_row + first
        )
    if not emptied.any():
        return {}
    assert verdicts.emptied_column is not None
    positions = np.flatnonzero(emptied)
    dropped = int(verdicts.dropped[emptied].sum())
    messages = int(lengths[emptied].sum())
    stats.add_kept_rows(len(positions), messages, messages - dropped, repaired=True)
    rows = len(positions)
    stats.add_code(
        EMPTY_ASSISTANT_TURN, "dropped", rows, dropped, source, first_row + int(positions[0])
    )
    stats.empty_turns_dropped += dropped
    index = pa.array(positions)
    repaired = table.take(index)
    at = table.schema.get_field_index(column)
    repaired = repaired.set_column(at, table.schema.field(at), verdicts.emptied_column.take(index))
    return {int(i): repaired.slice(k, 1) for k, i in enumerate(positions)}


def _resolve_format(format: Format | str, table: pa.Table) -> Format:
    if isinstance(format, Format):
        return format
    from transcript_clean.formats import detect_format, get_format

    if format == "auto":
        return detect_format(table.column_names, table.slice(0, 20).to_pylist())
    return get_format(format)


def _clean_row_of(row: Row, fmt: Format, config: Config, as_json: bool) -> RowResult:
    if as_json:
        text = row[fmt.column]
        try:
            row = {**row, fmt.column: json.loads(text) if text is not None else None}
        except (TypeError, json.JSONDecodeError) as err:
            return rejected_row(MALFORMED_ROW, f"{fmt.column}: not valid JSON ({err})")
    return clean_row(row, fmt, config)


def _fit_repaired(
    repaired: dict[int, RowResult], schema: pa.Schema, json_column: str | None
) -> dict[int, pa.Table]:
    """The repaired rows as one-row tables of the input's schema, converted together. A row that
    does not fit the schema any more is rejected as `unencodable_row` (and left out)."""
    if not repaired:
        return {}
    rows = []
    for result in repaired.values():
        assert result.row is not None
        row = result.row
        if json_column is not None:
            row = {**row, json_column: json.dumps(row[json_column], ensure_ascii=False)}
        rows.append(row)
    try:
        table = pa.Table.from_pylist(rows, schema=schema)
        return {i: table.slice(k, 1) for k, i in enumerate(repaired)}
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError):
        pass  # find the rows that do not fit, one by one
    fitted = {}
    for (i, result), row in zip(repaired.items(), rows, strict=True):
        try:
            fitted[i] = pa.Table.from_pylist([row], schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, TypeError) as err:
            unencodable(result, f"the repaired row does not fit the input's schema: {err}")
    return fitted


def _assemble_kept(
    table: pa.Table, kept: npt.NDArray[np.bool_], fitted: dict[int, pa.Table]
) -> pa.Table:
    """The kept rows in input order: runs of unchanged rows sliced from the input, repaired rows
    from their re-encoded tables."""
    unchanged = kept.copy()
    unchanged[list(fitted)] = False
    edges = np.flatnonzero(np.diff(np.concatenate(([0], unchanged.view(np.int8), [0]))))
    pieces = [
        (int(a), table.slice(int(a), int(b - a)))
        for a, b in zip(edges[::2], edges[1::2], strict=True)
    ]
    pieces += list(fitted.items())
    pieces.sort(key=lambda piece: piece[0])
    if not pieces:
        return table.slice(0, 0)
    # One contiguous copy: a Parquet writer handed thousands of tiny chunks is slower than this.
    return pa.concat_tables([piece for _, piece in pieces]).combine_chunks()


def _assemble_rejects(
    table: pa.Table, rejected: Iterable[tuple[int, RowResult]], source: str, first_row: int
) -> pa.Table:
    rejected = list(rejected)
    positions = [i for i, _ in rejected]
    out = table.take(pa.array(positions, pa.int64()))
    columns = [
        [r.codes for _, r in rejected],
        [r.reject_message for _, r in rejected],
        [source] * len(rejected),
        [first_row + i for i in positions],
    ]
    for f, values in zip(REJECT_FIELDS, columns, strict=True):
        out = out.append_column(f, pa.array(values, f.type))
    return out
