"""OpenAI's flattener (`formats/openai/flatten.py`) held to its decoder: each row read as the
decoder reads it, unread exactly where the decoder raises (or maybe more, for the layouts it
leaves to the per-row path), and each walk attribute what the rule's `find` finds; the fast path
and the per-row path agree on whole batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from differential import assert_fast_and_slow_agree
from flattened import assert_flattened_as_decoded, truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import every_rates, generate_rows

from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.formats.openai import OpenAIFormat
from transcript_clean.formats.openai.flatten import openai_shape
from transcript_clean.policy import DEFAULT, STRICT, Config

OPENAI = get_format("openai")
SHARED = Path(__file__).parents[2] / "shared" / "data" / "openai"
GOLDEN = Path(__file__).parent / "data" / "golden"

_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
_MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(_CALL)),
        ("tool_call_id", pa.string()),
        ("reasoning_content", pa.string()),
        ("thinking", pa.string()),
        ("weight", pa.int64()),
        ("name", pa.string()),
    ]
)
_SCHEMA = pa.schema([("messages", pa.list_(_MESSAGE))])

# The roles the decoder knows, twice the common ones, and two it does not.
_ROLES = ("user", "assistant", "assistant", "tool", "tool", "system", "developer", "function")
_ROLES += ("robot", None)
_texts = st.sampled_from(["", " ", "\n", "hi", "\u3000", "é!"])
_maybe_texts = st.one_of(_texts, _texts, st.none())
# Made-up ids look like these: a row holding one of its own must step aside (`IdMinter`).
_ids = st.sampled_from(["a", "b", "", "call_1_0", "result_2"])
_maybe_ids = st.one_of(_ids, _ids, st.none())


def _call() -> st.SearchStrategy[dict[str, Any] | None]:
    function = st.builds(
        lambda name, arguments: {"name": name, "arguments": arguments},
        st.sampled_from(["f", "f", "g", None]),
        st.sampled_from(['{"n": 1}', "{}", "[1]", "{bad", None]),
    )
    call = st.builds(
        lambda i, fn: {"id": i, "type": "function", "function": fn},
        _maybe_ids,
        function | st.none(),
    )
    return call | st.none()


def _messages() -> st.SearchStrategy[dict[str, Any] | None]:
    message = st.builds(
        lambda role, content, calls, call_id, thought, thinking, weight, name: {
            "role": role,
            "content": content,
            "tool_calls": calls,
            "tool_call_id": call_id,
            "reasoning_content": thought,
            "thinking": thinking,
            "weight": weight,
            "name": name,
        },
        st.sampled_from(_ROLES),
        _maybe_texts,
        st.lists(_call(), max_size=3) | st.none(),
        _maybe_ids,
        st.sampled_from([None, None, "", " ", "hmm"]),
        st.sampled_from([None, None, None, "t"]),
        st.sampled_from([None, None, 0, 1]),
        st.sampled_from([None, None, "f"]),
    )
    return message | st.none()


def _rows() -> st.SearchStrategy[list[dict[str, Any]]]:
    # Mostly well formed: a question, calls answered by their results, an answer.
    exchange = st.builds(
        lambda ids, named, words: [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i if named else None, "function": {"name": "f", "arguments": "{}"}}
                    for i in ids
                ],
            },
            *({"role": "tool", "tool_call_id": i if named else None, "content": "ok"} for i in ids),
            {"role": "assistant", "content": words},
        ],
        st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
        st.booleans(),
        _texts,
    )
    row = st.builds(
        lambda head, tail: {"messages": head + tail},
        exchange | st.just([]),
        st.lists(_messages(), max_size=6),
    )
    return st.lists(row | st.just({"messages": None}), min_size=1, max_size=6)


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=_SCHEMA)


def test_rows_flatten_as_the_decoder_reads_them() -> None:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows())
    def check(rows: list[dict[str, Any]]) -> None:
        assert_flattened_as_decoded(OPENAI, _table(rows), unread_superset=True)

    check()


def test_the_rows_it_leaves_unread_are_few_and_named() -> None:
    """A row the decoder reads is unread only for a legacy call, calls on a message that is not
    the assistant's, or a made-up id that would meet one of the row's own."""
    turn = {"role": "user", "content": "go"}
    said = {"role": "assistant", "content": "done"}
    calling = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}
    result = {"role": "tool", "content": "ok"}
    rows = [
        {"messages": [turn, calling, result, said]},  # ids by place: read
        {"messages": [turn, {**turn, "tool_calls": calling["tool_calls"]}, said]},
        {"messages": [turn, calling, {**result, "tool_call_id": "call_1_0"}, said]},
        {"messages": [turn, said, result, {**result, "tool_call_id": "result_2"}]},
    ]
    view = OPENAI.flatten(_table(rows).column("messages").combine_chunks())
    assert view is not None
    assert [truth(OPENAI, row) is not None for row in rows] == [True] * 4
    assert view.unread.tolist() == [False, True, True, True]


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_batches_agree_on_both_paths(config: Config) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rows())
    def check(rows: list[dict[str, Any]]) -> None:
        assert_fast_and_slow_agree(_table(rows), config, OPENAI)

    check()


def test_other_role_names_are_read_as_the_roles_they_stand_for() -> None:
    fmt = OpenAIFormat(roles={"User": "user", "Chatbot": "assistant", "System": "system"})
    rows = [
        {
            "messages": [
                {"role": "System", "content": "Be brief."},
                {"role": "User", "content": "hi"},
                {"role": "Chatbot", "content": "hello"},
                {"role": "Chatbot", "content": "again"},
            ]
        },
        {"messages": [{"role": "User", "content": "hi"}, {"role": "Chatbot", "content": " "}]},
    ]
    table = pa.Table.from_pylist(rows)
    view = assert_flattened_as_decoded(fmt, table)
    assert not view.unread.any()
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, fmt)


def _real_tables() -> list[tuple[str, pa.Table]]:
    out = []
    for path in sorted(SHARED.glob("*.json*")):
        text = path.read_text()
        if path.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            loaded = json.loads(text)
            rows = loaded if isinstance(loaded, list) else [loaded]
        rows = [{"messages": row["messages"]} for row in rows if "messages" in row]
        out.append((path.name, pa.Table.from_pylist(rows)))
    golden = pq.read_table(GOLDEN / "openai.parquet")
    out.append(("golden/openai.parquet", golden))
    return out


@pytest.mark.parametrize(
    "name, table", _real_tables(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_real_files_flatten_as_decoded_and_agree(name: str, table: pa.Table) -> None:
    column = table.column("messages").combine_chunks()
    if OPENAI.flatten(column) is not None:
        assert_flattened_as_decoded(OPENAI, table, unread_superset=True)
    else:  # a layout the flattener does not read (calls without ids): every row per row
        assert not openai_shape(column.type)
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, OPENAI)


@pytest.mark.parametrize("tools", [False, True], ids=["no tools", "tools"])
@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_generated_rows_agree_and_most_are_settled_in_arrow(config: Config, tools: bool) -> None:
    rows = [row for row, _ in generate_rows(1500, "openai", seed=5, rates=every_rates("openai"))]
    if not tools:
        rows = [{k: v for k, v in row.items() if k != "tools"} for row in rows]
    table = pa.Table.from_pylist(rows)
    view = assert_flattened_as_decoded(OPENAI, table, unread_superset=True)
    assert view.unread.mean() < 0.05
    assert_fast_and_slow_agree(table, config, OPENAI)
    verdicts = fast_verdicts(OPENAI, table.column("messages").combine_chunks(), schema=table.schema)
    assert verdicts is not None and verdicts.clean.sum() > table.num_rows // 2
