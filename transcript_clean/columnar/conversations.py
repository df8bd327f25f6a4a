"""`Conversations`: one batch of conversations as canonical columns, whatever format it came in.

A format's flattener reads its own Arrow layout into this one view: per canonical message its row
and role and whether it says anything, per tool call its message, id, tool name and arguments,
per tool result the call it answers. The view holds what the decoder would make of each row it
reads (`unread` flags the rest, which the per-row path decides), so that a rule's Arrow check,
written once over the view, means the same for every format. A query engine has one vector
format that every reader produces; this is that format for conversations.

Columns are NumPy arrays where they are numbers or flags and Arrow arrays where they are text,
each sorted by row and, within a row, in the order of the decoded transcript.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from transcript_clean.columnar.arrays import Counts, Mask

__all__ = [
    "ASSISTANT",
    "ROLES",
    "SYSTEM",
    "USER",
    "Conversations",
    "Roles",
    "first_items",
    "of_texts",
]

Roles = npt.NDArray[np.int8]

SYSTEM: Final = 0
USER: Final = 1
ASSISTANT: Final = 2
ROLES: Final = ("system", "user", "assistant")
"""The canonical roles (SPEC section 1), by their number in `Conversations.role`. A tool result
is a part of a user message, as in rig's model."""


@dataclass(slots=True)
class Conversations:
    """A batch of conversations flattened into canonical columns (see the module's docstring).

    Every column of messages, calls and results covers the rows the flattener reads; a row in
    `unread` may have none of its elements here, or some: the rules' checks look only at the
    rows read, and the fast path leaves the others to the per-row path.
    """

    rows: int
    unread: Mask
    """Per row: not read as the decoder would read it (the per-row path decides it)."""

    message_row: Counts
    """Per message, its row (non-decreasing)."""
    role: Roles
    """Per message, its role: `SYSTEM`, `USER` or `ASSISTANT`."""
    said: Mask
    """Per message, whether a part of it other than calls, results and reasoning is not blank as
    SPEC section 2 has it: text that is not white space, an assistant text with
    `additional_params`, media."""
    thought: Mask
    """Per message, whether a reasoning part of it is not blank: a piece of text that is not
    white space, an encrypted piece, a signature."""
    reasoned: Mask
    """Per message, whether it holds a reasoning part at all."""
    spoken: Mask
    """Per message, whether it holds a text part whose text is not empty (white space counts)."""
    chars: Counts
    """Per message, the characters of its texts (`model.message_texts`: text parts, results'
    texts, reasoning texts; a system message's content)."""

    call_message: Counts
    """Per tool call, its message (a position among the messages), non-decreasing."""
    call_id: pa.Array
    """Per tool call, its id as the decoder has it (minted where the format has none)."""
    call_name: pa.Array
    """Per tool call, the tool's name."""
    call_arguments: pa.Array
    """Per tool call, its arguments as the source holds them: JSON text, or a struct."""
    call_object: Mask
    """Per tool call, whether its arguments are a JSON object as the decoder reads them."""

    result_message: Counts
    """Per tool result, its message (a user message), non-decreasing."""
    result_call: pa.Array
    """Per tool result, the id of the call it answers."""
    result_blank: Mask
    """Per tool result, whether it says nothing: its every part is blank text."""

    item_message: Counts | None = None
    """Per list item of the conversation column, the message it is part of (-1: none), where
    each message is made of whole items (a rig or Anthropic message is one item; a ShareGPT
    assistant message its text turn and the call turns after it); None elsewhere. With it, a
    repair that drops whole messages (R1, R5's cut) drops their items, in Arrow, for any
    format."""
    call_made_up: Mask | None = None
    """Per tool call, whether the decoder made its id up (the row holds none): what a writer of a
    result answering it reads (OpenAI writes such a result with the tool's name, not the id).
    None: the format writes no results anew (R2's answers are then the per-row path's)."""
    result_item: Counts | None = None
    """Per tool result, the item of the conversation column that is the whole of it (an OpenAI
    tool message), where every result is one; None elsewhere. With it, R3's drop of orphan
    results is made in Arrow (a message left with no item is gone, as R3 drops it)."""
    pairs_by_position: bool = False
    """Whether the format's results answer calls by their place, not by ids (ShareGPT's): the
    decoder pairs them before R1 drops an empty turn, so dropping one that stands between
    calls and their results would pair them anew; such a row is the per-row path's."""
    reencoded: Mask | None = None
    """Per row, whether the per-row path, writing the row after a repair, writes a message it
    keeps otherwise than the source holds it (Gemini's encoder gives a call with no `args` an
    empty object): dropping whole items would not be what it writes, so such a row's repairs
    are the per-row path's. None: the per-row path writes every kept message as it is."""
    result_text: Callable[[], pa.Array] | None = None
    """Per tool result, its text where the whole of what it says is one text part, null where
    it is anything else: what tells a result that repeats one already given (R3), made when
    asked for; None where the flattener does not say (R3 then leaves such rows to the per-row
    path)."""
    result_error: Mask | None = None
    """Per tool result, whether the decoder reads it as an error (`ToolResult.status`): what
    tells R2 whether an invalid call's result is a real one; all False for a format whose
    results have no such flag; None where the flattener does not say (a row whose invalid call
    may have a real result then takes the per-row path)."""
    declarations: pa.Array | None = None
    """Per row, the tools it declares inside its conversation (Hermes' `<tools>` block in the
    system prompt), as the JSON text of a declarations list, null where it declares none there:
    read where the batch's declarations columns declare nothing, as the decoder reads them.
    None: the format keeps no declarations in its conversations."""
    message_text: Callable[[Counts], pa.Array] | None = None
    """Of the messages at the positions given, each one's text where the whole of it is one
    text part (no reasoning, call, result, media or annotation), null where it is anything else
    (a flattener may say null of every message but the assistant's): what R4 compares and
    joins, taken for the few messages it asks about. None where the flattener does not say
    (R4's merges are then the per-row path's)."""
    merge_text: Callable[[Counts], pa.Array] | None = None
    """Of the messages at the positions given, the text R4 joins others' texts into where the
    message grows, for a format that keeps an assistant's reasoning in fields of their own,
    which a merge leaves as they are (OpenAI's `reasoning_content`): its content, beside its
    reasoning too ("" for none), null where it cannot grow (a call). None: only a message that
    is one text grows (`message_text`)."""
    message_origin: Callable[[Counts], pa.Array] | None = None
    """Of the messages at the positions given, the source object the decoder keeps as each
    one's `origin` (a struct: the item of the conversation column it starts with), null where
    it has none: the fields besides what it says, which R4 requires to agree. None where the
    flattener does not say."""
    texts: Callable[[], tuple[pa.Array, Counts]] | None = None
    """Where tokens are counted: the texts of `chars`, one piece each, and each piece's message
    (made when asked for: a copy of every text)."""
    _first_items: Counts | None = field(default=None, init=False, repr=False, compare=False)

    def first_items(self) -> Counts:
        """Per message, its first item among the column's items (-1: none), for a flattener
        with `item_message`: worked out once, though the repairs and the writer each ask."""
        if self._first_items is None:
            assert self.item_message is not None
            self._first_items = first_items(self.item_message, self.messages)
        return self._first_items

    @property
    def messages(self) -> int:
        return len(self.message_row)

    @property
    def blank(self) -> Mask:
        """Per message, whether every part of it but its calls and results is blank: an
        assistant message that is blank and makes no call is an empty turn (R1)."""
        blank: Mask = ~self.said & ~self.thought
        return blank

    @property
    def read(self) -> Mask:
        return ~self.unread

    def check(self) -> None:
        """Raise `ValueError` where the columns do not fit together (a flattener's bug)."""
        m, c, r = self.messages, len(self.call_message), len(self.result_message)
        sizes = {
            "unread": (len(self.unread), self.rows),
            "role": (len(self.role), m),
            "said": (len(self.said), m),
            "thought": (len(self.thought), m),
            "reasoned": (len(self.reasoned), m),
            "spoken": (len(self.spoken), m),
            "chars": (len(self.chars), m),
            "call_id": (len(self.call_id), c),
            "call_name": (len(self.call_name), c),
            "call_arguments": (len(self.call_arguments), c),
            "call_object": (len(self.call_object), c),
            "result_call": (len(self.result_call), r),
            "result_blank": (len(self.result_blank), r),
        }
        if self.result_error is not None:
            sizes["result_error"] = (len(self.result_error), r)
        for name, (got, wanted) in sizes.items():
            if got != wanted:
                raise ValueError(f"Conversations.{name} has {got} items, not {wanted}")
        for name, values, bound in (
            ("message_row", self.message_row, self.rows),
            ("call_message", self.call_message, m),
            ("result_message", self.result_message, m),
        ):
            if len(values) and (values.min() < 0 or values.max() >= bound):
                raise ValueError(f"Conversations.{name} points past its {bound} items")
            if len(values) > 1 and (np.diff(values) < 0).any():
                raise ValueError(f"Conversations.{name} is not sorted")


