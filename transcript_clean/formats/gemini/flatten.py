"""Gemini's flattener: a column of `contents`, held as Arrow structs, into `Conversations`.

It reads a row as `GeminiFormat.decode` reads it, or marks it unread: a null item or `parts`,
a role other than `user`, `model` or `function` (none is the user's), a null part, a call
without a name.
A layout it does not read as the decoder would is not flattened at all (None): a field of
another type than the decoder takes, a key held under both its camelCase and snake_case names.

Ids. The decoder mints an id for a call that has none (`call_{i}_{k}`: its turn's place in the
row, its part's place in the turn) and pairs a response that has none with the call at its
place in the model turn before (the k-th response of a turn, the k-th call); a response with
nothing at its place gets an id of its own (`result_contents[i]_j`), an orphan. The view's ids
are the decoder's, so that a reject made in Arrow names a call or a result as the per-row path
does. The decoder makes a minted id longer where the row really holds it (`IdMinter`); such a
row, rare, is left unread.

Each turn is one item of the column (`item_message`), so R1 and R5's cut drop items in Arrow.
A response without an id pairs by its place (`pairs_by_position`): an empty model turn right
before one is the per-row path's to drop. So is every repair of a row whose kept turns the
encoder would write anew (`reencoded`): a call with no `args`, a response with no id and no
name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    field_type,
    finite,
    flattened,
    indices,
    is_text,
    rows_with,
    run_starts,
    sole,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, USER, Conversations
from transcript_clean.columnar.edits import item_origins, taken
from transcript_clean.formats.fields import (
    alias,
    end_to_end,
    field,
    fits,
    is_list_of_structs,
    joined_texts,
    not_blank,
    prepend_system,
    present,
)

__all__ = ["flatten_gemini", "reads_schema"]

_CALL_KEYS: Final = ("functionCall", "function_call")
_RESPONSE_KEYS: Final = ("functionResponse", "function_response")
_SIGNATURE_KEYS: Final = ("thoughtSignature", "thought_signature")
_SYSTEM_KEYS: Final = ("systemInstruction", "system_instruction")
_DECLARATION_KEYS: Final = ("functionDeclarations", "function_declarations")


def reads_schema(schema: pa.Schema | None, tools_column: str | None) -> bool:
    """Whether the batch's other columns leave the rows to the conversation column and the
    system instruction (`GeminiFormat.side_columns`, which the flattener is given): `tools` only
    in Gemini's own layout, which the fast path's declared-tools check never
    takes for declarations (so it leaves each row that has them to the per-row path)."""
    if schema is None:
        return True
    columns = pa.struct(list(schema))
    tools = field_type(columns, "tools")
    if tools_column is not None or tools is None or pa.types.is_null(tools):
        return True
    if not is_list_of_structs(tools):
        return False
    entry = tools.value_type
    has_declarations = any(field_type(entry, k) is not None for k in _DECLARATION_KEYS)
    return has_declarations and field_type(entry, "name") is None


def _is_call(type_: pa.DataType) -> bool:
    return (
        pa.types.is_struct(type_)
        and fits(type_, "name", is_text)
        and fits(type_, "id", is_text)
        and fits(type_, "args", pa.types.is_struct)
    )


def _is_response(type_: pa.DataType) -> bool:
    return (
        pa.types.is_struct(type_)
        and fits(type_, "name", is_text)
        and fits(type_, "id", is_text)
        and fits(type_, "response", lambda t: is_text(t) or pa.types.is_struct(t))
    )


def flatten_gemini(
    array: pa.Array,
    schema: pa.Schema | None,
    side: Mapping[str, pa.Array],
    column: str = "contents",
) -> Conversations | None:
    """The rows of a Gemini `contents` column (named `column`, as the decoder's paths and so
    its orphans' ids name it), and of its system instruction column (`side`), as
    `Conversations`; None for columns whose Arrow types this does not read (the per-row path
    reads every row)."""
    if schema is not None and any(k in schema.names and k not in side for k in _SYSTEM_KEYS):
        return None  # the rows hold a system instruction this was not given
    system = _system(side, len(array))
    if system is None:
        return None
    conversations = _contents(array, column)
    if conversations is None:
        return None
    return prepend_system(conversations, *system)


def _system(side: Mapping[str, pa.Array], rows: int) -> tuple[pa.Array, Mask, Mask] | None:
    """Per row, the system instruction's text as the decoder reads it, whether the row has
    one (the decoder makes a system message of any, even an empty one), and the rows it does
    not read; None for a layout this does not read (a key held under both its names: the
    decoder takes the first that is not null, row by row)."""
    held = [side[k] for k in _SYSTEM_KEYS if k in side and not pa.types.is_null(side[k].type)]
    if len(held) > 1:
        return None
    none = np.zeros(rows, dtype=bool)
    if not held:
        return pa.nulls(rows, pa.large_string()), none, none
    column = held[0]
    present = ~as_mask(column.is_null())
    if is_text(column.type):
        return column.cast(pa.large_string()), present, none
    parts_type = field_type(column.type, "parts") if pa.types.is_struct(column.type) else None
    if parts_type is None or not (is_list_of_structs(parts_type) or pa.types.is_null(parts_type)):
        return None
    parts = pc.struct_field(column, "parts")
    if pa.types.is_null(parts.type):  # an instruction without parts: the decoder refuses it
        return pa.nulls(rows, pa.large_string()), present, present
    text, unread = joined_texts(parts, required=True)
    return text, present, unread | (present & as_mask(parts.is_null()))


def _contents(array: pa.Array, column: str) -> Conversations | None:
    if not is_list_of_structs(array.type):
        return None
    item_type = array.type.value_type
    parts_type = field_type(item_type, "parts")
    if parts_type is None or not is_list_of_structs(parts_type):
        return None
    if not fits(item_type, "role", is_text):
        return None
    part_type = parts_type.value_type
    try:
        call_key = alias(part_type, _CALL_KEYS)
        response_key = alias(part_type, _RESPONSE_KEYS)
        signature_key = alias(part_type, _SIGNATURE_KEYS)
    except LookupError:
        return None
    if not (
        fits(part_type, "text", is_text)
        and fits(part_type, "thought", pa.types.is_boolean)
        and fits(part_type, signature_key, is_text)
        and fits(part_type, call_key, _is_call)
        and fits(part_type, response_key, _is_response)
    ):
        return None

    rows = len(array)
    items, _, message_row = flattened(array)
    messages_n = len(items)
    role = field(items, "role")
    is_model = as_mask(pc.equal(role, "model"))
    # A content without a role is the user's, as the decoder reads it.
    is_user = as_mask(pc.is_in(role, pa.array(["user", "function"]))) | as_mask(role.is_null())
    parts_list = field(items, "parts")
    flag = as_mask(items.is_null()) | ~(is_model | is_user) | as_mask(parts_list.is_null())

    parts, _, part_message = flattened(parts_list)
    parts_n = len(parts)
    model_part = is_model[part_message]
    calls_struct = field(parts, call_key)
    responses_struct = field(parts, response_key)
    text = field(parts, "text")
    thought = field(parts, "thought")
    marked = as_mask(thought) if pa.types.is_boolean(thought.type) else np.zeros(parts_n, bool)

    # The decoder's order: a call (model) or a response (user) first, then a text, else media.
    is_call = model_part & present(parts, call_key)
    is_result = ~model_part & present(parts, response_key)
    is_text_part = ~is_call & ~is_result & ~as_mask(text.is_null())
    is_reasoning = is_text_part & model_part & marked
    is_plain = is_text_part & ~is_reasoning
    is_media = ~(is_call | is_result | is_text_part)

    flag_part = as_mask(parts.is_null())
    calls = np.flatnonzero(is_call)
    call_structs = calls_struct.take(indices(calls))
    name = field(call_structs, "name")
    flag_part[calls[as_mask(name.is_null())]] = True
    unread = as_mask(array.is_null())
    unread |= rows_with(flag, message_row, rows)
    unread |= rows_with(flag_part, message_row[part_message], rows)

    says = not_blank(text)
    text_chars = text_lengths(text)
    part_said = (is_plain & says) | is_media
    part_thought = is_reasoning & (says | present(parts, signature_key))

    # Calls: their ids as the decoder has them (the module's docstring).
    call_message = part_message[calls]
    real_id = field(call_structs, "id")
    turn_place = np.arange(messages_n, dtype=np.int64) - run_starts(message_row)
    part_place = np.arange(parts_n, dtype=np.int64) - run_starts(part_message)
    minted_call = end_to_end("call_", turn_place[call_message], "_", part_place[calls])
    call_id = pc.if_else(real_id.is_valid(), real_id.cast(pa.string()), minted_call)
    arguments = field(call_structs, "args")
    call_object: Mask = as_mask(arguments.is_null()) | finite(arguments)  # none: `{}`

    # Results: their texts, and the call each answers.
    results = np.flatnonzero(is_result)
    result_structs = responses_struct.take(indices(results))
    result_message = part_message[results]
    result_text = _response_texts(field(result_structs, "response"))
    orphan_id = end_to_end(
        f"result_{column}[", turn_place[result_message], "]_", part_place[results]
    )
    result_call, own_id, paired = _answered_ids(
        result_structs, result_message, call_id, call_message, message_row, is_model, orphan_id
    )
    minted = pa.concat_arrays([minted_call, orphan_id])
    minted_row = message_row[np.concatenate([call_message, result_message])]
    wanted = np.concatenate([as_mask(real_id.is_null()), ~own_id & ~paired])
    real_ids, real_row = _real_ids(parts, call_key, response_key, message_row[part_message])
    unread |= _taken(minted, minted_row, wanted, real_ids, real_row, rows)

    # Rows the encoder writes anew (`Conversations.reencoded`): it gives a call with no `args`
    # an empty object, and a response with no id and no name the name of the call it answers.
    answered_as = pc.fill_null(field(result_structs, "name").cast(pa.string()), "")
    nameless = as_mask(pc.equal(answered_as, ""), fill=True)
    reencoded = rows_with(as_mask(arguments.is_null()), message_row[call_message], rows)
    reencoded |= rows_with(~own_id & paired & nameless, message_row[result_message], rows)

    result_chars = text_lengths(result_text)
    own_chars = np.where(is_text_part, text_chars, 0)
    chars = np.bincount(part_message, weights=own_chars, minlength=messages_n)
    chars += np.bincount(result_message, weights=result_chars, minlength=messages_n)

    # A turn of one plain text part says that text (what R4 compares and joins).
    one_text = sole(is_plain, part_message, messages_n)

    def texts() -> tuple[pa.Array, Counts]:
        own = np.flatnonzero(is_text_part)
        pieces = pa.concat_arrays(
            [text.take(indices(own)).cast(pa.large_string()), result_text.cast(pa.large_string())]
        )
        return pieces, np.concatenate([part_message[own], result_message])

    return Conversations(
        rows=rows,
        unread=unread,
        message_row=message_row,
        role=np.where(is_model, ASSISTANT, USER).astype(np.int8),
        said=rows_with(part_said, part_message, messages_n),
        thought=rows_with(part_thought, part_message, messages_n),
        reasoned=rows_with(is_reasoning, part_message, messages_n),
        spoken=rows_with(is_plain & (text_chars > 0), part_message, messages_n),
        chars=chars.astype(np.int64),
        call_message=call_message,
        call_id=call_id,
        call_name=name,
        call_arguments=arguments,
        call_object=call_object,
        result_message=result_message,
        result_call=result_call,
        result_blank=~not_blank(result_text),
        item_message=np.arange(messages_n, dtype=np.int64),
        pairs_by_position=True,
        reencoded=reencoded,
        result_text=lambda: result_text,  # a response is one text, always
        texts=texts,
        message_text=lambda positions: taken(text, one_text[positions]),
        message_origin=item_origins(items, np.arange(messages_n, dtype=np.int64), messages_n),
    )


def _response_texts(response: pa.Array) -> pa.Array:
    """Each response's text as the decoder reads it: a text as it is; `{"result": text}` or
    `{"error": text}` that text; anything else (null too) its JSON, made in Python for those
    alone."""
    n = len(response)
    if is_text(response.type):
        direct = response
    elif pa.types.is_struct(response.type) and response.type.num_fields == 1:
        only = response.type.field(0)
        direct = (
            pc.struct_field(response, 0)
            if only.name in ("result", "error") and is_text(only.type)
            else pa.nulls(n, pa.string())
        )
    else:
        direct = pa.nulls(n, pa.string())
    direct = direct.cast(pa.large_string())
    rest = np.flatnonzero(as_mask(direct.is_null()))
    if not len(rest):
        return direct
    values = response.take(indices(rest)).to_pylist()
    made = pa.array([json.dumps(v, ensure_ascii=False) for v in values], pa.large_string())
    at = np.arange(n, dtype=np.int64)
    at[rest] = n + np.arange(len(rest), dtype=np.int64)
    return pa.concat_arrays([direct, made]).take(indices(at))


def _answered_ids(
    results: pa.Array,
    result_message: Counts,
    call_id: pa.Array,
    call_message: Counts,
    message_row: Counts,
    is_model: Mask,
    orphan_id: pa.Array,
) -> tuple[pa.Array, Mask, Mask]:
    """Each response's id as the decoder has it: its own, else that of the call at its place in
    the model turn right before (the decoder's `answers`), else the one minted for an orphan
    (`orphan_id`); which responses have their own, and which have a call at their place."""
    n = len(results)
    real = field(results, "id")
    place = np.arange(n, dtype=np.int64) - run_starts(result_message)
    before = result_message - 1
    follows = before >= 0
    follows[follows] &= (message_row[before[follows]] == message_row[result_message[follows]]) & (
        is_model[before[follows]]
    )
    calls_per = np.bincount(call_message, minlength=len(message_row)).astype(np.int64)
    first_call = np.cumsum(calls_per) - calls_per
    answers = np.where(follows, calls_per[np.maximum(before, 0)], 0)
    paired = place < answers
    if paired.any():
        at = np.where(paired, first_call[np.maximum(before, 0)] + place, 0)
        by_place = pc.if_else(pa.array(paired), call_id.take(indices(at)), orphan_id)
    else:
        by_place = orphan_id
    own = real.is_valid()
    return pc.if_else(own, real.cast(pa.string()), by_place), as_mask(own), paired


def _real_ids(
    parts: pa.Array, call_key: str, response_key: str, part_row: Counts
) -> tuple[pa.Array, Counts]:
    """The ids a row really holds, as the decoder's `_real_ids` finds them: a part's call's id,
    else (a part with no call) its response's; and each one's row."""
    call = field(parts, call_key)
    has_call = ~as_mask(call.is_null())
    ids = pc.if_else(
        pa.array(has_call),
        field(call, "id").cast(pa.string()),
        field(field(parts, response_key), "id").cast(pa.string()),
    )
    held = np.flatnonzero(~as_mask(ids.is_null()))
    return ids.take(indices(held)), part_row[held]


def _taken(
    minted: pa.Array,
    minted_row: Counts,
    wanted: Mask,
    real: pa.Array,
    real_row: Counts,
    rows: int,
) -> Mask:
    """Rows where an id the decoder mints (`minted`, where `wanted`) is one the row really
    holds: the decoder makes it longer (`IdMinter`), which the view does not follow."""
    asked = np.flatnonzero(wanted)
    if not len(asked) or not len(real):
        return np.zeros(rows, dtype=bool)
    keys = end_to_end(minted_row[asked], "\x1f").cast(pa.string())
    mine = pc.binary_join_element_wise(keys, minted.take(indices(asked)), "")
    theirs = pc.binary_join_element_wise(end_to_end(real_row, "\x1f").cast(pa.string()), real, "")
    hit = as_mask(pc.is_in(mine, value_set=theirs), fill=False)
    return rows_with(hit, minted_row[asked], rows)
