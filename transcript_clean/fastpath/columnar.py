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
    lists_of,
    rows_with,
    run_starts,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, Conversations
from transcript_clean.columnar.edits import Answers, Edits, Inserts, item_sources
from transcript_clean.columnar.walk import ConversationsWalk
from transcript_clean.fastpath.base import (
    ORIGIN,
    ArrowRepair,
    ArrowView,
    FastReject,
    Origins,
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
from transcript_clean.rules.invalid_tool_arguments import (
    arrow_rejects,
    invalid_calls,
    shown_arguments,
)
from transcript_clean.rules.no_assistant_turn import CODE as NO_ASSISTANT_TURN
from transcript_clean.rules.no_assistant_turn import MESSAGE as NO_ASSISTANT_MESSAGE
from transcript_clean.rules.orphan_tool_result import used_message, used_orphans
from transcript_clean.rules.tool_arguments_schema import CODE as TOOL_ARGUMENTS_SCHEMA
from transcript_clean.rules.unanswered_tool_call import error_results, uncuttable
from transcript_clean.rules.unencodable_row import CODE as UNENCODABLE_ROW
from transcript_clean.rules.unencodable_row import message as unwritten_message
from transcript_clean.rules.unknown_tool import CODE as UNKNOWN_TOOL
from transcript_clean.transcript import (
    TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER,
    invalid_arguments_feedback,
)

__all__ = ["ConversationsView"]


class ConversationsView(ArrowView):
    """A batch's `Conversations` as the fast path reads a view: the rows the flattener reads,
    the calls pending at the end and the calls for the declared-tools checks. Its checks are
    the rules' columnar checks (`possible_codes` asks each rule of `walk`); the codes it
    repairs, R1 and R5, it names among its own; so are R3, whose orphans it drops where each
    result is an item of the column (`Conversations.result_item`) and rejects where a later
    turn may have used one, and R2, whose rows it only rejects (its answers are the per-row
    path's)."""

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
        # Whole messages dropped and merged in the format's layout: its items, or its text.
        whole = c.item_message is not None or fmt.renders_messages
        if whole:
            repairs |= {EMPTY_ASSISTANT_TURN, UNANSWERED_TOOL_CALL}
            self.checks[EMPTY_ASSISTANT_TURN] = walk.rows_empty
            self.checks[UNANSWERED_TOOL_CALL] = walk.rows_unanswered
        if c.result_text is not None:  # R3's rejects, and its drops where results are items
            repairs.add(ORPHAN_TOOL_RESULT)
            self.checks[ORPHAN_TOOL_RESULT] = walk.rows_orphan
        joins = fmt.merges_join_texts(column)
        self.joins_texts = bool(joins)
        """A message grows by its text (ShareGPT's `value`): only one that is one text can."""
        if whole and c.message_text is not None and joins is not None:
            repairs.add(CONSECUTIVE_ASSISTANT)  # R4's merges, which the format writes
            self.checks[CONSECUTIVE_ASSISTANT] = walk.rows_consecutive
            self.with_empty = frozenset({CONSECUTIVE_ASSISTANT})
        self.repairs = frozenset(repairs)

    def reject(self, rows: dict[str, Mask]) -> list[FastReject]:
        """Rows whose only code is a call to an undeclared tool or one breaking its schema,
        rejected with the per-row path's words (`fastpath.declared`), which name each call by
        its message and its place among the calls of its turn."""
        c = self.conversations

        def places() -> tuple[Counts, Counts]:
            calls = np.arange(len(c.call_message), dtype=np.int64)
            place = calls - run_starts(c.call_message)
            return self.walk.message_index[c.call_message], place

        out = declared_rejects(self, rows, places) + self._reject_undecodable(rows)
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
        reject where no assistant turn would be left; R3's drops and R2's answers where the
        format writes them (`_orphans`, `_answers`), else their rejects alone."""
        c, walk = self.conversations, self.walk
        assert set(rows) <= self.repairs
        rows = dict(rows)
        if c.reencoded is not None:  # rows the per-row path writes anew: theirs to repair
            kept = ~c.reencoded  # (R2's rows here are only ever rejected, R3's as `_orphans` says)
            only_rejected = (ORPHAN_TOOL_RESULT, INVALID_TOOL_ARGUMENTS)
            rows = {k: m if k in only_rejected else m & kept for k, m in rows.items()}
        rejects: list[FastReject] = []
        occurrences: dict[str, Counts] = {}
        orphaned = np.zeros(self.rows, dtype=bool)
        if ORPHAN_TOOL_RESULT in rows:
            orphaned, rejects = self._orphans(rows.pop(ORPHAN_TOOL_RESULT))
        answered = np.zeros(self.rows, dtype=bool)
        answers = None
        if INVALID_TOOL_ARGUMENTS in rows:
            invalid_rows = rows.pop(INVALID_TOOL_ARGUMENTS)
            rejected = self._reject_invalid_arguments(invalid_rows, repairing=True)
            rejects += rejected
            invalid_rows &= ~any_of((r.rows for r in rejected), self.rows)
            answered, answers = self._answers(invalid_rows)
            if answered.any():  # R2: the turns with an invalid call answered anew
                raw, _ = raw_input_calls(self)
                call_row = c.message_row[c.call_message]
                invalid = invalid_calls(c, raw)
                occurrences[INVALID_TOOL_ARGUMENTS] = count(invalid, call_row, self.rows)
        if not rows and not orphaned.any() and not answered.any():
            return ArrowRepair(np.zeros(0, dtype=np.int64), self.column.slice(0, 0), {}, rejects)
        assert c.item_message is not None or self.fmt.renders_messages
        drop = np.zeros(c.messages, dtype=bool)
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
                inserts, given = self._error_results(rows[UNANSWERED_TOOL_CALL])
                asked |= given
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
            refused = self.fmt.unmerged(self.column, c, merges) if merged.any() else None
            if refused is not None and (refused & merged).any():  # the per-row path's
                mergeable &= ~refused
                merges, merged = consecutive_merges(walk, mergeable, plain_first=self.joins_texts)
            asked |= merged
        drop_results = None
        if orphaned.any():  # R3: every orphan of those rows dropped
            result_row = c.message_row[c.result_message]
            drop_results = walk.orphan & orphaned[result_row]
            occurrences[ORPHAN_TOOL_RESULT] = count(walk.orphan, result_row, self.rows)
            asked |= orphaned
        asked |= answered
        subset = np.flatnonzero(asked)
        edits = Edits(c, subset, drop, merges, drop_results, answers, inserts)
        column = self.fmt.write(self.column, edits)
        assert column is not None  # whole items dropped, merges where `merges_join_texts`
        # and `unmerged` say, results where `result_holders` says
        origins = None
        if self.fmt.edits_lines and self.fmt.merged_field is not None:
            origins = Origins(lambda: _origins(self.column, edits), self.fmt.merged_field)
        return ArrowRepair(subset, column, occurrences, rejects, origins)

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
        # Each message holding results once (`result_message` is sorted).
        first = np.ones(len(c.result_message), dtype=bool)
        first[1:] = c.result_message[1:] != c.result_message[:-1]
        holders = c.result_message[first]
        prior = before[holders]
        found = prior >= 0
        found[found] &= self.walk.empty[prior[found]]
        found[found] &= c.message_row[prior[found]] == c.message_row[holders[found]]
        return rows_with(found, c.message_row[holders], self.rows)

    def _orphans(self, rows: Mask) -> tuple[Mask, list[FastReject]]:
        """R3 of the rows of `rows` (rows with no other code): the rows whose orphans are
        dropped here (every orphan of theirs, for a flattener whose results are whole items,
        `result_item`), and those rejected in the per-row path's words, which name the first
        orphan a later turn may have used (`used_orphans`), where the config rejects such
        rows. A row with such an orphan is dropped where the config drops them; one with an
        orphan that says something other than one text (which the columns do not compare), or
        with a used one where the config is not known, is left to the per-row path."""
        c, walk = self.conversations, self.walk
        none = np.zeros(self.rows, dtype=bool)
        if c.result_text is None:
            return none, []
        drops = c.result_item is not None and c.item_message is not None
        droppable = rows if c.reencoded is None else rows & ~c.reencoded
        if not drops:
            droppable = none
        if self.config is not None and self.config.orphan_result == "drop":
            return droppable, []
        result_row = c.message_row[c.result_message]
        last_turn = np.full(self.rows, -1, dtype=np.int64)
        turns = np.flatnonzero(c.role == ASSISTANT)
        np.maximum.at(last_turn, c.message_row[turns], turns)
        says = ~c.result_blank
        before = c.result_message < last_turn[result_row]
        maybe = walk.orphan & says & before
        if not (rows & rows_with(maybe, result_row, self.rows)).any():
            return droppable, []
        text = c.result_text()
        used = used_orphans(result_row, walk.orphan, says, text, before)
        unsure = rows_with(maybe & as_mask(text.is_null()), result_row, self.rows)
        using = rows_with(used, result_row, self.rows)
        dropped = droppable & ~using & ~unsure
        hit = rows & using & ~unsure
        if self.config is None or not hit.any():
            return dropped, []
        first = first_flagged(used, result_row, self.rows)[hit]
        index = walk.message_index[c.result_message[first]]
        ids = c.result_call.take(indices(first)).to_pylist()
        words = [
            used_message(int(i), str(call_id))
            for i, call_id in zip(index.tolist(), ids, strict=True)
        ]
        occurrences = np.where(hit, count(walk.orphan, result_row, self.rows), 0)
        return dropped, [FastReject(ORPHAN_TOOL_RESULT, hit, occurrences, words)]

    def _answers(self, rows: Mask) -> tuple[Mask, Answers | None]:
        """R2 of the rows of `rows` (rows with no other code, none rejected for R2): the rows
        answered here, and their answers, where the format writes results anew
        (`Conversations.call_made_up`, `result_item`). In such a row every call is answered;
        each turn with an invalid call gets its results written anew in place of those there,
        as `answer_invalid_calls` writes them, where they stand in its calls' order and each
        invalid call's result is R2's own feedback already (any other would be a real result,
        which R2 never writes over: rejected, or the per-row path's to tell). Every other row
        is left to the per-row path."""
        c, walk = self.conversations, self.walk
        none = np.zeros(self.rows, dtype=bool)
        if c.call_made_up is None or c.result_item is None or c.result_text is None:
            return none, None
        raw, unsure = raw_input_calls(self)
        rows = rows & ~unsure
        if c.reencoded is not None:
            rows &= ~c.reencoded
        call_row = c.message_row[c.call_message]
        invalid = invalid_calls(c, raw)
        turn = rows_with(invalid & rows[call_row], c.call_message, c.messages)
        calls = np.flatnonzero(turn[c.call_message])
        if not len(calls):
            return none, None
        answer = walk.answer[calls]
        fine = (answer >= 0) & ~walk.duplicate[calls]
        if not fine.any():  # (no result to write over: a batch may hold none at all)
            return none, None
        # In place: the k-th call's result is the k-th result of the message answering them,
        # which holds no other.
        place = calls - np.searchsorted(c.call_message, c.call_message[calls])
        first = answer - place
        fine &= first >= 0
        held = np.bincount(c.result_message, minlength=c.messages)
        at = np.maximum(first, 0)
        fine &= c.result_message[at] == c.result_message[np.maximum(answer, 0)]
        fine &= held[c.result_message[at]] == self.walk.calls_per_message[c.call_message[calls]]
        bad = invalid[calls]
        shown = shown_arguments(c.call_arguments.take(indices(calls[bad])))
        names = c.call_name.take(indices(calls[bad])).to_pylist()
        given = c.result_text().take(indices(np.maximum(answer[bad], 0))).to_pylist()
        texts = np.full(len(calls), TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER, dtype=object)
        feedback: list[bool] = []
        feedback_texts: list[str | None] = []
        for raw_text, name, was in zip(shown, names, given, strict=True):
            text = None if raw_text is None else invalid_arguments_feedback(str(name), raw_text)
            feedback.append(text is not None and text == was)
            feedback_texts.append(text)
        fine[bad] &= np.array(feedback, dtype=bool)
        texts[bad] = feedback_texts
        ok = rows & ~rows_with(~fine, call_row[calls], self.rows)
        take = ok[call_row[calls]]
        if not take.any():
            return none, None
        text = pa.array(texts[take].tolist(), pa.string())
        return ok, Answers(answer[take], calls[take], text)

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


def _origins(column: pa.Array, edits: Edits) -> pa.Array:
    """Per row the edits write, where each of its items came from (`Origins.messages`)."""
    sizes, at, rewritten = item_sources(column, edits)
    where = pa.StructArray.from_arrays([pa.array(at), pa.array(rewritten)], fields=list(ORIGIN))
    return lists_of(pa.list_(where.type), sizes, where)
