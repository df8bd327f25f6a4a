"""ShareGPT's flattener: a column of `{from, value}` turns, and the batch's `system` column, into
`Conversations`.

It reads a row as `ShareGPTFormat.decode` reads it, or marks it unread (a null turn, tag or
value, a tag the format does not know, a `function_call` value that is not calls). Turns become
messages as the decoder makes them: a human turn a user message; a gpt turn, with the
function_call turns right after it, an assistant message; a run of observation turns one user
message of results, the k-th answering the k-th call of the assistant message before it (system
turns aside), and one observation holding a JSON list of one item per call answering them all.
ShareGPT has no ids: calls are numbered, and each result takes the number of the call it
answers, as the decoder's minted ids pair them. Function_call values holding one call, or a
list of calls, in the common layout are read over the whole column (`formats.calls`), the
others in Python; so are the observations that may hold such a list, over the column where it
is a list of flat objects as `json.dumps` writes them (`lists`). It knows no rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    holds_text,
    indices,
    is_text,
    long_digits,
    rows_with,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations
from transcript_clean.columnar.edits import item_origins, taken
from transcript_clean.formats.base import REASONING_KEYS, parse_arguments
from transcript_clean.formats.calls import Call, read_calls
from transcript_clean.formats.fields import arguments_json, end_to_end
from transcript_clean.formats.sharegpt.lists import split_lists
from transcript_clean.formats.sharegpt.values import calls_of
from transcript_clean.formats.sharegpt.values import read_calls as read_values_calls
from transcript_clean.model import is_json

__all__ = ["flatten_sharegpt"]


def flatten_sharegpt(
    array: pa.Array,
    schema: pa.Schema | None,
    side: Mapping[str, pa.Array],
    tags: Mapping[str, str],
) -> Conversations | None:
    """The rows of a ShareGPT column (and `side["system"]`) as `Conversations`; None for a
    layout this does not read (the per-row path reads every row)."""
    if not _sharegpt_shape(array.type):
        return None
    system = side.get("system")
    if system is None and schema is not None and schema.get_field_index("system") >= 0:
        return None  # the rows hold a system prompt this was not given
    if system is not None and not (is_text(system.type) or pa.types.is_null(system.type)):
        return None  # the decoder rejects a system column that is not text, row by row
    if system is None or pa.types.is_null(system.type):
        system = pa.nulls(len(array), pa.string())

    rows = len(array)
    turns, _, turn_row = flattened(array)
    n = len(turns)
    tag = pc.struct_field(turns, "from")
    value = pc.struct_field(turns, "value")

    # Each turn's role, by one lookup of its tag among the known ones (one pass, not a pass
    # per role); a null or unknown tag has none.
    no_role = len(_TAG_ROLES)
    roles = [_TAG_ROLES.index(r) if r in _TAG_ROLES else no_role for r in tags.values()]
    tag_role = np.array([*roles, no_role], dtype=np.int64)
    known = pc.index_in(tag, pa.array(list(tags), pa.string()))
    tag_at = np.asarray(known.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    turn_role = tag_role[tag_at]  # -1, a tag not found: the last, no role
    is_gpt, is_system, is_call, is_obs = (turn_role == k for k in range(1, 5))  # user: 0
    flag = turn_role == no_role
    flag |= as_mask(turns.is_null()) | as_mask(value.is_null())

    same_row = np.zeros(n, dtype=bool)
    same_row[1:] = turn_row[1:] == turn_row[:-1]
    before_gpt_or_call = np.zeros(n, dtype=bool)
    before_gpt_or_call[1:] = (is_gpt | is_call)[:-1]
    before_obs = np.zeros(n, dtype=bool)
    before_obs[1:] = is_obs[:-1]
    goes_on = (is_call & before_gpt_or_call & same_row) | (is_obs & before_obs & same_row)
    turn_message = np.cumsum(~goes_on) - 1  # each turn's message among the turns' messages
    starts = np.flatnonzero(~goes_on)
    m_turns = len(starts)
    kind = np.full(m_turns, USER, dtype=np.int64)
    kind[is_system[starts]] = SYSTEM
    kind[(is_gpt | is_call)[starts]] = ASSISTANT
    results_message = is_obs[starts]  # a user message of results

    # Calls, read from each function_call turn (over the column where its call or list of calls
    # is in the common layout, `formats.calls`; else by `_calls`), numbered in order. A value
    # holding a long run of digits (an integer orjson may read as a float) is the per-row
    # path's, found in Arrow.
    call_turns = np.flatnonzero(is_call & ~flag)
    call_values = value.take(indices(call_turns))  # taken once: about a megabyte a batch
    long = long_digits(call_values)
    if long.any():
        flag[call_turns[long]] = True
        call_turns, call_values = call_turns[~long], call_values.filter(pa.array(~long))
    found = read_calls(call_values, _calls, lists=True)
    flag[call_turns[~found.read]] = True
    calls_of_turn = np.zeros(n, dtype=np.int64)
    calls_of_turn[call_turns] = found.count
    call_turn_at = call_turns[found.value]
    calls_per_message = np.bincount(turn_message, weights=calls_of_turn, minlength=m_turns)
    calls_per_message = calls_per_message.astype(np.int64)
    first_call = np.cumsum(calls_per_message) - calls_per_message

    # The message each run of observations answers: the one before it, system turns aside,
    # when that is an assistant message of the same row.
    message_row = turn_row[starts]
    said = np.flatnonzero(kind != SYSTEM)
    last_said = np.full(m_turns, -1, dtype=np.int64)
    positions = np.arange(m_turns, dtype=np.int64)
    if m_turns:
        running = np.maximum.accumulate(np.where(kind != SYSTEM, positions, -1))
        last_said[1:] = running[:-1]
    valid = last_said >= 0
    valid[valid] &= message_row[last_said[valid]] == message_row[valid]
    valid[valid] &= kind[last_said[valid]] == ASSISTANT
    answered_by = np.where(valid & results_message, last_said, -1)
    del said

    # Results: the k-th observation of a run answers the k-th call, where there is one.
    obs = np.flatnonzero(is_obs)
    place = obs - starts[turn_message[obs]]
    run = turn_message[obs]
    window = answered_by[run]
    answers = np.where(window >= 0, calls_per_message[np.maximum(window, 0)], 0)
    run_length = np.bincount(run, minlength=m_turns)[run]
    answer_call = np.where(
        place < answers, first_call[np.maximum(window, 0)] + place, -1
    )  # the call it answers, by number; -1 for none
    # An observation alone answering two calls or more may be a JSON list of one item each
    # (`lists.split_lists`: over the column where it is a list of flat objects as `json.dumps`
    # writes them, else one by one): its items are then results, the first its own.
    maybe = np.flatnonzero((run_length == 1) & (answers >= 2) & ~flag[obs])
    read, pieces = split_lists(value.take(indices(obs[maybe])), answers[maybe])
    done_at = maybe[read]  # the split observations (positions in `obs`)
    per_split = answers[done_at]
    split_done = np.zeros(len(obs), dtype=bool)
    split_done[done_at] = True
    first_piece = np.cumsum(per_split) - per_split
    later = np.ones(len(pieces), dtype=bool)
    later[first_piece] = False
    extra_turn = np.repeat(obs[done_at], per_split - 1)
    extra_call = np.repeat(first_call[window[done_at]] - first_piece, per_split)[later]
    extra_call += np.flatnonzero(later)
    # The split observations' texts: each one's first, then the others.
    split_texts = pa.concat_arrays(
        [pieces.take(indices(first_piece)), pieces.filter(pa.array(later))]
    )
    result_turn = np.concatenate([obs, extra_turn])
    result_call_number = np.concatenate([answer_call, extra_call])
    order = np.argsort(result_turn, kind="stable")
    result_turn, result_call_number = result_turn[order], result_call_number[order]

    value_blank = ~holds_text(value)
    value_chars = text_lengths(value)
    done = len(done_at)
    piece_blank = ~holds_text(split_texts)
    piece_chars = text_lengths(split_texts)
    result_blank = np.concatenate([value_blank[obs], piece_blank[done:]])
    result_blank[done_at] = piece_blank[:done]
    result_blank = result_blank[order]
    split_sum = np.bincount(
        np.concatenate([obs[done_at], extra_turn]), weights=piece_chars, minlength=n
    ).astype(np.int64)
    turn_chars = np.where(is_call, 0, value_chars)
    turn_chars[obs[split_done]] = split_sum[obs[split_done]]

    # Messages: each row's system prompt, then the turns' messages, in row order.
    system_chars = text_lengths(system)
    system_rows = np.flatnonzero(system_chars > 0)
    all_row = np.concatenate([system_rows, message_row])
    turn_first = np.concatenate([np.full(len(system_rows), -1, dtype=np.int64), positions])
    by_row = np.lexsort((turn_first, all_row))
    place_of = np.empty(len(by_row), dtype=np.int64)
    place_of[by_row] = np.arange(len(by_row), dtype=np.int64)
    of_message = place_of[len(system_rows) :]  # a turns' message's place among all messages

    def per_message(values: Counts | Mask, system_value: Counts | Mask) -> Any:
        return np.concatenate([system_value, values])[by_row]

    gpt_said = rows_with(is_gpt & ~value_blank, turn_message, m_turns)
    gpt_spoken = rows_with(is_gpt & (value_chars > 0), turn_message, m_turns)
    chars = np.bincount(turn_message, weights=turn_chars, minlength=m_turns).astype(np.int64)
    none = np.zeros(len(system_rows), dtype=bool)
    unread = as_mask(array.is_null()) | rows_with(flag, turn_row, rows)
    # The ids the decoder mints: `call_{turn}_{k}` for the k-th call of a turn, and
    # `result_{turn}` for a result that answers nothing (turns counted within the row).
    row_start = np.searchsorted(turn_row, np.arange(rows))
    call_at = call_turn_at - row_start[turn_row[call_turn_at]]
    call_k = np.arange(len(call_turn_at)) - np.searchsorted(call_turn_at, call_turn_at)
    call_ids = end_to_end("call_", call_at, "_", call_k)
    orphans = end_to_end("result_", result_turn - row_start[turn_row[result_turn]])
    answered = result_call_number >= 0
    result_ids = orphans
    if answered.any():
        answers_of = call_ids.take(indices(np.where(answered, result_call_number, 0)))
        result_ids = pc.if_else(pa.array(answered), answers_of, orphans)

    def result_texts() -> pa.Array:
        # An observation's value, or the item of a split one, in the results' order.
        own = value.take(indices(obs)).cast(pa.large_string())
        every = pa.concat_arrays([own, split_texts])
        at = np.concatenate([np.arange(len(obs)), len(obs) + np.arange(done, len(split_texts))])
        at[done_at] = len(obs) + np.arange(done)
        return every.take(indices(at[order]))

    def texts() -> tuple[pa.Array, Counts]:
        whole = ~is_call
        whole[obs[split_done]] = False
        plain = np.flatnonzero(whole)
        parts = [
            system.take(indices(system_rows)).cast(pa.large_string()),
            value.take(indices(plain)).cast(pa.large_string()),
            split_texts,
        ]
        owners = [
            np.flatnonzero(turn_first[by_row] < 0),
            of_message[turn_message[plain]],
            of_message[turn_message[np.concatenate([obs[split_done], extra_turn])]],
        ]
        return pa.concat_arrays(parts), np.concatenate(owners)

    item_message = of_message[turn_message]
    messages = len(by_row)

    # A gpt turn with no function_call turn after it says one text, its value.
    plain = is_gpt[starts] & (np.bincount(turn_message, minlength=m_turns) == 1)
    one_text = np.full(messages, -1, dtype=np.int64)
    one_text[of_message[plain]] = starts[plain]

    return Conversations(
        rows=rows,
        unread=unread,
        message_row=per_message(message_row, system_rows).astype(np.int64),
        role=per_message(kind, np.full(len(system_rows), SYSTEM)).astype(np.int8),
        said=per_message(gpt_said, none).astype(bool),
        thought=np.zeros(len(by_row), dtype=bool),
        reasoned=np.zeros(len(by_row), dtype=bool),
        spoken=per_message(gpt_spoken, none).astype(bool),
        chars=per_message(chars, system_chars[system_rows]).astype(np.int64),
        call_message=of_message[turn_message[call_turn_at]],
        call_id=call_ids,
        call_name=found.name,
        call_arguments=found.arguments,
        call_object=found.object,
        result_message=of_message[turn_message[result_turn]],
        result_call=result_ids,
        result_blank=result_blank,
        result_text=result_texts,
        result_error=np.zeros(len(result_turn), dtype=bool),  # an observation is no error
        item_message=item_message,
        pairs_by_position=True,
        message_text=lambda positions: taken(value, one_text[positions]),
        message_origin=item_origins(turns, item_message, messages),
        texts=texts,
    )


def _calls(text: str) -> list[Call] | None:
    """The calls a `function_call` value holds, as the decoder reads them: each one's name,
    its arguments as JSON text (None where JSON cannot write them), and whether they are a
    JSON object; None where the decoder would call the turn malformed. `text` holds no long run
    of digits (`columnar.arrays.long_digits`): orjson reads it as `json.loads` does."""
    # The common value, strict JSON whose calls are objects with a name and object arguments
    # (or arguments as text, parsed as `calls_of` parses them), read in one orjson pass with no
    # other call per call (a call each was most of the flattener's time); anything else is
    # read by `_read_calls`, as the decoder reads it.
    try:
        parsed = _loads(text)
    except orjson.JSONDecodeError:
        return _read_calls(text)
    out: list[Call] = []
    for call in parsed if type(parsed) is list else (parsed,):
        if type(call) is not dict:
            return None  # `calls_of`: a call that is no object is no call
        name = call.get("name")
        arguments = call.get("arguments")
        if type(name) is not str:
            return _read_calls(text)
        if type(arguments) is str:  # arguments as JSON text, kept as they are (`calls_of`)
            parsed, raw = parse_arguments(arguments)
            out.append((name, raw, isinstance(parsed, dict)))
            continue
        if type(arguments) is not dict:
            return _read_calls(text)
        try:
            out.append((name, _dumps(arguments).decode(), True))
        except (TypeError, orjson.JSONEncodeError):
            return _read_calls(text)
    return out or None


_loads = orjson.loads
_dumps = orjson.dumps


def _read_calls(text: str) -> list[Call] | None:
    """`_calls` of any value, read through the decoder's own helpers."""
    try:
        # orjson reads strict JSON only (no NaN, no lone surrogate), and reads it as
        # `parse_call_objects` does: parsed once.
        parsed = orjson.loads(text)
        strict = True
        read = calls_of(parsed if isinstance(parsed, list) else [parsed])
    except orjson.JSONDecodeError:
        strict = False
        read = read_values_calls(text)
    if not read:
        return None
    out = []
    for name, arguments, raw in read:
        if not isinstance(name, str):
            return None
        is_object = isinstance(arguments, dict) and (
            raw is not None or strict or is_json(arguments)
        )
        out.append((name, raw if raw is not None else arguments_json(arguments), is_object))
    return out


_TAG_ROLES: tuple[str, ...] = ("user", "assistant", "system", "function_call", "observation")


def _sharegpt_shape(type_: pa.DataType) -> bool:
    """Turns as structs with text `from` and `value`, and no reasoning field."""
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    turn = type_.value_type
    return (
        pa.types.is_struct(turn)
        and is_text(field_type(turn, "from"))
        and is_text(field_type(turn, "value"))
        and not any(field_type(turn, key) is not None for key in REASONING_KEYS)
    )
