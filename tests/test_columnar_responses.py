"""The Responses API's flattener (`formats/responses/flatten.py`) held to its decoder: each row
read as the decoder reads it, unread exactly where the decoder raises, and each walk attribute
what the rule's `find` finds; the fast path and the per-row path agree on whole batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree
from flattened import assert_flattened_as_decoded, truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import every_rates, generate_rows

from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import DecodeError, get_format
from transcript_clean.formats.base import Decoded
from transcript_clean.policy import DEFAULT, STRICT, Config

RESPONSES = get_format("responses")
REAL = Path(__file__).parent / "data" / "responses_rows.jsonl"

_PART = pa.struct(
    [
        ("type", pa.string()),
        ("text", pa.string()),
        ("refusal", pa.string()),
        ("image_url", pa.string()),
    ]
)


def _schema(content: pa.DataType) -> pa.Schema:
    item = pa.struct(
        [
            ("type", pa.string()),
            ("id", pa.string()),
            ("role", pa.string()),
            ("content", content),
            ("call_id", pa.string()),
            ("name", pa.string()),
            ("arguments", pa.string()),
            ("output", pa.string()),
            ("summary", pa.list_(pa.struct([("type", pa.string()), ("text", pa.string())]))),
            ("encrypted_content", pa.string()),
        ]
    )
    return pa.schema([("instructions", pa.string()), ("input", pa.list_(item))])


_texts = st.sampled_from(["", " ", "\n", "hi", "\u3000", "é!"])
_maybe_texts = st.one_of(_texts, _texts, _texts, st.none())
_ids = st.sampled_from(["a", "b", "c"])


def _items(parts: bool) -> st.SearchStrategy[dict[str, Any]]:
    part = st.one_of(
        st.builds(
            lambda k, t: {"type": k, "text": t},
            st.sampled_from(["input_text", "output_text", "text"]),
            _maybe_texts,
        ),
        st.builds(lambda t: {"type": "refusal", "refusal": t}, _maybe_texts),
        st.just({"type": "input_image", "image_url": "https://example.com/a.png"}),
        st.just({"type": None, "text": "x"}),
        st.none(),
    )
    content = st.lists(part, max_size=3) | st.none() if parts else _maybe_texts
    message = st.builds(
        lambda kind, role, body: {"type": kind, "role": role, "content": body},
        st.sampled_from(["message", None]),
        st.sampled_from(["user", "user", "assistant", "assistant", "system", "developer", "tool"]),
        content,
    )
    call = st.builds(
        lambda i, name, arguments: {
            "type": "function_call",
            "call_id": i,
            "name": name,
            "arguments": arguments,
        },
        st.one_of(_ids, _ids, st.none()),
        st.sampled_from(["f", "f", None]),
        st.sampled_from(['{"n": 1}', "{}", "[1]", "{bad", None]),
    )
    output = st.builds(
        lambda i, text: {"type": "function_call_output", "call_id": i, "output": text},
        st.one_of(_ids, _ids, st.none()),
        _maybe_texts,
    )
    reasoning = st.builds(
        lambda summary, encrypted: {
            "type": "reasoning",
            "summary": summary,
            "encrypted_content": encrypted,
        },
        st.lists(st.builds(lambda t: {"type": "summary_text", "text": t}, _maybe_texts), max_size=2)
        | st.none(),
        st.sampled_from([None, None, "gAAA"]),
    )
    other = st.sampled_from([{"type": "web_search_call"}, {"type": "custom_tool_call_output"}])
    return st.one_of(message, message, call, call, output, output, reasoning, other, st.none())


def _rows(parts: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    # Mostly well formed: a user's question, calls answered by their outputs, an answer.
    exchange = st.builds(
        lambda ids, words: [
            {"role": "user", "content": [{"type": "input_text", "text": "go"}] if parts else "go"},
            *({"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"} for i in ids),
            *({"type": "function_call_output", "call_id": i, "output": "ok"} for i in ids),
            {
                "role": "assistant",
                "content": [{"type": "output_text", "text": words}] if parts else words,
            },
        ],
        st.lists(_ids, max_size=3, unique=True),
        _texts,
    )
    row = st.builds(
        lambda head, tail, instructions: {"instructions": instructions, "input": head + tail},
        exchange | st.just([]),
        st.lists(_items(parts), max_size=6),
        st.sampled_from([None, "", "Be brief.", " "]),
    )
    return st.lists(row | st.just({"instructions": None, "input": None}), min_size=1, max_size=6)


def _joins_apart(row: dict[str, Any]) -> bool:
    """Whether a system message of the row has parts that `join_texts` joins other than end to
    end (two said, or a blank one with characters left out): the one layout the flattener
    leaves to the per-row path although the decoder reads it."""
    for item in row["input"] or []:
        if not item or item.get("role") not in ("system", "developer"):
            continue
        if not isinstance(item.get("content"), list):
            continue
        texts = [(p.get("text") or p.get("refusal") or "") for p in item["content"] if p]
        said = [t for t in texts if t.strip()]
        if len(said) > 1 or (said and len("".join(texts)) > len("".join(said))):
            return True
    return False


@pytest.mark.parametrize("parts", [True, False], ids=["content parts", "content text"])
def test_responses_rows_flatten_as_the_decoder_reads_them(parts: bool) -> None:
    schema = _schema(pa.list_(_PART) if parts else pa.string())

    def flattened_exactly(rows: list[dict[str, Any]]) -> None:
        table = pa.Table.from_pylist(rows, schema=schema)
        view = assert_flattened_as_decoded(RESPONSES, table, unread_superset=True)
        rows = table.to_pylist()
        unread = [truth(RESPONSES, row) is None or _joins_apart(row) for row in rows]
        assert view.unread.tolist() == unread, rows

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows(parts))
    def check(rows: list[dict[str, Any]]) -> None:
        flattened_exactly(rows)

    check()
    if parts:  # a system message's parts: read where joining them is putting them end to end
        cases = (["", ""], [" ", "Be brief."], ["", "Be brief."], ["Be", "brief."], [" ", " "])
        rows = [
            {
                "input": [
                    {"role": "system", "content": [{"type": "refusal", "refusal": t} for t in c]}
                ]
            }
            for c in cases
        ]
        flattened_exactly(rows)
        table = pa.Table.from_pylist(rows, schema=schema)
        side = {"instructions": table.column("instructions").combine_chunks()}
        view = RESPONSES.flatten(table.column("input").combine_chunks(), table.schema, side)
        assert view is not None
        assert view.unread.tolist() == [False, True, False, True, False]


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
@pytest.mark.parametrize("parts", [True, False], ids=["content parts", "content text"])
def test_responses_batches_agree_on_both_paths(config: Config, parts: bool) -> None:
    schema = _schema(pa.list_(_PART) if parts else pa.string())

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows(parts))
    def check(rows: list[dict[str, Any]]) -> None:
        assert_fast_and_slow_agree(pa.Table.from_pylist(rows, schema=schema), config, RESPONSES)

    check()


def test_the_real_rows_are_settled_in_arrow() -> None:
    rows = [json.loads(line) for line in REAL.read_text().splitlines()]
    table = pa.Table.from_pylist(rows)
    view = assert_flattened_as_decoded(RESPONSES, table)
    assert not view.unread.any()
    verdicts = fast_verdicts(RESPONSES, table.column("input").combine_chunks())
    assert verdicts is not None
    assert verdicts.clean.tolist() == [True, False]  # the second has no assistant turn
    assert_fast_and_slow_agree(table, DEFAULT, RESPONSES)


def test_layouts_it_does_not_read_are_left_to_the_per_row_path() -> None:
    turn = {"role": "user", "content": "hi"}
    for rows in (
        [{"input": "hi"}],  # one text, not items
        [{"input": [turn], "instructions": 3}],  # instructions that are not text
        [{"input": [{"role": "user", "content": 3}]}],  # content that is no text
    ):
        table = pa.Table.from_pylist(rows)
        column = table.column("input").combine_chunks()
        side = {n: table.column(n).combine_chunks() for n in table.column_names if n != "input"}
        assert RESPONSES.flatten(column, table.schema, side) is None, rows
    table = pa.Table.from_pylist([{"input": [turn], "instructions": "Be brief."}])
    column = table.column("input").combine_chunks()
    assert RESPONSES.flatten(column, table.schema) is None  # a column it was not handed


def test_reasoning_with_no_summary_in_any_row_is_flattened() -> None:
    """Arrow types a `summary` that is `[]` in every row as a list of nulls: read, not left to
    the per-row path (the rows `--to`-style encoders write); a null piece in it is unread."""
    reasoning = {"type": "reasoning", "summary": [], "content": [{"type": "text", "text": "t"}]}
    said = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "a"}],
    }
    asked = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]}
    rows = [
        {"input": [asked, reasoning, said]},
        {"input": [asked, {**reasoning, "summary": [None]}, said]},
    ]
    table = pa.Table.from_pylist(rows)
    assert pa.types.is_null(
        table.schema.field("input").type.value_type.field("summary").type.value_type
    )
    view = assert_flattened_as_decoded(RESPONSES, table)
    assert view.unread.tolist() == [False, True]
    assert view.reasoned.tolist()[:3] == [False, True, False]  # one assistant message, reasoned


def _generated(n: int, seed: int) -> pa.Table:
    """Generated OpenAI rows with every code planted, written as Responses items (the rows the
    OpenAI decoder reads; what it rejects has no Responses form to take)."""
    openai = get_format("openai")
    rows = []
    for row, _ in generate_rows(n, "openai", seed=seed, rates=every_rates("openai")):
        try:
            decoded = openai.decode(row)
        except DecodeError:
            continue
        fresh = Decoded([], {"id": row["id"], "tools": row["tools"]}, format="openai")
        rows.append(RESPONSES.encode(fresh, decoded.messages))
    return pa.Table.from_pylist(rows)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_generated_rows_agree_on_both_paths_and_most_are_settled_in_arrow(config: Config) -> None:
    table = _generated(1500, seed=5)
    view = assert_flattened_as_decoded(RESPONSES, table)
    assert not view.unread.any()
    assert_fast_and_slow_agree(table, config, RESPONSES)
    verdicts = fast_verdicts(RESPONSES, table.column("input").combine_chunks(), schema=table.schema)
    assert verdicts is not None and verdicts.clean.sum() > table.num_rows // 2
