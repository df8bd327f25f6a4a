"""OpenAI's flattener: a column of OpenAI `messages`, held as plain-text Arrow structs, into
`Conversations`.

It reads a row as `OpenAIFormat.decode` reads it, or marks it unread: a null message, a role
the decoder does not know (or the legacy `function` one, or a `function_call`), calls on a
message that is not the assistant's, a call with no `function`, name or arguments, and a row
whose made-up ids could meet one of its own. A system or developer message is a system
message; a user message its text; an assistant message its text, its reasoning fields and its
calls; a run of tool messages one user message of results. A call without an `id` (or with an
empty one) gets the one the decoder makes up (`call_<message>_<call>`), and a tool message
without `tool_call_id` answers the call at its place in the turn before, or none
(`result_<message>`). Content held as a list of parts is not read here (the per-row path reads
every such row). It knows no rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Final

import numpy as np
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
    list_sizes,
    lists_of,
    objects,
    previous_unflagged,
    rows_with,
    text_lengths,
)
from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations
from transcript_clean.columnar.edits import Edits, replaced, taken
from transcript_clean.formats.base import REASONING_KEYS

__all__ = ["flatten_openai", "openai_shape", "with_answers"]

_ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function")
"""The roles the decoder knows (`codec.ROLES`), by their number here."""
_SYSTEM, _DEVELOPER, _USER, _ASSISTANT, _TOOL, _FUNCTION = range(len(_ROLES))
_CANONICAL: Final = np.array([SYSTEM, SYSTEM, USER, ASSISTANT, USER, USER, USER], dtype=np.int8)
"""Each role's canonical role by its number (the last: a role the decoder does not know)."""


def openai_shape(type_: pa.DataType) -> bool:
    """Whether a column holds OpenAI messages as plain-text structs: the layout read here."""
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    message = type_.value_type
    if not pa.types.is_struct(message):
        return False
    if not is_text(field_type(message, "role")) or not is_text(field_type(message, "content")):
        return False
    for name in ("tool_call_id", *REASONING_KEYS):
        kind = field_type(message, name)
        if kind is not None and not is_text(kind):
            return False
    calls = field_type(message, "tool_calls")
    if calls is None:
        return True
    if not pa.types.is_list(calls) or not pa.types.is_struct(calls.value_type):
        return False
    function = field_type(calls.value_type, "function")
    return (
        is_text(field_type(calls.value_type, "id"))
        and function is not None
        and pa.types.is_struct(function)
        and is_text(field_type(function, "name"))
        and field_type(function, "arguments") is not None
    )


