"""OpenHands' flattener: a column of trajectories (lists of action and observation events) into
`Conversations`.

It reads a row as `OpenHandsFormat.decode` reads it, or marks it unread: a null event, one with
neither `action` nor `observation`, an action the decoder has no place for, a call whose
`tool_call_id` or `function_name` is null or whose model response holds no call of that id (or
one without its `function`), a system action without its text, a null image url, an
observation that answers no call and is no bookkeeping. Events make messages as the decoder
gathers them: a system or message action is a message of its own, the actions of one model
response (one `model_response.id`) one assistant message, which says the response's text and
reasoning, and each run of observations answering calls one user message; bookkeeping
events are in none (`item_message` -1). A layout it does not read as the decoder would is not
flattened at all (None): ids that are not integers, fields of another type than the decoder
takes.

Rows are left to the per-row path where it answers otherwise than it reads: an observation
that names its call by `cause` only is read where that call came before it and no other call
of the row has its event id (else unread); a row whose system text is the event's `message`,
or where bookkeeping follows an assistant message that may be dropped as an empty turn, is
`reencoded` (its encoder writes such rows otherwise than dropping whole events).

`write_openhands` writes a repair as the encoder does: the events of the messages dropped left
out, a message action others are joined into (R4) holding the joined text in `args.content` and
`message` (`unmerged` says where the encoder does more), and a result made by a repair (R5's
error result) as the new `error` observation the encoder writes (`events.result_event`), where
the encoder puts it (`result_holders`).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    field_type,
    first_flagged,
    flattened,
    indices,
    is_text,
    list_sizes,
    objects,
    rows_with,
    run_starts,
    text_lengths,
    with_child,
)
from transcript_clean.columnar.conversations import (
    ASSISTANT,
    SYSTEM,
    USER,
    Conversations,
    Roles,
)
from transcript_clean.columnar.edits import (
    Edits,
    Merges,
    Rewrite,
    inserted_lists,
    merged_texts,
    taken,
    with_values,
    written,
)
from transcript_clean.formats.base import REASONING_KEYS
from transcript_clean.formats.fields import field, fits, is_list_of_structs, not_blank
from transcript_clean.formats.openhands.events import (
    PASSED_ACTIONS,
    PASSED_OBSERVATIONS,
    result_event,
)
from transcript_clean.model import Text, ToolResult

__all__ = [
    "flatten_openhands",
    "merges_written",
    "result_holders",
    "unmerged",
    "write_openhands",
]

_SYSTEM_EVENT: Final = 0
_SAID_EVENT: Final = 1
_CALL_EVENT: Final = 2
_RESULT_EVENT: Final = 3

# An event id and the row it is in, as one number: ids past 31 bits leave the row unread.
_ID_SPAN: Final = 1 << 31


def _struct(type_: pa.DataType | None) -> bool:
    return type_ is None or pa.types.is_null(type_) or pa.types.is_struct(type_)


def _child(type_: pa.DataType | None, name: str) -> pa.DataType | None:
    """The type of a struct's field `name` (None where the type is no struct or lacks it)."""
    if type_ is None or not pa.types.is_struct(type_):
        return None
    return field_type(type_, name)


def _items_of(type_: pa.DataType | None) -> pa.DataType | None:
    """The item type of a list of structs (None for any other type)."""
    return type_.value_type if type_ is not None and is_list_of_structs(type_) else None


def _listed(type_: pa.DataType | None, test: object) -> bool:
    """Absent, nulls, or a list whose items pass `test` (or are all null)."""
    if type_ is None or pa.types.is_null(type_):
        return True
    if not (pa.types.is_list(type_) or pa.types.is_large_list(type_)):
        return False
    value = type_.value_type
    return bool(pa.types.is_null(value) or test(value))  # type: ignore[operator]


