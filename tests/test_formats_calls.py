"""Call values read over the whole column (`formats.calls`) held to each format's reader of one
value, and ShareGPT's `function_call` turns read that way held to the decoder and the per-row
path."""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree
from flattened import assert_flattened_as_decoded
from flattened import truth as decoded_truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_leaves, json_values

from transcript_clean.formats import get_format
from transcript_clean.formats.calls import common_calls, list_calls, read_calls
from transcript_clean.formats.sharegpt import flatten as sharegpt_flatten
from transcript_clean.jsontext import has_long_digits
from transcript_clean.model import AssistantMessage, ToolCall
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules.invalid_tool_arguments import has_invalid_arguments

SHAREGPT = get_format("sharegpt")
TURN = pa.struct([("from", pa.string()), ("value", pa.string())])
SCHEMA = pa.schema([("conversations", pa.list_(TURN)), ("tools", pa.string())])

# Leaves of any kind: NaN and infinities (json writes them, orjson refuses them), numbers past
# 64 bits and long runs of digits in text, escapes, quotes, braces.
_leaves = json_leaves(
    st.sampled_from([math.nan, math.inf, 1e100, 1e-100, -0.0, 1.5e-07, 10**400]),
    st.text(max_size=3),
    st.sampled_from(['a"b', "\\", "é\n", "\x00", "12345678901234567890", "}, {", "😀"]),
)
_values = json_values(_leaves)
_flat = st.dictionaries(
    st.one_of(st.sampled_from(["city", "n", "", 'k"ey']), st.text(max_size=3)), _leaves, max_size=4
)
_names = st.one_of(
    st.sampled_from(["f", "get_weather", 'a"b', "\\", "é", "", "}, {", "{"]), st.text(max_size=3)
)
_call = st.builds(
    lambda name, arguments: {"name": name, "arguments": arguments},
    st.one_of(_names, _names, _leaves),
    st.one_of(_flat, _flat, _values, st.sampled_from(['{"n": 1}', "not json", "[1]"])),
)


def _dumps(value: Any, ascii_: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_)  # NaN, Infinity, big integers as json writes


_function_calls = st.one_of(
    st.builds(_dumps, _call, st.booleans()),  # one call, mostly in the common layout
    st.builds(_dumps, _call, st.booleans()),
    st.builds(_dumps, st.lists(_call, max_size=3), st.booleans()),  # parallel calls
    st.builds(_dumps, _values, st.booleans()),
    st.builds(  # the common layout with any text where the arguments stand
        lambda body: '{"name": "f", "arguments": {' + body + "}}",
        st.text(alphabet='{}[]":,. \\\n\tu0123456789abdefDElnrstu+-', max_size=24),
    ),
    st.sampled_from(
        [
            '{"name": "f", "arguments": {"s": "\\ud800"}}',  # a lone surrogate
            '{"name": "f", "arguments": {"s": "\\uD83D\\uDE00"}}',  # a pair
            '{"name": "f", "arguments": {"s": "\\udc00x"}}',
            '{"name": "f", "arguments": {"n": 1e999}}',
            '{"name": "f", "arguments": {"n": 12345678901234567890}}',
            '{"name": "f", "arguments": {"a": 1, "a": 2}}',  # duplicate keys
            '{"name": "f", "arguments": {}, "name": "g"}',
            '{"name":"f","arguments":{}}',  # another layout
            ' {"name": "f", "arguments": {}}',
            '{"name": "f", "arguments": {}} ',
            '{"name": "f", "arguments": {"a": 1,}}',
            '{"name": "f", "arguments": {}',  # cut short
            "not json",
            "[]",
            "{}",
        ]
    ),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_function_calls, max_size=8))
def test_function_calls_read_over_the_column_are_read_as_calls_reads_each(
    drawn: list[str],
) -> None:
    # As the flattener reads them: a value with a long run of digits is the per-row path's.
    values = [v for v in drawn if not has_long_digits(v)]
    read = read_calls(pa.array(values, pa.string()), sharegpt_flatten._calls, lists=True)
    each = [sharegpt_flatten._calls(text) for text in values]
    assert read.read.tolist() == [found is not None for found in each]
    assert read.count.tolist() == [0 if found is None else len(found) for found in each]
    calls = [(k, call) for k, found in enumerate(each) for call in found or ()]
    assert read.value.tolist() == [k for k, _ in calls]
    assert read.name.to_pylist() == [call[0] for _, call in calls]
    assert read.object.tolist() == [call[2] for _, call in calls]
    for text, (_, truth) in zip(read.arguments.to_pylist(), calls, strict=True):
        if truth[2] and truth[1] is not None:  # an object: maybe the source's text, which
            assert text is not None  # reads as the same value
            assert json.loads(text) == json.loads(truth[1])
            assert json.dumps(json.loads(text)) == json.dumps(json.loads(truth[1]))  # -0.0
        else:
            assert text == truth[1]


