"""Bedrock Converse's flattener (`formats/bedrock/flatten.py`) held to its decoder: each row read
as the decoder reads it, unread exactly where the decoder raises, and each walk attribute what
the rule's `find` finds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from differential import (
    assert_fast_and_slow_agree,
    assert_settled_in_arrow,
    assert_verdicts_equal_on_generated_rows,
)
from flattened import assert_flattened_as_decoded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import every_rates, generate_rows

from transcript_clean.formats import get_format
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules.orphan_tool_result import used_message
from transcript_clean.rules.unanswered_tool_call import uncuttable

BEDROCK = get_format("bedrock")

_S = pa.string()
_INNER = pa.struct([("text", _S), ("json", pa.struct([("n", pa.int64())])), ("image", _S)])
_BLOCK = pa.struct(
    [
        ("image", pa.struct([("format", _S)])),  # before text: a block holding both is media
        ("text", _S),
        ("toolUse", pa.struct([("toolUseId", _S), ("name", _S), ("input", _S)])),
        (
            "toolResult",
            pa.struct([("toolUseId", _S), ("content", pa.list_(_INNER)), ("status", _S)]),
        ),
        (
            "reasoningContent",
            pa.struct(
                [
                    ("reasoningText", pa.struct([("text", _S), ("signature", _S)])),
                    ("redactedContent", _S),
                ]
            ),
        ),
    ]
)
SCHEMA = pa.schema(
    [("messages", pa.list_(pa.struct([("role", _S), ("content", pa.list_(_BLOCK))])))]
)

_ids = st.sampled_from(["a", "b", "c"])
_texts = st.sampled_from(["", " ", "\n", "hi", "\u3000", "é!"])


def _blocks() -> st.SearchStrategy[dict[str, Any]]:
    inner = st.one_of(
        st.builds(lambda t: {"text": t}, _texts),
        st.just({"json": {"n": 1}}),
        st.just({"image": "png"}),
    )
    return st.one_of(
        st.builds(lambda t: {"text": t}, _texts),
        st.just({"image": {"format": "png"}}),
        st.builds(
            lambda i, arguments: {"toolUse": {"toolUseId": i, "name": "f", "input": arguments}},
            _ids,
            st.sampled_from(['{"n": 1}', "{}", "[1]", "{", None]),
        ),
        st.builds(
            lambda i, content, status: {
                "toolResult": {"toolUseId": i, "content": content, "status": status}
            },
            _ids,
            st.lists(inner, max_size=2) | st.none(),
            st.sampled_from([None, "success", "error"]),
        ),
        st.builds(
            lambda t, sig: {"reasoningContent": {"reasoningText": {"text": t, "signature": sig}}},
            _texts,
            st.sampled_from([None, "sig"]),
        ),
        st.just({"reasoningContent": {"redactedContent": "xyz"}}),
        st.just({"reasoningContent": {"redactedContent": "x", "reasoningText": {"text": "t"}}}),
    )


# What the decoder does not read: a null message, role, content or block, another role, an
# empty block, a call without its id or name, a result with another status or a null block,
# reasoning without its text.
_BAD_BLOCKS = [
    None,
    {},
    {"toolUse": {"name": "f"}},
    {"toolUse": {"toolUseId": "a"}},
    {"toolResult": {"toolUseId": "a", "status": "done"}},
    {"toolResult": {"toolUseId": "a", "content": [None]}},
    {"toolResult": {"toolUseId": "a", "content": [{}]}},
    {"toolResult": {"content": []}},
    {"reasoningContent": {"reasoningText": {"signature": "s"}}},
    {"reasoningContent": {}},
]


def _rows() -> st.SearchStrategy[list[list[dict[str, Any]] | None]]:
    good = st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant"]),
            "content": st.lists(_blocks(), max_size=3),
        }
    )
    bad = st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {"role": st.sampled_from(["system", None, "user", "assistant"]), "content": st.none()}
        ),
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["user", "assistant"]),
                "content": st.sampled_from(_BAD_BLOCKS).map(lambda b: [b]),
            }
        ),
    )
    exchange = st.builds(
        lambda ids, words: [
            {"role": "user", "content": [{"text": "go"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": i, "name": "f", "input": "{}"}} for i in ids],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": i, "content": [{"text": words}]}} for i in ids
                ],
            },
        ],
        st.lists(_ids, min_size=1, max_size=3),
        _texts,
    )
    item = st.one_of(*[good] * 8, bad)
    row = st.builds(
        lambda head, tail: head + tail, exchange | st.just([]), st.lists(item, max_size=5)
    )
    return st.lists(st.one_of(row, row, row, row, st.none()), min_size=1, max_size=6)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows())
def test_bedrock_rows_flatten_as_the_decoder_reads_them(
    messages: list[list[dict[str, Any]] | None],
) -> None:
    table = pa.Table.from_pylist([{"messages": m} for m in messages], schema=SCHEMA)
    assert_flattened_as_decoded(BEDROCK, table)


@pytest.mark.parametrize(
    "config",
    [DEFAULT, STRICT, replace(DEFAULT, orphan_result="drop")],
    ids=["default", "strict", "drop orphans"],
)
def test_bedrock_batches_of_any_rows_agree_on_both_paths(config: Config) -> None:
    """Whatever the fast path settles in Arrow (empty turns and unanswered calls dropped, used
    orphans rejected) comes out as the per-row path writes it, in the column's own type."""

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows())
    def check(messages: list[list[dict[str, Any]] | None]) -> None:
        table = pa.Table.from_pylist([{"messages": m} for m in messages], schema=SCHEMA)
        assert_fast_and_slow_agree(table, config, BEDROCK)

    check()


