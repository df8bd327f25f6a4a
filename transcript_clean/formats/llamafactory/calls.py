"""LLaMA-Factory v1's `tool_call` values read over the whole column, as its decoder reads them:
those in the common layout in Arrow (`formats.calls`), any other one by one by `_call`."""

from __future__ import annotations

import orjson
import pyarrow as pa

from transcript_clean.formats.base import DecodeError
from transcript_clean.formats.calls import Call, Calls
from transcript_clean.formats.calls import read_calls as read_call_column
from transcript_clean.formats.fields import arguments_json
from transcript_clean.formats.llamafactory.values import read_call
from transcript_clean.jsontext import orjson_loads
from transcript_clean.model import is_json

__all__ = ["read_calls"]


def read_calls(texts: pa.Array) -> Calls:
    """The `tool_call` values `texts` (none null) read as `_call` reads each: one call a value
    read."""
    return read_call_column(texts, _one)


def _one(text: str) -> tuple[Call] | None:
    found = _call(text)
    return None if found is None else (found,)


def _call(text: str) -> Call | None:
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


def _read_call(text: str) -> Call | None:
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