@pytest.mark.parametrize(
    ("text", "fast"),
    [
        ('{"name": "f", "arguments": {"city": "Paris", "n": -1.5e-07, "ok": true}}', True),
        ('{"name": "f", "arguments": {"s": "\\u00e9\\n", "t": "}, {"}}', True),
        ('[{"name": "f", "arguments": {}}]', False),  # a list of calls: `_calls`'
        ('{"name": "f", "arguments": {"n": [1]}}', False),  # nested
        ('{"name": "f", "arguments": {"n": NaN}}', False),
        ('{"name": "f", "arguments": {"n": 1234567890123456789}}', False),  # 19 digits
        ('{"name": "f", "arguments": {"s": "\\ud800"}}', False),
        ('{"name": "a\\"b", "arguments": {}}', False),
    ],
)
def test_one_function_call_in_the_common_layout_is_told_in_arrow(text: str, fast: bool) -> None:
    found, names, arguments = common_calls(pa.array([text]))
    assert found.tolist() == [fast]
    truth = sharegpt_flatten._calls(text)
    if fast:
        assert truth is not None and len(truth) == 1 and truth[0][2]
        assert names.to_pylist() == [truth[0][0]]
        assert arguments.to_pylist() == [text[text.index('"arguments": ') + 13 : -1]]
        assert json.loads(arguments[0].as_py()) == json.loads(str(truth[0][1]))


@pytest.mark.parametrize(
    ("text", "fast"),
    [
        ('[{"name": "f", "arguments": {}}]', True),
        ('[{"name": "f", "arguments": {"a": "x"}}, {"name": "g", "arguments": {"n": 1}}]', True),
        ('[{"name": "f", "arguments": {"a": "}, {"}}, {"name": "g", "arguments": {}}]', False),
        ('[{"name": "f}, {", "arguments": {}}]', False),  # a brace: `_calls`'
        ('[{"name": "f", "arguments": {}},{"name": "g", "arguments": {}}]', False),
        ('[{"name": "f", "arguments": {"n": [1]}}]', False),
        ('[{"name": "f", "arguments": {}}, 3]', False),
        ("[]", False),
        ('{"name": "f", "arguments": {}}', False),  # one call: `common_calls`'
    ],
)
def test_a_list_of_function_calls_in_the_common_layout_is_told_in_arrow(
    text: str, fast: bool
) -> None:
    found, many, names, arguments = list_calls(pa.array([text]))
    assert found.tolist() == [fast]
    truth = sharegpt_flatten._calls(text)
    if fast:
        assert truth is not None and all(call[2] for call in truth)
        assert many.tolist() == [len(truth)]
        assert names.to_pylist() == [call[0] for call in truth]
        assert [json.loads(a) for a in arguments.to_pylist()] == [
            json.loads(str(call[1])) for call in truth
        ]


def _row(values: list[str], tools: str | None) -> dict[str, Any]:
    turns: list[dict[str, Any]] = [{"from": "human", "value": "q"}]
    for value in values:
        turns += [
            {"from": "gpt", "value": ""},
            {"from": "function_call", "value": value},
            {"from": "observation", "value": "r"},
        ]
    turns.append({"from": "gpt", "value": "done"})
    return {"conversations": turns, "tools": tools}


_TOOLS = json.dumps(
    [
        {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
                "required": ["city"],
            },
        },
        {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    ]
)
_rows = st.lists(
    st.builds(
        _row, st.lists(_function_calls, min_size=1, max_size=3), st.sampled_from([None, _TOOLS])
    ),
    min_size=1,
    max_size=6,
)


def _decoded_calls(row: dict[str, Any]) -> list[ToolCall]:
    messages = SHAREGPT.decode(row).messages
    return [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows)
def test_function_calls_flatten_as_the_decoder_reads_them(rows: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    view = assert_flattened_as_decoded(SHAREGPT, table, unread_superset=True)
    call_row = view.message_row[view.call_message]
    names = view.call_name.to_pylist()
    arguments = view.call_arguments.to_pylist()
    for r, row in enumerate(rows):
        # Unread: the rows the decoder does not read, and those holding a long run of digits
        # in a call value (the per-row path's, which reads them exactly), no other.
        values = [t["value"] for t in row["conversations"] if t["from"] == "function_call"]
        long = any(has_long_digits(v) for v in values)
        if view.unread[r]:
            assert long or decoded_truth(SHAREGPT, row) is None, row
            continue
        mine = [k for k in range(len(call_row)) if call_row[k] == r]
        decoded = _decoded_calls(row)
        assert [names[k] for k in mine] == [c.name for c in decoded]
        assert [bool(view.call_object[k]) for k in mine] == [
            not has_invalid_arguments(c) for c in decoded
        ]
        for k, c in zip(mine, decoded, strict=True):
            if view.call_object[k]:  # an object's text reads as the decoder's arguments
                assert json.loads(str(arguments[k])) == c.arguments


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows, st.sampled_from([DEFAULT, STRICT]))
def test_function_calls_give_the_per_row_paths_verdicts(
    rows: list[dict[str, Any]], config: Config
) -> None:
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows, schema=SCHEMA), config, SHAREGPT)
