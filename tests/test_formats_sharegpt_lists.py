"""Observation lists split over the whole column (`formats.sharegpt.lists`) held to
`split_list`, which splits one value as the decoder does."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from flattened import assert_flattened_as_decoded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_leaves

from transcript_clean.formats import get_format
from transcript_clean.formats.sharegpt.lists import _LIST, split_lists
from transcript_clean.formats.sharegpt.values import split_list

# Leaves that `json.dumps` writes again as they came and leaves it writes otherwise: floats of
# any size and digits, -0, escapes, quotes, braces, colons, white space, big integers.
_leaves = json_leaves(
    st.floats(-1e8, 1e8).map(lambda x: round(x, 3)),
    st.sampled_from([math.nan, 1e16, 1e-5, 1.5e-07, 0.0001, -0.0, 0.1, 123.456, 10**20]),
    st.text(max_size=3),
    st.sampled_from(['a"b', "\\", "é\n", "\x00", "\x7f", ": x", "}, {", "😀", "a/b", '": ']),
)
_objects = st.dictionaries(
    st.one_of(st.sampled_from(["a", "b", "", ":", 'k"', "é"]), st.text(max_size=2)),
    st.one_of(_leaves, st.lists(_leaves, max_size=2)),
    max_size=3,
)
_items = st.lists(st.one_of(_objects, _objects, _objects, _leaves), min_size=1, max_size=4)


def _written(items: list[Any], ascii_: bool, spaced: bool) -> str:
    if spaced:
        return json.dumps(items, ensure_ascii=ascii_)
    return json.dumps(items, ensure_ascii=ascii_, separators=(",", ":"))


_texts = st.one_of(
    st.builds(_written, _items, st.booleans(), st.booleans()),
    st.builds(_written, _items, st.just(False), st.just(True)),
    st.sampled_from(
        [
            '[{"a": 1, "a": 2}, {"b": 1}]',  # a key twice: json.dumps writes it once
            '[{"a": 1}, {"b": 1, "b": 1}]',
            '[{"a": "x", "a": "x"}, {}]',
            '[{"a": 1.50}, {"b": 1}]',  # a trailing zero
            '[{"a": 1e5}, {"b": 1}]',
            '[{"a": -0}, {"b": 0}]',
            '[{"a": 0.00001}, {"b": 1}]',
            '[{"a": 12345678.5}, {"b": 1}]',
            '[{"a": "\\u00e9"}, {"b": "\\/"}]',
            '[{"a": 1},{"b": 2}]',
            ' [{"a": 1}, {"b": 2}]',
            '[{"a": 1}, {"b": 2}] ',
            "[{}, {}]",
            '[{"a": ": b"}, {"c": 1}]',
            '[{"a": 1}, {"b": 2}',
            '[{"a": 1}, {"b": 2}]x',
            "[1, 2]",
            '["a", "b"]',
        ]
    ),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_texts, st.integers(1, 4)), max_size=8))
def test_observation_lists_split_over_the_column_as_split_list_splits_each(
    drawn: list[tuple[str, int]],
) -> None:
    texts = [t for t, _ in drawn]
    counts = np.array([c for _, c in drawn], dtype=np.int64)
    # A count that fits the value too, where the value is a list: most drawn values split.
    for k, text in enumerate(texts):
        if k % 2 and text.startswith("["):
            with contextlib.suppress(ValueError):
                counts[k] = len(json.loads(text)) or 1
    read, items = split_lists(pa.array(texts, pa.string()), counts)
    each = [split_list(t, int(c)) for t, c in zip(texts, counts, strict=True)]
    assert read.tolist() == [found is not None for found in each]
    assert items.to_pylist() == [item for found in each for item in found or ()]
    assert items.type == pa.large_string()


@pytest.mark.parametrize(
    ("text", "fast"),
    [
        ('[{"query": "sourdough", "n": 3}, {"amount": 257, "converted": 277.56}]', True),
        ('[{"a": "é\\n", "b": null, "c": true}, {}]', True),
        ('[{"a": -0.0, "b": 0.0001, "c": 1234567.1234567}, {"d": -12}]', True),
        ('[{"a": 1.50}, {}]', False),  # json.dumps writes 1.5
        ('[{"a": 0.00001}, {}]', False),  # 1e-05
        ('[{"a": -0}, {}]', False),  # 0
        ('[{"a": "\\u00e9"}, {}]', False),  # é
        ('[{"a": "\\"", "b": 1}, {}]', False),  # a quote: keys no longer counted by `": `
        ('[{"a": ": b"}, {}]', False),
        ('[{"a": "}, {"}, {}]', False),  # a brace
        ('[{"a": [1]}, {}]', False),  # not flat
        ('[{"a": 1},{"b": 2}]', False),  # another layout
    ],
)
def test_the_lists_json_dumps_writes_again_as_they_are_are_told_in_arrow(
    text: str, fast: bool
) -> None:
    assert pa.compute.match_substring_regex(pa.array([text]), _LIST)[0].as_py() is fast
    items = json.loads(text)
    if fast:  # each item's text is json.dumps's of the item
        inner = text[2:-2].split("}, {")
        assert ["{" + i + "}" for i in inner] == [json.dumps(i, ensure_ascii=False) for i in items]
    read, split = split_lists(pa.array([text]), np.array([len(items)]))
    assert read.tolist() == [True]
    assert split.to_pylist() == split_list(text, len(items))


def test_a_key_written_twice_is_split_by_split_list() -> None:
    text = '[{"a": 1, "a": 2}, {"b": 1}]'
    assert pa.compute.match_substring_regex(pa.array([text]), _LIST)[0].as_py()
    read, split = split_lists(pa.array([text]), np.array([2]))
    assert read.tolist() == [True]
    assert split.to_pylist() == ['{"a": 2}', '{"b": 1}']


@pytest.mark.parametrize("type_", [pa.string(), pa.large_string()])
def test_texts_of_either_type_and_sliced_are_split(type_: pa.DataType) -> None:
    texts = ["x", '[{"a": 1}, {"b": "é"}]', '["p", "q"]', '[{"a": 1, "a": 2}, {}]']
    texts += ['[{"a": 1}, {"b": 2}, {"c": null}]']
    counts = np.array([2, 2, 2, 2, 3])
    column = pa.array(["before", *texts], type_).slice(1)
    read, items = split_lists(column, counts)
    each = [split_list(t, int(c)) for t, c in zip(texts, counts, strict=True)]
    assert read.tolist() == [found is not None for found in each]
    assert items.to_pylist() == [item for found in each for item in found or ()]


@pytest.mark.parametrize("type_", [pa.string(), pa.large_string()])
def test_rows_with_split_observations_flatten_as_the_decoder_reads_them(
    type_: pa.DataType,
) -> None:
    call = '{"name": "f", "arguments": {"n": 1}}'
    rows = []
    for observation in [
        '[{"t": "18 C"}, {"t": "é", "n": 2.5}]',  # split in Arrow
        '[{"a": 1, "a": 2}, {"b": " "}]',  # one by one
        '["x", "y"]',
        '[{"t": " "}, {}]',
    ]:
        turns = [("human", "q"), ("function_call", f"[{call}, {call}]")]
        turns += [("observation", observation), ("gpt", "done")]
        rows.append({"conversations": [{"from": f, "value": v} for f, v in turns]})
    turn = pa.struct([("from", type_), ("value", type_)])
    table = pa.Table.from_pylist(rows, schema=pa.schema([("conversations", pa.list_(turn))]))
    view = assert_flattened_as_decoded(get_format("sharegpt"), table)
    assert view.result_text is not None
    assert len(view.result_text()) == 8  # every observation split in two
