"""Claude Code's flattener (`formats/claude_code/flatten.py`) held to its decoder: each row read
as the decoder reads it, unread exactly where the decoder raises, each walk attribute what the
rule's `find` finds; and clean's output through the fast path the per-row path's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from differential import (
    assert_fast_and_slow_agree,
    assert_verdicts_equal_on_generated_rows,
)
from flattened import assert_flattened_as_decoded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import arrow_schema, every_rates, generate_rows

from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.pipeline import batch_verdicts
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.sources import jsontypes, open_source
from transcript_clean.utf8 import python_rows

CLAUDE = get_format("claude-code")
DATA = Path(__file__).parent / "data" / "claude_code"

_S = pa.string()
_BLOCK = pa.struct(
    [("type", _S), ("text", _S), ("thinking", _S), ("signature", _S), ("id", _S), ("name", _S),
     ("input", pa.struct([("n", pa.int64())])), ("tool_use_id", _S), ("content", _S),
     ("is_error", pa.bool_())]
)  # fmt: skip
_MESSAGE = pa.struct([("id", _S), ("role", _S), ("content", pa.list_(_BLOCK))])
_EVENT = pa.struct([("type", _S), ("uuid", _S), ("message", _MESSAGE)])
SCHEMA = pa.schema([("events", pa.list_(_EVENT))])

_texts = st.sampled_from(["", " ", "\n", "hi", "\u3000", "é!"])
_ids = st.sampled_from(["a", "b", "c"])
_text = st.builds(lambda t: {"type": "text", "text": t}, _texts)
_use = st.builds(lambda i: {"type": "tool_use", "id": i, "name": "f", "input": {"n": 1}}, _ids)
_thinking = st.builds(
    lambda t, s: {"type": "thinking", "thinking": t, "signature": s},
    _texts,
    st.sampled_from(["sig", None]),
)
_result = st.builds(
    lambda i, t, e: {"type": "tool_result", "tool_use_id": i, "content": t, "is_error": e},
    _ids,
    _texts | st.none(),
    st.sampled_from([None, True, False]),
)
_odd = st.sampled_from(
    [{"type": "image"}, {"type": "text"}, {"type": "tool_use", "id": None, "name": "f"}, None]
)


def _events() -> st.SearchStrategy[list[dict[str, Any]] | None]:
    block = st.one_of(_text, _text, _use, _use, _thinking, _result, _result, _odd)
    message = st.fixed_dictionaries(
        {
            # a streamed answer's events share an id; the role is the event's type, not this
            "id": st.sampled_from(["m1", "m1", "m2", None]),
            "role": st.sampled_from(["user", "assistant", None]),
            "content": st.lists(block, max_size=3) | st.none(),
        }
    )
    event = st.one_of(
        *[
            st.fixed_dictionaries(
                {"type": st.sampled_from(["user", "assistant"]), "uuid": _ids, "message": message}
            )
        ]
        * 6,
        # passed over: another type, with a message or none; unread: a null event, a message
        # event whose message is null (or missing: Arrow cannot tell)
        st.fixed_dictionaries(
            {"type": st.sampled_from(["system", "summary", None]), "message": message | st.none()}
        ),
        st.just(None),
        st.just({"type": "user", "message": None}),
    )
    # Mostly well formed: a call in two streamed events, its result, an answer.
    exchange = st.just(
        [
            {"type": "user", "message": {"content": [{"type": "text", "text": "go"}]}},
            {"type": "assistant", "message": {"id": "m1", "content": [
                {"type": "text", "text": "x"}]}},
            {"type": "assistant", "message": {"id": "m1", "content": [
                {"type": "tool_use", "id": "a", "name": "f", "input": {"n": 1}}]}},
            {"type": "system"},
            {"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"}]}},
            {"type": "assistant", "message": {"id": "m2", "content": [
                {"type": "text", "text": "1"}]}},
        ]
    )  # fmt: skip
    row = st.builds(
        lambda head, tail: head + tail, exchange | st.just([]), st.lists(event, max_size=6)
    )
    return row | st.none()


def _table(events: list[list[dict[str, Any]] | None]) -> pa.Table:
    return pa.Table.from_pylist([{"events": e} for e in events], schema=SCHEMA)


def test_claude_code_rows_flatten_as_the_decoder_reads_them() -> None:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(_events(), min_size=1, max_size=6))
    def check(events: list[list[dict[str, Any]] | None]) -> None:
        assert_flattened_as_decoded(CLAUDE, _table(events))

    check()


@pytest.mark.parametrize(
    "config",
    [
        DEFAULT,
        STRICT,
        replace(DEFAULT, orphan_result="drop"),
        replace(DEFAULT, interrupted_call="cut"),
    ],
    ids=["default", "strict", "drop orphans", "cut"],
)
def test_claude_code_batches_of_any_rows_agree_on_both_paths(config: Config) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(_events(), min_size=1, max_size=6))
    def check(events: list[list[dict[str, Any]] | None]) -> None:
        assert_fast_and_slow_agree(_table(events), config, CLAUDE)

    check()


def test_a_streamed_answer_is_one_message_and_its_row_is_repaired_per_row() -> None:
    """Two assistant events with one `message.id` are one message (no R4); a third with another
    id is a message of its own (R4). A row whose message came from several events, or that
    holds an event with no message, is written anew by the encoder (`reencoded`): its repairs
    are the per-row path's; a row of one event per message is repaired in Arrow."""

    def said(type_: str, text: str, id_: str | None = None) -> dict[str, Any]:
        message = {"id": id_, "content": [{"type": "text", "text": text}]}
        return {"type": type_, "message": message}

    streamed = [said("user", "go"), said("assistant", "a", "m1"), said("assistant", "b", "m1")]
    rows = [
        streamed,
        [*streamed, said("assistant", "c", "m2")],
        # an empty turn, in a row of one event per message: dropped in Arrow
        [said("user", "go"), said("assistant", " ", "m1"), said("user", "?"),
         said("assistant", "x", "m2")],
        # the same after a streamed answer: the encoder writes that answer as one event
        [said("user", "go"), said("assistant", "a", "m0"), said("assistant", "b", "m0"),
         said("user", "?"), said("assistant", " ", "m1"), said("user", "?"),
         said("assistant", "x", "m2")],
        # the same with an event holding no message: the encoder moves it
        [said("user", "go"), said("assistant", " ", "m1"), {"type": "system"}, said("user", "?"),
         said("assistant", "x", "m2")],
    ]  # fmt: skip
    table = _table(rows)
    view = assert_flattened_as_decoded(CLAUDE, table)
    assert view.message_row.tolist() == [0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4]
    assert view.reencoded is not None
    assert view.reencoded.tolist() == [True, True, False, True, True]
    verdicts = batch_verdicts(table, DEFAULT, format=CLAUDE)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, False, True, False, False]
    assert verdicts.repaired.tolist() == [False, False, True, False, False]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, CLAUDE)


