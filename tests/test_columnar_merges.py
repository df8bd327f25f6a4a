"""R4 (`consecutive_assistant`) merged in Arrow: the rule's merges decided over the columnar view
(`consecutive_assistant.merges`), as edits (`columnar/edits.py`) each format writes in its own
layout (`Format.write`), held to the per-row path's output for OpenAI, ShareGPT, Hermes,
Anthropic (string and block content), rig and LLaMA-Factory; and the joined texts to
`formats.base.join_texts`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from differential import assert_settled_in_arrow
from hypothesis import given
from hypothesis import strategies as st

from transcript_clean.columnar.edits import JOINER, Merges, merged_texts
from transcript_clean.formats import get_format
from transcript_clean.formats.base import TEXT_JOINER, Format, join_texts
from transcript_clean.pipeline import batch_verdicts, clean_batch
from transcript_clean.policy import DEFAULT, STRICT

Message = Callable[..., dict[str, Any]]
"""A format's message: `(role, text, weight=None, call=False, thought=False)`."""


def _openai(
    role: str, text: str, weight: int | None = None, call: bool = False, thought: bool = False
) -> Any:
    calls = None
    if call:
        calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    reasoning = "hmm" if thought else None
    message = {"role": role, "content": text, "reasoning_content": reasoning, "tool_calls": calls}
    return {**message, "weight": weight}


def _sharegpt(role: str, text: str, weight: int | None = None, call: bool = False) -> Any:
    tag = {"user": "human", "assistant": "gpt"}[role]
    turn = {"from": tag, "value": text, "weight": weight}
    if call:  # the gpt turn, then its call
        value = '{"name": "f", "arguments": {}}'
        return [turn, {"from": "function_call", "value": value, "weight": weight}]
    return turn


def _hermes(role: str, text: str, weight: int | None = None, call: bool = False) -> Any:
    tag = {"user": "human", "assistant": "gpt"}[role]
    if call:  # the call in the gpt turn's text
        text += '\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    return {"from": tag, "value": text, "weight": weight}


def _gemini(
    role: str, text: str, weight: int | None = None, call: bool = False, thought: bool = False
) -> Any:
    parts: list[dict[str, Any]] = [{"text": text, "thought": None, "functionCall": None}]
    if thought:
        parts.insert(0, {"text": "hmm", "thought": True, "functionCall": None})
    if call:
        parts.append({"text": None, "thought": None, "functionCall": {"name": "f", "args": {}}})
    return {"role": {"user": "user", "assistant": "model"}[role], "parts": parts, "weight": weight}


def _bedrock(
    role: str, text: str, weight: int | None = None, call: bool = False, thought: bool = False
) -> Any:
    blocks: list[dict[str, Any]] = [{"text": text, "toolUse": None, "reasoningContent": None}]
    if thought:
        reasoning = {"reasoningText": {"text": "hmm", "signature": "sig"}}
        blocks.insert(0, {"text": None, "toolUse": None, "reasoningContent": reasoning})
    if call:
        use = {"toolUseId": "t1", "name": "f", "input": {"x": 1}}
        blocks.append({"text": None, "toolUse": use, "reasoningContent": None})
    return {"role": role, "content": blocks, "weight": weight}


def _anthropic_text(role: str, text: str, weight: int | None = None) -> Any:
    return {"role": role, "content": text, "weight": weight}


def _anthropic_blocks(
    role: str, text: str, weight: int | None = None, thought: bool = False
) -> Any:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text, "thinking": None}]
    if thought:
        blocks.insert(0, {"type": "thinking", "text": None, "thinking": "hmm"})
    return {"role": role, "content": blocks, "weight": weight}


def _rig(
    role: str, text: str, weight: int | None = None, call: bool = False, thought: bool = False
) -> Any:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text, "id": None, "function": None}]
    if thought:
        pieces = [{"type": "text", "text": "hmm"}]
        parts.insert(0, {"type": "reasoning", "id": None, "function": None, "content": pieces})
    if call:
        function = {"name": "f", "arguments": "{}"}
        parts.append({"type": "toolcall", "text": None, "id": "c1", "function": function})
    message: dict[str, Any] = {"role": role, "content": parts, "weight": weight}
    if role == "assistant":
        message["id"] = None
    return message


def _llamafactory(
    role: str, text: str, weight: float | None = None, call: bool = False, thought: bool = False
) -> Any:
    items = [{"type": "text", "value": text}]
    if thought:
        items.insert(0, {"type": "reasoning", "value": "hmm"})
    if call:
        items.append({"type": "tool_call", "value": '{"name": "f", "arguments": {}}'})
    return {"role": role, "content": items, "loss_weight": weight}


