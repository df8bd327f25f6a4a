"""The Anthropic fast path against the per-row path: a differential test, as for OpenAI."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from differential import (
    assert_fast_and_slow_agree,
    assert_verdicts_equal_on_generated_rows,
    per_row_clean,
    verdicts_reached,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import generate_rows

from transcript_clean.fastpath import clean_mask, fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.pipeline import batch_verdicts
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules.unanswered_tool_call import INTERRUPTED_TEXT

ANTHROPIC = get_format("anthropic")
BLOCK = pa.struct(
    [
        ("type", pa.string()),
        ("text", pa.string()),
        ("thinking", pa.string()),
        ("signature", pa.string()),
        ("data", pa.string()),
        ("id", pa.string()),
        ("name", pa.string()),
        ("input", pa.struct([("city", pa.string())])),
        ("tool_use_id", pa.string()),
        ("content", pa.string()),
        ("is_error", pa.bool_()),
    ]
)
MESSAGE = pa.struct([("role", pa.string()), ("content", pa.list_(BLOCK))])
SCHEMA = pa.schema([("messages", pa.list_(MESSAGE)), ("system", pa.string())])


@pytest.mark.parametrize("seed", [0, 1])
def test_verdicts_equal_on_generated_data_of_every_defect_kind(seed: int) -> None:
    assert_verdicts_equal_on_generated_rows(ANTHROPIC, seed, kinds=7)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
@pytest.mark.parametrize("size", [1, 10, 500])
def test_fast_and_slow_batches_give_identical_output(config: Config, size: int) -> None:
    rows = [row for row, _ in generate_rows(size, format="anthropic", seed=size)]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, ANTHROPIC)


def text(value: str | None = "hi") -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(id: str | None = "a", city: str | None = "Paris", input: bool = True) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "f", "input": {"city": city} if input else None}


def result(id: str | None = "a", error: bool | None = None) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id, "content": "18 C", "is_error": error}


BLOCKS = st.sampled_from(
    [
        text(),
        text(" "),
        text(""),
        text(None),
        use(),
        use("b"),
        use(None),
        use(input=False),
        result(),
        result("b"),
        result("z", True),
        result(None),
        {"type": "thinking", "thinking": "hmm", "signature": None},
        {"type": "thinking", "thinking": " ", "signature": "sig"},
        {"type": "thinking", "thinking": " ", "signature": None},
        {"type": "redacted_thinking", "data": "xyz"},
        {"type": "image"},
        {"type": None},
    ]
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "assistant", "system", None]))
    content = draw(st.one_of(st.none(), st.lists(BLOCKS, max_size=3)))
    return {"role": role, "content": content}


@st.composite
def near_valid(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid conversation of a few exchanges, now and then with a message changed, taken out
    or put in: the rows the fast path must get exactly right."""
    out: list[dict[str, Any]] = []
    for k in range(draw(st.integers(1, 3))):
        out.append({"role": "user", "content": [text("q")]})
        kind = draw(st.sampled_from(["chat", "one", "two", "thought", "chat"]))
        if kind == "chat":
            out.append({"role": "assistant", "content": [text(draw(st.sampled_from(["a", " "])))]})
            continue
        ids = [f"{k}a"] if kind in ("one", "thought") else [f"{k}a", f"{k}b"]
        said = [text("let me look")] if draw(st.booleans()) else []
        if kind == "thought":
            said.insert(0, {"type": "thinking", "thinking": "hmm", "signature": "s"})
        out.append({"role": "assistant", "content": said + [use(i) for i in ids]})
        answers = [result(i, draw(st.sampled_from([None, False, True]))) for i in ids]
        out.append({"role": "user", "content": draw(st.permutations(answers))})
        out.append({"role": "assistant", "content": [text("done")]})
    if draw(st.integers(0, 3)) == 0:  # calls pending at the end
        pending = [use("p"), use("q")][: draw(st.integers(1, 2))]
        out += [{"role": "user", "content": [text("q")]}, {"role": "assistant", "content": pending}]
    if draw(st.integers(0, 2)) == 0:
        out.insert(draw(st.integers(0, len(out))), draw(messages()))
    if draw(st.integers(0, 2)) == 0:
        out.pop(draw(st.integers(0, len(out) - 1)))
    return out


