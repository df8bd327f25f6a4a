"""duplicate_call_id: two tool calls of one assistant turn share an id (SPEC section 8).

The walk of SPEC section 3 counts a repeated id once as pending, so one result "answers" both
calls; but two calls sharing an id cannot both be answered, and no repair can tell which result
was meant for which. The row is rejected by default; `keep` leaves it as is, which the walk
still accepts (R6 holds).
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Final

from transcript_clean.model import AssistantMessage
from transcript_clean.rules.base import Rule, Violation, Walk

CODE: Final = "duplicate_call_id"


def message(index: int, first: int, second: int, call_id: str) -> str:
    return f"message {index}: tool calls {first} and {second} share the id {call_id!r}"


def find(walk: Walk) -> Iterator[Violation]:
    """One violation per call whose id an earlier call of its turn has, naming the two (their
    places among the turn's calls)."""
    for index, msg in enumerate(walk.messages):
        if not isinstance(msg, AssistantMessage):
            continue
        calls = msg.tool_calls
        if len(calls) < 2:
            continue
        first: dict[str, int] = {}
        for place, call in enumerate(calls):
            seen = first.setdefault(call.id, place)
            if seen != place:
                yield Violation(CODE, index, call.id, message(index, seen, place, call.id))


RULE = Rule(
    CODE,
    order=1.5,
    summary="two tool calls of one assistant turn share an id: they cannot both be answered",
    actions_help=(
        "Two tool calls of one assistant turn share an id, so no result can say which of them "
        "it answers. `reject`, or `keep` (the walk counts the id once)."
    ),
    allowed=frozenset({"reject", "keep"}),
    default="reject",
    find=find,
    columnar=attrgetter("rows_duplicate_id"),
)