def test_layouts_it_does_not_read_are_left_to_the_per_row_path() -> None:
    turn = {"role": "user", "content": [{"text": "hi"}]}
    for rows in (
        [{"messages": [turn], "system": [{"text": "Be brief."}]}],  # a column it cannot see
        [{"messages": [turn], "toolConfig": '[{"name": "f"}]'}],  # tools the fast path reads
        [{"messages": [{"role": "user", "content": [{"text": 3}]}]}],  # text that is no text
    ):
        table = pa.Table.from_pylist(rows)
        column = table.column("messages").combine_chunks()
        assert BEDROCK.flatten(column, table.schema) is None, rows
    config = {"tools": [{"toolSpec": {"name": "f"}}]}
    table = pa.Table.from_pylist([{"messages": [turn], "toolConfig": config}])
    assert BEDROCK.flatten(table.column("messages").combine_chunks(), table.schema) is not None


def test_bedrock_generated_rows_with_every_code_flatten_as_decoded() -> None:
    rows = [row for row, _ in generate_rows(400, "bedrock", seed=21, rates=every_rates("bedrock"))]
    view = assert_flattened_as_decoded(BEDROCK, pa.Table.from_pylist(rows))
    assert 0 < view.unread.sum() < len(rows) // 5


def test_bedrock_clean_rows_are_found_clean_in_arrow() -> None:
    assert_verdicts_equal_on_generated_rows(BEDROCK, seed=4, kinds=6)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_bedrock_batches_agree_on_both_paths(config: Config) -> None:
    rows = [row for row, _ in generate_rows(600, "bedrock", seed=8, rates=every_rates("bedrock"))]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, BEDROCK)


# A `system` column beside the messages (`BedrockFormat.side_columns`): blocks of text, or
# blocks the decoder skips (a cache point), or cannot read (a null block or text); or a string.
_SYSTEM_BLOCK = pa.struct([("text", _S), ("cachePoint", pa.struct([("type", _S)]))])
SYSTEM_LAYOUTS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "blocks": (
        pa.list_(_SYSTEM_BLOCK),
        st.lists(
            st.one_of(
                st.builds(lambda t: {"text": t}, _texts),
                st.builds(lambda t: {"text": t}, _texts),
                st.just({"cachePoint": {"type": "default"}}),
                st.none(),
            ),
            max_size=3,
        ),
    ),
    "text blocks": (
        pa.list_(pa.struct([("text", _S)])),
        st.lists(st.builds(lambda t: {"text": t}, _texts), max_size=3),
    ),
    "cache points": (
        pa.list_(pa.struct([("cachePoint", pa.struct([("type", _S)]))])),
        st.just([{"cachePoint": {"type": "default"}}]),
    ),
    "string": (_S, _texts),
}


