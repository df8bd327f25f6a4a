"""invalid_tool_arguments (R2): a tool call whose arguments are not a JSON object.

`repair` answers the turn as the live loop would have: the invalid call gets
`invalid_arguments_feedback`, every valid peer `not_executed` (`invalid_call_feedback`, once per
invalid call). The call itself stays as the model wrote it, answered: a repaired row still has it.

A repair never writes over a real result: when the invalid call's result in the row is not an
error (the harness ran it anyway, and the turns after it read its output), the row cannot be
repaired and is rejected. A result R2 itself wrote (its feedback, which a format without an
error flag reads back as a success) counts as an error. A call to a declared raw-input tool
(`code_interpreter`, a custom tool) takes arguments that are not JSON by design: it is never
invalid.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Final

from transcript_clean.model import (
    AssistantMessage,
    Message,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
    is_json,
)
from transcript_clean.rules.base import (
    Rule,
    Unrepairable,
    Violation,
    Walk,
    answer_window,
    put_results,
    raw_input_names,
)
from transcript_clean.transcript import (
    invalid_arguments_feedback,
    not_executed,
    tool_result_message,
)

if TYPE_CHECKING:
    from transcript_clean.rules.base import RuleConfig
    from transcript_clean.tools import Declared

CODE: Final = "invalid_tool_arguments"


def has_invalid_arguments(call: ToolCall) -> bool:
    """Whether the call's arguments are not a JSON object: they did not parse, are not `{}`, or
    hold what strict JSON cannot (NaN, an infinite number, a lone surrogate)."""
    if not isinstance(call.arguments, dict):
        return True
    # Arguments parsed from text were parsed as strict JSON already (`parse_arguments`).
    return call.raw_arguments is None and not is_json(call.arguments)


def raw_arguments(call: ToolCall) -> str:
    """The arguments as the model wrote them."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def message(index: int, call_id: str, name: str, raw: str) -> str:
    shown = raw if len(raw) <= 60 else raw[:60] + "…"
    return (
        f"message {index}: tool call {call_id!r} to {name!r} has arguments that are not a JSON "
        f"object: {shown!r}"
    )


def real_result(index: int, call: ToolCall, at: int) -> str:
    """Why a turn whose invalid call has a real result cannot be repaired."""
    return (
        f"message {index}: tool call {call.id!r} to {call.name!r} has arguments that are not a "
        f"JSON object, but a real result in message {at}: rewriting it would contradict the "
        "turns after it"
    )


def find(walk: Walk) -> Iterator[Violation]:
    raw = raw_input_names(walk.tools)
    for index, msg in enumerate(walk.messages):
        if isinstance(msg, AssistantMessage):
            for call in msg.tool_calls:
                if call.name not in raw and has_invalid_arguments(call):
                    words = message(index, call.id, call.name, raw_arguments(call))
                    yield Violation(CODE, index, call.id, words)


def answer_invalid_calls(
    messages: Sequence[Message], raw: frozenset[str] = frozenset()
) -> list[Message]:
    """R2: a turn with a call whose arguments are not a JSON object is answered as the live loop
    would have answered it: the invalid call gets `invalid_arguments_feedback`, every valid peer
    `not_executed` (`invalid_call_feedback`, once per invalid call). Calls to the tools named in
    `raw` (raw-input tools) are valid whatever their arguments. `Unrepairable` when an invalid
    call's result in the row is a real one."""

    def invalid(call: ToolCall) -> bool:
        return call.name not in raw and has_invalid_arguments(call)

    out = list(messages)
    index = 0
    while index < len(out):
        msg = out[index]
        if isinstance(msg, AssistantMessage) and any(invalid(c) for c in msg.tool_calls):
            results: list[ToolResult] = []
            seen: set[str] = set()
            for call in msg.tool_calls:
                if call.id in seen:
                    continue
                seen.add(call.id)
                if invalid(call):
                    feedback = invalid_arguments_feedback(call.name, raw_arguments(call))
                    _refuse_real_result(out, index, call, feedback)
                    results.append(tool_result_message(call, feedback))
                else:
                    results.append(not_executed(call))
            put_results(out, index, results, replacing=True)
        index += 1
    return out


def _refuse_real_result(messages: Sequence[Message], index: int, call: ToolCall, text: str) -> None:
    """`Unrepairable` when the call's result in the user message answering its turn is a real
    one: not an error, and not the feedback R2 writes (which a format without an error flag
    reads back as a success)."""
    at = answer_window(messages, index)
    if at is None:
        return
    answering = messages[at]
    assert isinstance(answering, UserMessage)
    for part in answering.content:
        if isinstance(part, ToolResult) and part.call == call.id:
            if part.status != "error" and part.content != (Text(text),):
                raise Unrepairable(CODE, real_result(index, call, at))
            return


def _repair(messages: list[Message], config: RuleConfig) -> list[Message]:
    return answer_invalid_calls(messages)


def _repair_declared(
    messages: list[Message], config: RuleConfig, tools: Declared | None
) -> list[Message]:
    return answer_invalid_calls(messages, raw_input_names(tools))


RULE = Rule(
    CODE,
    order=2,
    summary=(
        "a call's arguments are not a JSON object (never a raw-input tool's); a call with a "
        "real result is rejected, never rewritten"
    ),
    actions_help=(
        "R2: a tool call whose arguments are not a JSON object (never a call to a declared "
        "raw-input tool, such as code_interpreter). `repair` answers the turn as the live loop "
        "would have: the invalid call gets feedback asking for a JSON object, its peers "
        '"not executed"; a row whose invalid call has a real (non-error) result is rejected '
        "instead, since rewriting it would contradict the turns after it."
    ),
    allowed=frozenset({"repair", "reject", "keep"}),
    default="repair",
    find=find,
    repair=_repair,
    repair_declared=_repair_declared,
    survives_repair=True,
    columnar=attrgetter("rows_invalid_arguments"),
)
