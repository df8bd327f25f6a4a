"""Hermes' flattener: a column of `{from, value}` turns whose calls and results are tags in their
text, into `Conversations`.

It reads a row as `HermesFormat.decode` reads it, or marks it unread (a null turn, tag or value,
a tag the format does not know, a `<tool_call>` the decoder cannot read). Turns become messages
as the decoder makes them: a system, human or gpt turn one message each, a run of tool turns one
user message of results, the k-th result of the run answering the k-th call of the assistant
message before it (system turns aside). Hermes has no ids: calls are numbered `call_{turn}_{k}`
and a result of no call `result_{turn}_{k}`, as the decoder mints them.

A turn without tags, most of them, is read in Arrow: a gpt turn's text is its value stripped, a
tool turn's one result its value stripped. A gpt turn holding `<tool_call>` or `<think>` and a
tool turn holding `<tool_response>` (or a `{...}` body) are read by `tagged.py`: the common
layout over the whole column (split at its tags in Arrow, each body parsed by orjson), any other
turn one at a time with the decoder's own readers (`values.py`: `assistant_parts`,
`read_responses`), the truth the column read is held to by property tests, so that the two
cannot drift. Every message is whole items of the column's lists (a gpt turn with text,
reasoning and calls is one item), so R1 and R5's cut drop items in Arrow. The tools a system
prompt declares in a `<tools>` block are handed to the fast path as JSON text (`declarations`),
read where the batch's `tools` column declares nothing, as the decoder reads them; a row whose
block has a problem is unread. It knows no rule.
"""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    field_type,
    flattened,
    indices,
    is_text,
    rows_with,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations
from transcript_clean.columnar.edits import item_origins
from transcript_clean.columnar.tags import tag_counts
from transcript_clean.formats.fields import end_to_end, is_list_of_structs, not_blank
from transcript_clean.formats.hermes.tagged import read_gpt, read_tool, stripped
from transcript_clean.formats.hermes.values import TAGS, prompt_tools, read_tools_block

__all__ = ["flatten_hermes"]


_ROLES = ("system", "user", "assistant", "tool")
_TAG_NAMES = pa.array(list(TAGS), pa.string())
_TAG_ROLES = np.array([*(_ROLES.index(r) for r in TAGS.values()), -1], dtype=np.int8)