def test_claude_code_generated_rows_with_every_code_flatten_as_decoded() -> None:
    rows = [
        r for r, _ in generate_rows(400, "claude-code", seed=21, rates=every_rates("claude-code"))
    ]
    table = pa.Table.from_pylist(rows, schema=arrow_schema("claude-code"))
    view = assert_flattened_as_decoded(CLAUDE, table)
    assert 0 < view.unread.sum() < len(rows) // 5
    assert view.reencoded is not None and 0 < view.reencoded.sum() < len(rows)


def test_claude_code_clean_rows_are_found_clean_in_arrow() -> None:
    assert_verdicts_equal_on_generated_rows(CLAUDE, seed=4, kinds=6)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_claude_code_batches_agree_on_both_paths(config: Config) -> None:
    rows = [
        r for r, _ in generate_rows(600, "claude-code", seed=8, rates=every_rates("claude-code"))
    ]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, CLAUDE)


def _session_rows(name: str) -> list[dict[str, Any]]:
    source = open_source(str(DATA / name))
    return [row for part in source.parts() for b in source.read(part) for row in python_rows(b)]


@pytest.mark.parametrize("name", ["dag_compact_after_rewind.jsonl", "sidechain_integrated.jsonl"])
def test_real_sessions_as_a_session_source_reads_them(name: str) -> None:
    """A session file's rows hold their events as JSON text (`sources/sessions.py`): the fast
    path leaves them to the per-row path, which parses them; both paths agree."""
    source = open_source(str(DATA / name))
    part = source.parts()[0]
    batch = next(source.read(part))
    assert jsontypes.is_json(batch.schema.field("events").type)
    assert CLAUDE.flatten(batch.column("events")) is None
    table = pa.Table.from_batches([batch])
    assert batch_verdicts(table, DEFAULT, format=CLAUDE) is None
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, CLAUDE)


@pytest.mark.parametrize("name", ["dag_compact_after_rewind.jsonl", "sidechain_integrated.jsonl"])
def test_real_sessions_typed_as_arrow(name: str) -> None:
    """The same rows with their events typed as a JSON source types them (`jsontypes`): a
    field whose values differ in type (a prompt's string content beside a result's blocks) is
    JSON text, which the flattener does not read; the rows of one type throughout are read as
    the decoder reads them, and both paths agree."""
    rows = _session_rows(name)
    for subset in (rows, *([r] for r in rows)):
        events = [r["events"] for r in subset]
        column = jsontypes.to_array(events, jsontypes.infer(events))
        table = pa.table({"events": column})
        view = CLAUDE.flatten(column)
        if view is not None:
            assert_flattened_as_decoded(CLAUDE, table)
        for config in (DEFAULT, STRICT):
            assert_fast_and_slow_agree(table, config, CLAUDE)


def test_real_sessions_with_uniform_content_are_read() -> None:
    """The main thread of claude-code-log's sidechain session, its blocks' `content` (a
    result's text blocks) and its `toolUseResult` left out where the two disagree in type: each
    event is read, the verdicts of both paths agree."""
    (main,) = [r for r in _session_rows("sidechain_integrated.jsonl") if not r["sidechain"]]
    events = main["events"]
    for e in events:
        e.pop("toolUseResult", None)
        for block in e["message"]["content"]:
            if isinstance(block.get("content"), list):
                block["content"] = " ".join(b["text"] for b in block["content"])
    column = jsontypes.to_array([events], jsontypes.infer([events]))
    table = pa.table({"events": column})
    view = assert_flattened_as_decoded(CLAUDE, table)
    assert not view.unread.any() and view.messages == 3
    verdicts = fast_verdicts(CLAUDE, column, keep_trailing=True)
    assert verdicts is not None and verdicts.clean.tolist() == [True]
    assert_fast_and_slow_agree(table, DEFAULT, CLAUDE)
