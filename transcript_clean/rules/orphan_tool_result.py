"""orphan_tool_result (R3): a tool result that answers no pending call (SPEC section 3).

`repair` drops it, and a message left with no parts with it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from transcript_clean.model import AssistantMessage, Message, ToolResult, UserMessage
from transcript_clean.rules.base import Rule, Violation, Walk
from transcript_clean.transcript import ORPHAN_TOOL_RESULT

if TYPE_CHECKING:
    from transcript_clean.policy import Config

CODE: Final = ORPHAN_TOOL_RESULT


def describe(index: int, call_id: str | None) -> str:
    return f"message {index}: tool result for {call_id!r} answers no pending call"


def find(walk: Walk) -> Iterator[Violation]:
    for error in walk.errors_of(CODE):
        yield Violation(CODE, error.index, error.call_id, str(error))


def drop_orphan_results(messages: Sequence[Message]) -> list[Message]:
    """R3: every result that answers no pending call is dropped, and a message left empty."""
    out: list[Message] = []
    pending: set[str] = set()
    for msg in messages:
        if isinstance(msg, AssistantMessage):
            pending = {c.id for c in msg.tool_calls}
        elif isinstance(msg, UserMessage):
            answered: set[str] = set()
            parts = []
            for part in msg.content:
                if isinstance(part, ToolResult):
                    if part.call not in pending or part.call in answered:
                        continue
                    answered.add(part.call)
                parts.append(part)
            pending = set()
            if len(parts) == len(msg.content):
                out.append(msg)
                continue
            if not parts:
                continue
            msg = replace(msg, content=tuple(parts))
        out.append(msg)
    return out


def _repair(messages: list[Message], config: Config) -> list[Message]:
    return drop_orphan_results(messages)


RULE = Rule(
    CODE,
    order=3,
    summary="a result answers no pending call",
    actions_help=(
        "R3: a tool result that answers no pending call. `repair` drops it (and a message left "
        "empty)."
    ),
    allowed=frozenset({"repair", "reject"}),
    default="repair",
    find=find,
    repair=_repair,
    describe=describe,
)
