"""The fast path's view of a batch that its format flattened into `Conversations`: every rule
clears rows with its own columnar check (`Rule.columnar`), the same for every format; calls to
undeclared tools or breaking a schema are rejected in the per-row path's words; and where each
message is made of whole items of the conversation column, R1's empty turns are dropped and R5's
cut made in Arrow, and R5's error result written where the format writes it."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    any_of,
    as_mask,
    count,
    first_flagged,
    indices,
    rows_with,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, Conversations
from transcript_clean.columnar.edits import Edits, Inserts, joins_texts
from transcript_clean.columnar.walk import ConversationsWalk
from transcript_clean.fastpath.base import (
    ArrowRepair,
    ArrowView,
    FastReject,
    decode_rejects,
)
from transcript_clean.fastpath.declared import declared_rejects, raw_input_calls
from transcript_clean.fastpath.measures import Measures, conversation_measures
from transcript_clean.formats.base import Format
from transcript_clean.rules import (
    CONSECUTIVE_ASSISTANT,
    EMPTY_ASSISTANT_TURN,
    INVALID_TOOL_ARGUMENTS,
    MALFORMED_ROW,
    ORPHAN_TOOL_RESULT,
    UNANSWERED_TOOL_CALL,
    UNKNOWN_ROLE,
)
from transcript_clean.rules.consecutive_assistant import merges as consecutive_merges
from transcript_clean.rules.invalid_tool_arguments import arrow_rejects
from transcript_clean.rules.no_assistant_turn import CODE as NO_ASSISTANT_TURN
from transcript_clean.rules.no_assistant_turn import MESSAGE as NO_ASSISTANT_MESSAGE
from transcript_clean.rules.orphan_tool_result import used_message, used_orphans
from transcript_clean.rules.tool_arguments_schema import CODE as TOOL_ARGUMENTS_SCHEMA
from transcript_clean.rules.unanswered_tool_call import error_results, uncuttable
from transcript_clean.rules.unencodable_row import CODE as UNENCODABLE_ROW
from transcript_clean.rules.unencodable_row import message as unwritten_message
from transcript_clean.rules.unknown_tool import CODE as UNKNOWN_TOOL

__all__ = ["ConversationsView"]


class ConversationsView(ArrowView):
    """A batch's `Conversations` as the fast path reads a view: the rows the flattener reads,
    the calls pending at the end and the calls for the declared-tools checks. Its checks are
    the rules' columnar checks (`possible_codes` asks each rule of `walk`); the codes it
    repairs, R1 and R5, it names among its own; so are R2 and R3, whose rows it only
    rejects (their repairs are the per-row path's)."""

    rejects = frozenset(
        {UNKNOWN_TOOL, TOOL_ARGUMENTS_SCHEMA, MALFORMED_ROW, UNKNOWN_ROLE, INVALID_TOOL_ARGUMENTS}
    )

    def __init__(
        self,
        conversations: Conversations,
        fmt: Format,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> None:
        walk = ConversationsWalk(conversations)
        super().__init__(conversations.rows, conversations.unread, {}, walk.trailing_calls)
        self.conversations = conversations
        self.walk = walk
        self.fmt = fmt
        self.column = column
        self.schema = schema
        self.side = dict(side or {})
        c = conversations
        self.calls = (c.message_row[c.call_message], c.call_name, c.call_arguments)
        # R2's rejects (its answers, new results written in the format, are the per-row path's)
        repairs: set[str] = {INVALID_TOOL_ARGUMENTS}
        self.checks = {INVALID_TOOL_ARGUMENTS: walk.rows_invalid_arguments}
        if c.item_message is not None:
            repairs |= {EMPTY_ASSISTANT_TURN, UNANSWERED_TOOL_CALL}
            self.checks[EMPTY_ASSISTANT_TURN] = walk.rows_empty
            self.checks[UNANSWERED_TOOL_CALL] = walk.rows_unanswered
        if c.result_text is not None:  # R3's rejects (its drops are the per-row path's)
            repairs.add(ORPHAN_TOOL_RESULT)
            self.checks[ORPHAN_TOOL_RESULT] = walk.rows_orphan
        field = fmt.merged_field
        self.joins_texts = field is not None and joins_texts(column, field)
        """A message grows by its text (ShareGPT's `value`): only one that is one text can."""
        if c.item_message is not None and c.message_text is not None and field is not None:
            repairs.add(CONSECUTIVE_ASSISTANT)  # R4's merges, which the format writes
            self.checks[CONSECUTIVE_ASSISTANT] = walk.rows_consecutive
            self.with_empty = frozenset({CONSECUTIVE_ASSISTANT})
        self.repairs = frozenset(repairs)

    def reject(self, rows: dict[str, Mask]) -> list[FastReject]:
        """Rows whose only code is a call to an undeclared tool or one breaking its schema,
        rejected with the per-row path's words (`fastpath.declared`), which name each call by
        its message and its place among the calls of its turn."""
        c = self.conversations
        calls = np.arange(len(c.call_message), dtype=np.int64)
        place = calls - np.searchsorted(c.call_message, c.call_message)
        index = self.walk.message_index[c.call_message]
        out = declared_rejects(self, rows, (index, place)) + self._reject_undecodable(rows)
        if INVALID_TOOL_ARGUMENTS in rows:
            out += self._reject_invalid_arguments(rows[INVALID_TOOL_ARGUMENTS], repairing=False)
        return out

    def _reject_invalid_arguments(self, rows: Mask, *, repairing: bool) -> list[FastReject]:
        """R2 of the rows of `rows` (rows with no other code), rejected as the per-row path
        rejects them (`invalid_tool_arguments.arrow_rejects`): each one where the config
        rejects R2, those whose invalid call has a real result where it repairs R2. A row
        whose declarations are not read here may call a raw-input tool: left out."""
        raw, unsure = raw_input_calls(self)
        rows = rows & ~unsure
        if not rows.any():
            return []
        c = self.conversations
        hit, occurrences, words = arrow_rejects(c, self.walk, rows, raw, repairing=repairing)
        if not hit.any():
            return []
        return [FastReject(INVALID_TOOL_ARGUMENTS, hit, occurrences, words)]

    def _reject_undecodable(self, rows: dict[str, Mask]) -> list[FastReject]:
        """Rows the flattener does not read, decoded here by the format's decoder as the
        per-row path decodes them (from the conversation and the side columns, all the decoder
        reads): one it cannot read is rejected with its words, for the decoding codes of `rows`.
        A row that decodes, or a null one (a line the source could not read, a row over
        `--max-row-bytes`: the per-row path says why), is left to the per-row path."""
        wanted: dict[str, Mask] = {c: rows[c] for c in (MALFORMED_ROW, UNKNOWN_ROLE) if c in rows}
        if not wanted:
            return []
        asked = any_of(wanted.values(), self.rows) & ~as_mask(self.column.is_null())
        hit = np.flatnonzero(asked)
        if not len(hit):
            return []
        at = indices(hit)
        values = self.column.take(at).to_pylist()
        side = {name: column.take(at).to_pylist() for name, column in self.side.items()}
        records = (
            (row, {self.fmt.column: value, **{name: v[k] for name, v in side.items()}})
            for k, (row, value) in enumerate(zip(hit.tolist(), values, strict=True))
        )
        return decode_rejects(self.fmt, records, wanted)

    def measures(self, rows: Mask, *, texts: bool = False) -> Measures | None:
        return conversation_measures(
            self.conversations, rows & self.conversations.read, texts=texts
        )

    def repair(self, rows: dict[str, Mask]) -> ArrowRepair:
        """The rows of `rows` repaired as the per-row path repairs them, decided over the view
        as edits (`columnar.edits`) that the format writes in its own layout (`Format.write`):
        R1, any row's empty turns dropped (every other code it has is the re-check's:
        `again`); R4's merges (`consecutive_assistant.merges`), in the rows whose only code it
        is and in R1's, after R1 as the per-row path makes them; R5's cut, for rows whose only
        code it is, everything from the first assistant turn with an unanswered call on, or a
        reject where no assistant turn would be left."""
        c, walk = self.conversations, self.walk
        assert set(rows) <= self.repairs
        rows = dict(rows)
        if c.reencoded is not None:  # rows the per-row path writes anew: theirs to repair
            kept = ~c.reencoded  # (R3's and R2's rows here are only ever rejected)
            only_rejected = (ORPHAN_TOOL_RESULT, INVALID_TOOL_ARGUMENTS)
            rows = {k: m if k in only_rejected else m & kept for k, m in rows.items()}
        rejects: list[FastReject] = []
        if ORPHAN_TOOL_RESULT in rows:
            rejects += self._reject_used_orphans(rows.pop(ORPHAN_TOOL_RESULT))
        if INVALID_TOOL_ARGUMENTS in rows:
            asked = rows.pop(INVALID_TOOL_ARGUMENTS)
            rejects += self._reject_invalid_arguments(asked, repairing=True)
        if not rows:
            return ArrowRepair(np.zeros(0, dtype=np.int64), self.column.slice(0, 0), {}, rejects)
        assert c.item_message is not None
        drop = np.zeros(c.messages, dtype=bool)
        occurrences: dict[str, Counts] = {}
        asked = np.zeros(self.rows, dtype=bool)
        empty_rows = np.zeros(self.rows, dtype=bool)
        if EMPTY_ASSISTANT_TURN in rows:
            empty_rows = rows[EMPTY_ASSISTANT_TURN]
            if c.pairs_by_position:
                empty_rows = empty_rows & ~self._empty_before_results()
            drop |= walk.empty & empty_rows[c.message_row]
            occurrences[EMPTY_ASSISTANT_TURN] = count(walk.empty, c.message_row, self.rows)
            asked |= empty_rows
        inserts = None
        if UNANSWERED_TOOL_CALL in rows:
            occurrences[UNANSWERED_TOOL_CALL] = walk.unanswered_calls
            if self.config is not None and self.config.interrupted_call == "error_result":
                inserts, answered = self._error_results(rows[UNANSWERED_TOOL_CALL])
                asked |= answered
            else:
                cut, rejected = self._cut(rows[UNANSWERED_TOOL_CALL])
                drop |= cut
                rejects += rejected
                asked |= rows[UNANSWERED_TOOL_CALL] & ~any_of((r.rows for r in rejected), self.rows)
        merges = None
        if CONSECUTIVE_ASSISTANT in rows:
            occurrences[CONSECUTIVE_ASSISTANT] = count(walk.consecutive, walk.kept_row, self.rows)
            # Merged only where the empty turns R1 sets aside are dropped here too.
            mergeable = rows[CONSECUTIVE_ASSISTANT] & ~(walk.rows_empty & ~empty_rows)
            merges, merged = consecutive_merges(walk, mergeable, plain_first=self.joins_texts)
            asked |= merged
        subset = np.flatnonzero(asked)
        column = self.fmt.write(self.column, Edits(c, subset, drop, merges, inserts=inserts))
        assert column is not None  # whole items dropped, merges into `merged_field`, results
        # where `result_holders` says
        return ArrowRepair(subset, column, occurrences, rejects)

    def reject_unwritten(
        self, rows: Mask, *, reject_no_assistant: bool, reject_unwritten: bool
    ) -> list[FastReject]:
        """The rows of `rows` (rows whose only codes are R1 and perhaps no assistant turn after
        it) whose empty turns the format cannot drop (`Format.unwritten`: Alpaca's, ms-swift's
        and TRL's strings hold alternating pairs), rejected as the per-row path rejects them,
        R1 `present`: where no assistant turn is left, for that (`reject_no_assistant`: the
        config rejects it); else as `unencodable_row` (`reject_unwritten`: the config rejects
        it, as any but `clean_batch`'s with `on_row` does), in the encoder's words. A row the
        format would write is left to the per-row path."""
        c, walk = self.conversations, self.walk
        rows = rows & walk.rows_empty
        if not rows.any():
            return []
        empty = count(walk.empty, c.message_row, self.rows)
        present = {EMPTY_ASSISTANT_TURN: empty}
        none_left = rows & walk.rows_no_assistant
        out: list[FastReject] = []
        if reject_no_assistant and none_left.any():
            words = [NO_ASSISTANT_MESSAGE] * int(none_left.sum())
            ones = none_left.astype(np.int64)
            out.append(FastReject(NO_ASSISTANT_TURN, none_left, ones, words, present))
        asked = np.flatnonzero(rows & ~walk.rows_no_assistant)
        if not reject_unwritten or not len(asked):
            return out
        # Each asked row's turns as R1 leaves them, the system prompt aside, as the encoder
        # is handed them.
        said = ~walk.empty & (c.role != SYSTEM)
        said &= np.isin(c.message_row, asked)
        names = np.where(c.role[said] == ASSISTANT, "assistant", "user").tolist()
        owner = c.message_row[said]
        cuts = np.searchsorted(owner, asked, side="right").tolist()
        hit = np.zeros(self.rows, dtype=bool)
        words = []
        start = 0
        for row, stop in zip(asked.tolist(), cuts, strict=True):
            problem = self.fmt.unwritten(names[start:stop])
            start = stop
            if problem is not None:
                hit[row] = True
                words.append(unwritten_message(problem))
        if hit.any():
            out.append(FastReject(UNENCODABLE_ROW, hit, hit.astype(np.int64), words, present))
        return out

    def _empty_before_results(self) -> Mask:
        """Rows where an empty turn is the message right before one holding results (system
        messages aside): the results the decoder paired with the empty turn's (no) calls."""
        c = self.conversations
        said = np.flatnonzero(c.role != SYSTEM)
        before = np.full(c.messages, -1, dtype=np.int64)
        before[said[1:]] = said[:-1]
        holders = np.unique(c.result_message)
        prior = before[holders]
        found = prior >= 0
        found[found] &= self.walk.empty[prior[found]]
        found[found] &= c.message_row[prior[found]] == c.message_row[holders[found]]
        return rows_with(found, c.message_row[holders], self.rows)

    def _reject_used_orphans(self, rows: Mask) -> list[FastReject]:
        """R3 of the rows of `rows` (rows with no other code): a row with an orphan result a
        later turn may have used (`used_orphans`) is rejected in the per-row path's words,
        which name the first one, where the config rejects such rows. Every other row is left
        to the per-row path: one whose orphans may all be dropped, one with an orphan that
        says something other than one text (which the columns do not compare), and every row
        where the config drops them all or is not known."""
        c, walk = self.conversations, self.walk
        if self.config is None or self.config.orphan_result == "drop" or c.result_text is None:
            return []
        result_row = c.message_row[c.result_message]
        last_turn = np.full(self.rows, -1, dtype=np.int64)
        turns = np.flatnonzero(c.role == ASSISTANT)
        np.maximum.at(last_turn, c.message_row[turns], turns)
        says = ~c.result_blank
        before = c.result_message < last_turn[result_row]
        rows = rows & rows_with(walk.orphan & says & before, result_row, self.rows)
        if not rows.any():
            return []
        text = c.result_text()
        used = used_orphans(result_row, walk.orphan, says, text, before)
        unsure = walk.orphan & says & before & as_mask(text.is_null())
        hit = rows & rows_with(used, result_row, self.rows)
        hit &= ~rows_with(unsure, result_row, self.rows)
        if not hit.any():
            return []
        first = first_flagged(used, result_row, self.rows)[hit]
        index = walk.message_index[c.result_message[first]]
        ids = c.result_call.take(indices(first)).to_pylist()
        words = [
            used_message(int(i), str(call_id))
            for i, call_id in zip(index.tolist(), ids, strict=True)
        ]
        occurrences = np.where(hit, count(walk.orphan, result_row, self.rows), 0)
        return [FastReject(ORPHAN_TOOL_RESULT, hit, occurrences, words)]

    def _error_results(self, rows: Mask) -> tuple[Inserts | None, Mask]:
        """R5's error results for the rows of `rows` (rows with no other code), as
        `unanswered_tool_call.error_results` decides them, where the format writes each one
        where it goes (`Format.result_holders`); and the rows they answer. Others are left to
        the per-row path."""
        c = self.conversations
        nothing = np.zeros(self.rows, dtype=bool)
        if not self.fmt.writes_results:
            return None, nothing
        inserts, answered = error_results(self.walk, rows)
        # Where each result goes: into the answering message, else after the call's turn.
        target = np.where(inserts.into >= 0, inserts.into, c.call_message[inserts.call])
        holders = self.fmt.result_holders(self.column, c, target)
        if holders is None:
            return None, nothing
        answered &= ~rows_with(~holders, c.message_row[target], self.rows)
        chosen = answered[c.message_row[target]]
        return Inserts(inserts.call[chosen], inserts.into[chosen], inserts.text), answered

    def _cut(self, rows: Mask) -> tuple[Mask, list[FastReject]]:
        """R5's cut of the rows of `rows` (rows with no empty turn: every message is kept), as
        `unanswered_tool_call.cut_before_unanswered` cuts: the messages dropped, and the rows it
        cannot cut, rejected in its words."""
        c, walk = self.conversations, self.walk
        turns = rows_with(walk.unanswered, c.call_message, c.messages)
        first = first_flagged(turns, c.message_row, self.rows)
        position = np.arange(c.messages, dtype=np.int64)
        before = position < first[c.message_row]
        cuttable = rows_with((c.role == ASSISTANT) & before, c.message_row, self.rows)
        drop = ~before & (rows & cuttable)[c.message_row]
        stuck = rows & ~cuttable
        if not stuck.any():
            return drop, []
        # The first unanswered call of each such row: the first of its first unanswered turn.
        call_row = c.message_row[c.call_message]
        first_call = first_flagged(walk.unanswered, call_row, self.rows)
        at = np.flatnonzero(stuck)
        ids = c.call_id.take(indices(first_call[at])).to_pylist()
        words = [
            uncuttable(int(index), str(call_id))
            for index, call_id in zip(walk.message_index[first[at]].tolist(), ids, strict=True)
        ]
        reject = FastReject(UNANSWERED_TOOL_CALL, stuck, walk.unanswered_calls, words)
        return drop, [reject]

    def again(self, column: pa.Array, rows: Counts) -> ConversationsView | None:
        side = {name: values.take(indices(rows)) for name, values in self.side.items()}
        conversations = self.fmt.flatten(column, self.schema, side)
        if conversations is None:
            return None
        return ConversationsView(conversations, self.fmt, column, self.schema, side)