def flatten_openai(array: pa.Array, roles: Mapping[str, str] | None = None) -> Conversations | None:
    """The rows of an OpenAI `messages` column as `Conversations`, reading the role names of
    `roles` as the roles they stand for; None for a layout this does not read."""
    if not openai_shape(array.type):
        return None
    rows = len(array)
    items, sizes, item_row = flattened(array)
    n = len(items)
    message_type = items.type
    role = pc.struct_field(items, "role")
    if roles:
        named = pc.index_in(role, pa.array(list(roles), role.type))
        meant = pa.array(list(roles.values()), role.type).take(named)
        role = pc.if_else(named.is_valid(), meant, role)
    kind = pc.fill_null(pc.index_in(role, pa.array(_ROLES)), -1).to_numpy(zero_copy_only=False)
    kind = kind.astype(np.int64)
    is_assistant, is_tool = kind == _ASSISTANT, kind == _TOOL
    content = pc.struct_field(items, "content")

    flag = as_mask(items.is_null()) | (kind < 0) | (kind == _FUNCTION)
    if message_type.get_field_index("function_call") >= 0:  # legacy: the per-row path's
        flag |= ~as_mask(pc.struct_field(items, "function_call").is_null())

    # Messages: each item is one, but a run of tool messages, which is one user message.
    same_row = np.zeros(n, dtype=bool)
    same_row[1:] = item_row[1:] == item_row[:-1]
    continues = np.zeros(n, dtype=bool)
    continues[1:] = is_tool[1:] & is_tool[:-1]
    continues &= same_row
    item_message = np.cumsum(~continues) - 1
    starts = np.flatnonzero(~continues)
    message_row = item_row[starts]
    role_of = _CANONICAL[kind[starts]]

    # Per message, of its items: the first's, and the few tool messages after a first's.
    runs = np.flatnonzero(continues)
    into = item_message[runs]

    def any_of(values: Mask) -> Mask:
        out: Mask = values[starts]
        if len(runs):
            out[into[values[runs]]] = True
        return out

    def sum_of(values: Counts) -> Counts:
        out: Counts = values[starts]
        if len(runs):
            np.add.at(out, into, values[runs])
        return out

    # What each message says: the user's and the assistant's text, the assistant's reasoning.
    lengths = text_lengths(content)
    speaking = (kind == _USER) | is_assistant
    spoken_item = speaking & (lengths > 0)
    says = holds_text(content)
    said_item = speaking & says
    thought_item = np.zeros(n, dtype=bool)
    reasoned_item = np.zeros(n, dtype=bool)
    reasoning: list[pa.Array] = []
    for key in REASONING_KEYS:
        if message_type.get_field_index(key) < 0:
            continue
        values = pc.struct_field(items, key)
        holds = is_assistant & ~as_mask(values.is_null())
        if not holds.any():
            continue
        reasoning.append(values)
        reasoned_item |= holds
        look = np.flatnonzero(holds & ~thought_item)
        thought_item[look] = holds_text(values.take(indices(look)))
        lengths = lengths + np.where(is_assistant, text_lengths(values), 0)

    row_start = np.cumsum(sizes) - sizes

    def place_in_row(at: Counts) -> Counts:
        """Of the items at `at`, each one's place in its row (where an id is made up)."""
        place: Counts = at - row_start[item_row[at]]
        return place

    # Calls: the assistant's; any other message's are the per-row path's.
    n_calls = np.zeros(n, dtype=np.int64)
    call_item = np.zeros(0, dtype=np.int64)
    call_id: pa.Array = pa.array([], pa.string())
    call_name: pa.Array = pa.array([], pa.string())
    call_arguments: pa.Array = pa.array([], pa.string())
    minted = np.zeros(0, dtype=bool)
    if message_type.get_field_index("tool_calls") >= 0:
        calls_list = pc.struct_field(items, "tool_calls")
        n_calls = list_sizes(calls_list)
        flag |= ~is_assistant & (n_calls > 0)
        calls = pc.list_flatten(calls_list)
        call_item = np.repeat(np.arange(n, dtype=np.int64), n_calls)
        function = pc.struct_field(calls, "function")
        call_name = pc.struct_field(function, "name")
        call_arguments = pc.struct_field(function, "arguments")
        wrong = as_mask(calls.is_null()) | as_mask(function.is_null())
        wrong |= as_mask(call_name.is_null()) | as_mask(call_arguments.is_null())
        flag |= rows_with(wrong, call_item, n)
        call_id = pc.struct_field(calls, "id")
        minted = ~as_mask(pc.greater(pc.binary_length(call_id), 0), fill=False)  # `id or mint`
    first_call = np.cumsum(n_calls) - n_calls
    if len(minted) and minted.any():  # made up for those calls alone
        at = np.flatnonzero(minted)
        item = call_item[at]
        made = _made_up("call_", place_in_row(item), at - first_call[item])
        call_id = replaced(call_id, at, made)

    # Results: a tool message names its call, or answers the call at its place in the turn
    # before (the last message before its run that is not a system one), or none.
    tool = np.flatnonzero(is_tool)
    if message_type.get_field_index("tool_call_id") >= 0:
        given = pc.struct_field(items, "tool_call_id").take(indices(tool))
    else:
        given = pa.nulls(len(tool), pa.string())
    result_call = given
    unnamed = as_mask(result_call.is_null())
    result_minted = np.zeros(len(tool), dtype=bool)
    if unnamed.any():
        run_start = starts[item_message[tool]]
        system = (kind == _SYSTEM) | (kind == _DEVELOPER)
        before = previous_unflagged(run_start, system, item_row)
        turn = (before >= 0) & is_assistant[np.maximum(before, 0)]
        k = tool - run_start
        answers = unnamed & turn & (k < n_calls[np.maximum(before, 0)])
        result_minted = unnamed & ~answers
        # Only the unnamed ones are looked up or made up.
        by_place = np.flatnonzero(answers)
        call_at = first_call[before[by_place]] + k[by_place]
        made_at = np.flatnonzero(result_minted)
        made = _made_up("result_", place_in_row(tool[made_at]))
        named = pa.concat_arrays(
            [call_id.take(indices(call_at)).cast(pa.string()), made.cast(pa.string())]
        )
        order = np.argsort(np.concatenate([by_place, made_at]), kind="stable")
        result_call = replaced(
            result_call.cast(pa.string()), np.flatnonzero(unnamed), named.take(indices(order))
        )
    if minted.any() or result_minted.any():
        # The row's own ids: its calls', and any message's `tool_call_id` (`_real_ids`).
        named_items = np.zeros(0, dtype=np.int64)
        named_ids: pa.Array = pa.array([], pa.string())
        if message_type.get_field_index("tool_call_id") >= 0:
            every = pc.struct_field(items, "tool_call_id")
            named_items = np.flatnonzero(as_mask(every.is_valid()))
            named_ids = every.take(indices(named_items)).cast(pa.string())
        own = np.concatenate([call_item[~minted], named_items])
        own_ids = pa.concat_arrays([call_id.filter(pa.array(~minted)).cast(pa.string()), named_ids])
        made = np.concatenate([call_item[minted], tool[result_minted]])
        flag |= _own_ids_like(item_row, rows, (own, own_ids), made)

    @cache
    def result_text() -> pa.Array:
        # The tool messages' texts: a copy, made only for rows whose repairs read them (a
        # view holding it was most of a long-rows run's texts held twice).
        return content.take(indices(tool))

    unread = as_mask(array.is_null()) | rows_with(flag, item_row, rows)

    def message_text(positions: Counts) -> pa.Array:
        # An assistant message that is one text: no calls, no reasoning.
        first = starts[positions]
        plain = is_assistant[first] & (n_calls[first] == 0) & ~reasoned_item[first]
        return taken(content, np.where(plain, first, -1))

    def merge_text(positions: Counts) -> pa.Array:
        # An assistant message without calls grows its `content` (none: ""), its reasoning
        # fields left as they are: the encoder writes them back unchanged.
        first = starts[positions]
        grows = is_assistant[first] & (n_calls[first] == 0)
        text = pc.fill_null(content.take(indices(first)), "")
        return pc.if_else(pa.array(grows), text, pa.nulls(len(first), content.type))

    def texts() -> tuple[pa.Array, Counts]:
        at = np.flatnonzero(~as_mask(content.is_null()))
        pieces, owners = [content.take(indices(at)).cast(pa.large_string())], [at]
        for values in reasoning:
            held = np.flatnonzero(is_assistant & ~as_mask(values.is_null()))
            pieces.append(values.take(indices(held)).cast(pa.large_string()))
            owners.append(held)
        return pa.concat_arrays(pieces), item_message[np.concatenate(owners)]

    result_message = item_message[tool]
    return Conversations(
        rows=rows,
        unread=unread,
        message_row=message_row,
        role=role_of,
        said=any_of(said_item),
        thought=any_of(thought_item),
        reasoned=any_of(reasoned_item),
        spoken=any_of(spoken_item),
        chars=sum_of(lengths),
        call_message=item_message[call_item],
        call_id=call_id,
        call_name=call_name,
        call_arguments=call_arguments,
        call_object=objects(call_arguments),
        call_made_up=minted,
        result_message=result_message,
        result_call=result_call,
        result_blank=~says[tool],
        result_text=result_text,
        result_error=np.zeros(len(tool), dtype=bool),
        item_message=item_message,
        result_item=tool,
        pairs_by_position=True,
        message_text=message_text,
        merge_text=merge_text,
        message_origin=lambda positions: items.take(indices(starts[positions])),
        texts=texts,
    )


