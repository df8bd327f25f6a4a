"""orphan_tool_result (R3): a tool result that answers no pending call (SPEC section 3).

`repair` drops it, and a message left with no parts with it, only where dropping it cannot
change what a later assistant turn means: the result is empty, repeats a result already given,
or no assistant turn follows it. Any other orphan carries what a later turn may have used (glaive
writes a call as the assistant's text, then a real result the next turn quotes): dropping it
would teach that turn to state a result it never saw, so the row cannot be repaired, unless the
config asks to drop it anyway (`[repair] orphan_result = "drop"`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Counts, Mask, rows_with
from transcript_clean.model import AssistantMessage, Message, Text, ToolResult, UserMessage
from transcript_clean.rules.base import Rule, Unrepairable, Violation, Walk
from transcript_clean.transcript import ORPHAN_TOOL_RESULT, describe_error

if TYPE_CHECKING:
    from transcript_clean.rules.base import RuleConfig

CODE: Final = ORPHAN_TOOL_RESULT


def describe(index: int, call_id: str | None) -> str:
    return describe_error(CODE, index, call_id)


def find(walk: Walk) -> Iterator[Violation]:
    for error in walk.errors_of(CODE):
        yield Violation(CODE, error.index, error.call_id, str(error))


def used_message(index: int, call_id: str | None) -> str:
    """The words of an orphan that a later assistant turn may have used."""
    return (
        f"{describe(index, call_id)}, and an assistant turn after it may use what it says: "
        "dropping it would leave that turn stating a result it never saw"
    )


def drop_orphan_results(messages: Sequence[Message], *, drop_used: bool = True) -> list[Message]:
    """R3: every result that answers no pending call is dropped, and a message left empty.
    Without `drop_used`, `Unrepairable` for the first orphan a later assistant turn may have
    used (`may_be_used`)."""
    out: list[Message] = []
    pending: set[str] = set()
    given: list[tuple[object, ...]] = []  # the content of each result that answered a call
    last_assistant = max(
        (i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=-1
    )
    for index, msg in enumerate(messages):
        if isinstance(msg, AssistantMessage):
            pending = {c.id for c in msg.tool_calls}
        elif isinstance(msg, UserMessage):
            answered: set[str] = set()
            parts = []
            for part in msg.content:
                if isinstance(part, ToolResult):
                    if part.call not in pending or part.call in answered:
                        if not drop_used and index < last_assistant and may_be_used(part, given):
                            raise Unrepairable(CODE, used_message(index, part.call))
                        continue
                    answered.add(part.call)
                    given.append(part.content)
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


def may_be_used(result: ToolResult, given: Sequence[tuple[object, ...]]) -> bool:
    """Whether an orphan `result` says something a later turn could have read from it alone:
    it is not empty (every part a blank text) and repeats none of the results `given`."""
    empty = all(isinstance(p, Text) and not p.text.strip() for p in result.content)
    return not empty and result.content not in given


def used_orphans(
    row: Counts, orphan: Mask, says: Mask, text: pa.Array, before_last_turn: Mask
) -> Mask:
    """`may_be_used` over the columns of a batch's results, in order: of each result (its row,
    whether it is an orphan, whether it says something, its text, whether an assistant turn
    follows it in its row), whether it is an orphan a later turn may have used. Such an orphan
    says something, comes before the row's last assistant turn, and repeats no earlier result
    of its row that answered a call. Its text is the whole of what it says (one text part)."""
    candidate = orphan & says & before_last_turn
    if not candidate.any():
        return candidate
    # Only the rows holding a candidate are compared, by their texts' codes in one dictionary.
    looked = np.flatnonzero(rows_with(candidate, row, int(row[-1]) + 1)[row])
    codes = pc.dictionary_encode(text.take(pa.array(looked, pa.int64()))).indices
    code = pc.fill_null(codes, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    key = row[looked] * (int(code.max()) + 2) + code
    answered = ~orphan[looked] & (code >= 0)
    # The first answer of each (row, text): results are in order, so `np.unique`'s first index
    # is the earliest one.
    keys, first = np.unique(key[answered], return_index=True)
    first_at = looked[answered][first]
    asked = np.flatnonzero(candidate[looked])
    place = np.minimum(np.searchsorted(keys, key[asked]), max(len(keys) - 1, 0))
    repeat = np.zeros(len(asked), dtype=bool)
    if len(keys):
        repeat = (keys[place] == key[asked]) & (first_at[place] < looked[asked])
    used = np.zeros(len(orphan), dtype=bool)
    used[looked[asked[~repeat]]] = True
    return used


def _repair(messages: list[Message], config: RuleConfig) -> list[Message]:
    return drop_orphan_results(messages, drop_used=config.orphan_result == "drop")


RULE = Rule(
    CODE,
    order=3,
    summary="a result answers no pending call",
    actions_help=(
        "R3: a tool result that answers no pending call. `repair` drops it (and a message left "
        "empty) where it is empty, repeats a result already given or no assistant turn follows; "
        "otherwise a later turn may use it and the row is rejected: see [repair] below."
    ),
    allowed=frozenset({"repair", "reject"}),
    default="repair",
    find=find,
    repair=_repair,
    columnar=attrgetter("rows_orphan"),
)