def table_of(rows: list[tuple[list[dict[str, Any]], str | None]]) -> pa.Table:
    return pa.Table.from_pylist([{"messages": m, "system": s} for m, s in rows], schema=SCHEMA)


ROWS = st.lists(
    st.tuples(
        st.one_of(st.lists(messages(), max_size=6), near_valid(), near_valid()),
        st.sampled_from([None, "", "Be brief."]),
    ),
    min_size=1,
    max_size=8,
)


ERROR_RESULT = replace(DEFAULT, interrupted_call="error_result")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ROWS, st.sampled_from([DEFAULT, STRICT, ERROR_RESULT]))
def test_fast_and_slow_batches_agree_on_any_rows(
    rows: list[tuple[list[dict[str, Any]], str | None]], config: Config
) -> None:
    assert_fast_and_slow_agree(table_of(rows), config, ANTHROPIC)


def test_near_valid_rows_reach_every_verdict() -> None:
    tables = st.lists(st.tuples(near_valid(), st.none()), min_size=10, max_size=10).map(table_of)
    seen = verdicts_reached(tables, ANTHROPIC)
    assert min(seen) >= 20, seen  # clean, pending at the end, and left to the per-row path


def test_text_content_is_read_too() -> None:
    schema = pa.schema(
        [("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))]
    )
    rows = [
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": " "}],
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None}],
        [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}],
    ]
    table = pa.Table.from_pylist([{"messages": m} for m in rows], schema=schema)
    mask = clean_mask(ANTHROPIC, table.column("messages"))
    assert mask is not None and mask.tolist() == [True, False, False, False]
    assert_fast_and_slow_agree(table, DEFAULT, ANTHROPIC)


def test_a_system_prompt_of_blocks_means_no_fast_path() -> None:
    conversation = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    table = pa.table({"messages": [conversation], "system": [[{"type": "text", "text": "s"}]]})
    assert fast_verdicts(ANTHROPIC, table.column("messages"), schema=table.schema) is None
    assert_fast_and_slow_agree(table, DEFAULT, ANTHROPIC)


def conversation(*turns: tuple[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"role": role, "content": blocks} for role, blocks in turns]


HAND = [
    # a call made twice is pending once (and counted once when it ends the history)
    conversation(("user", [text()]), ("assistant", [use(), use()])),
    # a result given twice: the second answers nothing
    conversation(("user", [text()]), ("assistant", [use()]), ("user", [result(), result()])),
    conversation(("user", [text()]), ("assistant", [{"type": "thinking", "thinking": " "}])),
    conversation(("user", [text()]), ("assistant", [text(None), use()]), ("user", [result()])),
    conversation(("user", [text()]), ("assistant", [use(input=False)]), ("user", [result()])),
    conversation(("user", [text()]), ("assistant", [text(), {"type": "image"}])),
    conversation(("user", [text()]), ("assistant", [text(), result()])),
    conversation(("user", [text(), use()]), ("assistant", [text()])),
    conversation(("user", [result()]), ("assistant", [text()])),
    conversation(("user", [text()]), ("assistant", [use()]), ("user", [result(None)])),
    conversation(("user", [text()]), ("assistant", [use(), use("b")]), ("user", [result("b")])),
    conversation(("user", [text()]), ("assistant", [text(), {"type": "redacted_thinking"}])),
    conversation(("user", [text()]), ("assistant", [text(), {"type": "thinking"}])),
]


