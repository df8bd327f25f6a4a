"""LLaMA-Factory v1's `tool_call` values read over the whole column, as its decoder reads them.

A value in the common layout, `{"name": "...", "arguments": {...}}` as `json.dumps` writes it,
with a name without escapes and flat arguments (each key's value a string, a number, true, false
or null), is read in Arrow: one regular expression proves the whole value strict JSON that orjson
reads, and splitting it at `", "arguments": ` gives its name and its arguments' text. For such a
value `_call` (the truth: it reads as the decoder reads) gives the same name, an object, and
arguments that orjson reads as the same value; the text is the source's
(`Conversations.call_arguments`: "as the source holds them"), not orjson's compact copy, and
every reader of it parses it. Any other value is read one by one by `_call`.

The expression is JSON's own grammar for such values, narrowed to what orjson reads: no `\\u`
escape of a surrogate (orjson refuses a lone one; a value with a pair is `_call`'s), integer
and fraction parts of at most 18 and 17 digits (no run of `jsontext.LONG_DIGITS`: no integer
orjson reads as a float) and exponents of at most 2 (no number orjson reads as infinite). Nested
arguments are left to `_call`: a regular expression cannot match brackets, and a JSON array of
all the values parsed once is not exact by itself (docs/performance.md, Hermes: a value that is
no JSON can pair with the next). Counting each value's brackets outside its strings in Arrow,
then parsing the joined arguments once, was tried: on the generated rows those checks cost more
than the 1 µs a value costs `_call`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from transcript_clean.columnar.arrays import Mask, as_mask, indices
from transcript_clean.formats.base import DecodeError
from transcript_clean.formats.fields import arguments_json
from transcript_clean.formats.llamafactory.values import read_call
from transcript_clean.jsontext import orjson_loads
from transcript_clean.model import is_json

__all__ = ["Calls", "read_calls"]

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
    """The `tool_call` values read: per value, whether it was read (`_call` gives None for the
    others: the decoder calls such an item malformed), and of those read, in order, the name,
    the arguments' JSON text (null where JSON cannot write them) and whether they are an
    object."""

    read: Mask
    name: pa.Array
    arguments: pa.Array
    object: Mask


def read_calls(texts: pa.Array) -> Calls:
    """The `tool_call` values `texts` (none null) read as `_call` reads each."""
    fast, fast_names, fast_arguments = common_calls(texts)
    names_type = fast_names.type
    slow = np.flatnonzero(~fast)
    found = [_call(text) for text in texts.take(indices(slow)).to_pylist()]
    slow_read = np.array([f is not None for f in found], dtype=bool)
    read = fast.copy()
    read[slow[slow_read]] = True
    kept = [f for f in found if f is not None]
    at = np.concatenate([np.flatnonzero(fast), slow[slow_read]])
    order = np.argsort(at, kind="stable")
    names = pa.concat_arrays([fast_names, pa.array([f[0] for f in kept], names_type)])
    arguments = pa.concat_arrays([fast_arguments, pa.array([f[1] for f in kept], names_type)])
    objects = np.array([True] * len(fast_names) + [f[2] for f in kept], dtype=bool)
    return Calls(
        read,
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


def _call(text: str) -> tuple[str, str | None, bool] | None:
    """A `tool_call` value as the decoder reads it: the tool's name, its arguments as JSON text
    (None where JSON cannot write them), and whether they are a JSON object; None where the
    decoder would call the item malformed."""
    # The common value, strict JSON of an object with a text name and object arguments, is
    # read with one orjson pass (it was parsed twice); any other goes through `_read_call`.
    try:
        data = _loads(text)
    except orjson.JSONDecodeError:
        return _read_call(text)
    if type(data) is dict:
        name, arguments = data.get("name"), data.get("arguments")
        if type(name) is str and type(arguments) is dict:
            try:
                return name, _dumps(arguments).decode(), True
            except (TypeError, orjson.JSONEncodeError):
                pass
    return _read_call(text)


_loads = orjson_loads  # an integer past 64 bits is `_read_call`'s, read exactly
_dumps = orjson.dumps


def _read_call(text: str) -> tuple[str, str | None, bool] | None:
    """`_call` of any value, read through the decoder's own helper."""
    try:
        name, arguments, raw = read_call(text, "")
    except DecodeError:
        return None
    try:
        orjson.loads(text)
        strict = True  # orjson reads strict JSON only: no NaN, no lone surrogate
    except orjson.JSONDecodeError:
        strict = False
    is_object = isinstance(arguments, dict) and (raw is not None or strict or is_json(arguments))
    return name, raw if raw is not None else arguments_json(arguments), is_object