def _readable(event: pa.DataType) -> bool:
    """Whether the fields the decoder reads have the types it takes (text where it wants text,
    objects where it wants objects, integer ids)."""
    integer = pa.types.is_integer
    args = field_type(event, "args")
    meta = field_type(event, "tool_call_metadata")
    response = _child(meta, "model_response")
    choices = _child(response, "choices")
    choice = _items_of(choices)
    message = _child(choice, "message")
    tool_calls = _child(message, "tool_calls")
    call = _items_of(tool_calls)
    function = _child(call, "function")
    arguments = _child(function, "arguments")
    return (
        all(fits(event, k, is_text) for k in ("action", "observation", "source", "message"))
        and fits(event, "content", is_text)
        and fits(event, "id", integer)
        and fits(event, "cause", integer)
        and _struct(args)
        and _struct(meta)
        and (args is None or not pa.types.is_struct(args) or fits(args, "content", is_text))
        and _listed(_child(args, "image_urls"), is_text)
        and (meta is None or not pa.types.is_struct(meta) or _meta_readable(meta))
        and _struct(response)
        and (response is None or not pa.types.is_struct(response) or fits(response, "id", is_text))
        and _listed(choices, pa.types.is_struct)
        and _struct(message)
        and (message is None or not pa.types.is_struct(message) or _message_readable(message))
        and _listed(tool_calls, pa.types.is_struct)
        and (call is None or fits(call, "id", is_text))
        and _struct(function)
        and (arguments is None or pa.types.is_null(arguments) or is_text(arguments)
             or pa.types.is_struct(arguments))
        and not _opaque(arguments, deep=True)
        and not _opaque(_child(message, "content"))  # text in some rows, which it reads
        and not _opaque(_child(args, "tools"))  # a list in some rows: declarations
    )  # fmt: skip


def _opaque(type_: pa.DataType | None, *, deep: bool = False) -> bool:
    """Whether `type_` is an extension type (`pa.json_()`: values of several types, which the
    decoder reads as values), or with `deep` holds one: every other field the flattener reads
    is refused in such a type by its own type test. (A tool's `parameters` held so is read as
    the decoder reads it: the declared-tools checks decode such leaves.)"""
    if type_ is None:
        return False
    if isinstance(type_, pa.BaseExtensionType):
        return True
    return deep and any(_opaque(type_.field(i).type, deep=True) for i in range(type_.num_fields))


def _meta_readable(meta: pa.DataType) -> bool:
    return fits(meta, "tool_call_id", is_text) and fits(meta, "function_name", is_text)


def _message_readable(message: pa.DataType) -> bool:
    return all(fits(message, k, is_text) for k in REASONING_KEYS)


def _equal(values: pa.Array, value: str) -> Mask:
    return as_mask(pc.equal(values, value), fill=False)


def _null(values: pa.Array) -> Mask:
    return as_mask(values.is_null())


def _responses(choices: pa.Array, calls: Counts) -> tuple[pa.Array, Counts]:
    """The messages of the responses' choices, and per call the position of its response's
    first choice's (-1 where its response has no choice or no message)."""
    if not (pa.types.is_list(choices.type) or pa.types.is_large_list(choices.type)):
        return pa.nulls(0, pa.string()), np.full(len(calls), -1, dtype=np.int64)
    values, sizes, _ = flattened(choices)
    messages = field(values, "message")
    first = (np.cumsum(sizes) - sizes)[calls]
    has = sizes[calls] > 0
    has[has] &= ~_null(messages)[first[has]]
    return messages, np.where(has, first, -1)


def _coalesce(*values: pa.Array) -> pa.Array:
    """The first that is not null, as text (a null-typed field is null text)."""
    return pc.coalesce(*(v.cast(pa.string()) for v in values))


