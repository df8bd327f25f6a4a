"""The repairs R1-R5 of SPEC section 5, one function each.

Each takes canonical messages and returns new ones, leaving its input untouched; a repair that is
impossible raises `Unrepairable`. A repaired message is made with `dataclasses.replace`, so it
keeps its `origin` and the encoder writes back the source's extra keys.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from transcript_clean.errors import TranscriptCleanError
from transcript_clean.model import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    UserMessage,
)
from transcript_clean.policy import CONSECUTIVE_ASSISTANT, INTERRUPTED_TEXT, UNANSWERED_TOOL_CALL
from transcript_clean.transcript import (
    invalid_arguments_feedback,
    is_empty_assistant_turn,
    not_executed,
    tool_result_message,
    transcript_errors,
)

__all__ = [
    "Unrepairable",
    "answer_invalid_calls",
    "answer_unanswered_calls",
    "cut_before_unanswered",
    "drop_empty_turns",
    "drop_orphan_results",
    "has_invalid_arguments",
    "merge_consecutive_assistant",
    "trailing_calls",
]


class Unrepairable(TranscriptCleanError):
    """A violation the repair cannot fix; the row is rejected with `code`."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


def has_invalid_arguments(call: ToolCall) -> bool:
    """Whether the call's arguments are not a JSON object (they did not parse, or are not `{}`)."""
    return not isinstance(call.arguments, dict)


def raw_arguments(call: ToolCall) -> str:
    """The arguments as the model wrote them."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


# R1 ------------------------------------------------------------------------------------------


def drop_empty_turns(messages: Sequence[Message]) -> tuple[list[Message], list[int]]:
    """R1: the messages without empty assistant turns, and the indexes of the turns dropped."""
    kept: list[Message] = []
    dropped: list[int] = []
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and is_empty_assistant_turn(message.content):
            dropped.append(index)
        else:
            kept.append(message)
    return kept, dropped


# R2 ------------------------------------------------------------------------------------------


def _answer_window(messages: list[Message], turn: int) -> int | None:
    """The index of the user message that must answer the assistant turn at `turn`, if any: the
    next message that is not a system message, when it is a user message."""
    for index in range(turn + 1, len(messages)):
        message = messages[index]
        if isinstance(message, UserMessage):
            return index
        if isinstance(message, AssistantMessage):
            return None
    return None


def _put_results(messages: list[Message], turn: int, results: Sequence[ToolResult]) -> None:
    """Make `results` the answers to the turn at `turn`: they replace the first result for each
    of their calls in the answering user message (in front of its other parts), or become a new
    user message right after the turn when none answers it."""
    at = _answer_window(messages, turn)
    if at is None:
        messages.insert(turn + 1, UserMessage(tuple(results)))
        return
    answering = messages[at]
    assert isinstance(answering, UserMessage)
    calls = {r.call for r in results}
    replaced: set[str] = set()
    others = []
    for part in answering.content:
        if isinstance(part, ToolResult) and part.call in calls and part.call not in replaced:
            replaced.add(part.call)
        else:
            others.append(part)
    messages[at] = replace(answering, content=(*results, *others))


def answer_invalid_calls(messages: Sequence[Message]) -> list[Message]:
    """R2: a turn with a call whose arguments are not a JSON object is answered as the live loop
    would have answered it: the invalid call gets `invalid_arguments_feedback`, every valid peer
    `not_executed` (`invalid_call_feedback`, once per invalid call)."""
    out = list(messages)
    index = 0
    while index < len(out):
        message = out[index]
        if isinstance(message, AssistantMessage) and any(
            has_invalid_arguments(c) for c in message.tool_calls
        ):
            results: list[ToolResult] = []
            seen: set[str] = set()
            for call in message.tool_calls:
                if call.id in seen:
                    continue
                seen.add(call.id)
                if has_invalid_arguments(call):
                    feedback = invalid_arguments_feedback(call.name, raw_arguments(call))
                    results.append(tool_result_message(call, feedback))
                else:
                    results.append(not_executed(call))
            _put_results(out, index, results)
        index += 1
    return out


# R3 ------------------------------------------------------------------------------------------


def drop_orphan_results(messages: Sequence[Message]) -> list[Message]:
    """R3: every result that answers no pending call is dropped, and a message left empty."""
    out: list[Message] = []
    pending: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            pending = {c.id for c in message.tool_calls}
        elif isinstance(message, UserMessage):
            answered: set[str] = set()
            parts = []
            for part in message.content:
                if isinstance(part, ToolResult):
                    if part.call not in pending or part.call in answered:
                        continue
                    answered.add(part.call)
                parts.append(part)
            pending = set()
            if len(parts) == len(message.content):
                out.append(message)
                continue
            if not parts:
                continue
            message = replace(message, content=tuple(parts))
        out.append(message)
    return out


# R4 ------------------------------------------------------------------------------------------


def merge_consecutive_assistant(messages: Sequence[Message]) -> list[Message]:
    """R4: a second assistant message identical to the first is dropped; otherwise, when the
    first has no tool calls, the second's parts are appended to it. Otherwise `Unrepairable`."""
    out: list[Message] = []
    for index, message in enumerate(messages):
        previous = out[-1] if out else None
        if not (isinstance(message, AssistantMessage) and isinstance(previous, AssistantMessage)):
            out.append(message)
        elif message.content == previous.content:
            continue
        elif not previous.tool_calls:
            out[-1] = replace(previous, content=previous.content + message.content)
        else:
            raise Unrepairable(
                CONSECUTIVE_ASSISTANT,
                f"message {index}: an assistant message follows one that made tool calls; "
                "it cannot be merged",
            )
    return out


