"""consecutive_assistant (R4): an assistant message right after another (SPEC section 3).

`repair` drops a second message identical to the first; otherwise, when the first made no tool
calls, appends the second's parts to it (a format whose content is one string joins the texts
with a blank line); otherwise the row cannot be repaired.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from transcript_clean.model import AssistantMessage, Message
from transcript_clean.rules.base import Rule, Unrepairable, Violation, Walk
from transcript_clean.transcript import CONSECUTIVE_ASSISTANT

if TYPE_CHECKING:
    from transcript_clean.policy import Config

CODE: Final = CONSECUTIVE_ASSISTANT


def describe(index: int, call_id: str | None) -> str:
    return f"message {index}: an assistant message follows another assistant message"


def find(walk: Walk) -> Iterator[Violation]:
    for error in walk.errors_of(CODE):
        yield Violation(CODE, error.index, error.call_id, str(error))


def merge_consecutive_assistant(messages: Sequence[Message]) -> list[Message]:
    """R4: a second assistant message identical to the first is dropped; otherwise, when the
    first has no tool calls, the second's parts are appended to it. Otherwise `Unrepairable`."""
    out: list[Message] = []
    for index, msg in enumerate(messages):
        previous = out[-1] if out else None
        if not (isinstance(msg, AssistantMessage) and isinstance(previous, AssistantMessage)):
            out.append(msg)
        elif msg.content == previous.content:
            continue
        elif not previous.tool_calls:
            out[-1] = replace(previous, content=previous.content + msg.content)
        else:
            raise Unrepairable(
                CODE,
                f"message {index}: an assistant message follows one that made tool calls; "
                "it cannot be merged",
            )
    return out


def _repair(messages: list[Message], config: Config) -> list[Message]:
    return merge_consecutive_assistant(messages)


RULE = Rule(
    CODE,
    order=4,
    summary="an assistant message follows an assistant message",
    actions_help=(
        "R4: an assistant message right after another. `repair` drops an identical second "
        "message, or appends the second to the first when the first made no tool calls; "
        "otherwise the row is rejected."
    ),
    allowed=frozenset({"repair", "reject"}),
    default="repair",
    find=find,
    repair=_repair,
    describe=describe,
)
