"""LLaMA-Factory v1's flattener (`formats/llamafactory/flatten.py`) held to its decoder: each
row read as the decoder reads it, unread exactly where the decoder raises, each walk attribute
what the rule's `find` finds; and the fast path's verdicts the per-row path's."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from differential import (
    assert_fast_and_slow_agree,
    assert_settled_in_arrow,
    assert_verdicts_equal_on_generated_rows,
    per_row_clean,
)
from flattened import assert_flattened_as_decoded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_leaves, json_values
from synthetic import every_rates, generate_rows

from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.formats.calls import common_calls
from transcript_clean.formats.llamafactory import calls
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules.orphan_tool_result import used_message
from transcript_clean.rules.unanswered_tool_call import uncuttable

LLAMAFACTORY = get_format("llamafactory")
DATA = Path(__file__).parent / "data" / "llamafactory"

_ITEM = pa.struct([("type", pa.string()), ("value", pa.string())])
_MESSAGE = pa.struct(
    [("role", pa.string()), ("content", pa.list_(_ITEM)), ("loss_weight", pa.float64())]
)
SCHEMA = pa.schema([("messages", pa.list_(_MESSAGE))])

_texts = st.sampled_from(["", " ", "\n", "hi", "\u3000", "é!"])
_calls = st.sampled_from(
    [
        '{"name": "f", "arguments": {"n": 1}}',
        '{"name": "g", "arguments": "{\\"n\\": 2}"}',  # arguments as JSON text
        '{"name": "f", "arguments": "{oops"}',  # invalid arguments
        '{"name": "f", "arguments": [1]}',  # not an object
        '{"name": "f", "arguments": NaN}',  # not strict JSON
        '{"name": "f"}',
        '{"arguments": {}}',  # no name: malformed
        "not json",  # malformed
    ]
)


def _item(type_: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda v: {"type": type_, "value": v}, values)


_text = _item("text", _texts)
_reasoning = _item("reasoning", _texts)
_call = _item("tool_call", _calls)
_media = _item("image_url", st.just("a.png")) | _item("custom", st.just(None))
_bad_item = st.one_of(
    st.none(),
    _item("text", st.none()),
    _item("image_url", st.none()),
    st.just({"type": None, "value": "x"}),
)
_packed = st.sampled_from(
    [
        '["1", "2"]',
        '[{"a": 1}, " "]',
        '["1", "2", "3"]',
        "[]",
        # lists of flat objects, split over the column (`sharegpt.lists`), or not quite
        '[{"a": 1}, {"b": "x y"}]',
        '[{"a": 1}, {"a": 1, "a": 2}]',
        '[{"a": 1.50}, {"b": -0}]',
        '[{"a": "}, {"}, {}]',
        '[{"a": 1}, {}, {"c": null}]',
    ]
)


def _message(role: str, items: st.SearchStrategy[Any], max_size: int = 3) -> Any:
    return st.builds(
        lambda content, w: {"role": role, "content": content, "loss_weight": w},
        st.lists(items, max_size=max_size),
        st.sampled_from([None, 0.0, 1.0]),
    )


def _rows() -> st.SearchStrategy[list[list[dict[str, Any]] | None]]:
    good = st.one_of(
        _message("system", _text, 2),
        _message("user", _text | _media),
        _message("assistant", st.one_of(_text, _reasoning, _call, _call, _media)),
        _message("tool", _text | _media, 2),
        _message("tool", _item("text", _packed), 1),
        _message("tool", _text, 1),
    )
    # What the decoder does not read: a null message, role or content, another role, a bad
    # item, an item where it does not belong.
    bad = st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {"role": st.sampled_from(["observation", None]), "content": st.just([])}
        ),
        st.just({"role": "user", "content": None}),
        _message("user", _bad_item, 1),
        _message("system", _media | _reasoning, 1),
        _message("user", _reasoning | _call, 1),
    )
    message = st.one_of(*[good] * 10, bad)
    # Mostly well formed: parallel calls answered by tool messages or one packed list.
    exchange = st.builds(
        lambda n, packed: [
            {"role": "user", "content": [{"type": "text", "value": "go"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_call", "value": json.dumps({"name": "f", "arguments": {}})}
                ]
                * n,
            },
            *(
                [{"role": "tool", "content": [{"type": "text", "value": json.dumps(["1"] * n)}]}]
                if packed
                else [{"role": "tool", "content": [{"type": "text", "value": "1"}]}] * n
            ),
            {"role": "assistant", "content": [{"type": "text", "value": "done"}]},
        ],
        st.integers(1, 3),
        st.booleans(),
    )
    row = st.builds(
        lambda head, tail: head + tail, exchange | st.just([]), st.lists(message, max_size=6)
    )
    return st.lists(st.one_of(row, row, row, row, st.none()), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows())
def test_llamafactory_rows_flatten_as_the_decoder_reads_them(
    messages: list[list[dict[str, Any]] | None],
) -> None:
    table = pa.Table.from_pylist([{"messages": m} for m in messages], schema=SCHEMA)
    assert_flattened_as_decoded(LLAMAFACTORY, table)


@pytest.mark.parametrize(
    "config",
    [DEFAULT, STRICT, replace(DEFAULT, interrupted_call="error_result")],
    ids=["default", "strict", "error_result"],
)
def test_llamafactory_batches_agree_on_both_paths(config: Config) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows())
    def check(messages: list[list[dict[str, Any]] | None]) -> None:
        table = pa.Table.from_pylist([{"messages": m} for m in messages], schema=SCHEMA)
        assert_fast_and_slow_agree(table, config, LLAMAFACTORY)

    check()


def _real_table() -> pa.Table:
    rows = []
    for name in ("reason_tool_use_rows.jsonl", "v1_sft_rows.jsonl"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            row.setdefault("tools", None)
            rows.append(row)
    return pa.Table.from_pylist(rows)


def test_the_real_rows_flatten_as_decoded_and_the_fast_path_settles_them() -> None:
    table = _real_table()
    view = assert_flattened_as_decoded(LLAMAFACTORY, table.drop_columns(["tools"]))
    assert not view.unread.any()
    # the packed list of line 3 answers both of its calls, by the decoder's minted ids
    assert view.result_call.to_pylist()[:2] == ["call_2_1", "call_2_2"]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, LLAMAFACTORY)
    # Every real row is settled in Arrow: found clean, or pending at the end (the demo's rows
    # that stop at the call), kept as the per-row path keeps them.
    plain = table.drop_columns(["tools"])  # the conversations alone
    verdicts = fast_verdicts(LLAMAFACTORY, plain.column("messages"), keep_trailing=True)
    assert verdicts is not None
    assert verdicts.clean.tolist() == [per_row_clean(r, LLAMAFACTORY) for r in plain.to_pylist()]
    assert int(verdicts.clean.sum()) == 5  # the sft rows, line 29 and the parallel row
    assert int(verdicts.trailing.sum()) == 3


def test_layouts_it_does_not_read_are_left_to_the_per_row_path() -> None:
    for rows in (
        [{"messages": [{"role": "user", "content": "Hi"}]}],  # content a string
        [{"messages": [{"role": "user", "content": [{"type": "text", "value": 3}]}]}],
    ):
        column = pa.Table.from_pylist(rows).column("messages").combine_chunks()
        assert LLAMAFACTORY.flatten(column) is None, rows
    # OpenAI's text parts: a layout it reads, every row unread (the decoder wants "value")
    rows = [{"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}]
    view = LLAMAFACTORY.flatten(pa.Table.from_pylist(rows).column("messages").combine_chunks())
    assert view is not None
    assert view.unread.tolist() == [True]


def test_llamafactory_generated_rows_with_every_code_flatten_as_decoded() -> None:
    rates = every_rates("llamafactory")
    rows = [row for row, _ in generate_rows(400, "llamafactory", seed=21, rates=rates)]
    view = assert_flattened_as_decoded(LLAMAFACTORY, pa.Table.from_pylist(rows))
    assert 0 < view.unread.sum() < len(rows) // 5


def test_llamafactory_clean_rows_are_found_clean_in_arrow() -> None:
    assert_verdicts_equal_on_generated_rows(LLAMAFACTORY, seed=4, kinds=6)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_llamafactory_generated_batches_agree_on_both_paths(config: Config) -> None:
    rates = every_rates("llamafactory")
    rows = [row for row, _ in generate_rows(600, "llamafactory", seed=8, rates=rates)]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, LLAMAFACTORY)


def _msg(role: str, *values: str, kind: str = "text") -> dict[str, Any]:
    return {"role": role, "content": [{"type": kind, "value": v} for v in values]}


def test_empty_turns_unanswered_calls_and_used_orphans_are_settled_in_arrow() -> None:
    """R1's empty turns dropped, R5's cut made or its reject, and R3's reject of an orphan a
    later turn may use, each in Arrow, in the per-row path's words (the minted ids); an orphan
    repeating a result packed in a list is no used one, and one of two items, which the view
    does not compare, is the per-row path's. Both paths agree on every row."""
    u, a, t = "user", "assistant", "tool"
    call = json.dumps({"name": "f", "arguments": {}})

    def calls(n: int) -> dict[str, Any]:
        return _msg(a, *[call] * n, kind="tool_call")

    rows = [
        # an empty turn: dropped
        [_msg(u, "hi"), _msg(a, " "), _msg(u, "hi?"), _msg(a, "yo")],
        # an unanswered call: cut before its turn
        [_msg(u, "hi"), _msg(a, "yo"), _msg(u, "go"), calls(1), _msg(u, "stop"), _msg(a, "ok")],
        # nothing would be left: rejected
        [_msg(u, "go"), calls(1), _msg(u, "stop"), _msg(a, "ok")],
        # a tool message past the calls, which a later turn may use: rejected
        [_msg(u, "go"), calls(1), _msg(t, "18 C"), _msg(t, "19 C"), _msg(a, "18 C")],
        # an orphan repeating a result packed in a list: dropped, by the per-row path
        [_msg(u, "go"), calls(2), _msg(t, '["18 C", "19 C"]'), _msg(u, "and?"), _msg(t, "19 C"),
         _msg(a, "18 C")],
        # an orphan of two items: the per-row path's
        [_msg(u, "go"), calls(1), _msg(t, "18 C"), _msg(t, "19", " C"), _msg(a, "18 C")],
    ]  # fmt: skip
    table = pa.Table.from_pylist([{"messages": r} for r in rows], schema=SCHEMA)
    assert_settled_in_arrow(
        table,
        LLAMAFACTORY,
        handled=[True, True, True, True, False, False],
        repaired=[True, True, False, False, False, False],
        lengths=[3, 3],
        words={
            "unanswered_tool_call": [uncuttable(1, "call_1_0")],
            "orphan_tool_result": [used_message(2, "result_3")],
        },
    )