@pytest.mark.parametrize("index", range(len(HAND)))
def test_hand_made_shapes(index: int) -> None:
    """The flattener reads each row exactly as the decoder does: clean in Arrow exactly when
    the per-row path keeps it unchanged with no code (an image block is media, not unread)."""
    table = table_of([(HAND[index], None)])
    mask = clean_mask(ANTHROPIC, table.column("messages"))
    assert mask is not None
    assert mask.tolist() == [per_row_clean(r, ANTHROPIC) for r in table.to_pylist()]
    assert_fast_and_slow_agree(table, DEFAULT, ANTHROPIC)


def test_empty_turns_and_unanswered_calls_are_repaired_in_arrow() -> None:
    u, a = "user", "assistant"
    rows = [
        [msg(u, [text("q")]), msg(a, [text(" ")]), msg(u, [text("q2")]), msg(a, [text("x")])],
        [msg(u, [text("q")]), msg(a, [text("x")]), msg(u, [text("q2")]), msg(a, [])],
        [msg(u, [text("q")]), msg(a, [text("")])],  # no assistant turn would be left
        # an unanswered call: cut before its turn
        [msg(u, [text("q")]), msg(a, [text("x")]), msg(u, [text("q2")]), msg(a, [use()]),
         msg(u, [text("q3")]), msg(a, [text("y")])],
        [msg(u, [text("q")]), msg(a, [use()]), msg(u, [text("q2")]), msg(a, [text("y")])],
        # a null content is no empty turn but a row the decoder rejects
        [msg(u, [text("q")]), msg(a, None), msg(u, [text("q2")]), msg(a, [text("y")])],
    ]  # fmt: skip
    table = table_of([(r, None) for r in rows])
    verdicts = fast_verdicts(
        ANTHROPIC,
        table.column("messages"),
        repair=["empty_assistant_turn", "unanswered_tool_call"],
        reject=["no_assistant_turn"],
    )
    assert verdicts is not None
    assert verdicts.repaired.tolist() == [True, True, False, True, False, False]
    assert verdicts.repaired_column is not None
    fixed = verdicts.repaired_column.to_pylist()
    assert [len(m) for m in fixed] == [3, 3, 3]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, ANTHROPIC)


def msg(role: str, content: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {"role": role, "content": content}


def test_error_results_are_written_in_arrow_into_the_answering_user_message() -> None:
    """Where the config answers an unanswered call with R5's error result, it is written in
    Arrow as the encoder writes it: a `tool_result` block, `is_error`, after the results the
    answering user message opens with and before its text. A user message holding another
    kind of block (an image, which the encoder writes anew) leaves its row to the per-row
    path; so does a config that cuts (in Arrow too, as before)."""
    u, a = "user", "assistant"
    calls = msg(a, [text("let me look"), use("x"), use("y")])
    done = msg(a, [text("done")])
    rows = [
        [msg(u, [text("q")]), calls, msg(u, [result("x", None)]), done],
        [msg(u, [text("q")]), calls, msg(u, [text("stop")]), done],
        [msg(u, [text("q")]), calls, msg(u, [result("x", None), text("stop")]), done],
        [msg(u, [text("q")]), calls, msg(u, [{"type": "image"}, text("stop")]), done],
    ]
    table = table_of([(r, None) for r in rows])
    verdicts = batch_verdicts(table, ERROR_RESULT, format=ANTHROPIC)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, True, True, False]
    assert verdicts.repaired.tolist() == [True, True, True, False]
    assert verdicts.repaired_column is not None
    answers = [
        [(b["type"], b["tool_use_id"], b["is_error"]) for b in m[2]["content"]]
        for m in verdicts.repaired_column.to_pylist()
    ]
    error = [("tool_result", "y", True)]
    assert answers == [
        [("tool_result", "x", None), *error],
        [("tool_result", "x", True), *error, ("text", None, None)],
        [("tool_result", "x", None), *error, ("text", None, None)],
    ]
    texts = {b["content"] for m in verdicts.repaired_column.to_pylist() for b in m[2]["content"]}
    assert INTERRUPTED_TEXT in texts
    for config in (DEFAULT, STRICT, ERROR_RESULT):
        assert_fast_and_slow_agree(table, config, ANTHROPIC)
