"""Hermes' `<tool_response>` bodies read over the column (`formats/hermes/responses.py`) held to
the codec's reader of one body (`values.read_responses`): the same name and content text for
every body it reads, and every body of the common layout read."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_leaves, json_values

from transcript_clean.formats.hermes.responses import common_responses
from transcript_clean.formats.hermes.values import read_responses
from transcript_clean.jsontext import DUMPED_NUMBER

# Leaves of any kind: NaN and infinities (json writes them, orjson refuses them), numbers past
# 64 bits and long runs of digits, floats `repr` writes with an exponent, escapes, unicode.
_leaves = json_leaves(
    st.floats(-1e7, 1e7).map(lambda f: round(f, 3)),
    st.sampled_from(
        [math.nan, math.inf, 1e16, 1e-05, 0.0001, -0.0, 0.1, 1234567.1234567, 12345678.5, 10**400]
    ),
    st.text(max_size=4),
    st.sampled_from(
        ['a"b', "\\", "é\n", "\x00", "\x7f", "\u2028", "😀", "a/b", "12345678901234567890", "x, "]
    ),
)
_values = json_values(_leaves)
_keys = st.one_of(
    st.sampled_from(["city", "n", "", "name", "content", 'k"y', "é", "x, ", ", "]),
    st.text(max_size=3),
)
_flat = st.dictionaries(_keys, _leaves, max_size=4)
_names = st.one_of(st.sampled_from(["f", "get_weather", 'a"b', "\\", "é", ""]), st.text(max_size=3))


def _dumps(value: Any, ascii_only: bool, compact: bool) -> str:
    separators = (",", ":") if compact else None
    return json.dumps(value, ensure_ascii=ascii_only, separators=separators)


_response = st.builds(
    lambda name, content: {"name": name, "content": content},
    st.one_of(_names, _names, _leaves),
    st.one_of(_flat, _flat, _values, _leaves),
)
_edits = st.sampled_from([" ", "\n", '"', "\\", "{", "}", ",", ":", "0", ".", "e", "-", "\t"])


@st.composite
def _body(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0:  # the common layout with any text where the content stands
        content = draw(st.text(alphabet='{}[]":,. \\\n\tu0123456789abdefDElnrstu+-é', max_size=24))
        return '{"name": "f", "content": ' + content + "}"
    if kind == 1:
        return draw(
            st.sampled_from(
                [
                    '{"name": "f", "content": {"a": 1, "a": 2}}',  # a key twice: its last value
                    '{"name": "f", "content": {"a": 1, "b": 2, "a": 3}}',
                    '{"name": "f", "content": {"a": 1, "ab": 2}}',
                    '{"name": "f", "content": {"a": "x\\", \\"a\\": 1"}}',
                    '{"name": "f", "content": {"x": 1.50}}',
                    '{"name": "f", "content": {"x": 1E2}}',
                    '{"name": "f", "content": {"x": -0}}',
                    '{"name": "f", "content": {"x": 0.00001}}',
                    '{"name": "f", "content": {"x": 1.0e5}}',
                    '{"name": "f", "content": {"x": "a\\/b"}}',
                    '{"name": "f", "content": {"x": "\\u00e9"}}',
                    '{"name": "f", "content": {"x": "tab\tx"}}',  # a Python literal, not JSON
                    '{"name": "f", "content": {"x": NaN}}',
                    '{"name": "f", "content": {"x": 123456789012345678901}}',
                    '{"name": "f", "content": "say \\"hi\\""}',
                    '{"name": "f", "content": "x", "extra": 1}',
                    "{'name': 'f', 'content': {'x': 1}}",
                    '{"name": "f", "content": {"x": 1}',
                    '{"name": "f"}',
                ]
            )
        )
    body = _dumps(draw(_response), draw(st.booleans()), kind == 2 and draw(st.booleans()))
    if kind == 3:  # something out of the layout, anywhere
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(_edits) + body[at:]
    return body.strip()


def _read(bodies: list[str], large: bool = True) -> list[tuple[str | None, str] | None]:
    fast, names, contents = common_responses(
        pa.array(bodies, pa.large_string() if large else pa.string())
    )
    read = iter(zip(names.to_pylist(), contents.to_pylist(), strict=True))
    out = [next(read) if f else None for f in fast.tolist()]
    assert next(read, None) is None
    return out


def _truth(body: str) -> tuple[str | None, str]:
    found = read_responses(f"<tool_response>{body}</tool_response>")
    assert len(found) == 1
    return found[0]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_body(), min_size=1, max_size=8))
def test_bodies_read_over_the_column_are_read_as_the_codec_reads_each(bodies: list[str]) -> None:
    for body, read in zip(bodies, _read(bodies), strict=True):
        if read is not None:
            assert read == _truth(body), body


# What the column read must read itself: a body as `json.dumps` writes it, whose content is a
# flat object of keys without escapes, short numbers written as `repr` writes them, and strings
# with no character the encoder writes as `\u00XX`; or a string without escapes. A key or
# string that ends in `, ` may part an object in one piece more than it has keys, which
# `_repeated_keys` reads as "may repeat a key": such objects are left to the rest.
_plain = st.characters(
    blacklist_categories=("Cs",), blacklist_characters='"\\' + "".join(map(chr, range(32)))
)
_said = st.characters(
    blacklist_categories=("Cs",),
    blacklist_characters=[chr(c) for c in range(32) if chr(c) not in "\b\f\n\r\t"],
)


def _short(number: float) -> bool:
    whole, _, fraction = repr(abs(number)).partition(".")
    return "e" not in repr(number) and len(whole) <= 7 and len(fraction) <= 7


_common_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**18) + 1, 10**18 - 1),
    st.floats(allow_nan=False, allow_infinity=False).filter(_short),
    st.floats(-1e6, 1e6).map(lambda f: round(f, 4)).filter(_short),
    st.text(st.one_of(_said, st.sampled_from(list('\b\f\n\r\t"\\/'))), max_size=6),
    st.sampled_from(['a"b', "\\", "x\ty", "\b\f\n\r", "a/b", "é😀", "\x7f\u2028"]),
)
_common = st.builds(
    lambda name, content: json.dumps({"name": name, "content": content}, ensure_ascii=False),
    st.text(_plain, max_size=6),
    st.one_of(
        st.dictionaries(st.text(_plain, max_size=4), _common_leaves, max_size=5).filter(
            lambda d: not any(str(t).endswith(", ") for t in [*d, *d.values()])
        ),
        st.text(_plain, max_size=8),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_common, min_size=1, max_size=8))
def test_bodies_in_the_common_layout_are_all_read_over_the_column(bodies: list[str]) -> None:
    assert _read(bodies) == [_truth(b) for b in bodies]


def _keyed(keys: Iterable[int]) -> str:
    pairs = ", ".join(f'"k{k}": {k}' for k in keys)
    return '{"name": "f", "content": {' + pairs + "}}"


@pytest.mark.parametrize(
    ("body", "fast"),
    [
        ('{"name": "f", "content": {"t": 18, "ok": true, "x": null, "s": "a\\nb"}}', True),
        ('{"name": "f", "content": {}}', True),
        ('{"name": "f", "content": {"s": "q\\"b\\\\s\\b\\f\\n\\r\\t/"}}', True),
        ('{"name": "f", "content": "18 C"}', True),
        ('{"name": "f", "content": {"x": 907.2, "y": -0.0, "z": 0.0001}}', True),
        ('{"name": "f", "content": {"a": 1, "a": 2}}', False),  # a key twice
        ('{"name": "f", "content": {"x": 0.00001}}', False),  # repr writes 1e-05
        ('{"name": "f", "content": {"x": -0}}', False),  # json writes 0
        ('{"name": "f", "content": {"x": [1]}}', False),  # nested
        ('{"name": "f", "content": "a\\"b"}', False),  # a string with an escape
        ('{"name": "f", "content": {"x": "\\u00e9"}}', False),  # json writes é
        ('{"name":"f","content":{}}', False),  # compact
        ('{"name": "f", "content": {"a": "x, ", "b": 1}}', True),
        ('{"name": "f", "content": {"a": "x, ", "a": 1}}', False),  # a key twice, parted more
        ('{"name": "f", "content": {"x, ": 1, "x, ": 2}}', False),
        ('{"name": "f", "content": {"x, ": 1, "x": 2}}', False),  # may repeat: left to the rest
        (_keyed(range(16)), True),
        (_keyed([*range(15), 0]), False),  # the first key again, last
        (_keyed(range(17)), False),  # more keys than are compared
    ],
)
def test_the_common_layout_is_told_in_arrow(body: str, fast: bool) -> None:
    for large in (False, True):
        read = _read(["x", body], large)[1]
        assert (read is not None) == fast
        if fast:
            assert read == _truth(body)


@given(st.from_regex(DUMPED_NUMBER, fullmatch=True).filter(lambda number: "." in number))
def test_a_number_with_a_fraction_read_in_arrow_is_as_repr_writes_it(text: str) -> None:
    assert repr(float(text)) == text
    assert _read(['{"name": "f", "content": {"x": ' + text + "}}"]) == [
        ("f", '{"x": ' + text + "}")
    ]