# A tool_call value as it may come: strict JSON or not, of any type, names and arguments of
# any type, duplicate keys, NaN, numbers past 64 bits, lone surrogates.
_leaves = json_leaves(st.text(max_size=3))
_values = json_values(_leaves)
_call_texts = st.one_of(
    st.builds(
        lambda name, arguments: json.dumps({"name": name, "arguments": arguments}),
        st.one_of(st.sampled_from(["f", "get_weather"]), _leaves),
        st.one_of(_values, st.sampled_from(['{"n": 1}', "not json", "[1]", '{"x": NaN}'])),
    ),
    st.builds(json.dumps, _values),
    st.sampled_from(
        [
            '{"name": "f", "name": "g", "arguments": {"a": 1, "a": 2}}',  # duplicate keys
            '{"name": "f", "arguments": {"s": "\\ud800"}}',  # a lone surrogate
            '{"name": "f", "arguments": {"n": 1e999}}',
            '{"name": "f", "arguments": {}',  # cut short
            '{"arguments": {}}',
        ]
    ),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_call_texts)
def test_tool_call_values_are_read_as_the_decoders_helper_reads_them(text: str) -> None:
    assert calls._call(text) == calls._read_call(text)


# Values as the column-wide read sees them: the common layout with flat arguments of any leaves
# (NaN, infinities, numbers past 64 bits, escapes, lone surrogates), nested arguments, and the
# common layout with any text where the arguments stand (JSON's characters, shuffled).
_keys = st.one_of(st.sampled_from(["city", "n", ""]), st.text(max_size=3))
_edges = st.sampled_from([math.nan, math.inf, -math.inf, 1e100, 1e-100, 2**64, 2**70, 10**400])
_flat = st.dictionaries(
    _keys, st.one_of(_leaves, _edges, st.text(max_size=3), st.integers(-9, 9)), max_size=3
)
_layout = st.builds(
    lambda name, arguments, ascii: json.dumps(
        {"name": name, "arguments": arguments}, ensure_ascii=ascii
    ),
    st.one_of(*[st.sampled_from(["f", "get_weather", 'a"b', "\\", "é"])] * 3, st.text(max_size=3)),
    st.one_of(_flat, _flat, _flat, _values),
    st.booleans(),
)
_scrambled = st.builds(
    lambda body: '{"name": "f", "arguments": {' + body + "}}",
    st.text(alphabet='{}[]":,. \\\n\tu0123456789abdefDElnrstu+-', max_size=24),
)
_column_values = st.lists(st.one_of(_layout, _layout, _scrambled, _call_texts), max_size=8)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_column_values)
def test_tool_call_values_read_over_the_column_are_read_as_call_reads_each(
    values: list[str],
) -> None:
    read = calls.read_calls(pa.array(values, pa.string()))
    each = [calls._call(text) for text in values]
    assert read.read.tolist() == [found is not None for found in each]
    found = [f for f in each if f is not None]
    assert read.name.to_pylist() == [f[0] for f in found]
    assert read.object.tolist() == [f[2] for f in found]
    for text, truth in zip(read.arguments.to_pylist(), found, strict=True):
        if truth[2] and truth[1] is not None:  # an object: maybe the source's text, read
            assert text is not None  # as `_call`'s is (exactly: an integer past 64 bits too)
            assert json.loads(text) == json.loads(truth[1])
        else:
            assert text == truth[1]


