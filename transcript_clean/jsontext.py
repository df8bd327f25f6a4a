"""JSON text read as a provider reads it: `strict_loads` refuses what RFC 8259 and the APIs do
not take (NaN, infinities, numbers too large for a double, lone surrogates). Below the formats
and the columnar view, which both read arguments with it."""

from __future__ import annotations

import json
import math
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

import orjson

from transcript_clean.model import is_json

__all__ = ["dumps", "loads", "strict_loads"]


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


_ENCODER = json.JSONEncoder(ensure_ascii=False)
_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ": ", ", ", False, False, True
    )
)


def dumps(value: object) -> str:
    """`json.dumps(value, ensure_ascii=False)` for a value that is not a string, made with one
    encoder for all calls: `JSONEncoder.encode` makes its C encoder anew per call, which costs
    as much as the writing (no circular check: a value read from text holds no cycle)."""
    return "".join(_C_ENCODE(value, 0)) if _C_ENCODE is not None else _ENCODER.encode(value)
