"""trailing_tool_call: calls still pending at the very end of the history.

`validate_canonical` calls them unanswered, but in a function-calling fine-tuning set the last
assistant turn's calls are the training target, so the cleaner names them apart and keeps them by
default. `repair` treats them like `unanswered_tool_call`, whose repair does it.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Final

from transcript_clean.rules.base import Rule, Violation, Walk
from transcript_clean.transcript import UNANSWERED_TOOL_CALL

CODE: Final = "trailing_tool_call"


def message(index: int, call_id: str | None) -> str:
    return f"message {index}: tool call {call_id!r} ends the history"


def find(walk: Walk) -> Iterator[Violation]:
    trailing = walk.trailing
    if trailing is None:
        return
    for error in walk.errors_of(UNANSWERED_TOOL_CALL):
        if error.index == trailing[0]:
            yield Violation(CODE, error.index, error.call_id, message(error.index, error.call_id))


RULE = Rule(
    CODE,
    order=5.5,
    summary=("the history ends with calls not yet answered (a function-calling training target)"),
    actions_help=(
        "Calls still pending at the very end: the training target of a function-calling set. "
        "`keep` leaves them; `repair` treats them like unanswered_tool_call."
    ),
    allowed=frozenset({"repair", "reject", "keep"}),
    default="keep",
    find=find,
    columnar=attrgetter("rows_trailing"),
)