@pytest.mark.parametrize("layout", sorted(SYSTEM_LAYOUTS))
def test_bedrock_rows_with_a_system_column_flatten_as_the_decoder_reads_them(layout: str) -> None:
    system_type, systems = SYSTEM_LAYOUTS[layout]
    schema = SCHEMA.append(pa.field("system", system_type))

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows(), st.data())
    def check(messages: list[list[dict[str, Any]] | None], data: st.DataObject) -> None:
        rows = [{"messages": m, "system": data.draw(st.none() | systems)} for m in messages]
        table = pa.Table.from_pylist(rows, schema=schema)
        # roles (the system prompt first, where the decoder makes one) and characters included
        assert_flattened_as_decoded(BEDROCK, table)

    check()


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_bedrock_batches_with_a_system_column_agree_on_both_paths(config: Config) -> None:
    rows = [row for row, _ in generate_rows(600, "bedrock", seed=8, rates=every_rates("bedrock"))]
    prompts = [[{"text": "Be brief."}], None, [{"text": " "}], [{"text": "A"}, {"text": "B"}]]
    for k, row in enumerate(rows):
        row["system"] = prompts[k % len(prompts)]
    table = pa.Table.from_pylist(rows)
    view = assert_flattened_as_decoded(BEDROCK, table)
    assert (view.role == 0).sum() == 450  # a system message in each row with a prompt (" " too)
    assert_fast_and_slow_agree(table, config, BEDROCK)


def _msg(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": list(blocks)}


def _said(text: str) -> dict[str, Any]:
    return {"text": text}


def _use(call_id: str) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call_id, "name": "f", "input": "{}"}}


def _result(call_id: str, *content: dict[str, Any]) -> dict[str, Any]:
    return {"toolResult": {"toolUseId": call_id, "content": list(content)}}


def test_empty_turns_unanswered_calls_and_used_orphans_are_settled_in_arrow() -> None:
    """R1's empty turns dropped, R5's cut made or its reject, and R3's reject of an orphan a
    later turn may use, each in Arrow (the rows are settled by the fast path, in the per-row
    path's words); an orphan of two blocks, which the view does not compare, is the per-row
    path's, as is a row whose kept turns the encoder writes anew. Both paths agree on every
    row, the system column aside included."""
    u, a = "user", "assistant"
    rows = [
        # an empty turn (reasoning with no text and no signature): dropped
        [_msg(u, _said("hi")), _msg(a, {"reasoningContent": {"reasoningText": {"text": " "}}}),
         _msg(u, _said("hi?")), _msg(a, _said("yo"))],
        # an unanswered call: cut before its turn
        [_msg(u, _said("hi")), _msg(a, _said("yo")), _msg(u, _said("go")), _msg(a, _use("t1")),
         _msg(u, _said("stop")), _msg(a, _said("ok"))],
        # nothing would be left: rejected
        [_msg(u, _said("go")), _msg(a, _use("t1")), _msg(u, _said("stop")), _msg(a, _said("ok"))],
        # an orphan whose one block is JSON, which a later turn may use: rejected
        [_msg(u, _said("go")), _msg(a, _use("t1")),
         _msg(u, _result("t1", _said("18 C")), _result("t9", {"json": {"n": 1}})),
         _msg(a, _said("18 C"))],
        # an orphan of two blocks: the per-row path's
        [_msg(u, _said("go")), _msg(a, _use("t1")),
         _msg(u, _result("t1", _said("18 C")), _result("t9", _said("19"), _said(" C"))),
         _msg(a, _said("18 C"))],
        # a turn the encoder writes anew (redacted reasoning loses its reasoningText): the
        # per-row path's to repair
        [_msg(u, _said("hi")), _msg(a, {"reasoningContent": {"redactedContent": "xyz",
         "reasoningText": {"text": "t", "signature": "s"}}}, _said("yo")),
         _msg(u, _said("more")), _msg(a, _said(" ")), _msg(u, _said("?")), _msg(a, _said("ok"))],
    ]  # fmt: skip
    table = pa.Table.from_pylist([{"messages": r, "system": [{"text": "Be brief."}]} for r in rows])
    assert_settled_in_arrow(
        table,
        BEDROCK,
        handled=[True, True, True, True, False, False],
        repaired=[True, True, False, False, False, False],
        lengths=[3, 3],
        words={
            "unanswered_tool_call": [uncuttable(2, "t1")],  # the system prompt is message 0
            "orphan_tool_result": [used_message(3, "t9")],
        },
    )
