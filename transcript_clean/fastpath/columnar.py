"""The fast path's view of a batch that its format flattened into `Conversations`: every rule
clears rows with its own columnar check (`Rule.columnar`), the same for every format."""

from __future__ import annotations

from transcript_clean.columnar.arrays import Mask
from transcript_clean.columnar.conversations import Conversations
from transcript_clean.columnar.walk import ConversationsWalk
from transcript_clean.fastpath.base import ArrowView
from transcript_clean.fastpath.measures import Measures, conversation_measures

__all__ = ["ConversationsView"]


class ConversationsView(ArrowView):
    """A batch's `Conversations` as the fast path reads a view: the rows the flattener reads,
    the calls pending at the end and the calls for the declared-tools checks. It brings no
    checks of its own: `possible_codes` asks each rule's columnar check of `walk`."""

    def __init__(self, conversations: Conversations) -> None:
        walk = ConversationsWalk(conversations)
        super().__init__(conversations.rows, conversations.unread, {}, walk.trailing_calls)
        self.conversations = conversations
        self.walk = walk
        c = conversations
        self.calls = (c.message_row[c.call_message], c.call_name, c.call_arguments)

    def measures(self, rows: Mask, *, texts: bool = False) -> Measures | None:
        return conversation_measures(
            self.conversations, rows & self.conversations.read, texts=texts
        )