def flatten_openhands(array: pa.Array, *, declarations: bool) -> Conversations | None:
    """The rows of an OpenHands `history` column as `Conversations`; None for a column whose
    Arrow type this does not read (the per-row path reads every row). With `declarations`,
    each row's tools as the decoder reads them from its `system` action's `args.tools`."""
    if not is_list_of_structs(array.type) or not _readable(array.type.value_type):
        return None
    rows = len(array)
    items, _, item_row = flattened(array)
    n = len(items)
    flag = _null(items)

    action, observation = field(items, "action"), field(items, "observation")
    has_action = ~_null(action)
    has_observation = ~has_action & ~_null(observation)
    flag |= ~has_action & ~has_observation
    meta = field(items, "tool_call_metadata")
    has_meta = ~_null(meta)
    args = field(items, "args")
    call_ids = field(meta, "tool_call_id")  # a call's, or the call an observation answers

    plain = has_action & ~has_meta
    is_call = has_action & has_meta
    is_system = plain & _equal(action, "system")
    is_said = plain & _equal(action, "message")
    passed = plain & as_mask(pc.is_in(action, pa.array(sorted(PASSED_ACTIONS))), fill=False)
    flag |= plain & ~(is_system | is_said | passed)
    said_text = _coalesce(field(args, "content"), field(items, "message"))
    flag |= is_system & _null(said_text)

    # Calls: the id and name of the metadata, the arguments of the response's call of that id.
    # (Only leaves are taken: a take of the responses' structs copies every nested list.)
    calls = np.flatnonzero(is_call)
    names = field(meta, "function_name")
    flag[calls] |= (_null(call_ids) | _null(names))[calls]
    messages, choice = _responses(field(field(meta, "model_response"), "choices"), calls)
    found, missing = _called(field(messages, "tool_calls"), choice, call_ids.take(indices(calls)))
    flag[calls] |= missing

    # Observations: a result where the metadata names its call, or `cause` an earlier call's
    # event; else bookkeeping, or no place at all.
    answers = np.full(n, -1, dtype=np.int64)  # per observation, the item naming its call
    with_meta = has_observation & has_meta
    answers[with_meta] = np.flatnonzero(with_meta)
    flag |= with_meta & _null(call_ids)
    _by_cause(items, item_row, is_call, has_observation & ~has_meta, answers, flag)
    is_result = has_observation & (answers >= 0)
    observed = has_observation & ~is_result
    bookkeeping = observed & as_mask(
        pc.is_in(observation, pa.array(sorted(PASSED_OBSERVATIONS))), fill=False
    )
    flag |= observed & ~bookkeeping
    passed |= bookkeeping

    # Images of a message action: each a string.
    images = field(args, "image_urls")
    image_count = np.zeros(n, dtype=np.int64)
    if pa.types.is_list(images.type) or pa.types.is_large_list(images.type):
        urls, image_count, url_item = flattened(images)
        flag |= is_said & rows_with(_null(urls), url_item, n)

    unread = _null(array) | rows_with(flag, item_row, rows)
    read_item = ~unread[item_row]
    kept = read_item & (is_system | is_said | is_call | is_result)

    # Messages: a run of one response's calls, or of results, is one; any other event its own.
    kind = np.select(
        [is_system, is_said, is_call], [_SYSTEM_EVENT, _SAID_EVENT, _CALL_EVENT], _RESULT_EVENT
    )
    at = np.flatnonzero(kept)
    starts = np.ones(len(at), dtype=bool)
    if len(at) > 1:
        before, after = at[:-1], at[1:]
        response_ids = field(field(meta, "model_response"), "id")
        same_response = as_mask(
            pc.equal(response_ids.take(indices(after)), response_ids.take(indices(before))),
            fill=False,
        )  # (a null id opens a message of its own)
        same_row = item_row[after] == item_row[before]
        both_calls = (kind[after] == _CALL_EVENT) & (kind[before] == _CALL_EVENT)
        both_results = (kind[after] == _RESULT_EVENT) & (kind[before] == _RESULT_EVENT)
        starts[1:] = ~(same_row & ((both_calls & same_response) | both_results))
    event_message = np.cumsum(starts, dtype=np.int64) - 1
    firsts = at[starts]
    m = len(firsts)
    item_message = np.full(n, -1, dtype=np.int64)
    item_message[at] = event_message
    source_user = _equal(field(items, "source"), "user")
    first_kind = kind[firsts]
    role = np.where(
        first_kind == _SYSTEM_EVENT,
        SYSTEM,
        np.where(
            (first_kind == _CALL_EVENT) | ((first_kind == _SAID_EVENT) & ~source_user[firsts]),
            ASSISTANT,
            USER,
        ),
    ).astype(np.int8)

    said = np.zeros(m, dtype=bool)
    thought = np.zeros(m, dtype=bool)
    reasoned = np.zeros(m, dtype=bool)
    spoken = np.zeros(m, dtype=bool)
    chars = np.zeros(m, dtype=np.int64)
    pieces: list[pa.Array] = []
    owners: list[Counts] = []

    def add(texts: pa.Array, owner: Counts, *, says: bool = True) -> Counts:
        """Texts of the messages `owner` (null: none); their characters."""
        lengths = text_lengths(texts)
        np.add.at(chars, owner, lengths)
        if says:
            said[owner[not_blank(texts)]] = True
            spoken[owner[lengths > 0]] = True
        pieces.append(texts)
        owners.append(owner)
        return lengths

    # System and message actions: their text, and a message's images.
    spoke = at[(kind[at] == _SYSTEM_EVENT) | (kind[at] == _SAID_EVENT)]
    spoke_lengths = add(said_text.take(indices(spoke)), item_message[spoke])
    said[item_message[spoke[image_count[spoke] > 0]]] = True

    # Calls: the text and reasoning of the response that opens their message.
    read_calls = read_item[calls]
    place = np.full(n, -1, dtype=np.int64)
    place[at] = np.arange(len(at), dtype=np.int64)
    opening = read_calls.copy()
    opening[read_calls] = starts[place[calls[read_calls]]]
    opened = np.flatnonzero(opening)
    owner = item_message[calls[opened]]
    said_at = indices(choice[opened])
    content = field(messages, "content").take(said_at)
    if not is_text(content.type):  # the decoder takes text only, and passes anything else over
        content = pa.nulls(len(opened), pa.string())
    add(content, owner)
    for key in REASONING_KEYS:
        reasoning = field(messages, key).take(said_at)
        reasoned[owner[~_null(reasoning)]] = True
        thought[owner[not_blank(reasoning)]] = True
        add(reasoning, owner, says=False)

    # Results: each says its text ("" where it has none).
    results = np.flatnonzero(is_result & read_item)
    result_text = _coalesce(
        field(items, "content").take(indices(results)),
        field(items, "message").take(indices(results)),
        pa.array([""] * len(results), pa.string()),
    )
    add(result_text, item_message[results], says=False)

    kept_calls = calls[read_calls]
    call_arguments = _arguments(found[read_calls])
    errors = _equal(observation, "error")[results]

    def texts() -> tuple[pa.Array, Counts]:
        # Made when asked for (tokens are counted): a copy of every text.
        held = [np.flatnonzero(~_null(t)) for t in pieces]
        return (
            pa.concat_arrays(
                [
                    t.take(indices(h)).cast(pa.large_string())
                    for t, h in zip(pieces, held, strict=True)
                ]
            ),
            np.concatenate([o[h] for o, h in zip(owners, held, strict=True)]).astype(np.int64),
        )

    # A message's one text: a system or message action's non-empty text, with no images (its
    # decoded parts are that text alone); calls and results say more, or other things.
    one_text = np.full(m, -1, dtype=np.int64)
    plain = spoke[(image_count[spoke] == 0) & (spoke_lengths > 0)]
    one_text[item_message[plain]] = plain
    own_event = np.full(m, -1, dtype=np.int64)  # the decoder's origin: a message action's
    own_event[item_message[spoke]] = spoke

    return Conversations(
        rows=rows,
        unread=unread,
        message_row=item_row[firsts],
        role=role,
        said=said,
        thought=thought,
        reasoned=reasoned,
        spoken=spoken,
        chars=chars,
        call_message=item_message[kept_calls],
        call_id=call_ids.take(indices(kept_calls)),
        call_name=field(meta, "function_name").take(indices(kept_calls)),
        call_arguments=call_arguments,
        call_object=objects(call_arguments),
        result_message=item_message[results],
        result_call=call_ids.take(indices(answers[results])),
        result_blank=~not_blank(result_text),
        result_text=lambda: result_text,  # a result is one text part
        result_error=errors,
        item_message=item_message,
        reencoded=_reencoded(
            items, item_row, rows, kept, passed & read_item, kind, is_system, args, said, role,
            item_message,
        ),
        declarations=_declarations(items, item_row, rows, args) if declarations else None,
        message_text=lambda positions: taken(said_text, one_text[positions]),
        message_origin=lambda positions: taken(items, own_event[positions]),
        texts=texts,
    )  # fmt: skip