def _rows(m: Message, thinks: bool = False, **odd: Any) -> list[list[Any]]:
    """The rows every format is tried on; `odd` is what makes an assistant message other than
    plain text in this format (a call, a thought). With `thinks` (a format whose messages can
    think), a row whose first message thinks comes last: its reasoning stays, the second's
    text follows."""
    u = lambda text: m("user", text)  # noqa: E731
    a = lambda text, **kw: m("assistant", text, **kw)  # noqa: E731
    return [
        # 0: a pair: joined
        [u("q"), a("a"), a("b")],
        # 1: a second repeating the first: dropped, the row goes on
        [u("q"), a("a"), a("a"), u("q2"), a("c")],
        # 2: a run of four: the leading repeat adds nothing, the later one does
        [u("q"), a("a"), a("a"), a("b"), a("a")],
        # 3: R1 and R4 in one row: the empty turn dropped first, then the merge across it
        [u("q"), a("a"), a(" "), a("b é")],
        # 4: an empty turn first, then a pair; the texts' own white space kept
        [u("q"), a("\n"), a("x\n"), a(" y"), u("q2"), a("z")],
        # 5: their other fields differ: rejected by the per-row path
        [u("q"), a("a", weight=1), a("b", weight=0)],
        # 6: the second is not plain text here: the per-row path's
        [u("q"), a("a"), a("b", **odd)],
        # 7: the same fields on both: joined
        [u("q"), a("a", weight=1), a("b", weight=1)],
    ] + ([[u("q"), a("a", thought=True), a("a")]] if thinks else [])  # 8: the first thinks


def _flat(row: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in row:
        out += item if isinstance(item, list) else [item]
    return out


def _table(fmt: Format, rows: list[list[Any]]) -> pa.Table:
    records = [{fmt.column: _flat(r)} for r in rows]
    if fmt.name in ("sharegpt", "anthropic"):
        for record in records:
            record["system"] = None
    return pa.Table.from_pylist(records)


CASES = [  # the format, its message, what makes a second not plain text, whether one thinks
    ("openai", _openai, {"call": True}, True),
    ("sharegpt", _sharegpt, {"call": True}, False),
    ("hermes", _hermes, {"call": True}, False),
    ("gemini", _gemini, {"call": True}, True),
    ("bedrock", _bedrock, {"call": True}, True),
    ("anthropic", _anthropic_text, None, False),
    ("anthropic", _anthropic_blocks, {"thought": True}, True),
    ("rig", _rig, {"call": True}, True),
    ("llamafactory", _llamafactory, {"call": True}, True),
]


@pytest.mark.parametrize(
    ("name", "message", "odd", "thinks"), CASES, ids=[f"{n}-{m.__name__}" for n, m, *_ in CASES]
)
def test_merges_are_settled_in_arrow_as_the_per_row_path_writes_them(
    name: str, message: Message, odd: dict[str, Any] | None, thinks: bool
) -> None:
    fmt = get_format(name)
    rows = _rows(message, thinks, **(odd or {}))
    settled = [True, True, True, True, True, False, False, True] + [True] * thinks
    lengths = [2, 4, 2, 2, 4, 2] + [2] * thinks
    if odd is None:  # string content holds nothing but text
        rows, settled = rows[:6] + rows[7:], settled[:6] + settled[7:]
    table = _table(fmt, rows)
    assert_settled_in_arrow(
        table, fmt, handled=settled, repaired=settled, lengths=lengths, words={}
    )
    # Byte for byte: the kept table the fast path writes is the per-row path's, types and all.
    for config in (DEFAULT, STRICT):
        fast = clean_batch(table, config, format=fmt, source="s")
        slow = clean_batch(table, config, format=fmt, source="s", fast=False)
        assert fast.kept.equals(slow.kept)
        assert fast.kept.schema == slow.kept.schema


def test_joined_texts_are_what_the_encoders_write() -> None:
    """A ShareGPT turn holds the joined text; a rig message the parts, each as it came."""
    sharegpt, rig = get_format("sharegpt"), get_format("rig")
    rows = _rows(_sharegpt, call=True)
    verdicts = batch_verdicts(_table(sharegpt, rows), DEFAULT, format=sharegpt)
    assert verdicts is not None and verdicts.repaired_column is not None
    said = [[t["value"] for t in row] for row in verdicts.repaired_column.to_pylist()]
    assert said[0] == ["q", "a\n\nb"]
    assert said[2] == ["q", "a\n\nb\n\na"]
    assert said[3] == ["q", "a\n\nb é"]
    assert said[4] == ["q", "x\n\n\n y", "q2", "z"]
    assert said[5] == ["q", "a\n\nb"]
    verdicts = batch_verdicts(_table(rig, _rows(_rig, True, call=True)), DEFAULT, format=rig)
    assert verdicts is not None and verdicts.repaired_column is not None
    written = verdicts.repaired_column.to_pylist()
    assert [p["text"] for p in written[2][1]["content"]] == ["a", "b", "a"]
    assert [p["text"] for p in written[3][1]["content"]] == ["a", "b é"]
    # A first that thinks is never repeated: the second's text follows its reasoning and text.
    assert [p["type"] for p in written[-1][1]["content"]] == ["reasoning", "text", "text"]


def test_a_first_the_format_cannot_grow_leaves_only_its_own_row_per_row() -> None:
    """Hermes writes a gpt turn's texts as one value: a first turn that also thinks cannot be
    grown in Arrow, and its row alone goes to the per-row path, not every merge of the batch."""
    fmt = get_format("hermes")
    u = _hermes("user", "q")
    thinks = {"from": "gpt", "value": "<think>\nhmm\n</think>\na", "weight": None}
    rows = [
        [u, _hermes("assistant", "a"), _hermes("assistant", "b")],
        [u, thinks, _hermes("assistant", "b")],
    ]
    table = _table(fmt, rows)
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, False]
    fast = clean_batch(table, DEFAULT, format=fmt, source="s")
    slow = clean_batch(table, DEFAULT, format=fmt, source="s", fast=False)
    assert fast.kept.equals(slow.kept)
    assert [t["value"] for t in fast.kept.column(fmt.column)[0].as_py()] == ["q", "a\n\nb"]


