"""consecutive_assistant (R4): an assistant message right after another (SPEC section 3).

`repair` drops a second message identical to the first; otherwise, when the first made no tool
calls, appends the second's parts to it (a format whose content is one string joins the texts
with a blank line, leaving out a blank text: `formats.base.join_texts`); otherwise the row
cannot be repaired. Nor can it when the two messages' other fields (`weight`, `loss_weight`)
differ: one message cannot carry both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Final

from transcript_clean.model import AssistantMessage, AssistantPart, Message
from transcript_clean.rules.base import Rule, Unrepairable, Violation, Walk
from transcript_clean.transcript import CONSECUTIVE_ASSISTANT, describe_error

if TYPE_CHECKING:
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


# What an assistant message says, which R4 merges, in any format's keys; every other key of the
# source object (OpenAI's `weight`, LLaMA-Factory's `loss_weight`, a `name`) must agree.
_SAID: Final = frozenset(
    {"role", "from", "content", "value", "tool_calls", "function_call", "id", "type"}
    | {"reasoning_content", "reasoning", "thinking"}
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