class _Found:
    """Per call, where its response's call of its id is among the responses' calls."""

    def __init__(self, functions: pa.Array, at: Counts) -> None:
        self.functions = functions
        self.at = at

    def __getitem__(self, which: Mask) -> _Found:
        return _Found(self.functions, self.at[which])


def _called(tool_calls: pa.Array, choice: Counts, call_id: pa.Array) -> tuple[_Found, Mask]:
    """Per call, the first call of its response's first choice with its id, and whether it
    has none (or one without its `function`): the decoder's `malformed_row`."""
    n = len(call_id)
    if not is_list_of_structs(tool_calls.type):
        return _Found(pa.nulls(0, pa.string()), np.full(n, -1)), np.ones(n, dtype=bool)
    values, _, of_choice = flattened(tool_calls)
    owner = np.full(len(tool_calls), -1, dtype=np.int64)
    owner[choice[choice >= 0]] = np.flatnonzero(choice >= 0)
    owned = owner[of_choice]
    candidates = np.flatnonzero((owned >= 0) & ~_null(values))
    match = np.zeros(len(values), dtype=bool)
    match[candidates] = as_mask(
        pc.equal(
            field(values, "id").take(indices(candidates)),
            call_id.take(indices(owned[candidates])),
        )
    )
    first = first_flagged(match, np.maximum(owned, 0), n)
    at = np.where(first < len(values), first, -1)
    functions = field(values, "function")
    missing = at < 0
    missing[~missing] = _null(functions)[at[~missing]]
    return _Found(functions, at), missing