# R5 ------------------------------------------------------------------------------------------


def trailing_calls(messages: Sequence[Message]) -> tuple[int, tuple[str, ...]] | None:
    """The last assistant turn and its call ids, when its calls are still pending at the very end
    of the history (no user message after it)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage):
            return None
        if isinstance(message, AssistantMessage):
            ids = tuple(dict.fromkeys(c.id for c in message.tool_calls))
            return (index, ids) if ids else None
    return None


def _unanswered(messages: Sequence[Message], include_trailing: bool) -> dict[int, list[str]]:
    """The unanswered call ids by the index of the turn that made them."""
    trailing = trailing_calls(messages)
    by_turn: dict[int, list[str]] = {}
    for error in transcript_errors(messages):
        if error.code != UNANSWERED_TOOL_CALL or error.call_id is None:
            continue
        if not include_trailing and trailing is not None and error.index == trailing[0]:
            continue
        by_turn.setdefault(error.index, []).append(error.call_id)
    return by_turn


def cut_before_unanswered(
    messages: Sequence[Message], *, include_trailing: bool = False
) -> list[Message]:
    """R5 (`cut`): the transcript up to just before the first assistant turn with an unanswered
    call. `Unrepairable` when no assistant turn would remain."""
    by_turn = _unanswered(messages, include_trailing)
    if not by_turn:
        return list(messages)
    first = min(by_turn)
    out = list(messages[:first])
    if not any(isinstance(m, AssistantMessage) for m in out):
        raise Unrepairable(
            UNANSWERED_TOOL_CALL,
            f"message {first}: tool call {by_turn[first][0]!r} has no result, and cutting the "
            "transcript before it would leave no assistant turn",
        )
    return out


def answer_unanswered_calls(
    messages: Sequence[Message], *, include_trailing: bool = False
) -> list[Message]:
    """R5 (`error_result`): every unanswered call is answered with the error result
    "The tool call was interrupted before a result was produced."."""
    by_turn = _unanswered(messages, include_trailing)
    out = list(messages)
    for turn in sorted(by_turn, reverse=True):
        message = out[turn]
        assert isinstance(message, AssistantMessage)
        calls = {c.id: c for c in message.tool_calls}
        results = [tool_result_message(calls[i], INTERRUPTED_TEXT) for i in by_turn[turn]]
        at = _answer_window(out, turn)
        if at is None:
            out.insert(turn + 1, UserMessage(tuple(results)))
        else:
            answering = out[at]
            assert isinstance(answering, UserMessage)
            out[at] = replace(answering, content=(*answering.content, *results))
    return out
