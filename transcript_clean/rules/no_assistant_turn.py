"""no_assistant_turn: a transcript with no assistant message left has nothing to learn from."""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from typing import Final

from transcript_clean.model import AssistantMessage
from transcript_clean.rules.base import Rule, Violation, Walk

CODE: Final = "no_assistant_turn"
MESSAGE: Final = "the transcript has no assistant turn"


def find(walk: Walk) -> Iterator[Violation]:
    if not any(isinstance(m, AssistantMessage) for m in walk.messages):
        yield Violation(CODE, None, None, MESSAGE)


RULE = Rule(
    CODE,
    order=6,
    summary="no assistant message is left",
    actions_help="No assistant message left: nothing to learn from. `reject` or `keep`.",
    allowed=frozenset({"reject", "keep"}),
    default="reject",
    find=find,
    message=MESSAGE,
    columnar=attrgetter("rows_no_assistant"),
)