def _arguments(found: _Found) -> pa.Array:
    """The arguments of the calls found (null where there are none)."""
    arguments = field(found.functions, "arguments")
    at = found.at
    return arguments.take(pa.array(np.maximum(at, 0), pa.int64(), mask=at < 0))


def _by_cause(
    items: pa.Array,
    item_row: Counts,
    is_call: Mask,
    asking: Mask,
    answers: Counts,
    flag: Mask,
) -> None:
    """Observations of `asking` whose `cause` names the event id of a call before them: the
    call's item in `answers`. A row where two calls share an event id, where such a cause names
    a call after it, or with ids this does not combine with the row, is flagged."""
    cause = field(items, "cause")
    asking = asking & ~_null(cause)
    if not asking.any():
        return
    ids = field(items, "id")
    holders = np.flatnonzero(is_call & ~_null(ids))
    id_values = pc.fill_null(ids, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    cause_values = pc.fill_null(cause, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    asked = np.flatnonzero(asking)
    wide = (np.abs(id_values[holders]) >= _ID_SPAN, np.abs(cause_values[asked]) >= _ID_SPAN)
    flag[holders[wide[0]]] = True
    flag[asked[wide[1]]] = True
    key_of = item_row[holders] * (2 * _ID_SPAN) + (id_values[holders] + _ID_SPAN)
    order = np.argsort(key_of, kind="stable")
    keys, by_key = key_of[order], holders[order]
    twice = np.flatnonzero(keys[1:] == keys[:-1])
    flag[by_key[twice]] = True
    wanted = item_row[asked] * (2 * _ID_SPAN) + (cause_values[asked] + _ID_SPAN)
    where = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    hit = np.zeros(len(asked), dtype=bool)
    if len(keys):
        hit = keys[where] == wanted
    call = np.where(hit, by_key[where] if len(keys) else 0, -1)
    flag[asked[hit & (call > asked)]] = True  # the encoder would read it as an answer
    earlier = hit & (call < asked)
    answers[asked[earlier]] = call[earlier]


def _reencoded(
    items: pa.Array,
    item_row: Counts,
    rows: int,
    kept: Mask,
    passed: Mask,
    kind: Counts,
    is_system: Mask,
    args: pa.Array,
    said: Mask,
    role: Roles,
    item_message: Counts,
) -> Mask:
    """Rows whose repairs its encoder writes otherwise than by dropping whole events: bookkeeping
    after an assistant message that may be dropped as an empty turn (the encoder moves it to the
    end), a system text held in the event's `message` (written anew in `args.content`)."""
    out = rows_with(is_system & kept & _null(field(args, "content")), item_row, rows)
    positions = np.arange(len(kept), dtype=np.int64)
    last_kept = np.maximum.accumulate(np.where(kept, positions, -1)) if len(kept) else positions
    after = np.flatnonzero(passed)
    before = last_kept[after]
    found = before >= 0
    found[found] &= item_row[before[found]] == item_row[after[found]]
    found[found] &= kind[before[found]] == _SAID_EVENT
    droppable = (role == ASSISTANT) & ~said
    found[found] &= droppable[item_message[before[found]]]
    out |= rows_with(found, item_row[after], rows) if len(after) else False
    return out


def _declarations(items: pa.Array, item_row: Counts, rows: int, args: pa.Array) -> pa.Array | None:
    """Per row, the `args.tools` of its first `system` action that lists some (null where none
    does), as the decoder reads its declarations where no column declares any."""
    tools = field(args, "tools")
    if not (pa.types.is_list(tools.type) or pa.types.is_large_list(tools.type)):
        return None  # no list anywhere: the decoder reads none
    holds = _equal(field(items, "action"), "system") & (list_sizes(tools) > 0)
    first = first_flagged(holds, item_row, rows)
    found = first < len(item_row)
    return tools.take(pa.array(np.where(found, first, 0), pa.int64(), mask=~found))


# ---------------------------------------------------------------------------------------------
# write


def _error_event(call_id: Any, name: Any, cause: Any, text: str) -> dict[str, Any]:
    """The event the encoder writes for a call's error result (R5's), after its action."""
    result = ToolResult(call_id, (Text(text),), name, "error")
    return result_event(result, {"id": cause})


def result_holders(array: pa.Array, c: Conversations, messages: Counts) -> Mask | None:
    """Of the messages at `messages`, whether `write_openhands` writes a new error result where
    the encoder puts it: for a turn no user message answers, a new observation after its events;
    into a run of results, one more after them; for a user's message action whose only part is
    its text, an observation before it (the encoder writes the result, then the message's own
    event; one with images it writes otherwise). None where the events' type cannot hold the
    observation the encoder writes (it would not fit the input's schema)."""
    if c.item_message is None:
        return None
    try:
        pa.array([_error_event("id", "name", 0, "text")], type=array.type.value_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return None
    first = c.first_items()[messages]
    items, _, _ = flattened(array)
    events = items.take(indices(np.maximum(first, 0)))
    images = field(field(events, "args"), "image_urls")
    pictured = np.zeros(len(events), dtype=bool)
    if pa.types.is_list(images.type) or pa.types.is_large_list(images.type):
        pictured = list_sizes(images) > 0
    holds_results = (np.bincount(c.result_message, minlength=c.messages) > 0)[messages]
    text_only = c.spoken[messages] & ~pictured & (first >= 0)
    role = c.role[messages]
    out: Mask = (role == ASSISTANT) | holds_results | ((role == USER) & text_only)
    return out


def merges_written(array: pa.Array) -> bool:
    """Whether `write_openhands` writes R4's merges in `array` as the encoder writes a merged
    message action: its `args.content` (text) and its `message` (absent or text) set to the
    joined text, its `args.image_urls` (absent, or a list) null."""
    if not is_list_of_structs(array.type):
        return False
    event = array.type.value_type
    args = field_type(event, "args")
    if args is None or not pa.types.is_struct(args) or not is_text(field_type(args, "content")):
        return False
    message, images = field_type(event, "message"), field_type(args, "image_urls")
    return (message is None or is_text(message)) and (
        images is None or pa.types.is_null(images) or pa.types.is_list(images)
        or pa.types.is_large_list(images)
    )  # fmt: skip


def unmerged(array: pa.Array, c: Conversations, merges: Merges) -> Mask:
    """Per row, whether `write_openhands` does not write its R4 merges as the encoder does:
    where the event a message is joined into has no `args` (the encoder writes one anew), or
    where bookkeeping follows a joined message's event and a message's event follows it (the
    encoder writes such bookkeeping last, after the event it followed is gone)."""
    out = np.zeros(c.rows, dtype=bool)
    item_message = c.item_message
    if item_message is None or not len(merges.grown):
        return out
    items, _, item_row = flattened(array)
    first = c.first_items()[merges.grown]
    out |= rows_with(_null(field(items, "args"))[first], c.message_row[merges.grown], c.rows)
    held = item_message >= 0
    positions = np.arange(len(items), dtype=np.int64)
    joined = np.append(merges.joined, False)[np.where(held, item_message, -1)]
    anchor = np.maximum.accumulate(np.where(held, positions, -1)) if len(items) else positions
    anchored = ~held & (anchor >= run_starts(item_row))
    anchored[anchored] = joined[anchor[anchored]]
    last_written = np.full(c.rows, -1, dtype=np.int64)
    stays = np.flatnonzero(held & ~joined)  # ascending: each row's last is where its run ends
    ends = np.ones(len(stays), dtype=bool)
    ends[:-1] = item_row[stays[1:]] != item_row[stays[:-1]]
    last_written[item_row[stays[ends]]] = stays[ends]
    out |= rows_with(anchored & (positions < last_written[item_row]), item_row, c.rows)
    return out


def _merged(edits: Edits) -> Rewrite | None:
    """The rewrite of the events that R4's merges grow, as `_message_event` writes them."""
    merges, c = edits.merges, edits.conversations
    if merges is None or not len(merges.grown):
        return None
    assert c.item_message is not None and c.message_text is not None
    grown, texts = merged_texts(merges, c.message_text)
    first = c.first_items()[grown]

    def rewrite(events: pa.Array, elements: Counts) -> pa.Array:
        at = np.searchsorted(elements, first)
        args = with_values(field(events, "args"), "content", at, texts)
        images = field_type(args.type, "image_urls")
        if images is not None and not pa.types.is_null(images):
            args = with_values(args, "image_urls", at, pa.nulls(len(at), images))
        events = with_child(events, "args", args)
        if field_type(events.type, "message") is not None:
            events = with_values(events, "message", at, texts)
        return events

    return rewrite


def write_openhands(array: pa.Array, edits: Edits) -> pa.Array:
    """The rows of `edits` written as `OpenHandsFormat.encode` writes them: the events of the
    messages dropped or joined into another left out (`written`), the message actions others are
    joined into holding the joined text (`_merged`), and each new error result an `error`
    observation naming its call (its action's `id` as `cause`), where `result_holders` says the
    encoder puts it: before the user's message action that answers the turn, else after the
    events of the results that answer it (or of the turn, where none does) and the bookkeeping
    after them."""
    out = written(array, edits, _merged(edits))
    inserts = edits.inserts
    if inserts is None or not len(inserts):
        return out
    c = edits.conversations
    item_message = c.item_message
    assert item_message is not None
    items, sizes, parent = flattened(array)
    row_start = np.cumsum(sizes) - sizes
    # The events of messages, in order, those of one message together.
    held = np.flatnonzero(item_message >= 0)
    held_message = item_message[held]
    # Each call's action: the k-th event of its message for its k-th call.
    turn = c.call_message[inserts.call]
    place = inserts.call - np.searchsorted(c.call_message, turn)
    action = held[np.searchsorted(held_message, turn) + place]
    # Where each observation goes, by position among the column's events.
    holds_results = np.bincount(c.result_message, minlength=c.messages) > 0
    into = inserts.into
    before_said = (into >= 0) & ~holds_results[np.maximum(into, 0)]
    anchor = np.where(into >= 0, into, turn)
    after_last = np.searchsorted(held_message, anchor, side="right")  # the next message's
    row = c.message_row[anchor]
    row_end = row_start[row] + sizes[row]
    next_event = held[np.minimum(after_last, len(held) - 1)]
    follows = (after_last < len(held)) & (parent[next_event] == row)
    slot = np.where(follows, next_event, row_end)
    slot = np.where(before_said, c.first_items()[np.maximum(into, 0)], slot)
    # ... as a place among the events the row keeps.
    whole = item_message >= 0
    gone = np.zeros(len(items), dtype=bool)
    gone[whole] = edits.removed[item_message[whole]]
    kept_before = np.concatenate([[0], np.cumsum(~gone)])
    local = kept_before[slot] - kept_before[row_start[row]]
    causes = field(items, "id").take(indices(action)).to_pylist()
    call_ids = c.call_id.take(indices(inserts.call)).to_pylist()
    names = c.call_name.take(indices(inserts.call)).to_pylist()
    events = [
        _error_event(call_id, name, cause, inserts.text)
        for call_id, name, cause in zip(call_ids, names, causes, strict=True)
    ]
    values = pa.array(events, type=array.type.value_type)
    return inserted_lists(out, values, np.searchsorted(edits.rows, row), local)
