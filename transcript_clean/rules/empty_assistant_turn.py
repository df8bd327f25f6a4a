"""empty_assistant_turn (R1): an assistant turn whose parts are all blank (SPEC section 2).

Found before every rule of the walk, on the transcript as it came in; the others are found on
what is left once these turns are set aside. `repair` drops them.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Final

from transcript_clean.model import AssistantMessage, Message
from transcript_clean.rules.base import Rule
from transcript_clean.transcript import is_empty_assistant_turn

CODE: Final = "empty_assistant_turn"


def message(index: int) -> str:
    return f"message {index}: empty assistant turn"


def drop_empty_turns(messages: Sequence[Message]) -> tuple[list[Message], list[int]]:
    """R1: the messages without empty assistant turns, and the indexes of the turns dropped."""
    kept: list[Message] = []
    dropped: list[int] = []
    for index, msg in enumerate(messages):
        if isinstance(msg, AssistantMessage) and is_empty_assistant_turn(msg.content):
            dropped.append(index)
        else:
            kept.append(msg)
    return kept, dropped


RULE = Rule(
    CODE,
    order=1,
    summary="every part of an assistant turn is blank (white space, empty reasoning)",
    actions_help=(
        "R1: an assistant turn whose parts are all blank (empty or white-space text, empty "
        'reasoning). `repair` drops the turn (the stats table says "dropped").'
    ),
    allowed=frozenset({"repair", "reject", "keep"}),
    default="repair",
    stage="empty",
    repaired_as="dropped",
    columnar=attrgetter("rows_empty"),
)
