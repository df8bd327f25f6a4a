"""consecutive_assistant (R4): an assistant message right after another (SPEC section 3).

`repair` drops a second message identical to the first; otherwise, when the first made no tool
calls, appends the second's parts to it (a format whose content is one string joins the texts
with a blank line, leaving out a blank text: `formats.base.join_texts`); otherwise the row
cannot be repaired. Nor can it when the two messages' other fields (`weight`, `loss_weight`)
differ: one message cannot carry both.

`merges` is the same repair decided over a batch's columnar view, once for every format that
flattens, for the rows whose runs are plain texts; the format writes it (`Format.write`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Mask, as_mask, fields_agree, rows_with
from transcript_clean.columnar.edits import Merges
from transcript_clean.model import AssistantMessage, AssistantPart, Message
from transcript_clean.rules.base import Rule, Unrepairable, Violation, Walk
from transcript_clean.transcript import CONSECUTIVE_ASSISTANT, describe_error

if TYPE_CHECKING:
    from transcript_clean.columnar.walk import ConversationsWalk
    from transcript_clean.rules.base import RuleConfig

CODE: Final = CONSECUTIVE_ASSISTANT


def describe(index: int, call_id: str | None) -> str:
    return describe_error(CODE, index, call_id)


def find(walk: Walk) -> Iterator[Violation]:
    for error in walk.errors_of(CODE):
        yield Violation(CODE, error.index, error.call_id, describe(error.index, error.call_id))


def merge_consecutive_assistant(messages: Sequence[Message]) -> list[Message]:
    """R4: a second assistant message identical to the first is dropped; otherwise, when the
    first has no tool calls, the second's parts are appended to it. Otherwise `Unrepairable`.

    Linear in the messages: a run of assistant messages gathers its parts in one list, made a
    message once the run ends (joining tuples message by message took 190 s for a row of
    100,000)."""
    out: list[Message] = []
    parts: list[AssistantPart] = []  # the merged content of the run `out[-1]` ends, if any
    calls = False  # whether that content holds a tool call

    def close_run() -> None:
        last = out[-1] if out else None
        if isinstance(last, AssistantMessage) and len(parts) != len(last.content):
            out[-1] = replace(last, content=tuple(parts))

    for index, msg in enumerate(messages):
        previous = out[-1] if out else None
        if not (isinstance(msg, AssistantMessage) and isinstance(previous, AssistantMessage)):
            close_run()
            out.append(msg)
            if isinstance(msg, AssistantMessage):
                parts = list(msg.content)
                calls = bool(msg.tool_calls)
        elif (differ := _differing_fields(previous, msg)) is not None:
            raise Unrepairable(
                CODE,
                f"message {index}: an assistant message follows another and their {differ} "
                "differ; merging them would change what they train",
            )
        elif len(msg.content) == len(parts) and msg.content == tuple(parts):
            continue
        elif not calls:
            parts.extend(msg.content)
            calls = bool(msg.tool_calls)
        else:
            raise Unrepairable(
                CODE,
                f"message {index}: an assistant message follows one that made tool calls; "
                "it cannot be merged",
            )
    close_run()
    return out


# What an assistant message says, which R4 merges, in any format's keys (Gemini's `parts`
# too), and where an agent trace's event sits (its ids, its parent, its time: two events
# never share them); every other key of the source object (OpenAI's `weight`,
# LLaMA-Factory's `loss_weight`, a `name`) must agree.
_SAID: Final = frozenset(
    {"role", "from", "content", "parts", "value", "tool_calls", "function_call", "id", "type"}
    | {"reasoning_content", "reasoning", "thinking"}
    | {"message", "args"}  # Claude Code's Anthropic message; OpenHands' text and its arguments
    | {"uuid", "parentUuid", "timestamp", "requestId", "llm_metrics"}
)


def _differing_fields(first: AssistantMessage, second: AssistantMessage) -> str | None:
    """The fields besides what they say on which two messages differ (`weight (0, 1)`), or
    None when they agree; a missing field and a null one agree."""

    def fields(message: AssistantMessage) -> dict[str, object]:
        origin = message.origin or {}
        return {k: v for k, v in origin.items() if k not in _SAID and v is not None}

    one, two = fields(first), fields(second)
    if one == two:
        return None
    keys = sorted(k for k in one.keys() | two.keys() if one.get(k) != two.get(k))
    return ", ".join(f"{k} ({one.get(k)!r}, {two.get(k)!r})" for k in keys)


def merges(
    walk: ConversationsWalk, rows: Mask, *, plain_first: bool = False
) -> tuple[Merges, Mask]:
    """R4's repair over a batch's columnar view, for the rows of `rows`: the merges
    `merge_consecutive_assistant` makes there, and the rows they settle. Like the walk, it
    reads the transcript without its empty turns (R1 runs first). A row is settled when each
    of its assistant messages that follows another is plain text (one text part, and nothing
    else), the message that begins its run makes no call, and their other fields agree (a
    nested one agrees only when both are null): then each is joined into the run's first
    message, adding its text unless it repeats that message (as every one before it in the run
    does; only a first of plain text can be repeated). Any other row with the code (a call or
    reasoning in a second, differing or nested fields, a view without `message_text`) is left
    to the per-row path, which is the truth. With `plain_first` (a format whose message holds
    one text, which a merge grows), so is a row whose run begins with more than one text,
    unless the format grows its text beside its reasoning (`Conversations.merge_text`)."""
    c = walk.conversations
    none = np.zeros(walk.rows, dtype=bool)
    into = np.full(c.messages, -1, dtype=np.int64)
    adds = np.zeros(c.messages, dtype=bool)
    second = walk.consecutive & rows[walk.kept_row]
    if c.message_text is None or c.message_origin is None or not second.any():
        return Merges(into, adds), none
    positions = np.arange(len(second), dtype=np.int64)
    # Each kept message's run: the last one at or before it that follows no assistant message.
    run = np.maximum.accumulate(np.where(walk.consecutive, -1, positions))
    seconds = np.flatnonzero(second)
    firsts = run[seconds]
    at, to = walk.kept[seconds], walk.kept[firsts]
    said, first_said = c.message_text(at), c.message_text(to)
    fine = ~as_mask(said.is_null()) & (walk.calls_per_message[to] == 0)
    if plain_first:
        grows = first_said if c.merge_text is None else c.merge_text(to)
        fine &= ~as_mask(grows.is_null())
    fine &= fields_agree(c.message_origin(to), c.message_origin(at), _SAID)
    row = walk.kept_row[seconds]
    settled = rows & walk.rows_consecutive & ~rows_with(~fine, row, walk.rows)
    take = settled[row]
    # A message adds its text unless it and every one before it in its run repeat the first.
    repeats = as_mask(pc.fill_null(pc.equal(said, first_said), False), fill=False)
    first_new = np.full(len(second), len(second), dtype=np.int64)
    np.minimum.at(first_new, firsts[~repeats], seconds[~repeats])
    into[at[take]] = to[take]
    adds[at[take]] = (seconds >= first_new[firsts])[take]
    return Merges(into, adds), settled


def _repair(messages: list[Message], config: RuleConfig) -> list[Message]:
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
    columnar=attrgetter("rows_consecutive"),
)
