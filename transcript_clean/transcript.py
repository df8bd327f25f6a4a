"""Conversation validation and repair, assistant-turn classification, and tool-result constructors.

The Python counterpart of the `transcript` module of rig (SPEC sections 2-4), with its names:

    >>> from transcript_clean.model import user, assistant
    >>> validate_canonical([user("Hello"), assistant("Hi")])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from transcript_clean.errors import TranscriptCleanError
from transcript_clean.model import (
    AssistantMessage,
    AssistantPart,
    Media,
    Message,
    Reasoning,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    ToolResultPart,
)

__all__ = [
    "CONSECUTIVE_ASSISTANT",
    "ORPHAN_TOOL_RESULT",
    "TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER",
    "TURN_CLASSES",
    "UNANSWERED_TOOL_CALL",
    "TranscriptError",
    "assistant_text_from_choice",
    "assistant_turn_class",
    "describe_error",
    "invalid_arguments_feedback",
    "invalid_call_feedback",
    "is_blank",
    "is_empty_assistant_turn",
    "not_executed",
    "tool_result_message",
    "tool_result_output",
    "transcript_errors",
    "validate_canonical",
]

CONSECUTIVE_ASSISTANT: Final = "consecutive_assistant"
UNANSWERED_TOOL_CALL: Final = "unanswered_tool_call"
ORPHAN_TOOL_RESULT: Final = "orphan_tool_result"

TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER: Final = (
    "Tool not executed because another tool call in the same assistant turn was invalid."
)

# How much of a bad `raw` argument string the feedback quotes; the model needs to recognise its
# call, not to read it back whole.
FEEDBACK_QUOTE_LIMIT: Final = 500


def describe_error(code: str, index: int, call_id: str | None) -> str:
    """The words for a violation of the walk (a `TranscriptError`): `code` at message `index`,
    about the call `call_id`. The rules of these codes say them too."""
    if code == CONSECUTIVE_ASSISTANT:
        return f"message {index}: an assistant message follows another assistant message"
    if code == UNANSWERED_TOOL_CALL:
        return f"message {index}: tool call {call_id!r} has no result in the next user message"
    if code == ORPHAN_TOOL_RESULT:
        return f"message {index}: tool result for {call_id!r} answers no pending call"
    return f"message {index}: {code}"


class TranscriptError(TranscriptCleanError):
    """Why a history is not a canonical transcript. See `validate_canonical`.

    `code` is a stable snake_case string, `index` the message it concerns and `call_id` the
    tool call, where there is one.
    """

    def __init__(self, code: str, index: int, call_id: str | None = None) -> None:
        # The words are made when asked for (`str`): a long transcript's walk can find a
        # hundred thousand violations that only need counting.
        super().__init__(code, index, call_id)
        self.code = code
        self.index = index
        self.call_id = call_id

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        return describe_error(self.code, self.index, self.call_id)

    def __repr__(self) -> str:
        return f"TranscriptError({self.code!r}, index={self.index}, call_id={self.call_id!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TranscriptError):
            return NotImplemented
        return (self.code, self.index, self.call_id) == (other.code, other.index, other.call_id)

    def __hash__(self) -> int:
        return hash((self.code, self.index, self.call_id))


def transcript_errors(messages: Sequence[Message]) -> list[TranscriptError]:
    """Every violation of SPEC section 3, in the order the walk finds them."""
    errors: list[TranscriptError] = []
    pending: dict[str, None] = {}  # an ordered set: the last assistant turn's unanswered calls
    pending_at = -1  # the index of that assistant turn
    after_assistant = False

    def close_window() -> None:
        errors.extend(TranscriptError(UNANSWERED_TOOL_CALL, pending_at, c) for c in pending)
        pending.clear()

    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            after_assistant = False
        elif isinstance(message, AssistantMessage):
            if after_assistant:
                errors.append(TranscriptError(CONSECUTIVE_ASSISTANT, index))
            if pending:
                close_window()
            for piece in message.content:
                if isinstance(piece, ToolCall):
                    pending[piece.id] = None
            pending_at = index
            after_assistant = True
        else:
            after_assistant = False
            answered: set[str] = set()
            for part in message.content:
                if not isinstance(part, ToolResult):
                    continue
                if part.call in pending and part.call not in answered:
                    answered.add(part.call)
                else:
                    errors.append(TranscriptError(ORPHAN_TOOL_RESULT, index, part.call))
            for call in answered:
                del pending[call]
            if pending:
                close_window()
    if pending:
        close_window()
    return errors


def validate_canonical(messages: Sequence[Message]) -> None:
    """Rejects consecutive assistant messages, unanswered tool-call ids, and results without a
    pending call, raising `TranscriptError` for the first violation.

    Each pending id must be answered once in the next user message, before another assistant
    message or the end of history. System messages reset the consecutive-assistant check but
    retain pending calls. Duplicate call ids are treated as one pending id.
    """
    errors = transcript_errors(messages)
    if errors:
        raise errors[0]


# ---------------------------------------------------------------------------------------------
# classification


def is_blank(part: AssistantPart) -> bool:
    """Whether a part carries nothing a reader or a provider could use (SPEC section 2)."""
    if isinstance(part, Text):
        return not part.text.strip() and part.additional_params is None
    if isinstance(part, Reasoning):
        return part.signature is None and all(
            isinstance(piece, ReasoningText) and not piece.text.strip() for piece in part.content
        )
    return False


def is_empty_assistant_turn(content: Iterable[AssistantPart]) -> bool:
    """Whether a generated assistant turn is empty: every part is blank (so also no parts).

    An empty turn must not enter history.
    """
    return all(is_blank(part) for part in content)


# What an assistant turn holds, as the profile counts it (`transcript_clean.profile`). A turn
# with calls and reasoning is `reasoning+tool_call` whether it also says something or not; the
# empty ones (`is_empty_assistant_turn`) are told apart by what blank thing they hold. The
# formats' Arrow sides compute the same classes (by these names and in this order) for the rows
# the fast path settles.
TURN_CLASSES: Final = (
    "text",
    "tool_call",
    "text+tool_call",
    "reasoning_only",
    "reasoning+text",
    "reasoning+tool_call",
    "empty: no content",
    "empty: white space",
    "empty: empty reasoning",
)


def assistant_turn_class(content: Sequence[AssistantPart]) -> str:
    """The class of an assistant turn as it came in: one of `TURN_CLASSES`."""
    calls = reasoning = said = False
    for part in content:
        if isinstance(part, ToolCall):
            calls = True
        elif isinstance(part, Reasoning):
            reasoning = reasoning or not is_blank(part)
        else:
            said = said or not is_blank(part)
    if calls:
        return "reasoning+tool_call" if reasoning else "text+tool_call" if said else "tool_call"
    if said:
        return "reasoning+text" if reasoning else "text"
    if reasoning:
        return "reasoning_only"
    if any(isinstance(part, Reasoning) for part in content):
        return "empty: empty reasoning"
    if any(isinstance(part, Text) and part.text for part in content):
        return "empty: white space"
    return "empty: no content"


def assistant_text_from_choice(content: Iterable[AssistantPart]) -> str:
    """The text parts of an assistant turn, concatenated."""
    return "".join(part.text for part in content if isinstance(part, Text))


# ---------------------------------------------------------------------------------------------
# constructors


def tool_result_message(call: ToolCall, text: str) -> ToolResult:
    """The error result of a call that never ran, its text verbatim (recovery feedback, a skip
    reason). JSON-shaped text stays text: it is never reparsed into structured content."""
    return ToolResult(call=call.id, name=call.name, content=(Text(text),), status="error")


def tool_result_output(
    call: ToolCall, output: str | Sequence[ToolResultPart] | BaseException
) -> ToolResult:
    """A tool's result as the model reads it, without reparsing text.

    A string or a sequence of parts is a success; an exception (anything but a success) is an
    error result carrying its message.
    """
    if isinstance(output, BaseException):
        return ToolResult(
            call=call.id, name=call.name, content=(Text(str(output)),), status="error"
        )
    if isinstance(output, str):
        return ToolResult(call=call.id, name=call.name, content=(Text(output),))
    parts = tuple(output)
    for part in parts:
        if not isinstance(part, Text | Media):
            raise TypeError(f"a tool result part must be Text or Media, got {type(part).__name__}")
    return ToolResult(call=call.id, name=call.name, content=parts)


def not_executed(call: ToolCall) -> ToolResult:
    """The result of a call the run did not execute because a call beside it was invalid."""
    return tool_result_message(call, TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER)


def invalid_arguments_feedback(tool: str, raw: str) -> str:
    """What the model reads when its call to `tool` sent `raw`, arguments that are not a JSON
    object: the tool never ran, and the model calls it again."""
    if len(raw) > FEEDBACK_QUOTE_LIMIT:
        quoted = f"{raw[:FEEDBACK_QUOTE_LIMIT]}… ({len(raw)} characters in all)"
    else:
        quoted = raw
    return (
        f"Tool {tool!r} was not executed: its arguments must be a JSON object, "
        f"but the call sent: {quoted}\n"
        f"Call {tool!r} again with its arguments as a JSON object."
    )


def invalid_call_feedback(
    content: Iterable[AssistantPart], invalid: ToolCall | str, feedback: str
) -> list[ToolResult]:
    """The results answering a turn with an invalid call, in call order: `feedback` for the call
    `invalid` (a call or its id), `not_executed` for every other call. A repeated call id is
    answered once. Empty when `content` has no tool calls."""
    invalid_id = invalid.id if isinstance(invalid, ToolCall) else invalid
    results: list[ToolResult] = []
    seen: set[str] = set()
    for part in content:
        if not isinstance(part, ToolCall) or part.id in seen:
            continue
        seen.add(part.id)
        if part.id == invalid_id:
            results.append(tool_result_message(part, feedback))
        else:
            results.append(not_executed(part))
    return results