def flatten_hermes(array: pa.Array, prompt_tools: bool = True) -> Conversations | None:
    """The rows of a Hermes column as `Conversations`; None for a layout this does not read
    (the per-row path reads every row). With `prompt_tools`, the declarations of each row's
    system prompt (`Conversations.declarations`)."""
    if not _hermes_shape(array.type):
        return None
    rows = len(array)
    turns, _, turn_row = flattened(array)
    n = len(turns)
    tag = pc.struct_field(turns, "from")
    value = pc.struct_field(turns, "value")

    # Each turn's role, from its tag's place among the tags (one look-up for all roles).
    place = pc.fill_null(pc.index_in(tag, _TAG_NAMES), -1).to_numpy(zero_copy_only=False)
    role = _TAG_ROLES[place]  # a tag the format does not know: the last, -1
    is_system, is_user, is_gpt, is_tool = (role == k for k in range(len(_ROLES)))
    flag = ~(is_system | is_user | is_gpt | is_tool)
    flag |= as_mask(turns.is_null()) | as_mask(tag.is_null()) | as_mask(value.is_null())

    # Messages: every turn starts one, but a tool turn right after a tool turn of its row.
    same_row = np.zeros(n, dtype=bool)
    same_row[1:] = turn_row[1:] == turn_row[:-1]
    after_tool = np.zeros(n, dtype=bool)
    after_tool[1:] = is_tool[:-1]
    goes_on = is_tool & after_tool & same_row
    turn_message = np.cumsum(~goes_on) - 1
    starts = np.flatnonzero(~goes_on)
    m = len(starts)
    kind = np.full(m, USER, dtype=np.int8)
    kind[is_system[starts]] = SYSTEM
    kind[is_gpt[starts]] = ASSISTANT
    message_row = turn_row[starts]
    row_start = np.searchsorted(turn_row, np.arange(rows))
    turn_at = np.arange(n, dtype=np.int64) - row_start[turn_row]  # the turn's index in its row

    # What each turn says, in Arrow: its value, or its value stripped (a gpt turn's text, a
    # tool turn's result).
    value_chars = text_lengths(value)
    said = not_blank(value).copy()
    trimmed = stripped(value)
    edged = as_mask(pc.not_equal(pc.binary_length(trimmed), pc.binary_length(value)))
    calls_in, thinks_in, responses_in = tag_counts(
        value, "<tool_call>", "<think>", "<tool_response>"
    )
    gpt_tags = is_gpt & ~flag & ((calls_in > 0) | (thinks_in > 0))
    tool_tags = is_tool & ~flag & (responses_in > 0)
    tool_tags |= as_mask(pc.starts_with(trimmed, "{")) & is_tool
    python_gpt = np.flatnonzero(is_gpt & gpt_tags & ~flag)
    python_tool = np.flatnonzero(is_tool & tool_tags & ~flag)
    untagged = (is_gpt & ~gpt_tags) | (is_tool & ~tool_tags)
    edges = np.flatnonzero(untagged & edged & ~flag)
    stripped_texts = trimmed.take(indices(edges)).to_pylist()
    turn_chars = value_chars.copy()
    turn_chars[edges] = [len(t) for t in stripped_texts]
    spoken = np.where(is_gpt, said, value_chars > 0)
    own_text: dict[int, str] = dict(zip(edges.tolist(), stripped_texts, strict=True))

    # Tagged gpt turns: their reasoning, text and calls, as the decoder reads them.
    gpt = read_gpt(value, python_gpt)
    flag[gpt.unread] = True
    said[gpt.read] = False
    spoken[gpt.read] = False
    text_chars = text_lengths(gpt.text)
    said[gpt.text_turn] = text_chars > 0  # the decoder strips a turn's text
    spoken[gpt.text_turn] = text_chars > 0
    reason_chars = text_lengths(gpt.reason)
    reasoned = np.zeros(n, dtype=bool)
    reasoned[gpt.reason_turn] = True
    thought = rows_with(reason_chars > 0, gpt.reason_turn, n)
    turn_chars[gpt.read] = 0
    turn_chars += np.bincount(gpt.text_turn, weights=text_chars, minlength=n).astype(np.int64)
    turn_chars += np.bincount(gpt.reason_turn, weights=reason_chars, minlength=n).astype(np.int64)
    call_turn_at = gpt.call_turn
    calls_of_turn = np.bincount(call_turn_at, minlength=n).astype(np.int64)
    reencoded_turn = rows_with(~gpt.call_same, call_turn_at, n)

    # Tool turns: their results, in order (one per untagged turn).
    results_of_turn = np.where(is_tool & ~flag, 1, 0).astype(np.int64)
    tool = read_tool(value, python_tool)
    flag[tool.unread] = True
    results_of_turn[python_tool] = 0
    results_of_turn += np.bincount(tool.turn, minlength=n).astype(np.int64)
    turn_chars[python_tool] = 0
    turn_chars += np.bincount(tool.turn, weights=text_lengths(tool.text), minlength=n).astype(
        np.int64
    )
    result_turn = np.repeat(np.arange(n, dtype=np.int64), results_of_turn)
    unread = as_mask(array.is_null()) | rows_with(flag, turn_row, rows)
    declarations = None
    if prompt_tools:
        declarations, unsure = _prompt_declarations(is_system, value, turn_row, rows)
        unread |= unsure

    # Calls, numbered in order; per message its first call.
    calls_per_message = np.bincount(turn_message, weights=calls_of_turn, minlength=m)
    calls_per_message = calls_per_message.astype(np.int64)
    first_call = np.cumsum(calls_per_message) - calls_per_message
    call_k = np.arange(len(call_turn_at)) - np.searchsorted(call_turn_at, call_turn_at)
    call_ids = end_to_end("call_", turn_at[call_turn_at], "_", call_k)

    # The message a run of tool turns answers: the one before it, system turns aside, when
    # that is an assistant message of the same row.
    positions = np.arange(m, dtype=np.int64)
    last_said = np.full(m, -1, dtype=np.int64)
    if m:
        running = np.maximum.accumulate(np.where(kind != SYSTEM, positions, -1))
        last_said[1:] = running[:-1]
    valid = last_said >= 0
    valid[valid] &= message_row[last_said[valid]] == message_row[valid]
    valid[valid] &= kind[last_said[valid]] == ASSISTANT
    answered_by = np.where(valid & is_tool[starts], last_said, -1)

    # Results: the k-th of a run answers the k-th call, where there is one.
    run = turn_message[result_turn]
    run_first = np.searchsorted(run, run)  # results are in order: a run's are together
    place = np.arange(len(result_turn), dtype=np.int64) - run_first
    window = answered_by[run]
    answers = np.where(window >= 0, calls_per_message[np.maximum(window, 0)], 0)
    answered = place < answers
    orphans = end_to_end("result_", turn_at[result_turn], "_", place)
    result_ids = orphans
    if answered.any():
        number = np.where(answered, first_call[np.maximum(window, 0)] + place, 0)
        result_ids = pc.if_else(pa.array(answered), call_ids.take(indices(number)), orphans)

    def result_texts() -> pa.Array:
        # Each result's text: a tool turn's value (stripped), or what its tags hold.
        untagged = np.flatnonzero(is_tool & ~tool_tags & ~flag)
        own = value.take(indices(untagged)).to_pylist()
        texts = [own_text.get(at, text) for at, text in zip(untagged.tolist(), own, strict=True)]
        turns, order = np.concatenate([untagged, tool.turn]), None
        order = np.argsort(turns, kind="stable")
        joined = pa.concat_arrays([pa.array(texts, pa.large_string()), tool.text])
        return joined.take(indices(order))

    result_words = result_texts()
    result_blank = ~not_blank(result_words)

    def texts() -> tuple[pa.Array, Counts]:
        # A gpt turn of calls or reasoning alone has no text part: no piece.
        own = np.zeros(n, dtype=bool)
        own[edges] = True
        own[gpt.read] = True
        plain = np.flatnonzero(~own & ~is_tool)
        replaced = sorted(t for t in own_text if not is_tool[t])
        pieces = [
            value.take(indices(plain)).cast(pa.large_string()),
            pa.array([own_text[t] for t in replaced], pa.large_string()),
            gpt.text,
            gpt.reason,
            result_words,
        ]
        owners = [
            turn_message[plain],
            turn_message[np.array(replaced, dtype=np.int64)],
            turn_message[gpt.text_turn],
            turn_message[gpt.reason_turn],
            run,
        ]
        return pa.concat_arrays(pieces), np.concatenate(owners).astype(np.int64)

    def per_message(flags: Mask) -> Mask:
        return rows_with(flags, turn_message, m)

    # A gpt turn without tags says one text: its value, stripped (what R4 joins).
    plain_gpt = is_gpt & ~gpt_tags & ~flag

    def message_text(positions: Counts) -> pa.Array:
        at = starts[positions]
        said_as = value.take(indices(at)).to_pylist()
        return pa.array(
            [
                own_text.get(t, v) if plain else None
                for t, v, plain in zip(at.tolist(), said_as, plain_gpt[at].tolist(), strict=True)
            ],
            value.type,
        )

    talk = is_system | is_user | is_gpt
    return Conversations(
        rows=rows,
        unread=unread,
        message_row=message_row.astype(np.int64),
        role=kind,
        said=per_message(talk & said),
        thought=per_message(thought),
        reasoned=per_message(reasoned),
        spoken=per_message(talk & spoken),
        chars=np.bincount(turn_message, weights=turn_chars, minlength=m).astype(np.int64),
        call_message=turn_message[call_turn_at],
        call_id=call_ids,
        call_name=gpt.call_name,
        call_arguments=gpt.call_arguments,
        call_object=gpt.call_object,
        result_message=run,
        result_call=result_ids,
        result_blank=result_blank,
        result_text=lambda: result_words,
        result_error=np.zeros(len(result_turn), dtype=bool),  # a tool response is no error
        item_message=turn_message,
        pairs_by_position=True,
        reencoded=rows_with(reencoded_turn, turn_row, rows),
        texts=texts,
        declarations=declarations,
        message_text=message_text,
        message_origin=item_origins(turns, turn_message, m),
    )


