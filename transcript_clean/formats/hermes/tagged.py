"""Hermes' tagged turns read as its decoder reads them, for the flattener: a gpt turn's
reasoning, text and calls (`read_gpt`), a tool turn's results (`read_tool`).

The common layout is read over the whole column at once: the values split at their tags
(`split_pattern`), each piece stripped as `str.strip()` strips (`utf8_trim` with the characters
it takes off), then each body parsed by orjson. It is a layout in which the decoder's pattern
can only pair the tags as the split does:

- a gpt turn: white space, at most one `<think>...</think>`, text, then `<tool_call>...
  </tool_call>` blocks, each holding one `</tool_call>` and only white space after it, each
  a strict JSON object with a name;
- a tool turn: `<tool_response>` blocks, each holding one `</tool_response>` (text outside
  them is dropped, as the decoder drops it), or none and a value that is one body; each body
  either not `{...}` or strict JSON;
- no body holds a run of 19 digits (`jsontext.LONG_DIGITS`): an integer orjson may read as a
  float.

Any other turn is read one at a time with the decoder's own readers (`values.py`), the truth;
property tests hold the two equal on drawn values. The bodies are parsed one by one: a JSON
array of them all, parsed once, could pair a body that is no JSON value with the next into
values that look right.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean import jsontext
from transcript_clean.columnar.arrays import (
    Counts,
    Mask,
    as_mask,
    indices,
    list_sizes,
    long_digits,
    rows_with,
)
from transcript_clean.columnar.tags import tag_counts
from transcript_clean.formats.base import DecodeError, IdMinter, parse_arguments
from transcript_clean.formats.calls import Call, read_calls
from transcript_clean.formats.fields import arguments_json
from transcript_clean.formats.hermes.responses import common_responses
from transcript_clean.formats.hermes.values import (
    assistant_parts,
    assistant_tags,
    read_responses,
    response,
)
from transcript_clean.model import Reasoning, ReasoningText, Text, ToolCall, is_json

__all__ = ["GptTurns", "ToolTurns", "read_gpt", "read_tool", "stripped"]

# Every character `str.strip()` takes off (`str.isspace()`: none is above U+3000).
WHITE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())


def stripped(texts: pa.Array) -> pa.Array:
    """Each text as `str.strip()` leaves it."""
    return pc.utf8_trim(texts, WHITE)


def _blank(texts: pa.Array) -> Mask:
    return as_mask(pc.equal(pc.binary_length(stripped(texts)), 0))


_Call = tuple[str, str | None, bool, bool]
_Gpt = tuple[list[str], str | None, list[_Call]]


@dataclass(slots=True, frozen=True)
class GptTurns:
    """What tagged gpt turns say: the turns the decoder cannot read, and per part its turn
    (in turn order, each turn's parts in its order) and what it holds."""

    unread: Counts
    read: Counts
    text_turn: Counts  # a text part, also an empty one (a turn of nothing else)
    text: pa.Array
    reason_turn: Counts
    reason: pa.Array
    call_turn: Counts
    call_name: pa.Array
    call_arguments: pa.Array  # JSON text, null where JSON cannot write them
    call_object: Mask  # whether the arguments are a JSON object as the decoder reads them
    call_same: Mask  # whether the encoder finds the call as it was (`_call`)


@dataclass(slots=True, frozen=True)
class ToolTurns:
    """The results of tool turns: the turns whose results Arrow cannot hold (a lone surrogate
    a JSON escape wrote: the per-row path's), and per result its turn (in order) and its text."""

    unread: Counts
    turn: Counts
    text: pa.Array


def _split(texts: pa.Array, tag: str) -> tuple[pa.Array, pa.Array, Counts]:
    """Each text's head, before its first `tag`; the pieces after each `tag`, and each
    piece's text."""
    split = pc.split_pattern(texts, tag)
    sizes = list_sizes(split)
    pieces = pc.list_flatten(split)
    owner = np.repeat(np.arange(len(texts), dtype=np.int64), sizes)
    head = np.zeros(len(pieces), dtype=bool)
    head[np.cumsum(sizes) - sizes] = True
    after = np.flatnonzero(~head)
    return pieces.filter(pa.array(head)), pieces.take(indices(after)), owner[after]


def _halves(texts: pa.Array, tag: str) -> tuple[pa.Array, pa.Array, Mask]:
    """Each text before and after its one `tag` (large strings), and the texts that hold it
    not exactly once (their halves are no answer)."""
    split = pc.split_pattern(texts.cast(pa.large_string()), tag)
    sizes = list_sizes(split)
    pieces = pc.list_flatten(split)
    first = np.cumsum(sizes) - sizes
    odd = sizes != 2
    second = np.where(odd, first, first + 1)
    return pieces.take(indices(first)), pieces.take(indices(second)), odd


def _in_order(turns: list[Counts]) -> tuple[Counts, Counts]:
    """The turns of several reads end to end, and the order that sorts them (stably)."""
    joined = np.concatenate(turns).astype(np.int64)
    return joined, np.argsort(joined, kind="stable")


def read_gpt(value: pa.Array, at: Counts) -> GptTurns:
    """The tagged gpt turns at `at` (of the column's turn values `value`, none null)."""
    texts = value.take(indices(at))
    # Each call's piece holds one `</tool_call>` (`_halves`); a `</tool_call>` before the
    # first `<tool_call>` is text to the decoder as it is here.
    # A `</think>` is text where no `<think>` opens, as it is to the decoder; one `<think>`
    # must close in the head, before the first call (`_halves`).
    (thinks,) = tag_counts(texts, "<think>")
    common = thinks <= 1
    fast = np.flatnonzero(common)
    shown = texts.take(indices(fast))
    heads, calls, call_of = _split(shown, "<tool_call>")
    bad = np.zeros(len(fast), dtype=bool)

    # The head: white space, a `<think>` block, then the text, or the text alone.
    thinking = np.flatnonzero(thinks[fast] == 1)
    plain = np.flatnonzero(thinks[fast] == 0)
    ends = _halves(heads.take(indices(thinking)), "</think>")
    starts = _halves(ends[0], "<think>")
    bad[thinking] |= ends[2] | starts[2] | ~_blank(starts[0])
    thought = stripped(starts[1])
    head_turn, order = _in_order([thinking, plain])
    head_text = stripped(
        pa.concat_arrays([ends[1], heads.take(indices(plain)).cast(pa.large_string())])
    ).take(indices(order))
    head_turn = head_turn[order]

    # The calls: one strict JSON object each, with only white space after it, and no long run
    # of digits (an integer orjson may read as a float: the decoder's reader reads it exactly).
    bodies, gaps, odd = _halves(calls, "</tool_call>")
    bad |= rows_with(odd | ~_blank(gaps), call_of, len(fast))
    # Read over the column where a body is one call in the common layout (`formats.calls`),
    # else by `_json_call`: each body read holds one call, in body order.
    bodies = stripped(bodies)
    found = read_calls(bodies, _one_call)
    failed = ~found.read | long_digits(bodies)
    bad |= rows_with(failed, call_of, len(fast))

    ok = ~bad
    keep_call = ok[call_of]
    kept = np.flatnonzero(keep_call[found.value])
    good = _CallColumns(
        found.name.take(indices(kept)),
        found.arguments.take(indices(kept)),
        found.object[kept],
    )
    # A turn of calls or reasoning alone has no text part; one of nothing says "".
    alone = (np.bincount(call_of, minlength=len(fast)) == 0) & (thinks[fast] == 0)
    spoken = pc.utf8_length(head_text).to_numpy(zero_copy_only=False) > 0
    spoken = ok[head_turn] & (spoken | alone[head_turn])
    reasoned = ok[thinking]
    parts = _Parts()
    parts.add_fast(
        texts=(at[fast[head_turn[spoken]]], head_text.filter(pa.array(spoken))),
        reasons=(
            at[fast[thinking[reasoned]]],
            thought.filter(pa.array(reasoned)),
        ),
        calls=(at[fast[call_of[keep_call]]], good),
    )

    # Every other turn, one at a time, with the decoder's readers.
    slow = np.sort(np.concatenate([np.flatnonzero(~common), fast[bad]]))
    for turn, text in zip(at[slow].tolist(), texts.take(indices(slow)).to_pylist(), strict=True):
        parts.add_slow(turn, _read_gpt(text))
    return parts.gpt_turns(at)


def _one_call(body: str) -> list[Call] | None:
    """A `<tool_call>` body's one call as `_json_call` reads it (the encoder finds every call it
    reads as it was), for `read_calls`."""
    call = _json_call(body)
    return None if call is None else [call[:3]]


def _json_call(body: str) -> tuple[str, str | None, bool, bool] | None:
    """A `<tool_call>` body that is a strict JSON object with a name, read as `assistant_parts`
    reads it (`_call`); None for any other (not an answer: the decoder's reader decides)."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    given = obj.get("arguments")
    if isinstance(given, str):
        # Arguments as JSON text: the text as it is, an object where it reads as one strictly.
        parsed, raw = parse_arguments(given)
        return obj["name"], raw, isinstance(parsed, dict), True
    # orjson refuses NaN, infinities and lone surrogates: what it reads JSON can write.
    return obj["name"], orjson.dumps(given).decode(), isinstance(given, dict), True


@dataclass(slots=True, frozen=True)
class _CallColumns:
    """Calls read over the column: per call its name, its arguments' JSON text and whether
    they are an object (`formats.calls.Calls`)."""

    name: pa.Array
    arguments: pa.Array
    object: Mask


class _Parts:
    """The parts of gpt turns read fast (as arrays) and one at a time, put in turn order."""

    def __init__(self) -> None:
        self.unread: list[int] = []
        self.read: list[int] = []
        self.text_turn: list[Counts] = []
        self.text: list[pa.Array] = []
        self.reason_turn: list[Counts] = []
        self.reason: list[pa.Array] = []
        self.call_turn: list[Counts] = []
        self.fast_calls: list[_CallColumns] = []
        self.calls: list[_Call] = []
        self.slow_texts: list[tuple[int, str]] = []
        self.slow_reasons: list[tuple[int, str]] = []
        self.slow_calls: list[int] = []

    def add_fast(
        self,
        texts: tuple[Counts, pa.Array],
        reasons: tuple[Counts, pa.Array],
        calls: tuple[Counts, _CallColumns],
    ) -> None:
        self.text_turn.append(texts[0])
        self.text.append(texts[1])
        self.reason_turn.append(reasons[0])
        self.reason.append(reasons[1])
        self.call_turn.append(calls[0])
        self.fast_calls.append(calls[1])

    def add_slow(self, turn: int, read: _Gpt | None) -> None:
        if read is None or not all(is_json(c[0]) for c in read[2]):
            self.unread.append(turn)
            return
        reasons, words, calls = read
        self.read.append(turn)
        self.slow_reasons.extend((turn, r) for r in reasons)
        if words is not None:
            self.slow_texts.append((turn, words))
        self.slow_calls.extend([turn] * len(calls))
        self.calls.extend(calls)

    def gpt_turns(self, at: Counts) -> GptTurns:
        text_turn, text = _ordered(self.text_turn, self.text, self.slow_texts)
        reason_turn, reason = _ordered(self.reason_turn, self.reason, self.slow_reasons)
        call_turn, order = _in_order([*self.call_turn, np.array(self.slow_calls, np.int64)])
        # The calls read fast as columns, then those read one at a time: every fast call is as
        # the encoder finds it (`_json_call`).
        fast, slow = self.fast_calls, self.calls
        names = pa.concat_arrays(
            [*(c.name for c in fast), pa.array([c[0] for c in slow], pa.string())]
        )
        arguments = pa.concat_arrays(
            [*(c.arguments for c in fast), pa.array([c[1] for c in slow], pa.string())]
        )
        objects = np.concatenate([*(c.object for c in fast), np.array([c[2] for c in slow], bool)])
        same = np.concatenate(
            [*(np.ones(len(c.object), bool) for c in fast), np.array([c[3] for c in slow], bool)]
        )
        unread = np.array(self.unread, dtype=np.int64)
        return GptTurns(
            unread=unread,
            read=np.setdiff1d(at, unread),
            text_turn=text_turn,
            text=text,
            reason_turn=reason_turn,
            reason=reason,
            call_turn=call_turn[order],
            call_name=names.take(indices(order)),
            call_arguments=arguments.take(indices(order)),
            call_object=objects[order],
            call_same=same[order],
        )


def _ordered(
    turns: list[Counts], texts: list[pa.Array], slow: list[tuple[int, str]]
) -> tuple[Counts, pa.Array]:
    """Texts read fast (by turn) and one at a time, in turn order."""
    turn, order = _in_order([*turns, np.array([t for t, _ in slow], dtype=np.int64)])
    text = pa.concat_arrays([*texts, pa.array([s for _, s in slow], pa.large_string())])
    return turn[order], text.take(indices(order))


def read_tool(value: pa.Array, at: Counts) -> ToolTurns:
    """The results of the tool turns at `at` (values holding `<tool_response>` or a `{...}`
    body; `value` the column's turn values, none null)."""
    texts = value.take(indices(at))
    # Text outside the tags is no result, and a `</tool_response>` before the first
    # `<tool_response>` closes none: the decoder reads one body per piece after an opening tag,
    # or the whole value where there is none.
    _, pieces, piece_of = _split(texts, "<tool_response>")
    opens = np.bincount(piece_of, minlength=len(at))
    tagged, whole = np.flatnonzero(opens), np.flatnonzero(opens == 0)
    piece_of = np.searchsorted(tagged, piece_of)
    found, _, odd = _halves(pieces, "</tool_response>")
    bad = np.zeros(len(at), dtype=bool)
    bad[tagged] |= rows_with(odd, piece_of, len(tagged))
    body_turn = np.concatenate([whole, tagged[piece_of]])
    bodies = stripped(pa.concat_arrays([texts.take(indices(whole)).cast(pa.large_string()), found]))

    # A `{...}` body is parsed: in the common layout over the column (`common_responses`),
    # else strict JSON without a long run of digits here, anything else by the decoder's reader.
    braced = as_mask(pc.starts_with(bodies, "{"))
    common, _, contents = common_responses(bodies.filter(pa.array(braced)))
    read = np.zeros(len(bodies), dtype=bool)
    read[np.flatnonzero(braced)[common]] = True
    braced &= ~read
    unparsed = braced & long_digits(bodies)
    braced &= ~unparsed
    said: list[str] = []
    at_braced = np.flatnonzero(braced).tolist()
    for k, body in zip(at_braced, bodies.filter(pa.array(braced)).to_pylist(), strict=True):
        try:
            said.append(response(body, orjson.loads(body))[1])
        except orjson.JSONDecodeError:
            unparsed[k] = True
            said.append(body)
    bad[body_turn[unparsed]] = True
    if len(contents):
        bodies = pc.replace_with_mask(bodies, pa.array(read), contents.cast(bodies.type))
    if said:
        bodies = pc.replace_with_mask(bodies, pa.array(braced), pa.array(said, bodies.type))
    keep = ~bad[body_turn]
    slow = np.flatnonzero(bad)
    slow_turn: list[int] = []
    slow_text: list[str] = []
    unread: list[int] = []
    for turn, text in zip(at[slow].tolist(), texts.take(indices(slow)).to_pylist(), strict=True):
        found_texts = [t for _, t in read_responses(text)]
        if not all(is_json(t) for t in found_texts):
            unread.append(turn)
            continue
        slow_turn.extend([turn] * len(found_texts))
        slow_text.extend(found_texts)
    turn, order = _in_order([at[body_turn[keep]], np.array(slow_turn, dtype=np.int64)])
    text = pa.concat_arrays(
        [bodies.filter(pa.array(keep)), pa.array(slow_text, pa.large_string())]
    ).take(indices(order))
    return ToolTurns(np.array(unread, dtype=np.int64), turn[order], text)


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
    (what orjson reads, `literal` reads alike) and no long run of digits (an integer orjson may
    read as a float); None for anything else (not an answer: the decoder's reader then
    decides)."""
    if jsontext.has_long_digits(text):
        return None
    reasons: list[str] = []
    calls: list[_Call] = []
    tags, words = assistant_tags(text)
    for tag, body in tags:
        if tag == "think":
            reasons.append(body)
            continue
        call = _json_call(body)
        if call is None:
            return None
        calls.append(call)
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