def test_an_openai_first_that_thinks_grows_its_content_beside_its_reasoning() -> None:
    """OpenAI keeps reasoning in fields of its own, which a merge leaves as they are: a first
    that thinks (in any of them, its content text, blank or none) grows its `content` in Arrow;
    a second that thinks too is the per-row path's."""
    fmt = get_format("openai")
    u = {"role": "user", "content": "q"}

    def a(content: str | None, **reasoning: str) -> dict[str, Any]:
        return {"role": "assistant", "content": content, **reasoning}

    rows = [
        [u, a("a", reasoning_content="hmm"), a("b")],
        [u, a(None, reasoning_content="hmm"), a("b")],
        [u, a("", thinking="hmm"), a("b"), a("c")],
        [u, a(" ", reasoning="hmm"), a("b")],
        [u, a("a", reasoning_content="hmm"), a("a")],  # no repeat: the first thinks
        [u, a("a", reasoning_content="hmm"), a("b", reasoning_content="more")],
    ]
    table = pa.Table.from_pylist([{"messages": r} for r in rows])
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, True, True, True, True, False]
    for config in (DEFAULT, STRICT):
        fast = clean_batch(table, config, format=fmt, source="s")
        slow = clean_batch(table, config, format=fmt, source="s", fast=False)
        assert fast.kept.equals(slow.kept)
    kept = clean_batch(table, DEFAULT, format=fmt, source="s").kept.column("messages").to_pylist()
    assert [m["content"] for m in kept[0]] == ["q", "a\n\nb"]
    assert kept[0][1]["reasoning_content"] == "hmm"
    assert [m["content"] for m in kept[1]] == ["q", "b"]
    assert [m["content"] for m in kept[2]] == ["q", "b\n\nc"] and kept[2][1]["thinking"] == "hmm"
    assert [m["content"] for m in kept[4]] == ["q", "a\n\na"]


def test_rows_with_r4_where_the_config_rejects_it_are_the_per_row_paths() -> None:
    fmt = get_format("llamafactory")
    table = _table(fmt, _rows(_llamafactory, call=True))
    verdicts = batch_verdicts(table, STRICT, format=fmt)
    assert verdicts is not None
    assert not verdicts.repaired.any()


_TEXTS = st.lists(st.sampled_from(["", " ", "\n", "\u3000", "a", "b c", "é\n"]), min_size=2)


@given(st.lists(_TEXTS, min_size=1, max_size=4))
def test_merged_texts_join_as_join_texts(runs: list[list[str]]) -> None:
    """Each run of texts joined into its first: `join_texts` of them, in NumPy and Arrow."""
    texts = [t for run in runs for t in run]
    into = np.full(len(texts), -1, dtype=np.int64)
    start = 0
    for run in runs:
        into[start + 1 : start + len(run)] = start
        start += len(run)
    column = pa.array(texts)
    grown, joined = merged_texts(Merges(into, into >= 0), lambda at: column.take(pa.array(at)))
    starts = np.cumsum([0] + [len(r) for r in runs[:-1]])
    assert grown.tolist() == starts.tolist()
    assert joined.to_pylist() == [join_texts(run) for run in runs]
    assert JOINER == TEXT_JOINER