def _prompt_declarations(
    is_system: Mask, value: pa.Array, turn_row: Counts, rows: int
) -> tuple[pa.Array | None, Mask]:
    """Per row, the declarations of the `<tools>` block of its first system turn
    (`HermesFormat.declared_tools`) as JSON text, null for none (None when no row has any); and
    the rows whose block the fast path would not read as the decoder does: one with a problem
    (the words of `invalid_tool_declaration` name the prompt) or a value JSON cannot write."""
    unsure = np.zeros(rows, dtype=bool)
    systems = np.flatnonzero(is_system)
    system_row = turn_row[systems]
    first = systems[np.searchsorted(system_row, system_row) == np.arange(len(systems))]
    maybe = first[as_mask(pc.match_substring(value.take(indices(first)), "<tools>"), fill=False)]
    texts: list[str | None] = [None] * rows
    for at, text in zip(maybe.tolist(), value.take(indices(maybe)).to_pylist(), strict=True):
        body = prompt_tools(text)
        if body is None:
            continue
        row = int(turn_row[at])
        declared, listed = read_tools_block(body)
        if declared is None:
            continue
        try:
            texts[row] = orjson.dumps(listed).decode()
        except (TypeError, orjson.JSONEncodeError):
            unsure[row] = True
        unsure[row] |= bool(declared.problems)
    if texts.count(None) == rows:
        return None, unsure
    return pa.array(texts, pa.string()), unsure


def _hermes_shape(type_: pa.DataType) -> bool:
    """Turns as structs with text `from` and `value`."""
    if not is_list_of_structs(type_):
        return False
    turn = type_.value_type
    return is_text(field_type(turn, "from")) and is_text(field_type(turn, "value"))
