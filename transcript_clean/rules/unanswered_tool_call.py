"""unanswered_tool_call (R5): a tool call with no result in the next user message (SPEC section 3).

Calls still pending at the very end of the history are `trailing_tool_call` instead. `repair`
cuts the transcript just before the assistant turn that made the call, when an assistant turn
remains (`[repair] interrupted_call = "cut"`; otherwise the row cannot be repaired), or answers
the call with an error result (`"error_result"`). The default, `"auto"`, is settled for the
rows' format before a rule reads it (`policy.for_format`): the error result for an agent loop's
record (Claude Code, OpenHands), whose loop answers a call it interrupted so, else the cut.

`error_results` is the error result decided over a batch's columnar view, once for every format
that flattens: which calls it answers and the message each result goes into; the format writes
it (`Format.write`), where it says it can (`Format.result_holders`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Final

import numpy as np

from transcript_clean.columnar.arrays import Mask
from transcript_clean.columnar.edits import Inserts
from transcript_clean.model import AssistantMessage, Message
from transcript_clean.rules.base import (
    Rule,
    Unrepairable,
    Violation,
    Walk,
    put_results,
)
from transcript_clean.transcript import (
    UNANSWERED_TOOL_CALL,
    describe_error,
    tool_result_message,
)

if TYPE_CHECKING:
    from transcript_clean.columnar.walk import ConversationsWalk
    from transcript_clean.rules.base import RuleConfig

CODE: Final = UNANSWERED_TOOL_CALL
TRAILING: Final = "trailing_tool_call"

INTERRUPTED_TEXT: Final = "The tool call was interrupted before a result was produced."


def describe(index: int, call_id: str | None) -> str:
    return describe_error(CODE, index, call_id)


def uncuttable(index: int, call_id: str) -> str:
    """Why a row whose first unanswered call is at message `index` cannot be cut before it."""
    return (
        f"message {index}: tool call {call_id!r} has no result, and cutting the transcript "
        "before it would leave no assistant turn"
    )


def find(walk: Walk) -> Iterator[Violation]:
    trailing = walk.trailing
    for error in walk.errors_of(CODE):
        if trailing is None or error.index != trailing[0]:
            yield Violation(CODE, error.index, error.call_id, str(error))


def _unanswered(messages: Sequence[Message], include_trailing: bool) -> dict[int, list[str]]:
    """The unanswered call ids by the index of the turn that made them."""
    walk = Walk(messages)
    trailing = walk.trailing
    by_turn: dict[int, list[str]] = {}
    for error in walk.errors_of(CODE):
        if error.call_id is None:
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
        raise Unrepairable(CODE, uncuttable(first, by_turn[first][0]))
    return out


def answer_unanswered_calls(
    messages: Sequence[Message], *, include_trailing: bool = False
) -> list[Message]:
    """R5 (`error_result`): every unanswered call is answered with the error result
    "The tool call was interrupted before a result was produced."."""
    by_turn = _unanswered(messages, include_trailing)
    out = list(messages)
    for turn in sorted(by_turn, reverse=True):
        msg = out[turn]
        assert isinstance(msg, AssistantMessage)
        calls = {c.id: c for c in msg.tool_calls}
        results = [tool_result_message(calls[i], INTERRUPTED_TEXT) for i in by_turn[turn]]
        put_results(out, turn, results, replacing=False)
    return out


def error_results(walk: ConversationsWalk, rows: Mask) -> tuple[Inserts, Mask]:
    """`answer_unanswered_calls` over a batch's view, for the rows of `rows` (rows whose calls
    pending at the very end it leaves alone): per unanswered call, its error result and the
    user message it goes into (`put_results`: the next message but system ones, where that is
    a user message; else a new one right after the turn), and the rows it answers. A row where
    a turn repeats a call id (whose result the per-row path names after the last of them) is
    left out."""
    c = walk.conversations
    rows = rows & ~walk.rows_duplicate_id
    calls = np.flatnonzero(walk.unanswered & rows[c.message_row[c.call_message]])
    # Per message, the user message that answers it (its window's), by position in the view.
    users = np.flatnonzero(walk.window >= 0)
    answering = np.full(c.messages, -1, dtype=np.int64)
    answering[walk.kept[walk.window[users]]] = walk.kept[users]
    inserts = Inserts(calls, answering[c.call_message[calls]], INTERRUPTED_TEXT)
    answered = np.zeros(walk.rows, dtype=bool)
    answered[c.message_row[c.call_message[calls]]] = True
    return inserts, answered


def _repair(messages: list[Message], config: RuleConfig) -> list[Message]:
    include_trailing = config.action(TRAILING) == "repair"
    if config.interrupted_call == "error_result":
        return answer_unanswered_calls(messages, include_trailing=include_trailing)
    # "cut", or an "auto" no entry point settled (a caller of the rule itself): the cut
    return cut_before_unanswered(messages, include_trailing=include_trailing)


RULE = Rule(
    CODE,
    order=5,
    summary="a call has no result in the next user message",
    actions_help="R5: a tool call with no result in the next user message. `repair`: see "
    "[repair] below.",
    allowed=frozenset({"repair", "reject"}),
    default="repair",
    find=find,
    repair=_repair,
    also_repairs=(TRAILING,),
    columnar=attrgetter("rows_unanswered"),
)
