"""What the formats' Arrow sides share to measure the profile (`transcript_clean.profile`):
text lengths, whether a text says anything, and each assistant turn's class, from Arrow arrays
and their buffers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    NOT_SPACE,
    SPACE_LEADS,
    Counts,
    Mask,
    as_mask,
    indices,
    text_bytes,
    whole,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations
from transcript_clean.model import AssistantPart, Reasoning, ReasoningText, Text, ToolCall
from transcript_clean.transcript import TURN_CLASSES, assistant_turn_class

__all__ = [
    "Measures",
    "RowSums",
    "add_counts",
    "classes_of",
    "column_array",
    "conversation_measures",
    "first_bytes",
    "leading_bytes",
    "said",
    "turn_classes",
]


@dataclass(slots=True)
class Measures:
    """Some rows' measures, as a format's Arrow side or `measure_transcripts` takes them."""

    rows: dict[str, Counts]
    """Per name of `PER_ROW` (`tokens` aside), one value per row; `system`: 1 for a row with a
    system message."""
    turn_chars: Counts
    """One value per assistant turn."""
    turn_classes: npt.NDArray[np.int8]
    """Per assistant turn, its class's index in `TURN_CLASSES`."""
    tools: Mapping[str, int]
    """Calls per tool name."""
    texts: list[str] | None = None
    """With a tokenizer: the text pieces of the rows, each counted for `text_row`'s row and, in
    an assistant turn, for `text_turn`'s turn (-1 elsewhere); by position among these rows and
    turns."""
    text_row: Counts | None = None
    text_turn: Counts | None = None

    def joined(self, other: Measures) -> Measures:
        """These rows' measures and `other`'s, as of one set of rows (without their texts,
        which are counted row by row where tokens are)."""
        rows = {
            name: np.concatenate([values, other.rows[name]]) for name, values in self.rows.items()
        }
        tools = dict(self.tools)
        add_counts(tools, other.tools)
        return Measures(
            rows,
            np.concatenate([self.turn_chars, other.turn_chars]),
            np.concatenate([self.turn_classes, other.turn_classes]),
            tools,
        )


def add_counts(into: dict[str, int], counts: Mapping[str, int]) -> None:
    """Add `counts` to `into`, name by name."""
    for name, n in counts.items():
        into[name] = into.get(name, 0) + n


class RowSums:
    """Sums over the elements of some rows of a list column, whose rows hold `sizes` elements
    each: a row's elements are a run of them, so a sum is a difference of running sums."""

    def __init__(self, sizes: Counts, rows: Mask) -> None:
        self.ends = np.cumsum(sizes)[rows]
        self.starts = self.ends - sizes[rows]

    def __call__(self, values: Counts | Mask) -> Counts:
        """Per row of `rows`, the sum of `values` (one per element of the whole column)."""
        running = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(values, out=running[1:])
        out: Counts = running[self.ends] - running[self.starts]
        return out


def column_array(table: pa.Table, name: str) -> pa.Array:
    """A column of `table` as one array (`whole`: its only chunk as it is)."""
    return whole(table.column(name))


def first_bytes(text: pa.Array, at: Counts) -> tuple[npt.NDArray[np.uint8], Mask]:
    """Of the texts at `at`: each one's first byte (0 for an empty or null text), and whether
    it holds anything. Read from the array's buffers: no text is copied."""
    offsets, used = text_bytes(text)
    start, size = offsets[at] - offsets[0], offsets[at + 1] - offsets[at]
    if text.null_count:
        size = np.where(as_mask(text.is_valid())[at], size, 0)
    spoken = size > 0
    first = np.zeros(len(at), dtype=np.uint8)
    if spoken.any():
        first[spoken] = used[start[spoken]]
    return first, spoken


def leading_bytes(text: pa.Array) -> npt.NDArray[np.uint8]:
    """Each text's first byte, 0 for an empty one (a null one's may be anything: for texts that
    are never null where it matters). From the buffers, for every text: cheaper than
    `first_bytes`'s gathers, or than matching strings."""
    offsets, used = text_bytes(text)
    first = np.zeros(len(text), dtype=np.uint8)
    spoken = offsets[1:] > offsets[:-1]
    first[spoken] = used[offsets[:-1][spoken] - offsets[0]]
    return first


def said(text: pa.Array, at: Counts) -> tuple[Mask, Mask]:
    """Of the texts at `at`: whether each holds something besides white space, and whether it
    holds anything (null: neither). Only a text starting with a white-space byte is searched."""
    first, spoken = first_bytes(text, at)
    doubt = spoken & SPACE_LEADS[first]
    out = spoken & ~doubt
    if doubt.any():
        look = text.take(indices(at[doubt]))
        out[doubt] = as_mask(pc.match_substring_regex(look, NOT_SPACE))
    return out, spoken


