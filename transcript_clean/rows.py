"""Cleaning one row: SPEC section 5 in order.

R0 decode, R1 empty turns, the codes found in the R1-cleaned transcript, each code's action from
the config, the repairs R2-R5, R6 validation and R7 encoding. A bad row is a `RowResult` with
status `rejected` and its codes, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from transcript_clean.formats.base import Decoded, DecodeError, Format, Row
from transcript_clean.model import AssistantMessage, Message
from transcript_clean.policy import (
    CONSECUTIVE_ASSISTANT,
    DEFAULT,
    EMPTY_ASSISTANT_TURN,
    INVALID_TOOL_ARGUMENTS,
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
from transcript_clean.transcript import transcript_errors

__all__ = [
    "RepairStep",
    "RowResult",
    "Violation",
    "clean_row",
    "find_violations",
    "rejected_row",
    "unencodable",
]

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


def _message_count(value: Any) -> int:
    return len(value) if isinstance(value, list) else 0
