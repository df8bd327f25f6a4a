"""JSON text read as a provider reads it: `strict_loads` refuses what RFC 8259 and the APIs do
not take (NaN, infinities, numbers too large for a double, lone surrogates). Below the formats
and the columnar view, which both read arguments with it.

orjson reads an integer outside [-2**63, 2**64) as a float, where `json.loads` keeps it exact
(`18446744073709551616`, a 20-digit id written as a number). Every such integer has at least 19
digits, so text with a run of 19 digits (`LONG_DIGITS`, `has_long_digits`) is read by the
standard library: an id in a string costs the slower parse, never a wrong value. `orjson_loads`
is orjson for the readers that go to a slower reader of their own where it fails; over a whole
column, `columnar.arrays.long_digits` finds the same runs with no Python per text."""

from __future__ import annotations

import json
import math
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Final

import orjson

from transcript_clean.model import is_json

__all__ = [
    "DUMPED_NUMBER",
    "LONG_DIGITS",
    "dumps",
    "has_long_digits",
    "loads",
    "orjson_loads",
    "strict_loads",
]

LONG_DIGITS: Final = "[0-9]{19}"
"""A run of digits as long as the shortest integer orjson reads as a float (-2**63 - 1): text
without one, orjson reads as `json.loads` does."""
DUMPED_NUMBER: Final = (
    r"(?:0|-?[1-9][0-9]{0,17}"
    r"|-?[1-9][0-9]{0,6}\.(?:0|[0-9]{0,6}[1-9])"
    r"|-?0\.(?:0|0{0,3}[1-9](?:[0-9]{0,5}[1-9])?))"
)
"""A JSON number that `json.dumps` writes again as it is, read and written back: an integer of
at most 18 digits (no run of `LONG_DIGITS`) without a sign on zero, or a decimal that
`float.__repr__` writes as it is (at most 7 digits before the point and 7 significant digits
after it, no trailing zero but in `.0`, none below 0.0001, no exponent). What the column
readers of values `json.dumps` wrote prove a value by (`formats.sharegpt.lists`,
`formats.hermes.responses`)."""
_RUN: Final = b"0" * 19
_DIGITS: Final = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
"""Every digit as `0`, every other byte as `.`: a run of `LONG_DIGITS` becomes `_RUN`."""


def has_long_digits(text: str | bytes | memoryview) -> bool:
    """Whether `text` holds a run of `LONG_DIGITS`. Per text, where there is no column to look
    at once (`columnar.arrays.long_digits`): its bytes mapped by one `translate` and searched,
    about 1 ns a byte and 0.35 us a short text (Python's `re` took 30 times as long)."""
    if isinstance(text, str):
        data = text.encode("utf-8", "surrogatepass")
    else:
        data = text if isinstance(text, bytes) else bytes(text)
    return _RUN in data.translate(_DIGITS)


def orjson_loads(text: str | bytes | memoryview) -> Any:
    """`orjson.loads(text)`, which raises `orjson.JSONDecodeError` for text holding a run of
    `LONG_DIGITS` too: what orjson reads, it then reads as `json.loads` does."""
    if has_long_digits(text):
        raise orjson.JSONDecodeError("a long run of digits: not read by orjson", "", 0)
    return orjson.loads(text)


def loads(text: str) -> Any:
    """`json.loads(text)`, faster: orjson parses what it reads exactly (strict JSON without a
    long run of digits, the common case) and the standard library the rest (NaN, huge integers,
    lone surrogates), so the result and the errors are `json.loads`'s."""
    try:
        return orjson_loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def strict_loads(text: str | bytes) -> Any:
    """`loads`, but only for JSON as RFC 8259 and the providers' APIs read it: `NaN`,
    `Infinity`, a number too large for a double (`1e999`) and a lone surrogate escape
    (`"\\ud800"`) raise `ValueError`, where `json.loads` accepts them; an integer of any size
    is read exactly, as `json.loads` reads it."""
    try:
        return orjson_loads(text)  # strict already: it refuses all of these
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