def turn_classes(
    content: pa.Array,
    reasoning: Sequence[pa.Array],
    at: Counts,
    n_calls: Counts,
) -> npt.NDArray[np.int8]:
    """The class of each assistant turn at `at`, as `assistant_turn_class` finds it (its index
    in `TURN_CLASSES`); `reasoning`, the fields holding the turns' reasoning text (one
    reasoning part each, where it is not null)."""
    calls = n_calls[at] > 0
    said_, spoken = said(content, at)
    has = np.zeros(len(at), dtype=bool)
    thought = np.zeros(len(at), dtype=bool)
    for thoughts in reasoning:
        holds = as_mask(thoughts.is_valid())[at]
        has |= holds
        # Only turns with reasoning are looked at: most have none.
        looked = holds & ~thought
        thought[looked] = said(thoughts, at[looked])[0]
    return classes_of(calls, thought, said_, has, spoken)


def classes_of(
    calls: Mask, thought: Mask, said: Mask, has: Mask, spoken: Mask
) -> npt.NDArray[np.int8]:
    """Each turn's class from what it holds: calls, reasoning that says something, text that
    does, any reasoning, any text."""
    key = calls * 1 + thought * 2 + said * 4 + has * 8 + spoken * 16
    classes: npt.NDArray[np.int8] = _CLASS_OF[key]
    return classes


def _class_of(key: int) -> int:
    """The class (its index in `TURN_CLASSES`) of a turn whose facts `key` packs: calls (1),
    reasoning that says something (2), text that does (4), any reasoning (8), any text (16).
    Asked of `assistant_turn_class` with a turn made to have them: the classes' one definition."""
    parts: list[AssistantPart] = []
    if key & 1:
        parts.append(ToolCall("c", "f", {}))
    if key & (2 | 8):
        parts.append(Reasoning((ReasoningText("r" if key & 2 else " "),)))
    if key & (4 | 16):
        parts.append(Text("t" if key & 4 else " "))
    return TURN_CLASSES.index(assistant_turn_class(parts))


# Every turn's class by its packed facts: one lookup per turn.
_CLASS_OF: Final = np.array([_class_of(key) for key in range(32)], dtype=np.int8)


def conversation_measures(
    conversations: Conversations, rows: Mask, *, texts: bool = False
) -> Measures:
    """The profile's measures of the rows of `rows` (rows the view reads), from any format's
    `Conversations`, as `measure_transcripts` makes them of their decoded transcripts: every
    message as it came in, a user turn a user message that answers no call."""
    c = conversations
    n = int(rows.sum())
    place = np.cumsum(rows) - 1  # each row's position among the measured ones
    mine = rows[c.message_row]
    at = place[c.message_row[mine]]

    def per_row(values: Counts | Mask) -> Counts:
        summed: Counts = np.bincount(at, weights=values[mine], minlength=n).astype(np.int64)
        return summed

    calls = np.bincount(c.call_message, minlength=c.messages)
    results = np.bincount(c.result_message, minlength=c.messages)
    assistant, user, system = (c.role == ASSISTANT), (c.role == USER), (c.role == SYSTEM)
    measured = {
        "messages": per_row(np.ones(c.messages, dtype=np.int64)),
        "user_turns": per_row(user & (results == 0)),
        "assistant_turns": per_row(assistant),
        "tool_calls": per_row(calls),
        "chars": per_row(c.chars),
        "system": (per_row(system) > 0).astype(np.int64),
    }
    turns = np.flatnonzero(assistant & mine)
    classes = classes_of(
        calls[turns] > 0, c.thought[turns], c.said[turns], c.reasoned[turns], c.spoken[turns]
    )
    named = c.call_name.filter(pa.array(rows[c.message_row[c.call_message]]))
    tools = {
        str(item["values"]): int(item["counts"]) for item in pc.value_counts(named).to_pylist()
    }
    measures = Measures(measured, c.chars[turns], classes, tools)
    if texts and c.texts is not None:
        pieces, message = c.texts()
        keep = mine[message]
        turn = np.full(c.messages, -1, dtype=np.int64)
        turn[turns] = np.arange(len(turns), dtype=np.int64)
        measures.texts = pieces.filter(pa.array(keep)).to_pylist()
        measures.text_row = place[c.message_row[message[keep]]]
        measures.text_turn = turn[message[keep]]
    return measures
