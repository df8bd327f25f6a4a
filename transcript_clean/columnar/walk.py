"""The walk of SPEC section 3, and R1's empty turns, over a batch's `Conversations`: what
`rules.base.Walk` is for one transcript, for every row of a batch at once, in NumPy.

Each rule's Arrow check reads what it needs of it (`Rule.columnar`); each piece is worked out
once, when first asked for. Like the per-row path, the walk runs on the transcript without its
empty assistant turns (R1 sets them aside before any other code is looked for); a row with an
empty turn is flagged for R1 and is never settled as clean.

The walk itself (`transcript.transcript_errors`): an assistant message opens a window for its
calls; the next message that is not a system message closes it. When that message is a user
message, each of its results answers a call of the window with the same id, the first result for
an id only; every other result is an orphan, and every call left without a result is unanswered.
The calls of the last assistant turn, when no user message follows it, are pending at the very
end instead (`trailing_tool_call`). A repeated call id in one turn is one pending id.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    count,
    previous_unflagged,
    repeated,
    rows_with,
    run_starts,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations

__all__ = ["ConversationsWalk"]


class ConversationsWalk:
    """What the rules' Arrow checks read of a batch's conversations, worked out once. Element
    masks are over the view's messages, calls or results; `rows_*` are per row."""

    def __init__(self, conversations: Conversations) -> None:
        self.conversations = conversations
        self.rows = conversations.rows

    # -- R1 ------------------------------------------------------------------------------------

    @cached_property
    def message_index(self) -> Counts:
        """Per message of the view, its index in its row, system messages counted: how the
        per-row path's words number a row's messages."""
        row = self.conversations.message_row
        index: Counts = np.arange(len(row), dtype=np.int64) - run_starts(row)
        return index

    @cached_property
    def calls_per_message(self) -> Counts:
        c = self.conversations
        return np.bincount(c.call_message, minlength=c.messages).astype(np.int64)

    @cached_property
    def empty(self) -> Mask:
        """Per message: an empty assistant turn (every part blank, no call)."""
        c = self.conversations
        empty: Mask = (c.role == ASSISTANT) & c.blank & (self.calls_per_message == 0)
        return empty

    @cached_property
    def rows_empty(self) -> Mask:
        return rows_with(self.empty, self.conversations.message_row, self.rows)

    # -- the transcript without its empty turns ----------------------------------------------

    @cached_property
    def kept(self) -> Counts:
        """The messages R1 keeps, by position among the view's messages."""
        kept: Counts = np.flatnonzero(~self.empty)
        return kept

    @cached_property
    def position(self) -> Counts:
        """Per message of the view, its position among the kept ones (-1: an empty turn)."""
        out = np.full(self.conversations.messages, -1, dtype=np.int64)
        out[self.kept] = np.arange(len(self.kept), dtype=np.int64)
        return out

    @cached_property
    def kept_row(self) -> Counts:
        row: Counts = self.conversations.message_row[self.kept]
        return row

    @cached_property
    def kept_role(self) -> Counts:
        role: Counts = self.conversations.role[self.kept].astype(np.int64)
        return role

    @cached_property
    def same_row_as_previous(self) -> Mask:
        row = self.kept_row
        same = np.zeros(len(row), dtype=bool)
        same[1:] = row[1:] == row[:-1]
        return same

    @cached_property
    def consecutive(self) -> Mask:
        """Per kept message: an assistant message right after another (R4)."""
        role = self.kept_role
        after = np.zeros(len(role), dtype=bool)
        after[1:] = role[:-1] == ASSISTANT
        out: Mask = (role == ASSISTANT) & after & self.same_row_as_previous
        return out

    @cached_property
    def previous_said(self) -> Counts:
        """Per kept message, the position of the last message before it in its row that is not
        a system message (-1 for none)."""
        return self._said_before(np.arange(len(self.kept), dtype=np.int64))

    def _said_before(self, at: Counts) -> Counts:
        """`previous_said` of the kept messages at `at`."""
        return previous_unflagged(at, self.kept_role == SYSTEM, self.kept_row)

    @cached_property
    def window(self) -> Counts:
        """Per kept message: for a user message, the assistant message whose calls it answers
        (the message before it, system messages aside, when that is an assistant message);
        -1 otherwise."""
        role, before = self.kept_role, self.previous_said
        opens = np.zeros(len(role), dtype=bool)
        has = before >= 0
        opens[has] = role[before[has]] == ASSISTANT
        return np.where((role == USER) & opens, before, -1)

    # -- calls and results -------------------------------------------------------------------

    @cached_property
    def _ids(self) -> tuple[Counts, Counts, int]:
        """The calls' and the results' ids as numbers in one dictionary, and its size."""
        c = self.conversations
        ids = [c.call_id, c.result_call]
        if c.call_id.type != c.result_call.type:  # else joined as they are, with no copy
            ids = [i.cast(pa.large_string()) for i in ids]
        both = pa.concat_arrays(ids)
        encoded = pc.dictionary_encode(both)
        # A null id is in a row the flattener does not read: any number will do.
        codes = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        calls = len(c.call_id)
        return codes[:calls], codes[calls:], max(len(encoded.dictionary), 1)

    @cached_property
    def call_key(self) -> Counts:
        """Per call, its turn and id as one number."""
        calls, _, size = self._ids
        turn = self.position[self.conversations.call_message]
        key: Counts = turn * size + calls
        return key

    @cached_property
    def result_window(self) -> Counts:
        """Per result, the window it falls in (`window` of its message), worked out for the
        messages holding results alone."""
        at = self.position[self.conversations.result_message]
        role, before = self.kept_role, self._said_before(at)
        opens = before >= 0
        opens[opens] = role[before[opens]] == ASSISTANT
        return np.where(opens & (role[at] == USER), before, -1)

    @cached_property
    def result_key(self) -> Counts:
        """Per result, the window it falls in and its call's id as one number (-1: no window)."""
        _, results, size = self._ids
        window = self.result_window
        return np.where(window >= 0, window * size + results, -1)

    @cached_property
    def _matched(self) -> Counts | None:
        """Per result, the call whose turn and id it has (-1: none), where no turn makes two
        calls with one id (None otherwise: then a result's key may name several calls).

        A result is first looked for at its place among its message's results in the calls of
        its window, where most results stand (the k-th result answering the k-th call); only
        the others are looked for among all the calls of their window."""
        if self.duplicate.any():
            return None
        c = self.conversations
        key = self.result_key
        out = np.full(len(key), -1, dtype=np.int64)
        has = np.flatnonzero(key >= 0)
        if not len(has):
            return out
        calls_per_message = self.calls_per_message
        first_call = np.cumsum(calls_per_message) - calls_per_message
        opener = self.kept[self.result_window[has]]
        opened = calls_per_message[opener]
        place = has - run_starts(c.result_message)[has]
        at = first_call[opener] + place
        fits = place < opened
        fits[fits] = self.call_key[at[fits]] == key[has[fits]]
        out[has[fits]] = at[fits]
        rest = ~fits
        if not rest.any():
            return out
        # The others: each against every call of its window.
        lost, sizes = has[rest], opened[rest]
        owner = np.repeat(np.arange(len(lost), dtype=np.int64), sizes)
        ends = np.cumsum(sizes)
        calls = np.repeat(first_call[opener[rest]] - (ends - sizes), sizes)
        calls += np.arange(len(owner), dtype=np.int64)
        hit = self.call_key[calls] == key[lost[owner]]
        out[lost[owner[hit]]] = calls[hit]
        return out

    @cached_property
    def orphan(self) -> Mask:
        """Per result: it answers no pending call (R3)."""
        matched = self._matched
        if matched is None:
            key = self.result_key
            answers = np.isin(key, self.call_key) & (key >= 0)
            out: Mask = ~answers | repeated(key)
            return out
        # A second result for a call, which only a message of several results can hold.
        again = np.zeros(len(matched), dtype=bool)
        c = self.conversations
        several = np.flatnonzero(
            (matched >= 0) & (np.bincount(c.result_message)[c.result_message] > 1)
        )
        again[several] = repeated(matched[several])
        out = (matched < 0) | again
        return out

    @cached_property
    def answered(self) -> Mask:
        """Per call: a result in the message that closes its window answers it."""
        matched = self._matched
        if matched is None:
            answered: Mask = np.isin(self.call_key, self.result_key[~self.orphan])
            return answered
        out = np.zeros(len(self.call_key), dtype=bool)
        out[matched[~self.orphan]] = True
        return out

    @cached_property
    def answer(self) -> Counts:
        """Per call, the result that answers it, by position among the results (-1: none): the
        first result for its id in the message that closes its window."""
        answering = np.flatnonzero(~self.orphan)
        out = np.full(len(self.call_key), -1, dtype=np.int64)
        matched = self._matched
        if matched is not None:
            out[matched[answering]] = answering
            return out
        keys = self.result_key[answering]  # distinct: a repeated one is an orphan
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        if len(keys):
            place = np.minimum(np.searchsorted(keys, self.call_key), len(keys) - 1)
            found = keys[place] == self.call_key
            out[found] = answering[order[place[found]]]
        return out

    @cached_property
    def trailing_turn(self) -> Counts:
        """Per row, the kept position of its last assistant turn when its calls are pending at
        the very end (it makes calls and no user message follows it), else -1."""
        role, row = self.kept_role, self.kept_row
        said = np.flatnonzero(role != SYSTEM)
        last = np.full(self.rows, -1, dtype=np.int64)
        last[row[said]] = said  # ascending: the last one of each row stays
        out = np.full(self.rows, -1, dtype=np.int64)
        has = np.flatnonzero(last >= 0)
        turns = last[has]
        pending = (role[turns] == ASSISTANT) & (self.calls_per_message[self.kept[turns]] > 0)
        out[has[pending]] = turns[pending]
        return out

    @cached_property
    def trailing(self) -> Mask:
        """Per call: made by its row's trailing turn."""
        c = self.conversations
        turn = self.position[c.call_message]
        out: Mask = turn == self.trailing_turn[self.kept_row[turn]]
        return out

    @cached_property
    def unanswered(self) -> Mask:
        """Per call: unanswered, and not pending at the very end (R5)."""
        out: Mask = ~self.answered & ~self.trailing
        return out

    @cached_property
    def unanswered_calls(self) -> Counts:
        """Per row, its unanswered calls (one per id of a turn): R5's occurrences."""
        c = self.conversations
        return count(self.unanswered & ~self.duplicate, c.message_row[c.call_message], self.rows)

    @cached_property
    def duplicate(self) -> Mask:
        """Per call: an earlier call of its turn has its id (looked for only in the turns that
        make several calls)."""
        c = self.conversations
        out = np.zeros(len(c.call_message), dtype=bool)
        several = np.flatnonzero(self.calls_per_message[c.call_message] > 1)
        if not len(several):
            return out
        key = self.call_key[several]
        turn = c.call_message[several]
        most = int(self.calls_per_message.max())
        if most > 8:
            out[several] = repeated(key)
            return out
        # A turn's calls are consecutive: each compared with the few before it in its turn.
        hit = np.zeros(len(several), dtype=bool)
        for back in range(1, most):
            same = (turn[back:] == turn[:-back]) & (key[back:] == key[:-back])
            hit[back:] |= same
        out[several] = hit
        return out

    @cached_property
    def trailing_calls(self) -> Counts:
        """Per row, the calls pending at the very end, one per id."""
        c = self.conversations
        return count(self.trailing & ~self.duplicate, c.message_row[c.call_message], self.rows)

    # -- per row -------------------------------------------------------------------------------

    def _rows_of_calls(self, flags: Mask) -> Mask:
        c = self.conversations
        return rows_with(flags, c.message_row[c.call_message], self.rows)

    @cached_property
    def rows_consecutive(self) -> Mask:
        return rows_with(self.consecutive, self.kept_row, self.rows)

    @cached_property
    def rows_orphan(self) -> Mask:
        c = self.conversations
        return rows_with(self.orphan, c.message_row[c.result_message], self.rows)

    @cached_property
    def rows_unanswered(self) -> Mask:
        return self._rows_of_calls(self.unanswered)

    @cached_property
    def rows_trailing(self) -> Mask:
        out: Mask = self.trailing_turn >= 0
        return out

    @cached_property
    def rows_duplicate_id(self) -> Mask:
        return self._rows_of_calls(self.duplicate)

    @cached_property
    def rows_invalid_arguments(self) -> Mask:
        return self._rows_of_calls(~self.conversations.call_object)

    @cached_property
    def rows_no_assistant(self) -> Mask:
        assistants = count(self.kept_role == ASSISTANT, self.kept_row, self.rows)
        out: Mask = assistants == 0
        return out
