"""The Anthropic format's Arrow side: its messages and their content blocks, flattened per batch.

The view reads a row when every message and block is one the decoder reads, every result answers
a call of the turn before and no assistant message follows another; its possible codes are then
empty assistant turns (R1) and calls the next message leaves unanswered (R5), which it repairs as
the per-row path does, calls pending at the end, and no assistant turn. Orphan results (R3) and
consecutive assistant messages (R4) leave their rows to the per-row path, which repairs them.
Content is read as a list of blocks (text, tool_use, thinking and redacted_thinking from the
assistant; text and tool_result from the user) or as plain text; any other block, like an image,
leaves its row to the per-row path.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    NOT_SPACE,
    Counts,
    Mask,
    any_of,
    as_mask,
    count,
    field_type,
    first_flagged,
    flatten,
    flattened,
    indices,
    is_text,
    last_of_rows,
    neighbours,
    objects,
    repeated,
    rows_with,
    shift,
    text_lengths,
)
from transcript_clean.fastpath.base import ArrowRepair, ArrowView, Subset, text_or_absent
from transcript_clean.fastpath.measures import Measures, RowSums, classes_of, column_array, said
from transcript_clean.formats.base import Format
from transcript_clean.rules import (
    CONSECUTIVE_ASSISTANT,
    DUPLICATE_CALL_ID,
    EMPTY_ASSISTANT_TURN,
    INVALID_TOOL_ARGUMENTS,
    NO_ASSISTANT_TURN,
    ORPHAN_TOOL_RESULT,
    TRAILING_TOOL_CALL,
    UNANSWERED_TOOL_CALL,
)

__all__ = ["anthropic_measures", "anthropic_view"]

# The codes a row this view reads never has: every message and block it reads as the decoder
# would, with arguments that are objects, every result answering a call of the turn before, no
# assistant message after another.
_NEVER = (
    DUPLICATE_CALL_ID,  # a turn with a repeated id is left to the per-row path (`_blocks`)
    INVALID_TOOL_ARGUMENTS,
    ORPHAN_TOOL_RESULT,
    CONSECUTIVE_ASSISTANT,
)


def anthropic_view(
    fmt: Format, array: pa.Array, schema: pa.Schema | None = None
) -> AnthropicView | None:
    """The view of an Anthropic `messages` column; None when the column or the row's `system`
    column has a shape this does not read."""
    content_type = _content_type(array.type)
    if content_type is None:
        return None
    if not text_or_absent(schema, "system"):
        return None  # a system prompt of blocks: the decoder checks them row by row
    bad, msgs, parent = flatten(array)
    n = len(msgs)
    if n == 0:  # every row is null or empty, so not read here
        nothing = np.zeros(0, dtype=bool)
        return AnthropicView(fmt, array, parent, bad, nothing, nothing, nothing, nothing, nothing)

    role = pc.struct_field(msgs, "role")
    content = pc.struct_field(msgs, "content")
    is_user = as_mask(pc.equal(role, "user"))
    is_assistant = as_mask(pc.equal(role, "assistant"))
    flag = ~(is_user | is_assistant) | as_mask(msgs.is_null()) | as_mask(content.is_null())
    same_prev, same_next = neighbours(parent)
    flag |= is_assistant & shift(is_assistant) & same_prev  # consecutive_assistant

    calls = unanswered = np.zeros(n, dtype=np.int64)
    if is_text(content_type):
        said = as_mask(pc.match_substring_regex(content, NOT_SPACE))
    else:
        said, calls, unanswered = _blocks(content, is_assistant, same_next, flag)
    blank = is_assistant & ~said
    bad |= rows_with(flag, parent, len(array))
    return AnthropicView(fmt, array, parent, bad, is_assistant, blank, calls, unanswered, said)


class AnthropicView(ArrowView):
    """What the scan of an Anthropic column found: the rows whose every message and block it
    reads as the decoder would, and among them those with empty assistant turns (R1), calls the
    next message does not answer (R5), calls pending at the end, or no assistant turn. It drops
    the empty turns, and cuts before the first unanswered turn where an assistant turn remains,
    as the per-row path does."""

    repairs = frozenset({EMPTY_ASSISTANT_TURN, UNANSWERED_TOOL_CALL})

    def __init__(
        self,
        fmt: Format,
        array: pa.Array,
        parent: npt.NDArray[np.int64],
        unread: Mask,
        is_assistant: Mask,
        blank: Mask,
        calls: Counts,
        unanswered: Counts,
        said: Mask,
    ) -> None:
        rows = len(array)
        nothing = np.zeros(rows, dtype=bool)
        checks = dict.fromkeys(_NEVER, nothing)
        if len(parent):
            checks[EMPTY_ASSISTANT_TURN] = rows_with(blank, parent, rows)
            checks[UNANSWERED_TOOL_CALL] = rows_with(unanswered > 0, parent, rows)
            checks[NO_ASSISTANT_TURN] = count(is_assistant & said, parent, rows) == 0
        trailing_calls = last_of_rows(np.where(is_assistant, calls, 0), parent, rows)
        checks[TRAILING_TOOL_CALL] = trailing_calls > 0
        super().__init__(rows, unread, checks, trailing_calls)
        self.fmt = fmt
        self.array = array
        self.parent = parent
        self.is_assistant = is_assistant
        self.blank = blank
        self.unanswered = unanswered

    def again(self, column: pa.Array) -> AnthropicView | None:
        return anthropic_view(self.fmt, column)

    def repair(self, rows: dict[str, Mask]) -> ArrowRepair:
        parent, count_rows = self.parent, self.rows
        position = np.arange(len(parent))
        drop = np.zeros(len(parent), dtype=bool)
        alone = dict(rows)
        if EMPTY_ASSISTANT_TURN in alone:
            drop |= self.blank & alone[EMPTY_ASSISTANT_TURN][parent]
        if UNANSWERED_TOOL_CALL in alone:
            # Everything from the first unanswered turn on, where an assistant turn is left
            # before it; a row the cut would leave without one goes to the per-row path, which
            # words its rejection.
            first = first_flagged(self.unanswered > 0, parent, count_rows)
            before = position < first[parent]
            cuttable = count(self.is_assistant & before, parent, count_rows) > 0
            alone[UNANSWERED_TOOL_CALL] &= cuttable
            drop |= ~before & alone[UNANSWERED_TOOL_CALL][parent]
        chosen = Subset.of(np.flatnonzero(any_of(alone.values(), count_rows)), parent, count_rows)
        messages = pc.list_flatten(self.array).take(indices(chosen.elements))
        column = chosen.column(self.array.type, messages, drop)
        occurrences = {
            EMPTY_ASSISTANT_TURN: count(self.blank, parent, count_rows),
            UNANSWERED_TOOL_CALL: count(
                self.unanswered > 0, parent, count_rows, weights=self.unanswered
            ),
        }
        return ArrowRepair(chosen.rows, column, {c: occurrences[c] for c in alone})


def _content_type(type_: pa.DataType) -> pa.DataType | None:
    """The `content` type of messages this reads: text, or a list of blocks whose fields have
    the types the decoder expects; None for any other shape."""
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return None
    message = type_.value_type
    if not pa.types.is_struct(message) or not is_text(field_type(message, "role")):
        return None
    content = field_type(message, "content")
    if content is None or is_text(content):
        return content
    if not (pa.types.is_list(content) or pa.types.is_large_list(content)):
        return None
    block = content.value_type
    if not pa.types.is_struct(block) or not is_text(field_type(block, "type")):
        return None
    for name in ("text", "thinking", "signature", "data", "id", "name", "tool_use_id", "content"):
        kind = field_type(block, name)
        if kind is not None and not is_text(kind):
            return None
    error = field_type(block, "is_error")
    if error is not None and not pa.types.is_boolean(error):
        return None
    return content


def _field(blocks: pa.Array, name: str) -> pa.Array:
    """A field of the blocks, all null where their type has no such field."""
    if blocks.type.get_field_index(name) >= 0:
        return pc.struct_field(blocks, name)
    return pa.nulls(len(blocks), pa.string())


def _blocks(
    content: pa.Array, is_assistant: Mask, same_next: Mask, flag: Mask
) -> tuple[Mask, Counts, Counts]:
    """Check the content blocks, flagging their messages in `flag`; returns, per message,
    whether it says something (an assistant turn that is not empty), its calls, and those of
    them the next message does not answer."""
    n = len(content)
    blocks = pc.list_flatten(content)
    owner = pc.list_parent_indices(content).to_numpy().astype(np.int64)
    said = np.zeros(n, dtype=bool)
    calls = np.zeros(n, dtype=np.int64)
    if len(blocks) == 0:
        return said, calls, calls

    def field(name: str) -> pa.Array:
        return _field(blocks, name)

    kind = field("type")
    text_block = as_mask(pc.equal(kind, "text"))
    use = as_mask(pc.equal(kind, "tool_use"))
    thinking = as_mask(pc.equal(kind, "thinking"))
    redacted = as_mask(pc.equal(kind, "redacted_thinking"))
    result = as_mask(pc.equal(kind, "tool_result"))
    by_assistant = is_assistant[owner]
    known = text_block | (by_assistant & (use | thinking | redacted)) | (~by_assistant & result)
    wrong = ~known | as_mask(blocks.is_null())
    wrong |= text_block & as_mask(field("text").is_null())
    wrong |= thinking & as_mask(field("thinking").is_null())
    wrong |= redacted & as_mask(field("data").is_null())
    wrong |= use & (as_mask(field("id").is_null()) | as_mask(field("name").is_null()))
    if blocks.type.get_field_index("input") >= 0:
        wrong |= use & ~objects(pc.struct_field(blocks, "input"))
    else:
        wrong |= use  # no arguments at all

    # An assistant turn says something: text, a call, or reasoning (SPEC section 2).
    says = use | redacted
    look = np.flatnonzero(text_block & by_assistant)
    if len(look):
        says[look] = as_mask(pc.match_substring_regex(field("text").take(indices(look)), NOT_SPACE))
    thought = np.flatnonzero(thinking)
    if len(thought):
        texts = field("thinking").take(indices(thought))
        signed = ~as_mask(field("signature").take(indices(thought)).is_null())
        says[thought] = as_mask(pc.match_substring_regex(texts, NOT_SPACE)) | signed
    said = np.bincount(owner[says], minlength=n) > 0
    flag |= np.bincount(owner[wrong], minlength=n) > 0

    # Each call is answered once, by id, in the user message right after its turn, and every
    # result answers a call of the turn right before it.
    uses, results = np.flatnonzero(use), np.flatnonzero(result)
    ids = pa.concat_arrays(
        [field("id").take(indices(uses)), field("tool_use_id").take(indices(results))]
    )
    codes = pc.dictionary_encode(ids)
    code = pc.fill_null(codes.indices, -1).to_numpy().astype(np.int64)  # no id: flagged above
    width = len(codes.dictionary) + 1
    # A call is keyed by its message and id, a result by the message before it and its id: a
    # result after anything but a turn with that call (or without an id) matches no call.
    call_keys = owner[uses] * width + code[: len(uses)]
    result_keys = (owner[results] - 1) * width + code[len(uses) :]
    flag[owner[uses[repeated(call_keys)]]] = True  # one pending call, counted twice here
    flag[owner[results[repeated(result_keys)]]] = True
    flag[owner[results[~np.isin(result_keys, call_keys)]]] = True  # answers no call
    calls = np.bincount(owner[uses], minlength=n).astype(np.int64)
    unanswered = ~np.isin(call_keys, result_keys) & same_next[owner[uses]]
    return said, calls, np.bincount(owner[uses[unanswered]], minlength=n).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# the profile's measures (`transcript_clean.profile`)


def anthropic_measures(
    fmt: Format, table: pa.Table, rows: Mask, *, texts: bool = False
) -> tuple[Measures, Mask]:
    """The profile's measures of the rows of `rows` (rows the view reads as the decoder would),
    computed in Arrow as `measure_transcripts` makes them of their decoded transcripts. With
    `texts` (a tokenizer) it measures none: the caller decodes them. Returns the measures and
    the rows measured."""
    array = column_array(table, fmt.column)
    if texts or not rows.any():
        rows = np.zeros(len(array), dtype=bool)
    msgs, sizes, parent = flattened(array)
    keep = rows[parent]
    n = len(msgs)
    is_user = as_mask(pc.equal(pc.struct_field(msgs, "role"), "user")) if n else keep
    is_assistant = as_mask(pc.equal(pc.struct_field(msgs, "role"), "assistant")) if n else keep
    content = pc.struct_field(msgs, "content") if n else pa.array([], pa.string())
    everyone = np.arange(n, dtype=np.int64)
    nothing = np.zeros(n, dtype=bool)
    calls = np.zeros(n, dtype=np.int64)
    tools: dict[str, int] = {}
    if n == 0 or is_text(content.type):
        chars = text_lengths(content)
        said_, spoken = said(content, everyone)
        thought = has = answers = nothing
    else:
        chars, calls, said_, spoken, thought, has, answers, tools = _block_facts(content, keep)
    per_row = RowSums(sizes, rows)

    prompt = np.zeros(len(array), dtype=np.int64)
    if "system" in table.column_names:  # the decoder reads a system prompt that says anything
        prompt = text_lengths(column_array(table, "system"))
    prompt = prompt[rows]
    turn = is_assistant & keep
    measured = {
        "messages": sizes[rows] + (prompt > 0),
        "user_turns": per_row(is_user & ~answers),
        "assistant_turns": per_row(is_assistant),
        "tool_calls": per_row(np.where(is_assistant, calls, 0)),
        "chars": per_row(chars) + prompt,
        "system": (prompt > 0).astype(np.int64),
    }
    classes = classes_of(calls[turn] > 0, thought[turn], said_[turn], has[turn], spoken[turn])
    return Measures(measured, chars[turn], classes, tools), rows


def _block_facts(
    content: pa.Array, keep: Mask
) -> tuple[Counts, Counts, Mask, Mask, Mask, Mask, Mask, dict[str, int]]:
    """Per message of blocks: its characters, its calls, whether its text says something and
    whether it has any, whether its reasoning says something and whether it has any, and
    whether it holds tool results; and the calls per tool name of the messages of `keep`."""
    n = len(keep)
    blocks, _, owner = flattened(content)

    def field(name: str) -> pa.Array:
        return _field(blocks, name)

    kind = field("type")

    def of(name: str) -> Mask:
        return as_mask(pc.equal(kind, name))

    text_block, use, thinking = of("text"), of("tool_use"), of("thinking")
    redacted, result = of("redacted_thinking"), of("tool_result")
    every = np.arange(len(blocks), dtype=np.int64)
    texts_said, texts_spoken = said(field("text"), every)
    thought_said, _ = said(field("thinking"), every)
    signed = as_mask(field("signature").is_valid())
    lengths = (
        np.where(text_block, text_lengths(field("text")), 0)
        + np.where(thinking, text_lengths(field("thinking")), 0)
        + np.where(result, text_lengths(field("content")), 0)
    )

    def any_of_message(flags: Mask) -> Mask:
        return np.bincount(owner[flags], minlength=n) > 0

    tools: dict[str, int] = {}
    measured_use = use & keep[owner]
    if measured_use.any():
        names = field("name").filter(pa.array(measured_use))
        for item in pc.value_counts(names).to_pylist():
            tools[item["values"]] = int(item["counts"])

    return (
        np.bincount(owner, weights=lengths, minlength=n).astype(np.int64),
        np.bincount(owner[use], minlength=n).astype(np.int64),
        any_of_message(text_block & texts_said),
        any_of_message(text_block & texts_spoken),
        any_of_message((thinking & (thought_said | signed)) | redacted),
        any_of_message(thinking | redacted),
        any_of_message(result),
        tools,
    )
