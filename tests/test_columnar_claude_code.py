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
    assert_settled_in_arrow,
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
                {
                    "type": st.sampled_from(["user", "assistant"]),
                    "uuid": st.uuids().map(str) | _ids | st.none(),
                    "message": message,
                }
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
    # Mostly well formed: a call in two streamed events, its result, an empty turn, an answer.
    exchange = st.just(
        [
            {"type": "user", "uuid": "e1", "message": {"content": [
                {"type": "text", "text": "go"}]}},
            {"type": "assistant", "uuid": "e2", "message": {"id": "m1", "content": [
                {"type": "text", "text": "x"}]}},
            {"type": "assistant", "uuid": "e3", "message": {"id": "m1", "content": [
                {"type": "tool_use", "id": "a", "name": "f", "input": {"n": 1}}]}},
            {"type": "system"},
            {"type": "user", "uuid": "e4", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"}]}},
            {"type": "assistant", "uuid": "e5", "message": {"id": "m2", "content": [
                {"type": "text", "text": ""}]}},
            {"type": "system"},
            {"type": "user", "uuid": "e6", "message": {"content": [
                {"type": "text", "text": "?"}]}},
            {"type": "assistant", "uuid": "e7", "message": {"id": "m3", "content": [
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


def _said(type_: str, text: str, id_: str | None = None, uuid: str | None = None) -> dict[str, Any]:
    message = {"id": id_, "content": [{"type": "text", "text": text}]}
    return {"type": type_, "uuid": uuid, "message": message}


def _thinks(id_: str, uuid: str | None = None) -> dict[str, Any]:
    block = {"type": "thinking", "thinking": "hm", "signature": "s"}
    return {"type": "assistant", "uuid": uuid, "message": {"id": id_, "content": [block]}}


def test_streamed_answers_and_other_events_are_written_as_the_encoder_writes_them() -> None:
    """Two assistant events with one `message.id` are one message (no R4); a third with another
    id is a message of its own (R4: its blocks joined into the streamed answer's first event,
    as the encoder writes it). R1's drop is written in Arrow as the
    encoder writes it: a streamed answer as one event holding the blocks of all, an event
    holding no message after its message event, or last where that is dropped. Where the
    encoder does more (reasoning after a streamed answer's first event, an event holding no
    message after one whose uuid is null or shared), the row is the per-row path's."""
    u, a = "user", "assistant"
    streamed = [_said(u, "go"), _said(a, "a", "m1"), _said(a, "b", "m1")]
    empty = [
        _said(u, "?", uuid="u2"),
        _said(a, " ", "m8", "a8"),
        _said(u, "?"),
        _said(a, "x", "m9"),
    ]
    system = {"type": "system", "uuid": "x"}
    rows = [
        streamed,
        [*streamed, _said(a, "c", "m2")],
        # an empty turn, in a row of one event per message: dropped
        [_said(u, "go"), *empty],
        # the same after a streamed answer (an event holding no message between its events)
        [_said(u, "go"), _said(a, "a", "m0", "a0"), system, _said(a, "b", "m0", "a1"), *empty],
        # an event holding no message after the empty turn: moved last; one after the
        # streamed answer's second event too
        [_said(u, "go"), _said(a, "a", "m0", "a0"), _said(a, "b", "m0", "a1"), system,
         *empty[:2], system, *empty[2:]],
        # the streamed answer thinks in its second event: the per-row path's
        [_said(u, "go"), _said(a, "a", "m0", "a0"), _thinks("m0", "a1"), *empty],
        # an event holding no message after a message event with no uuid, or a shared one
        [_said(u, "go"), _said(a, "a", "m0"), system, *empty],
        [_said(u, "go", uuid="a8"), system, *empty],
    ]  # fmt: skip
    table = _table(rows)
    view = assert_flattened_as_decoded(CLAUDE, table)
    assert view.message_row[:5].tolist() == [0, 0, 1, 1, 1]  # the streamed answer is one
    assert view.reencoded is not None
    assert view.reencoded.tolist() == [False] * 5 + [True] * 3
    assert_settled_in_arrow(
        table,
        CLAUDE,
        handled=[True, True, True, True, True, False, False, False],
        repaired=[False, True, True, True, True, False, False, False],
        lengths=[2, 4, 6, 7],
        words={},
    )
    written = batch_verdicts(table, DEFAULT, format=CLAUDE)
    assert written is not None and written.repaired_column is not None
    merged, _, _, fourth = written.repaired_column.to_pylist()
    assert [e["type"] for e in merged] == ["user", "assistant"]  # R4: one event, every block
    assert [b["text"] for b in merged[1]["message"]["content"]] == ["a", "b", "c"]
    assert [e["type"] for e in fourth] == [
        "user",
        "assistant",
        "user",
        "user",
        "assistant",
        "system",
        "system",
    ]
    assert [b["text"] for b in fourth[1]["message"]["content"]] == ["a", "b"]


def test_claude_code_generated_rows_with_every_code_flatten_as_decoded() -> None:
    rows = [
        r for r, _ in generate_rows(400, "claude-code", seed=21, rates=every_rates("claude-code"))
    ]
    table = pa.Table.from_pylist(rows, schema=arrow_schema("claude-code"))
    view = assert_flattened_as_decoded(CLAUDE, table)
    assert 0 < view.unread.sum() < len(rows) // 5
    # streamed answers among them, and events holding no message: all written in Arrow
    assert view.item_message is not None
    assert view.messages < (view.item_message >= 0).sum()
    assert (view.item_message < 0).any()
    assert view.reencoded is not None and not view.reencoded.any()


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


def _message_event(type_: str, uuid: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": type_, "uuid": uuid, "message": {"id": f"m-{uuid}", "content": list(blocks)}}


def test_error_results_are_written_in_arrow_into_the_answering_user_event() -> None:
    """R5's error result (the default for a session) is written in Arrow as the encoder writes
    it: a `tool_result` block, `is_error`, in the user event that answers the call's turn, after
    the results it opens with and before what the user said. A user event holding another kind
    of block (an image, which the encoder writes anew) leaves its row to the per-row path."""
    u, a = "user", "assistant"
    ask = _message_event(u, "u1", {"type": "text", "text": "Look."})
    calls = _message_event(
        a, "a1", *({"type": "tool_use", "id": i, "name": "f", "input": {"n": 1}} for i in "xy")
    )
    given = {"type": "tool_result", "tool_use_id": "x", "content": "1"}
    stop = {"type": "text", "text": "[Request interrupted by user for tool use]"}
    done = _message_event(a, "a2", {"type": "text", "text": "Done."})
    rows = [
        [ask, calls, _message_event(u, "u2", given), done],
        [ask, calls, {"type": "system", "uuid": "s"}, _message_event(u, "u2", stop), done],
        [ask, calls, _message_event(u, "u2", given, stop), done],
        [ask, calls, _message_event(u, "u2", {"type": "image"}, stop), done],
    ]
    table = _table(rows)
    assert_flattened_as_decoded(CLAUDE, table)
    verdicts = batch_verdicts(table, DEFAULT, format=CLAUDE)
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, True, True, False]
    assert verdicts.repaired.tolist() == [True, True, True, False]
    assert verdicts.repaired_column is not None
    answers = [
        [(b["type"], b["tool_use_id"], b["is_error"]) for b in e["message"]["content"]]
        for events in verdicts.repaired_column.to_pylist()
        for e in events
        if e["uuid"] == "u2"
    ]
    error = [("tool_result", "y", True)]
    both = [("tool_result", "x", True), *error]
    assert answers == [
        [("tool_result", "x", None), *error],
        [*both, ("text", None, None)],
        [("tool_result", "x", None), *error, ("text", None, None)],
    ]
    for config in (DEFAULT, STRICT, replace(DEFAULT, interrupted_call="cut")):
        assert_fast_and_slow_agree(table, config, CLAUDE)


def test_r4s_merges_are_written_in_arrow_into_the_first_event() -> None:
    """An answer that thinks, then another of plain text: its block joins the first event's
    blocks, the second event goes and an event holding no message after it moves last, as the
    encoder writes it; a repeat goes with nothing added. A streamed answer with an event holding
    no block, others joined into it, is the per-row path's (its one text is not read here)."""
    u, a = "user", "assistant"
    thinks = _thinks("m1", "a1")
    thinks["message"]["content"].append({"type": "text", "text": "Hi."})
    system = {"type": "system", "uuid": "x"}
    hollow = {"type": a, "uuid": "a0", "message": {"id": "m0", "content": []}}
    rows = [
        [_said(u, "go", uuid="u1"), thinks, _said(a, "More.", "m2", "a2"), system,
         _said(u, "ok", uuid="u2"), _said(a, "Bye.", "m3", "a3")],
        [_said(u, "go"), _said(a, "Hi.", "m1"), _said(a, "Hi.", "m2")],
        [_said(u, "go"), hollow, _said(a, "Hi.", "m0", "a1"), _said(a, "Hi.", "m2", "a2")],
    ]  # fmt: skip
    table = _table(rows)
    assert_flattened_as_decoded(CLAUDE, table)
    assert_settled_in_arrow(
        table,
        CLAUDE,
        handled=[True, True, False],
        repaired=[True, True, False],
        lengths=[5, 2],
        words={},
    )
    written = batch_verdicts(table, DEFAULT, format=CLAUDE)
    assert written is not None and written.repaired_column is not None
    first, repeat = written.repaired_column.to_pylist()
    assert [e["uuid"] for e in first] == ["u1", "a1", "u2", "a3", "x"]
    assert [b["type"] for b in first[1]["message"]["content"]] == ["thinking", "text", "text"]
    assert [b["text"] for b in repeat[1]["message"]["content"]] == ["Hi."]


def test_answers_apart_with_one_message_id_are_the_per_row_paths() -> None:
    """Two answers with one `message.id` and an empty turn between them: R1's drop would make
    them one streamed answer when the row is read again, where the per-row path merges them
    (R4) or, their other fields differing, rejects the row. Such a row is `reencoded`."""
    u, a = "user", "assistant"
    apart = [_said(u, "go", uuid="u0"), _said(a, "b", "m2", "a1"), _said(a, " ", "m1", "a2"),
             _said(a, "a", "m2", "a3")]  # fmt: skip
    rows = [[{**e, "sessionId": "s"} for e in apart], [*apart[:3], {**apart[3], "sessionId": "z"}]]
    table = pa.Table.from_pylist([{"events": r} for r in rows])
    view = assert_flattened_as_decoded(CLAUDE, table)
    assert view.reencoded is not None and view.reencoded.tolist() == [True, True]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, CLAUDE)
