"""invalid_tool_arguments (R2): a tool call whose arguments are not a JSON object.

`repair` answers the turn as the live loop would have: the invalid call gets
`invalid_arguments_feedback`, every valid peer `not_executed` (`invalid_call_feedback`, once per
invalid call). The call itself stays as the model wrote it, answered: a repaired row still has it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Final

from transcript_clean.model import AssistantMessage, Message, ToolCall, ToolResult, is_json
from transcript_clean.rules.base import Rule, Violation, Walk, put_results
from transcript_clean.transcript import (
    invalid_arguments_feedback,
    not_executed,
    tool_result_message,
)

if TYPE_CHECKING:
    from transcript_clean.policy import Config

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


def find(walk: Walk) -> Iterator[Violation]:
    for index, msg in enumerate(walk.messages):
        if isinstance(msg, AssistantMessage):
            for call in msg.tool_calls:
                if has_invalid_arguments(call):
                    words = message(index, call.id, call.name, raw_arguments(call))
                    yield Violation(CODE, index, call.id, words)


def answer_invalid_calls(messages: Sequence[Message]) -> list[Message]:
    """R2: a turn with a call whose arguments are not a JSON object is answered as the live loop
    would have answered it: the invalid call gets `invalid_arguments_feedback`, every valid peer
    `not_executed` (`invalid_call_feedback`, once per invalid call)."""
    out = list(messages)
    index = 0
    while index < len(out):
        msg = out[index]
        if isinstance(msg, AssistantMessage) and any(
            has_invalid_arguments(c) for c in msg.tool_calls
        ):
            results: list[ToolResult] = []
            seen: set[str] = set()
            for call in msg.tool_calls:
                if call.id in seen:
                    continue
                seen.add(call.id)
                if has_invalid_arguments(call):
                    feedback = invalid_arguments_feedback(call.name, raw_arguments(call))
                    results.append(tool_result_message(call, feedback))
                else:
                    results.append(not_executed(call))
            put_results(out, index, results, replacing=True)
        index += 1
    return out


def _repair(messages: list[Message], config: Config) -> list[Message]:
    return answer_invalid_calls(messages)


RULE = Rule(
    CODE,
    order=2,
    summary="a call's arguments are not a JSON object",
    actions_help=(
        "R2: a tool call whose arguments are not a JSON object. `repair` answers the turn as "
        "the live loop would have: the invalid call gets feedback asking for a JSON object, "
        'its peers "not executed".'
    ),
    allowed=frozenset({"repair", "reject", "keep"}),
    default="repair",
    find=find,
    repair=_repair,
    survives_repair=True,
)
