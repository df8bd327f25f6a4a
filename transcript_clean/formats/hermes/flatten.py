"""Hermes' flattener: a column of `{from, value}` turns whose calls and results are tags in their
text, into `Conversations`.

It reads a row as `HermesFormat.decode` reads it, or marks it unread (a null turn, tag or value,
a tag the format does not know, a `<tool_call>` the decoder cannot read). Turns become messages
as the decoder makes them: a system, human or gpt turn one message each, a run of tool turns one
user message of results, the k-th result of the run answering the k-th call of the assistant
message before it (system turns aside). Hermes has no ids: calls are numbered `call_{turn}_{k}`
and a result of no call `result_{turn}_{k}`, as the decoder mints them.

A turn without tags, most of them, is read in Arrow: a gpt turn's text is its value stripped,
a tool turn's one result its value stripped. A gpt turn holding `<tool_call>` or `<think>` and a
tool turn holding `<tool_response>` (or a `{...}` body) are read in Python, one turn at a time.
A gpt turn whose `<tool_call>` bodies are strict JSON objects with a name, the common layout,
is read with the decoder's own pattern straight into texts and calls (`_read_gpt_fast`, held
equal to the decoder by a property test); any other, and every tool turn, with the decoder's
own readers (`values.py`: `assistant_parts`, `read_responses`; orjson first, then the Python
literal), so that the two cannot drift. Every message is whole items of the column's
lists (a gpt turn with text, reasoning and calls is one item), so R1 and R5's cut drop items in
Arrow. The tools a system prompt declares in a `<tools>` block are handed to the fast path as
JSON text (`declarations`), read where the batch's `tools` column declares nothing, as the
decoder reads them; a row whose block has a problem is unread. It knows no rule.
"""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import (
    NOT_SPACE,
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
from transcript_clean.formats.base import DecodeError, IdMinter
from transcript_clean.formats.fields import (
    arguments_json,
    end_to_end,
    is_list_of_structs,
    not_blank,
)
from transcript_clean.formats.hermes.values import (
    TAGS,
    assistant_parts,
    assistant_tags,
    prompt_tools,
    read_responses,
    read_tools_block,
)
from transcript_clean.model import Reasoning, ReasoningText, Text, ToolCall, is_json

__all__ = ["flatten_hermes"]

# A character `str.strip()` takes off: a value that starts or ends with one is stripped in Python.
_SPACE = "[" + NOT_SPACE[2:]
_EDGE_SPACE = f"^{_SPACE}|{_SPACE}$"


def _tagged(role: str) -> pa.Array:
    return pa.array([t for t, r in TAGS.items() if r == role], pa.string())


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

    def tagged(role: str) -> Mask:
        return as_mask(pc.is_in(tag, _tagged(role)))

    is_system, is_user = tagged("system"), tagged("user")
    is_gpt, is_tool = tagged("assistant"), tagged("tool")
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
    # tool turn's result). Values with white space at an edge are stripped in Python.
    value_chars = text_lengths(value)
    said = not_blank(value).copy()
    edged = as_mask(pc.match_substring_regex(value, _EDGE_SPACE), fill=False)
    gpt_tags = as_mask(pc.match_substring(value, "<tool_call>")) | as_mask(
        pc.match_substring(value, "<think>")
    )
    tool_tags = as_mask(pc.match_substring(value, "<tool_response>")) | as_mask(
        pc.match_substring_regex(value, f"^{_SPACE}*\\{{"), fill=False
    )
    python_gpt = np.flatnonzero(is_gpt & gpt_tags & ~flag)
    python_tool = np.flatnonzero(is_tool & tool_tags & ~flag)
    untagged = (is_gpt & ~gpt_tags) | (is_tool & ~tool_tags)
    stripped = np.flatnonzero(untagged & edged & ~flag)
    stripped_texts = value.take(indices(stripped)).to_pylist()
    stripped_texts = [t.strip() for t in stripped_texts]
    turn_chars = value_chars.copy()
    turn_chars[stripped] = [len(t) for t in stripped_texts]
    thought = np.zeros(n, dtype=bool)
    reasoned = np.zeros(n, dtype=bool)
    spoken = np.where(is_gpt, said, value_chars > 0)
    reencoded_turn = np.zeros(n, dtype=bool)
    own_text: dict[int, str] = dict(zip(stripped.tolist(), stripped_texts, strict=True))

    # Tagged gpt turns: their reasoning, text and calls, as the decoder reads them.
    calls_of_turn = np.zeros(n, dtype=np.int64)
    names: list[str] = []
    arguments: list[str | None] = []
    objects: list[bool] = []
    call_turn: list[int] = []
    extra_texts: list[tuple[int, str]] = []  # reasoning texts, by turn (for the token count)
    parsed: list[int] = []  # the tagged gpt turns read
    values = value.take(indices(python_gpt)).to_pylist()
    for at, text in zip(python_gpt.tolist(), values, strict=True):
        read_turn = _read_gpt(text)
        if read_turn is None:
            flag[at] = True
            continue
        reasons, words, calls = read_turn
        chars = 0
        said[at] = spoken[at] = False
        for reason in reasons:
            reasoned[at] = True
            chars += len(reason)
            thought[at] |= bool(reason.strip())
            extra_texts.append((at, reason))
        if words is not None:
            chars += len(words)
            said[at] = bool(words.strip())
            spoken[at] = bool(words)
            own_text[at] = words
        for name, raw, is_object, same in calls:
            names.append(name)
            arguments.append(raw)
            objects.append(is_object)
            call_turn.append(at)
            reencoded_turn[at] |= not same
        calls_of_turn[at] = len(calls)
        parsed.append(at)
        turn_chars[at] = chars

    # Tool turns: their results, in order (one per untagged turn).
    results_of_turn = np.where(is_tool & ~flag, 1, 0).astype(np.int64)
    read: dict[int, list[str]] = {}
    values = value.take(indices(python_tool)).to_pylist()
    for at, text in zip(python_tool.tolist(), values, strict=True):
        found = [t for _, t in read_responses(text)]
        read[at] = found
        results_of_turn[at] = len(found)
        turn_chars[at] = sum(len(t) for t in found)
    result_turn = np.repeat(np.arange(n, dtype=np.int64), results_of_turn)
    unread = as_mask(array.is_null()) | rows_with(flag, turn_row, rows)
    declarations = None
    if prompt_tools:
        declarations, unsure = _prompt_declarations(is_system, value, turn_row, rows)
        unread |= unsure

    # Calls, numbered in order; per message its first call.
    call_turn_at = np.array(call_turn, dtype=np.int64)
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
        out: list[str] = []
        tool_turns = np.flatnonzero(results_of_turn)
        own = value.take(indices(tool_turns)).to_pylist()
        for at, text in zip(tool_turns.tolist(), own, strict=True):
            out.extend(read[at] if at in read else [own_text.get(at, text)])
        return pa.array(out, pa.large_string())

    result_words = result_texts()
    result_blank = ~not_blank(result_words)

    def texts() -> tuple[pa.Array, Counts]:
        # A gpt turn of calls or reasoning alone has no text part: no piece.
        plain = np.flatnonzero(~np.isin(np.arange(n), [*own_text, *parsed]) & ~is_tool)
        replaced = sorted(t for t in own_text if not is_tool[t])
        pieces = [
            value.take(indices(plain)).cast(pa.large_string()),
            pa.array([own_text[t] for t in replaced], pa.large_string()),
            pa.array([t for _, t in extra_texts], pa.large_string()),
            result_words,
        ]
        owners = [
            turn_message[plain],
            turn_message[np.array(replaced, dtype=np.int64)],
            turn_message[np.array([a for a, _ in extra_texts], dtype=np.int64)],
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
        call_name=pa.array(names, pa.string()),
        call_arguments=pa.array(arguments, pa.string()),
        call_object=np.array(objects, dtype=bool),
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


_Call = tuple[str, str | None, bool, bool]
_Gpt = tuple[list[str], str | None, list[_Call]]


def _read_gpt(text: str) -> _Gpt | None:
    """A tagged gpt turn's reasoning texts, its text (None for no text part) and its calls
    (`_call`), as `assistant_parts` reads it; None where the decoder cannot read it. The common
    layout, every `<tool_call>` body strict JSON, is read here without the model's parts; any
    other is left to `assistant_parts` (the truth)."""
    fast = _read_gpt_fast(text)
    return fast if fast is not None else _read_gpt_parts(text)


def _read_gpt_parts(text: str) -> _Gpt | None:
    """`_read_gpt` with the decoder's own reader."""
    try:
        parts = assistant_parts(text, "", 0, _UNUSED)
    except DecodeError:
        return None
    reasons: list[str] = []
    words: str | None = None
    calls: list[_Call] = []
    for part in parts:
        if isinstance(part, Text):
            words = part.text
        elif isinstance(part, Reasoning):
            reasons.extend(p.text for p in part.content if isinstance(p, ReasoningText))
        elif isinstance(part, ToolCall):
            calls.append((part.name, *_call(part)))
    return reasons, words, calls


def _read_gpt_fast(text: str) -> _Gpt | None:
    """`_read_gpt` for a turn whose `<tool_call>` bodies are strict JSON objects with a name
    (what orjson reads, `literal` reads alike); None for anything else (not an answer: the
    decoder's reader then decides)."""
    reasons: list[str] = []
    calls: list[_Call] = []
    tags, words = assistant_tags(text)
    for tag, body in tags:
        if tag == "think":
            reasons.append(body)
            continue
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        given = obj.get("arguments")
        if isinstance(given, str):
            return None
        # orjson refuses NaN, infinities and lone surrogates: what it reads JSON can write.
        raw = orjson.dumps(given).decode()
        calls.append((obj["name"], raw, isinstance(given, dict), True))
    if "<tool_call>" in words:
        return None
    return reasons, (words if words or not (calls or reasons) else None), calls


class _Unused(IdMinter):
    """A minter whose ids no one reads (the view spells them: `end_to_end`), at no cost."""

    __slots__ = ()

    def __call__(self, base: str) -> str:
        return base


_UNUSED = _Unused(tuple)


def _call(call: ToolCall) -> tuple[str | None, bool, bool]:
    """A call's arguments as JSON text (None where JSON cannot write them), whether they are a
    JSON object as the decoder reads them, and whether the encoder, comparing the turn it read
    with the call, finds them equal (arguments holding NaN never are: it writes the turn anew)."""
    arguments, raw = call.arguments, call.raw_arguments
    plain = raw is not None or is_json(arguments)
    is_object = isinstance(arguments, dict) and plain
    return raw if raw is not None else arguments_json(arguments), is_object, plain


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
    if not any(t is not None for t in texts):
        return None, unsure
    return pa.array(texts, pa.string()), unsure


def _hermes_shape(type_: pa.DataType) -> bool:
    """Turns as structs with text `from` and `value`."""
    if not is_list_of_structs(type_):
        return False
    turn = type_.value_type
    return is_text(field_type(turn, "from")) and is_text(field_type(turn, "value"))
