"""Cleaning one row: SPEC section 5 in order.

R0 decode, R1 empty turns, the codes found in the R1-cleaned transcript, each code's action from
the config, the repairs R2-R5, R6 validation and R7 encoding. A bad row is a `RowResult` with
status `rejected` and its codes, never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast, runtime_checkable

from transcript_clean.formats.base import Decoded, DecodeError, Format, Row
from transcript_clean.model import Message
from transcript_clean.policy import DEFAULT, Config, for_format
from transcript_clean.rules import (
    EMPTY_ASSISTANT_TURN,
    MALFORMED_ROW,
    UNENCODABLE_ROW,
    Unrepairable,
    Violation,
    Walk,
    find_rendered,
    find_violations,
    get_rule,
    repair_chain,
)
from transcript_clean.rules.empty_assistant_turn import drop_empty_turns
from transcript_clean.rules.empty_assistant_turn import message as empty_message
from transcript_clean.rules.unencodable_row import message as unwritten_message
from transcript_clean.tools import Declared

__all__ = [
    "RepairStep",
    "RowResult",
    "Violation",
    "clean_row",
    "find_violations",
    "rejected_row",
    "too_deep",
    "unencodable",
]

Status = Literal["unchanged", "repaired", "rejected"]


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
    """code -> what was done: repaired, rejected, kept or dropped (empty turns); on a rejected
    row, `rejected` for the codes that decided it and `present` for the others."""
    decoded: Decoded | None = None
    tools: Declared | None = None
    """The tools the row declares, where it declares any."""
    messages: list[Message] | None = None
    """The transcript as written (or as it was when the row was rejected)."""
    row: Row | None = None
    """The re-encoded row, when repaired."""
    reject_message: str | None = None
    steps: list[RepairStep] = field(default_factory=list)
    messages_in: int = 0
    """Messages in the row's conversation column as it came in, and as written."""
    messages_out: int = 0
    templated: bool = False
    """Rendered with the chat template (it got as far as that, with `--chat-template`)."""
    rendered: tuple[int, int | None] | None = None
    """With a chat template that came with a tokenizer: the tokens of the transcript as
    rendered, and the trained ones (None without `{% generation %}`); None when it raised."""
    parts: list[tuple[str, Decoded]] = field(default_factory=list)
    """A dataset type's row, traced: each conversation checked (the prompt, then prompt +
    candidate) by its column, as decoded, for `explain`."""

    @property
    def codes(self) -> list[str]:
        return sorted(self.actions)

    def occurrences(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for v in self.violations:
            counts[v.code] = counts.get(v.code, 0) + 1
        return counts


def _reject(result: RowResult, deciding: Iterable[str], message: str | None = None) -> RowResult:
    """Reject the row for the codes of `deciding`; every other code it has is only `present`
    (issue 27, item 5: a trailing call the config keeps did not reject a row that calls an
    undeclared tool, and a gate on it must not count that row)."""
    result.status = "rejected"
    result.actions = mark_rejected(result.actions, deciding)
    result.row = None
    result.messages_out = 0
    if message is not None:
        result.reject_message = message
    elif result.violations:
        result.reject_message = result.violations[0].message
    return result


@runtime_checkable
class CleansItsRows(Protocol):
    """A format that cleans a row by its own means: a dataset type part by part
    (`shapes.ShapedFormat`), `--to` in one format and written in another
    (`convert.ConvertingFormat`). `clean_row` asks it first, which keeps the row cleaner below
    them; None: clean the row as one conversation."""

    def clean(self, row: Row, config: Config, *, trace: bool = False) -> RowResult | None: ...


_CLEANS_ITS_ROWS: dict[type, bool] = {}


def _cleans_its_rows(kind: type) -> bool:
    """Whether a format of class `kind` is `CleansItsRows`: asked once per class (an isinstance
    of a runtime protocol looks its members up each time, about 20 µs a row)."""
    found = _CLEANS_ITS_ROWS.get(kind)
    if found is None:
        found = _CLEANS_ITS_ROWS[kind] = issubclass(kind, CleansItsRows)
    return found


def clean_row(row: Row, fmt: Format, config: Config = DEFAULT, *, trace: bool = False) -> RowResult:
    """Clean one row (SPEC section 5). Never raises for bad data: a bad row is a rejection.

    With `trace`, `steps` records each repair's before and after. A row of a dataset type
    (`ShapedFormat`: prompt and candidates) is cleaned part by part (`shapes.clean`), which
    its format does (`CleansItsRows`).
    """
    if config.interrupted_call == "auto":  # a run settles it once: this is for a caller's row
        config = for_format(config, fmt)
    if _cleans_its_rows(type(fmt)):
        own = cast(CleansItsRows, fmt).clean(row, config, trace=trace)
        if own is not None:
            return own
    messages_in = fmt.message_count(row)
    try:
        return _clean_row(row, fmt, config, trace, messages_in)
    except RecursionError:
        # Values nested deeper than Python's recursion goes (decoding, comparing or writing
        # them): the row cannot be read as a whole.
        return rejected_row(MALFORMED_ROW, too_deep(fmt.column), messages_in)


def too_deep(column: str) -> str:
    """The `malformed_row` message of a row nested too deep to read."""
    return f"{column}: nested too deep to read (Python's recursion limit)"


def _clean_row(row: Row, fmt: Format, config: Config, trace: bool, messages_in: int) -> RowResult:
    try:
        decoded = fmt.decode(row)
    except DecodeError as err:
        return rejected_row(err.code, str(err), messages_in)
    original = decoded.messages
    tools = fmt.declared_tools(row)
    result = RowResult(
        "unchanged",
        decoded=decoded,
        tools=tools,
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
        gone = set(dropped)
        positions = [i for i in positions if i not in gone]
    for index in dropped:
        result.violations.append(Violation(EMPTY_ASSISTANT_TURN, index, None, empty_message(index)))
    for v in find_violations(work, config, tools):
        at = positions[v.index] if v.index is not None else None
        if at != v.index:
            message = v.message.replace(f"message {v.index}:", f"message {at}:", 1)
            v = Violation(v.code, at, v.call_id, message)
        result.violations.append(v)
    result.violations.sort(key=_place)

    actions = {code: config.action(code) for code in {v.code: None for v in result.violations}}
    result.actions = {
        code: {"repair": "repaired", "keep": "kept", "reject": "rejected"}[a]
        for code, a in actions.items()
    }
    if dropped and empty_action == "repair":
        result.actions[EMPTY_ASSISTANT_TURN] = "dropped"
    if "reject" in actions.values():
        rejected = next(v for v in result.violations if actions[v.code] == "reject")
        return _reject(result, [c for c, a in actions.items() if a == "reject"], rejected.message)

    current = work
    if "repair" in actions.values():
        if dropped and empty_action == "repair" and trace:
            result.steps.append(RepairStep(EMPTY_ASSISTANT_TURN, tuple(original), tuple(work)))
        try:
            current = _repair(current, config, result, trace, tools)
        except Unrepairable as err:
            return _reject(result, [err.code], str(err))

    # R6: nothing invalid is ever written. A code whose repair answers it rather than removing
    # it (an invalid call keeps its arguments) never blocks; nor does any code the config keeps.
    # A transcript no repair touched holds just the codes found, each of them kept.
    remaining = []
    if current is not work:
        remaining = [
            v
            for v in find_violations(current, config, tools)
            if not get_rule(v.code).survives_repair and config.action(v.code) != "keep"
        ]
    if remaining:
        for v in remaining:
            if v.code not in {w.code for w in result.violations}:
                result.violations.append(v)
        return _reject(result, [v.code for v in remaining], remaining[0].message)

    # With a chat template: the transcript as it will be written, rendered as its trainer
    # renders it (the rules of stage `render`).
    writer = fmt
    if config.chat_template is not None:
        walk = Walk(current, tools, config, declarations(row, fmt))
        rendered = find_rendered(walk)
        result.rendered = rendered_tokens(walk)
        result.templated = True
        if rendered:
            result.violations.extend(rendered)
            for v in rendered:
                result.actions[v.code] = "rejected" if config.action(v.code) == "reject" else "kept"
            deciding = [v for v in rendered if config.action(v.code) == "reject"]
            if deciding:
                result.messages = current  # as rendered: `explain` shows what was left out
                return _reject(result, [v.code for v in deciding], deciding[0].message)
        writer = _arguments_writer(config, fmt)

    result.messages = current
    if current == original and writer is fmt:
        return result
    try:
        written = writer.encode(decoded, current)
    except Exception as err:  # an encoder bug must cost one row, not the run
        return unencodable(result, unwritten_message(str(err)))
    if current == original:
        # Unchanged, but for its calls' arguments, written in the form `--arguments-as` asks.
        if written != row:
            result.row = written
        return result
    result.row = written
    result.status = "repaired"
    result.messages_out = fmt.message_count(result.row)
    return result


def _arguments_writer(config: Config, fmt: Format) -> Format:
    """`fmt` writing calls' arguments in the form the run asks for (`--arguments-as`), where
    it asks for one and the format has no form of its own."""
    from transcript_clean.rules._template import written_arguments

    form = written_arguments(config)
    return fmt if form is None else fmt.with_arguments(form) or fmt


def declarations(row: Row, fmt: Format) -> Any:
    """The row's declared tools as it holds them: the first of its format's columns that holds
    something (what a trainer passes as `tools=`)."""
    for column in fmt.declaring_columns:
        value = row.get(column)
        if value is not None and value != "" and value != []:
            return value
    return None


def rendered_tokens(walk: Walk) -> tuple[int, int | None] | None:
    """The rendered tokens and trained tokens the render rules worked out on `walk`."""
    from transcript_clean.rules._template import template_check

    checked = template_check(walk)
    if checked is None or checked.rendering.tokens is None:
        return None
    return checked.rendering.tokens, checked.rendering.trained


def _place(violation: Violation) -> int:
    return -1 if violation.index is None else violation.index


def mark_rejected(actions: Mapping[str, str], deciding: Iterable[str]) -> dict[str, str]:
    """The actions of a rejected row: `rejected` for the codes that rejected it, `present` for
    every other (it was there, but the row's fate was not its doing)."""
    decided = dict.fromkeys(deciding, "rejected")
    return {**{code: decided.get(code, "present") for code in actions}, **decided}


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
    return _reject(result, [UNENCODABLE_ROW], message)


def _repair(
    messages: list[Message],
    config: Config,
    result: RowResult,
    trace: bool,
    tools: Declared | None = None,
) -> list[Message]:
    """The registry's repairs (R2-R5), in order, each where the config repairs its code (or a
    code it also repairs, as R5 does calls pending at the end) and the row has it. A repair may
    uncover a code that was not found before (dropping an orphan's message can make two
    assistant messages meet): it counts."""
    changed = False  # a repair that changed nothing cannot have uncovered a new code
    for rule in repair_chain():
        active = [c for c in (rule.code, *rule.also_repairs) if config.action(c) == "repair"]
        if not active or not (changed or any(c in result.actions for c in active)):
            continue
        if rule.repair_declared is not None:
            after = rule.repair_declared(messages, config, tools)
        else:
            assert rule.repair is not None
            after = rule.repair(messages, config)
        if after == messages:
            continue
        changed = True
        if trace:
            result.steps.append(RepairStep(rule.code, tuple(messages), tuple(after)))
        for c in [c for c in active if c in result.actions] or [rule.code]:
            if c not in result.actions:
                # Uncovered by an earlier repair (an orphan's message dropped, say): it counts.
                result.violations.append(Violation(c, None, None, f"{c} after an earlier repair"))
            result.actions[c] = "repaired"
        messages = after
    return messages