def first_items(item_message: Counts, messages: int) -> Counts:
    """Per message, its first item among the column's items (-1: it has none, as a system
    prompt read from a column of its own)."""
    out = np.full(messages, -1, dtype=np.int64)
    at = np.flatnonzero(item_message >= 0)
    # The items of a message are consecutive, so its first is the first whose message it is.
    new = np.ones(len(at), dtype=bool)
    new[1:] = item_message[at[1:]] != item_message[at[:-1]]
    out[item_message[at[new]]] = at[new]
    return out


def of_texts(
    rows: int,
    unread: Mask,
    message_row: Counts,
    role: Roles,
    said: Mask,
    chars: Counts,
    texts: Callable[[], tuple[pa.Array, Counts]],
) -> Conversations:
    """The view of conversations whose every message is one plain text (the string formats:
    hh-rlhf, Alpaca, ms-swift's pairs): no reasoning, no calls, no results."""
    messages = len(message_row)
    nothing = np.zeros(0, dtype=np.int64)
    return Conversations(
        rows=rows,
        unread=unread,
        message_row=message_row,
        role=role,
        said=said,
        thought=np.zeros(messages, dtype=bool),
        reasoned=np.zeros(messages, dtype=bool),
        spoken=chars > 0,
        chars=chars,
        call_message=nothing,
        call_id=pa.array([], pa.string()),
        call_name=pa.array([], pa.string()),
        call_arguments=pa.array([], pa.string()),
        call_object=np.zeros(0, dtype=bool),
        result_message=nothing,
        result_call=pa.array([], pa.string()),
        result_blank=np.zeros(0, dtype=bool),
        texts=texts,
    )
