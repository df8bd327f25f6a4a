"""Call values held as JSON text, `{"name": "...", "arguments": {...}}` (LLaMA-Factory v1's
`tool_call` items, ShareGPT's `function_call` turns), read over the whole column, as each
format's decoder reads them.

A value in the common layout, one call as `json.dumps` writes it, with a name without escapes
and flat arguments (each key's value a string, a number, true, false or null), is read in Arrow:
one regular expression proves the whole value strict JSON that orjson reads, and splitting it at
`", "arguments": ` gives its name and its arguments' text. For such a value the format's own
reader of one value (the truth: it reads as the decoder reads) gives one call with the same
name, object arguments, and arguments text that reads as the same value; the text is the
source's (`Conversations.call_arguments`: "as the source holds them"), not orjson's compact
copy, and every reader of it parses it. Where the format's decoder reads a list of calls as its
calls (ShareGPT's parallel calls), a list of calls in the common layout whose strings hold no
brace is read in Arrow too (`_LIST`): every brace is then JSON's own, so `}, {` parts two calls.
Any other value (nested arguments, a brace in a list's string, no JSON) is read one by one by
the format's reader.

The expression is JSON's own grammar for such values, narrowed to what orjson reads: no `\\u`
escape of a surrogate (orjson refuses a lone one; a value with a pair is the reader's), integer
and fraction parts of at most 18 and 17 digits (no run of `jsontext.LONG_DIGITS`: no integer
orjson reads as a float) and exponents of at most 2 (no number orjson reads as infinite). Nested
arguments are left to the reader: a regular expression cannot match brackets, and a JSON array
of all the values parsed once is not exact by itself (docs/performance.md, Hermes: a value that
is no JSON can pair with the next). Counting each value's brackets outside its strings in Arrow,
then parsing the joined arguments once, was tried: on the generated rows those checks cost more
than the 1 µs a value costs LLaMA-Factory's reader.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Counts, Mask, as_mask, indices

__all__ = ["Call", "Calls", "common_calls", "list_calls", "read_calls"]

Call = tuple[str, str | None, bool]
"""A call as a format's reader of one value gives it: the tool's name, its arguments as JSON
text (None where JSON cannot write them), and whether they are a JSON object."""

_WS: Final = "[ \t\n\r]*"  # JSON's white space (RE2's \s also takes \f and \v)
_ESCAPE: Final = r'\\(?:["\\/bfnrt]|u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))'
_NUMBER: Final = r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?(?:[eE][+-]?[0-9]{1,2})?"


def _call(char: str) -> str:
    """One call in the common layout, its strings' characters (unescaped) those of `char`."""
    string = rf'"(?:{char}|{_ESCAPE})*"'
    pair = rf"{_WS}{string}{_WS}:{_WS}(?:{string}|{_NUMBER}|true|false|null){_WS}"
    flat = rf"\{{(?:{pair}(?:,{pair})*|{_WS})\}}"
    return rf'\{{"name": "{char}*", "arguments": {flat}\}}'


_COMMON: Final = "^" + _call(r'[^"\\\x00-\x1f]') + "$"
_BRACELESS: Final = _call(r'[^"\\\x00-\x1f{}]')
_LIST: Final = rf"^\[{_BRACELESS}(?:, {_BRACELESS})*\]$"
"""A list of calls (ShareGPT's parallel calls) as `json.dumps` writes it, each call in the common
layout and no string holding a brace: a brace is then JSON's own, and `}, {` parts two calls."""
_NAME_ENDS: Final = '", "arguments": '


@dataclass(slots=True, frozen=True)
class Calls:
    """Call values read: per value, whether it was read (the reader gives None for the others:
    the decoder calls such a value malformed) and how many calls it holds; per call, in order
    (a value's calls together, values in order), the value it came from, its name, its
    arguments' JSON text (null where JSON cannot write them) and whether they are an object."""

    read: Mask
    count: Counts
    value: Counts
    name: pa.Array
    arguments: pa.Array
    object: Mask


def read_calls(
    texts: pa.Array, each: Callable[[str], Sequence[Call] | None], *, lists: bool = False
) -> Calls:
    """The call values `texts` (none null) read as `each` reads one value: its calls, or None
    where the decoder does not read it. A value holding one call in the common layout is read in
    Arrow, and with `lists` (a format whose decoder reads a list of calls as its calls), a list
    of such calls whose strings hold no brace (`_LIST`)."""
    one, one_names, one_arguments = common_calls(texts)
    rest = np.flatnonzero(~one)
    if lists and len(rest):
        listed, many, many_names, many_arguments = list_calls(texts.take(indices(rest)))
        many_at, slow = rest[listed], rest[~listed]
    else:
        many_at, slow = rest[:0], rest
        many = np.zeros(0, dtype=np.int64)
        many_names = many_arguments = pa.array([], one_names.type)
    names_type = one_names.type
    found = [each(text) for text in texts.take(indices(slow)).to_pylist()]
    count = one.astype(np.int64)
    count[many_at] = many
    count[slow] = [len(f) if f is not None else 0 for f in found]
    kept = [call for f in found if f is not None for call in f]
    at = np.concatenate(
        [np.flatnonzero(one), np.repeat(many_at, many), np.repeat(slow, count[slow])]
    )
    order = np.argsort(at, kind="stable")
    names = pa.concat_arrays([one_names, many_names, pa.array([c[0] for c in kept], names_type)])
    arguments = pa.concat_arrays(
        [one_arguments, many_arguments, pa.array([c[1] for c in kept], names_type)]
    )
    objects = np.ones(len(at), dtype=bool)
    objects[len(at) - len(kept) :] = [c[2] for c in kept]
    return Calls(
        count > 0,
        count,
        at[order],
        names.take(indices(order)).cast(pa.string()),
        arguments.take(indices(order)).cast(pa.string()),
        objects[order],
    )


def common_calls(texts: pa.Array) -> tuple[Mask, pa.Array, pa.Array]:
    """Per value of `texts` (none null), whether it is one call in the common layout (the
    module's docstring), and the name and arguments' text of each such value, in order."""
    fast = as_mask(pc.match_substring_regex(texts, _COMMON))
    halves = pc.split_pattern(texts.filter(pa.array(fast)), _NAME_ENDS, max_splits=1)
    names = pc.utf8_slice_codeunits(pc.list_element(halves, 0), len('{"name": "'))
    arguments = pc.utf8_slice_codeunits(pc.list_element(halves, 1), 0, -1)
    return fast, names, arguments


def list_calls(texts: pa.Array) -> tuple[Mask, Counts, pa.Array, pa.Array]:
    """Per value of `texts` (none null), whether it is a list of calls `_LIST` proves, and how
    many calls each such value holds; the name and arguments' text of each call, in order."""
    fast = as_mask(pc.match_substring_regex(texts, _LIST))
    # `[{"name": "f", "arguments": {...}}, {"name": ...}]` without its first and last two
    # characters, parted at each `}, {`: `"name": "f", "arguments": {...}` a call.
    inner = pc.utf8_slice_codeunits(texts.filter(pa.array(fast)), 2, -2)
    parts = pc.split_pattern(inner, "}, {")
    many = np.asarray(pc.list_value_length(parts).to_numpy(zero_copy_only=False), dtype=np.int64)
    halves = pc.split_pattern(pc.list_flatten(parts), _NAME_ENDS, max_splits=1)
    names = pc.utf8_slice_codeunits(pc.list_element(halves, 0), len('"name": "'))
    return fast, many, names, pc.list_element(halves, 1)
