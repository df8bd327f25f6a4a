"""consecutive_assistant (R4) and per-message training fields (issue 16, item 3): two assistant
messages merge only when their other fields (`weight`, `loss_weight`) agree, and no repair loses
or changes a message's weight."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from transcript_clean.formats import get_format
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import DEFAULT
from transcript_clean.rows import clean_row

OPENAI = get_format("openai")
SHAREGPT = get_format("sharegpt")
ZAVA = Path(__file__).resolve().parents[2] / "shared/data/openai/msfoundry_zava_toolsft_valid.jsonl"


def a(text: str | None, **more: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **more}


def row(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "q"}, *messages]}


@pytest.mark.parametrize("fast", [True, False])
def test_messages_of_different_weights_are_not_merged(fast: bool) -> None:
    bad = row(a("a", weight=0), a("b", weight=1))
    result = clean_batch(pa.Table.from_pylist([bad]), format=OPENAI, fast=fast)
    assert result.kept.num_rows == 0
    assert result.rejects.column("_reject_codes").to_pylist() == [["consecutive_assistant"]]
    assert result.rejects.column("_reject_message").to_pylist() == [
        "message 2: an assistant message follows another and their weight (0, 1) differ; "
        "merging them would change what they train"
    ]


@pytest.mark.parametrize("fast", [True, False])
def test_messages_of_one_weight_merge_and_keep_it(fast: bool) -> None:
    good = row(a("a", weight=1), a("b", weight=1))
    result = clean_batch(pa.Table.from_pylist([good]), format=OPENAI, fast=fast)
    assert result.kept.column("messages").to_pylist()[0][1] == a("a\n\nb", weight=1)


def test_in_a_batch_each_pair_is_merged_or_not_by_its_own_weights() -> None:
    # The fast path compares the two messages of each pair R4 could merge, and only those.
    rows = [
        row(a("a", weight=1), a("b", weight=1)),
        row(a("a", weight=0), a("b", weight=1)),
        row(a("x", weight=1), {"role": "user", "content": "r"}, a("a", weight=1), a("b")),
        row(a("a"), a("b")),
        row(a("a", weight=1), a("b", weight=0), a("c", weight=0)),
        row(a("a", weight=0), a("b", weight=0)),
    ]
    table = pa.Table.from_pylist(rows)
    fast, slow = (clean_batch(table, format=OPENAI, fast=f) for f in (True, False))
    assert fast.kept.equals(slow.kept) and fast.rejects.equals(slow.rejects)
    merged = [m[-1] for m in fast.kept.column("messages").to_pylist()]
    assert [m["content"] for m in merged] == ["a\n\nb", "a\n\nb", "a\n\nb"]
    assert [m["weight"] for m in merged] == [1, None, 0]
    assert fast.rejects.num_rows == 3


def test_a_missing_field_and_a_null_one_agree() -> None:
    result = clean_row(row(a("a"), a("b", weight=None)), OPENAI)
    assert result.status == "repaired"


def test_loss_weight_of_sharegpt_turns_must_agree_too() -> None:
    turns = [
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": "a", "loss_weight": 0.0},
        {"from": "gpt", "value": "b", "loss_weight": 1.0},
    ]
    result = clean_row({"conversations": turns}, SHAREGPT)
    assert result.codes == ["consecutive_assistant"]
    assert result.reject_message is not None and "loss_weight (0.0, 1.0)" in result.reject_message


def test_an_empty_turn_is_dropped_with_its_weight_and_the_others_keep_theirs() -> None:
    messages = row(a(" ", weight=1), {"role": "user", "content": "r"}, a("x", weight=0))
    result = clean_row(messages, OPENAI)
    assert result.status == "repaired"
    assert result.row == row({"role": "user", "content": "r"}, a("x", weight=0))


def _zava(weight: Any) -> list[dict[str, Any]]:
    if not ZAVA.exists():
        pytest.skip(f"{ZAVA} is not here")
    rows = [json.loads(line) for line in ZAVA.read_text().splitlines() if line.strip()]
    for r in rows:
        for m in r["messages"]:
            if m["role"] == "assistant":
                m["weight"] = weight(m)
    return rows


def _weights(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[m.get("weight") for m in r["messages"] if m["role"] == "assistant"] for r in rows]


def test_zava_with_weights_text_0_calls_1_never_merges_them() -> None:
    # Twenty rows hold an assistant text right before an assistant call: weight 0 and 1.
    rows = _zava(lambda m: 1 if m.get("tool_calls") else 0)
    table = pa.Table.from_pylist(rows)
    result = clean_batch(table, DEFAULT, format=OPENAI)
    assert result.rejects.num_rows == 20
    for codes, message in zip(
        result.rejects.column("_reject_codes").to_pylist(),
        result.rejects.column("_reject_message").to_pylist(),
        strict=True,
    ):
        assert "consecutive_assistant" in codes
        assert "their weight (0, 1) differ" in message
    # every other row is kept as it came, each weight as it was
    rejected = set(result.rejects.column("_source_row").to_pylist())
    expected = [r for i, r in enumerate(table.to_pylist()) if i not in rejected]
    assert result.kept.to_pylist() == expected


def test_zava_with_one_weight_merges_and_keeps_it() -> None:
    rows = _zava(lambda m: 1)
    result = clean_batch(pa.Table.from_pylist(rows), DEFAULT, format=OPENAI)
    assert result.rejects.num_rows == 0
    kept = result.kept.to_pylist()
    assert len(kept) == 55
    assert {w for ws in _weights(kept) for w in ws} == {1}


# Issue 27, item 6: a blank text on either side of an R4 merge adds no blank line. The first
# turn is not empty (it carries reasoning), so R1 leaves it, and R4 joins its blank text.
_BLANK_JOINS: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "openai",
        [a("", reasoning_content="think"), a("It is 4.")],
        "It is 4.",
    ),
    (
        "openai",
        [a("It is 4."), a(" ", reasoning_content="think")],
        "It is 4.",
    ),
    (
        "sharegpt",
        [
            {"from": "gpt", "value": "", "reasoning_content": "think"},
            {"from": "gpt", "value": "It is 4."},
        ],
        "It is 4.",
    ),
    (
        "sharegpt",
        [
            {"from": "gpt", "value": "It is 4."},
            {"from": "gpt", "value": "\n", "reasoning_content": "think"},
        ],
        "It is 4.",
    ),
]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("name", "assistants", "merged"), _BLANK_JOINS)
def test_a_blank_text_merged_adds_no_blank_line(
    name: str, assistants: list[dict[str, Any]], merged: str, fast: bool
) -> None:
    fmt = get_format(name)
    if name == "openai":
        source = row(*assistants)
        key = "content"
    else:
        source = {"conversations": [{"from": "human", "value": "q"}, *assistants]}
        key = "value"
    result = clean_batch(pa.Table.from_pylist([source]), format=fmt, fast=fast)
    assert result.rejects.num_rows == 0
    last = result.kept.column(fmt.column).to_pylist()[0][-1]
    assert last[key] == merged
    assert last["reasoning_content"] == "think"
