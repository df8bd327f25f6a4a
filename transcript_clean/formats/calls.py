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
copy, and every reader of it parses it. Any other value (a list of calls, nested arguments, no
JSON) is read one by one by the format's reader.

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

__all__ = ["Call", "Calls", "common_calls", "read_calls"]

Call = tuple[str, str | None, bool]
"""A call as a format's reader of one value gives it: the tool's name, its arguments as JSON
text (None where JSON cannot write them), and whether they are a JSON object."""

_WS: Final = "[ \t\n\r]*"  # JSON's white space (RE2's \s also takes \f and \v)
_ESCAPE: Final = r'\\(?:["\\/bfnrt]|u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))'
_STRING: Final = rf'"(?:[^"\\\x00-\x1f]|{_ESCAPE})*"'
_NUMBER: Final = r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,17})?(?:[eE][+-]?[0-9]{1,2})?"
_PAIR: Final = rf"{_WS}{_STRING}{_WS}:{_WS}(?:{_STRING}|{_NUMBER}|true|false|null){_WS}"
_FLAT: Final = rf"\{{(?:{_PAIR}(?:,{_PAIR})*|{_WS})\}}"
_COMMON: Final = rf'^\{{"name": "[^"\\\x00-\x1f]*", "arguments": {_FLAT}\}}$'
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


def read_calls(texts: pa.Array, each: Callable[[str], Sequence[Call] | None]) -> Calls:
    """The call values `texts` (none null) read as `each` reads one value: its calls, or None
    where the decoder does not read it. A value in the common layout is read in Arrow."""
    fast, fast_names, fast_arguments = common_calls(texts)
    names_type = fast_names.type
    slow = np.flatnonzero(~fast)
    found = [each(text) for text in texts.take(indices(slow)).to_pylist()]
    count = fast.astype(np.int64)
    count[slow] = [len(f) if f is not None else 0 for f in found]
    kept = [call for f in found if f is not None for call in f]
    at = np.concatenate([np.flatnonzero(fast), np.repeat(slow, count[slow])])
    order = np.argsort(at, kind="stable")
    names = pa.concat_arrays([fast_names, pa.array([c[0] for c in kept], names_type)])
    arguments = pa.concat_arrays([fast_arguments, pa.array([c[1] for c in kept], names_type)])
    objects = np.array([True] * len(fast_names) + [c[2] for c in kept], dtype=bool)
    return Calls(
        count > 0,
        count,
        at[order],
        names.take(indices(order)).cast(pa.string()),
        arguments.take(indices(order)).cast(pa.string()),
        objects[order],
    )


def common_calls(texts: pa.Array) -> tuple[Mask, pa.Array, pa.Array]:
    """Per value of `texts` (none null), whether it is in the common layout (the module's
    docstring), and the name and arguments' text of each such value, in order."""
    fast = as_mask(pc.match_substring_regex(texts, _COMMON))
    halves = pc.split_pattern(texts.filter(pa.array(fast)), _NAME_ENDS, max_splits=1)
    names = pc.utf8_slice_codeunits(pc.list_element(halves, 0), len('{"name": "'))
    arguments = pc.utf8_slice_codeunits(pc.list_element(halves, 1), 0, -1)
    return fast, names, arguments