def _made_up(prefix: str, *numbers: Counts) -> pa.Array:
    """Ids made up as the decoder makes them: `prefix` and the numbers joined by `_`."""
    parts: list[pa.Array | str] = [pa.array(numbers[0]).cast(pa.string())]
    for more in numbers[1:]:
        parts += ["_", pa.array(more).cast(pa.string())]
    return pc.binary_join_element_wise(prefix, *parts, "")


def _own_ids_like(
    item_row: Counts,
    rows: int,
    own: tuple[Counts, pa.Array],
    made: Counts,
) -> Mask:
    """Per item, whether its row makes up an id (`made`: the items that do) and holds one of
    its own (`own`: each one's item and the id) that starts as a made-up one does (`call_`,
    `result_`): the decoder's made-up id would step aside from it (`IdMinter`)."""
    owner, ids = own
    like = as_mask(pc.starts_with(ids, "call_"), fill=False)
    like |= as_mask(pc.starts_with(ids, "result_"), fill=False)
    clash = rows_with(like, item_row[owner], rows) & rows_with(
        np.ones(len(made), dtype=bool), item_row[made], rows
    )
    out: Mask = clash[item_row]
    return out


def with_answers(column: pa.Array, edits: Edits, role: str) -> pa.Array | None:
    """The column with the results of `edits.answers` written anew in place of their tool
    messages, as the encoder writes a fresh error result (`role`, the row's name for a tool
    message): its text as `content`, and `tool_call_id` the call's id, or, where the decoder
    made that id up, the tool's name as `name` (where the messages have the field); every
    other field null. None where a result is not one tool message (`result_item`)."""
    answers, c = edits.answers, edits.conversations
    if answers is None or not len(answers.result):
        return column
    if c.result_item is None or c.call_made_up is None:
        return None
    items, sizes, _ = flattened(column)
    at = c.result_item[answers.result]
    made_up = c.call_made_up[answers.call]
    ids = c.call_id.take(indices(answers.call))
    names = c.call_name.take(indices(answers.call))
    message_type = items.type
    children = []
    for child_field, child in zip(message_type, items.flatten(), strict=True):
        name = child_field.name
        if name == "role":
            new = pa.array([role] * len(at), child.type)
        elif name == "content":
            new = answers.text.cast(child.type)
        elif name == "tool_call_id":
            new = pc.if_else(pa.array(made_up), pa.nulls(len(at), child.type), ids.cast(child.type))
        elif name == "name" and is_text(child.type):
            new = pc.if_else(
                pa.array(made_up), names.cast(child.type), pa.nulls(len(at), child.type)
            )
        else:
            new = pa.nulls(len(at), child.type)
        children.append(replaced(child, at, new))
    mask = items.is_null() if items.null_count else None
    values = pa.StructArray.from_arrays(children, fields=list(message_type), mask=mask)
    nulls = column.is_null() if column.null_count else None
    return lists_of(column.type, sizes, values, nulls)
