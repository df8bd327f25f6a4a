"""The fast path's view of a batch that its format flattened into `Conversations`: every rule
clears rows with its own columnar check (`Rule.columnar`), the same for every format, and R1's
empty turns are dropped in Arrow where each message is one item of the conversation column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from transcript_clean.columnar.arrays import Mask, count, flattened, indices
from transcript_clean.columnar.conversations import Conversations
from transcript_clean.columnar.walk import ConversationsWalk
from transcript_clean.fastpath.base import ArrowRepair, ArrowView, Subset
from transcript_clean.fastpath.measures import Measures, conversation_measures
from transcript_clean.formats.base import Format
from transcript_clean.rules import EMPTY_ASSISTANT_TURN

__all__ = ["ConversationsView"]


class ConversationsView(ArrowView):
    """A batch's `Conversations` as the fast path reads a view: the rows the flattener reads,
    the calls pending at the end and the calls for the declared-tools checks. Its checks are
    the rules' columnar checks (`possible_codes` asks each rule of `walk`); the one it repairs,
    R1, it names among its own."""

    def __init__(
        self,
        conversations: Conversations,
        fmt: Format,
        column: pa.Array,
        schema: pa.Schema | None = None,
    ) -> None:
        walk = ConversationsWalk(conversations)
        super().__init__(conversations.rows, conversations.unread, {}, walk.trailing_calls)
        self.conversations = conversations
        self.walk = walk
        self.fmt = fmt
        self.column = column
        self.schema = schema
        c = conversations
        self.calls = (c.message_row[c.call_message], c.call_name, c.call_arguments)
        if c.message_item is not None:
            self.repairs = frozenset({EMPTY_ASSISTANT_TURN})
            self.checks = {EMPTY_ASSISTANT_TURN: walk.rows_empty}

    def measures(self, rows: Mask, *, texts: bool = False) -> Measures | None:
        return conversation_measures(
            self.conversations, rows & self.conversations.read, texts=texts
        )

    def repair(self, rows: dict[str, Mask]) -> ArrowRepair:
        """R1: the rows of `rows[EMPTY_ASSISTANT_TURN]` without their empty turns, their list
        items dropped (every other code is the re-check's: `again`)."""
        c, walk = self.conversations, self.walk
        assert c.message_item is not None and set(rows) <= self.repairs
        asked = rows[EMPTY_ASSISTANT_TURN]
        subset = np.flatnonzero(asked)
        items, _, parent = flattened(self.column)
        drop = np.zeros(len(items), dtype=bool)
        drop[c.message_item[walk.empty & asked[c.message_row]]] = True
        chosen = Subset.of(subset, parent, self.rows)
        column = chosen.column(self.column.type, items.take(indices(chosen.elements)), drop)
        dropped = count(walk.empty, c.message_row, self.rows)
        return ArrowRepair(subset, column, {EMPTY_ASSISTANT_TURN: dropped})

    def again(self, column: pa.Array) -> ConversationsView | None:
        conversations = self.fmt.flatten(column, self.schema)
        if conversations is None:
            return None
        return ConversationsView(conversations, self.fmt, column, self.schema)
