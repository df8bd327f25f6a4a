"""JSON text read as a provider reads it: `strict_loads` refuses what RFC 8259 and the APIs do
not take (NaN, infinities, numbers too large for a double, lone surrogates). Below the formats
and the columnar view, which both read arguments with it."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from transcript_clean.model import is_json

__all__ = ["loads", "strict_loads"]


def loads(text: str) -> Any:
    """`json.loads(text)`, faster: orjson parses what it can (strict JSON, the common case) and
    the standard library the rest (NaN, huge integers, lone surrogates), so the result and the
    errors are `json.loads`'s."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def strict_loads(text: str) -> Any:
    """`loads`, but only for JSON as RFC 8259 and the providers' APIs read it: `NaN`,
    `Infinity`, a number too large for a double (`1e999`) and a lone surrogate escape
    (`"\\ud800"`) raise `ValueError`, where `json.loads` accepts them."""
    try:
        return orjson.loads(text)  # strict already: it refuses all of these
    except orjson.JSONDecodeError:
        pass
    value = json.loads(text, parse_constant=_not_json, parse_float=_finite_float)
    if not is_json(value):
        raise ValueError("a string holds a lone surrogate")
    return value


def _not_json(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"{text} is too large for a double")
    return number