@pytest.mark.parametrize(
    ("text", "fast"),
    [
        ('{"name": "f", "arguments": {"city": "Paris", "n": -1.5e-07, "ok": true}}', True),
        ('{"name": "f", "arguments": {}}', True),
        ('{"name": "f", "arguments": {"s": "\\u00e9\\n"}}', True),
        ('{"name": "f", "arguments": {"n": [1]}}', False),  # nested: `_call`'s
        ('{"name": "f", "arguments": {"n": NaN}}', False),  # no JSON orjson reads
        ('{"name": "f", "arguments": {"n": 1e999}}', False),  # infinite to orjson
        ('{"name": "f", "arguments": {"s": "\\ud800"}}', False),  # a lone surrogate
        ('{"name": "f", "arguments": {"a": 1,}}', False),
        ('{"name": "f", "arguments": {}, "name": "g"}', False),
        ('{"name": "a\\"b", "arguments": {}}', False),  # an escape in the name
        ('{"name":"f","arguments":{}}', False),  # another layout
    ],
)
def test_the_common_layout_is_told_in_arrow(text: str, fast: bool) -> None:
    found, names, arguments = common_calls(pa.array([text]))
    assert found.tolist() == [fast]
    if fast:
        truth = calls._call(text)
        assert truth is not None and truth[2]
        assert names.to_pylist() == [truth[0]]
        assert orjson.loads(arguments[0].as_py()) == orjson.loads(str(truth[1]))
