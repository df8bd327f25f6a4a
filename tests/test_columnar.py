"""The columnar view of conversations (`transcript_clean.columnar`): a format's flattener reads
each row as its decoder does, and the walk over the view finds exactly what each rule's `find`
finds on the per-row path."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree, assert_verdicts_equal_on_generated_rows
from flattened import CHECKED, assert_flattened_as_decoded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_leaves, json_values
from synthetic import every_rates, generate_rows

from transcript_clean.columnar.conversations import ASSISTANT, SYSTEM, USER, Conversations
from transcript_clean.columnar.walk import ConversationsWalk
from transcript_clean.formats import get_format
from transcript_clean.formats.sharegpt import flatten as sharegpt_flatten
from transcript_clean.formats.sharegpt.values import split_list
from transcript_clean.jsontext import loads
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules import get_rule
from transcript_clean.rules.orphan_tool_result import used_message

RIG = get_format("rig")


def test_each_rule_reads_its_check_from_the_walk() -> None:
    for code, attribute in {**CHECKED, "empty_assistant_turn": "rows_empty"}.items():
        check = get_rule(code).columnar
        assert check is not None, code
        walk = ConversationsWalk(conversations([[]]))
        assert check(walk) is getattr(walk, attribute)


def conversations(rows: list[list[tuple[int, list[str], list[str]]]]) -> Conversations:
    """A view built by hand: per row, its messages as (role, call ids, result ids); every
    message says something."""
    message_row, role, call_message, call_id, result_message, result_call = [], [], [], [], [], []
    for r, messages in enumerate(rows):
        for kind, calls, results in messages:
            at = len(role)
            message_row.append(r)
            role.append(kind)
            call_message += [at] * len(calls)
            call_id += calls
            result_message += [at] * len(results)
            result_call += results
    m, c = len(role), len(call_id)
    return Conversations(
        rows=len(rows),
        unread=np.zeros(len(rows), dtype=bool),
        message_row=np.array(message_row, dtype=np.int64),
        role=np.array(role, dtype=np.int8),
        said=np.ones(m, dtype=bool),
        thought=np.zeros(m, dtype=bool),
        reasoned=np.zeros(m, dtype=bool),
        spoken=np.ones(m, dtype=bool),
        chars=np.ones(m, dtype=np.int64),
        call_message=np.array(call_message, dtype=np.int64),
        call_id=pa.array(call_id, pa.string()),
        call_name=pa.array(["f"] * c, pa.string()),
        call_arguments=pa.array(["{}"] * c, pa.string()),
        call_object=np.ones(c, dtype=bool),
        result_message=np.array(result_message, dtype=np.int64),
        result_call=pa.array(result_call, pa.string()),
        result_blank=np.zeros(len(result_call), dtype=bool),
    )


def test_the_walk_on_hand_made_rows() -> None:
    A, U, S = ASSISTANT, USER, SYSTEM
    view = conversations(
        [
            [(U, [], []), (A, ["a", "b"], []), (S, [], []), (U, [], ["b", "a"]), (A, [], [])],
            [(U, [], []), (A, ["a"], []), (U, [], ["a", "a"]), (A, [], [])],  # a repeat: orphan
            [(U, [], []), (A, ["a"], []), (A, [], [])],  # consecutive, and `a` unanswered
            [(U, [], ["x"]), (A, [], [])],  # a result with no window
            [(U, [], []), (A, ["a", "a"], []), (S, [], [])],  # pending at the end, one id
            [(U, [], [])],
        ]
    )
    view.check()
    walk = ConversationsWalk(view)
    assert walk.rows_orphan.tolist() == [False, True, False, True, False, False]
    assert walk.rows_consecutive.tolist() == [False, False, True, False, False, False]
    assert walk.rows_unanswered.tolist() == [False, False, True, False, False, False]
    assert walk.rows_trailing.tolist() == [False, False, False, False, True, False]
    assert walk.trailing_calls.tolist() == [0, 0, 0, 0, 1, 0]
    assert walk.rows_duplicate_id.tolist() == [False, False, False, False, True, False]
    assert walk.rows_no_assistant.tolist() == [False, False, False, False, False, True]


_walked_rows = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from([SYSTEM, USER, ASSISTANT]),
            st.lists(st.sampled_from("abc"), max_size=3),
            st.lists(st.sampled_from("abcd"), max_size=3),
            st.booleans(),
        ),
        max_size=7,
    ),
    min_size=1,
    max_size=4,
)


@given(_walked_rows)
def test_the_walk_pairs_calls_and_results_as_a_row_by_row_reading_does(
    rows: list[list[tuple[int, list[str], list[str], bool]]],
) -> None:
    """The walk's pairing (by place where results stand in their calls' order, else by id)
    held to SPEC section 3 read one row at a time: turns with a repeated id, results out of
    order, repeated and unknown ids, system messages between a turn and its results, and
    empty turns, which R1 sets aside."""
    # Calls are the assistant's, results a user message's.
    rows = [
        [
            (role, calls if role == ASSISTANT else [], results if role == USER else [], says)
            for role, calls, results, says in r
        ]
        for r in rows
    ]
    view = conversations([[(role, calls, results) for role, calls, results, _ in r] for r in rows])
    said = [says for r in rows for _, _, _, says in r]
    view = replace(view, said=np.array(said, dtype=bool))
    walk = ConversationsWalk(view)
    previous, orphan, answered, answer, duplicate = [], [], [], [], []
    call = result = 0
    for messages in rows:
        kept = [
            (role, calls, results)
            for role, calls, results, says in messages
            if says or calls or role != ASSISTANT
        ]
        turns: dict[int, list[tuple[int, str]]] = {}  # a turn's calls: (call, id)
        last = -1
        for k, (role, calls, results) in enumerate(kept):
            previous.append(-1 if last < 0 else len(previous) - k + last)
            opener = kept[last] if last >= 0 and role == USER else None
            window = turns.get(last, []) if opener is not None and opener[0] == ASSISTANT else []
            seen: set[str] = set()
            for call_id in results:
                ids = [i for _, i in window]
                lone = call_id in ids and call_id not in seen
                orphan.append(not lone)
                seen.add(call_id)
                for c, i in window:
                    if lone and i == call_id:
                        answered[c], answer[c] = True, result
                result += 1
            turns[k] = []
            for j, call_id in enumerate(calls):
                duplicate.append(call_id in calls[:j])
                turns[k].append((call, call_id))
                answered.append(False)
                answer.append(-1)
                call += 1
            if role != SYSTEM:
                last = k
    assert walk.previous_said.tolist() == previous
    assert walk.orphan.tolist() == orphan
    assert walk.answered.tolist() == answered
    assert walk.answer.tolist() == answer
    assert walk.duplicate.tolist() == duplicate


def test_a_view_whose_columns_do_not_fit_is_refused() -> None:
    view = conversations([[(USER, [], [])]])
    view.role = np.zeros(3, dtype=np.int8)
    with pytest.raises(ValueError, match="role has 3 items, not 1"):
        view.check()


# ---------------------------------------------------------------------------------------------
# rig's flattener, held to its decoder

_PIECE = pa.struct([("type", pa.string()), ("text", pa.string()), ("data", pa.string())])
_PART = pa.struct(
    [
        ("type", pa.string()),
        ("text", pa.string()),
        ("id", pa.string()),
        ("signature", pa.string()),
        ("content", pa.list_(_PIECE)),
        (
            "function",
            pa.struct([("name", pa.string()), ("arguments", pa.struct([("n", pa.int64())]))]),
        ),
        ("additional_params", pa.struct([("k", pa.string())])),
        ("call", pa.string()),
        ("name", pa.string()),
        ("status", pa.string()),
    ]
)
RIG_SCHEMA = pa.schema(
    [
        (
            "messages",
            pa.list_(
                pa.struct(
                    [("role", pa.string()), ("id", pa.string()), ("content", pa.list_(_PART))]
                )
            ),
        )
    ]
)

_ids = st.sampled_from(["a", "b", "c"])
_texts = st.sampled_from(["", " ", "\n", "hi", "\u3000", None])
_pieces = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "summary"]), "text": _texts}),
    st.fixed_dictionaries(
        {"type": st.just("encrypted"), "data": st.sampled_from(["enc", "enc", None])}
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["other", None]), "text": _texts}),
)
_user_parts = (
    st.fixed_dictionaries({"type": st.just("text"), "text": _texts})
    | st.fixed_dictionaries(
        {
            "type": st.just("toolresult"),
            "call": _ids | st.none(),
            "status": st.sampled_from([None, "success", "error", "done"]),
            "content": st.lists(
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["text", "image", "video"]), "text": _texts}
                ),
                max_size=2,
            )
            | st.none(),
        }
    )
    | st.fixed_dictionaries({"type": st.sampled_from(["image", "document", "toolcall"])})
)
_assistant_parts = (
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": _texts},
        optional={"additional_params": st.sampled_from([None, {"k": "v"}])},
    )
    | st.fixed_dictionaries(
        {
            "type": st.just("toolcall"),
            "id": _ids | st.none(),
            "function": st.fixed_dictionaries(
                {
                    "name": st.sampled_from(["f", None]),
                    "arguments": st.sampled_from([{"n": 1}, None]),
                }
            )
            | st.none(),
        }
    )
    | st.fixed_dictionaries(
        {
            "type": st.just("reasoning"),
            "signature": st.sampled_from([None, None, "sig"]),
            "content": st.lists(_pieces, max_size=2) | st.none(),
        }
    )
    | st.fixed_dictionaries({"type": st.sampled_from(["image", "toolresult", None])})
)
_messages = st.one_of(
    st.fixed_dictionaries(
        {"role": st.just("user"), "content": st.lists(_user_parts, max_size=3) | st.none()}
    ),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "id": st.sampled_from([None, "m1"]),
            "content": st.lists(_assistant_parts, max_size=3),
        }
    ),
    st.fixed_dictionaries({"role": st.sampled_from(["system", "tool", "User", None])}),
    st.fixed_dictionaries(  # one part alone decides whether a turn is empty
        {
            "role": st.just("assistant"),
            "content": st.lists(_assistant_parts, min_size=1, max_size=1),
        }
    ),
)
# Mostly well formed rows: a call's answer in the next user message, so that the walk has
# windows to close.
_answered = st.builds(
    lambda call_id, said: [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "toolcall",
                    "id": call_id,
                    "function": {"name": "f", "arguments": {"n": 2}},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "toolresult", "call": call_id, "content": [{"type": "text", "text": said}]}
            ],
        },
    ],
    _ids,
    _texts.filter(lambda t: t is not None),
)
_rows = st.lists(
    st.builds(
        lambda head, tail: head + tail, _answered | st.just([]), st.lists(_messages, max_size=5)
    ),
    min_size=1,
    max_size=6,
)


def _assert_flattened_as_decoded(rows: list[dict[str, Any]]) -> Conversations:
    return assert_flattened_as_decoded(RIG, pa.Table.from_pylist(rows, schema=RIG_SCHEMA))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows)
def test_rig_rows_flatten_as_the_decoder_reads_them(rows: list[list[dict[str, Any]]]) -> None:
    _assert_flattened_as_decoded([{"messages": m} for m in rows])


# Each part alone in an assistant turn: what decides whether the turn is empty (R1).
RIG_ALONE = [{"type": "text", "text": t} for t in ("", " ", "\u3000", "x")] + [
    {"type": "text", "text": " ", "additional_params": {"k": "v"}},
    {"type": "reasoning", "content": []},
    {"type": "reasoning", "content": [{"type": "text", "text": " "}]},
    {"type": "reasoning", "content": [{"type": "summary", "text": "why"}]},
    {"type": "reasoning", "content": [{"type": "encrypted", "data": "enc"}]},
    {"type": "reasoning", "content": [{"type": "text", "text": ""}], "signature": "sig"},
    {"type": "image"},
    {"type": "toolcall", "id": "a", "function": {"name": "f", "arguments": {"n": 1}}},
]


def test_rig_turns_of_one_part_flatten_as_decoded() -> None:
    said = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    rows = [{"messages": [said, {"role": "assistant", "content": [part]}]} for part in RIG_ALONE]
    view = _assert_flattened_as_decoded(rows)
    assert view.unread.sum() == 0
    assert ConversationsWalk(view).rows_empty.sum() == 5  # four blank texts and no pieces


def test_rig_generated_rows_with_every_code_flatten_as_decoded() -> None:
    rows = [row for row, _ in generate_rows(400, "rig", seed=21, rates=every_rates("rig"))]
    view = assert_flattened_as_decoded(RIG, pa.Table.from_pylist(rows))
    assert view.unread.sum() < len(rows) // 5


def test_rig_clean_rows_are_found_clean_in_arrow() -> None:
    assert_verdicts_equal_on_generated_rows(RIG, seed=4, kinds=6)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_rig_batches_agree_on_both_paths(config: Config) -> None:
    rows = [row for row, _ in generate_rows(600, "rig", seed=8, rates=every_rates("rig"))]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, RIG)


def test_rig_empty_turns_are_dropped_in_arrow_as_the_per_row_path_drops_them() -> None:
    """Each message of a rig row is one item of its column, so R1 is a drop of list items: the
    rows whose only code is an empty turn are repaired by the view, none by the per-row path."""
    from transcript_clean.pipeline import batch_verdicts

    rows = list(generate_rows(300, "rig", seed=2, rates={"empty_assistant_turn": 0.3}))
    table = pa.Table.from_pylist([row for row, _ in rows])
    verdicts = batch_verdicts(table, DEFAULT, format="rig")
    assert verdicts is not None
    planted = [bool(codes) for _, codes in rows]
    assert sum(planted) > 50
    assert verdicts.repaired.tolist() == planted
    assert verdicts.handled.all()
    assert_fast_and_slow_agree(table, DEFAULT, RIG)


def _rig_turn(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": list(parts)}


def _said(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _calls(call_id: str) -> dict[str, Any]:
    return {"type": "toolcall", "id": call_id, "function": {"name": "f", "arguments": {"n": 1}}}


def _result(call_id: str, *texts: str) -> dict[str, Any]:
    return {"type": "toolresult", "call": call_id, "content": [_said(t) for t in texts]}


@pytest.mark.parametrize("drop", [False, True], ids=["reject", "drop"])
def test_rig_orphans_a_later_turn_may_use_reject_their_rows_in_arrow(drop: bool) -> None:
    """R3 over the view: a row whose orphan result says one text no earlier result gave, with
    an assistant turn after it, is rejected in Arrow in the per-row path's words; one whose
    orphan repeats a result, or says two texts (which the view does not compare), is the
    per-row path's, as is every one where the config drops such orphans."""
    from transcript_clean.pipeline import batch_verdicts

    def row(*orphan: str) -> list[dict[str, Any]]:
        return [
            _rig_turn("user", _said("go")),
            _rig_turn("assistant", _calls("a")),
            _rig_turn("user", _result("a", "18 C"), _result("z", *orphan)),
            _rig_turn("assistant", _said("It is 18 C.")),
        ]

    rows = [row("19 C"), row("18 C"), row("19", " C")]
    table = pa.Table.from_pylist([{"messages": m} for m in rows], schema=RIG_SCHEMA)
    config = replace(DEFAULT, orphan_result="drop") if drop else DEFAULT
    verdicts = batch_verdicts(table, config, format="rig")
    assert verdicts is not None
    assert verdicts.handled.tolist() == [not drop, False, False]
    if not drop:
        (reject,) = verdicts.rejects
        assert reject.code == "orphan_tool_result" and reject.messages == [used_message(2, "z")]
    assert_fast_and_slow_agree(table, config, RIG)


def test_rig_unanswered_calls_are_cut_in_arrow_or_rejected_in_the_per_row_paths_words() -> None:
    from transcript_clean.pipeline import batch_verdicts

    stuck = [
        _rig_turn("user", _said("go")),
        _rig_turn("assistant", _calls("a")),
        _rig_turn("user", _said("never mind")),
        _rig_turn("assistant", _said("ok")),
    ]
    cut = [
        _rig_turn("user", _said("hi")),
        _rig_turn("assistant", _said("hello")),
        _rig_turn("user", _said("go")),
        _rig_turn("assistant", _calls("b")),
        _rig_turn("user", _said("stop")),
        _rig_turn("assistant", _said("stopped")),
    ]
    table = pa.Table.from_pylist([{"messages": stuck}, {"messages": cut}], schema=RIG_SCHEMA)
    verdicts = batch_verdicts(table, DEFAULT, format="rig")
    assert verdicts is not None and verdicts.handled.all()
    assert verdicts.repaired.tolist() == [False, True]
    (reject,) = verdicts.rejects
    assert reject.messages == [
        "message 1: tool call 'a' has no result, and cutting the transcript before it would "
        "leave no assistant turn"
    ]
    assert verdicts.repaired_column is not None
    assert [m["role"] for m in verdicts.repaired_column.to_pylist()[0]] == [
        "user",
        "assistant",
        "user",
    ]
    assert_fast_and_slow_agree(table, DEFAULT, RIG)
    rows = [
        row for row, _ in generate_rows(400, "rig", seed=9, rates={"unanswered_tool_call": 0.4})
    ]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), DEFAULT, RIG)


# ---------------------------------------------------------------------------------------------
# Anthropic's flattener, held to its decoder

ANTHROPIC = get_format("anthropic")
_BLOCK = pa.struct(
    [
        ("type", pa.string()),
        ("text", pa.string()),
        ("thinking", pa.string()),
        ("signature", pa.string()),
        ("data", pa.string()),
        ("id", pa.string()),
        ("name", pa.string()),
        ("input", pa.struct([("n", pa.int64())])),
        ("tool_use_id", pa.string()),
        ("content", pa.string()),
        ("is_error", pa.bool_()),
    ]
)
ANTHROPIC_SCHEMA = pa.schema(
    [
        ("system", pa.string()),
        (
            "messages",
            pa.list_(pa.struct([("role", pa.string()), ("content", pa.list_(_BLOCK))])),
        ),
    ]
)
_blocks = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _texts}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": _ids | st.none(),
            "name": st.sampled_from(["f", None]),
            "input": st.sampled_from([{"n": 1}, None]),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_result"),
            "tool_use_id": _ids | st.none(),
            "content": _texts,
            "is_error": st.sampled_from([None, True, False]),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("thinking"), "thinking": _texts, "signature": st.sampled_from([None, "s"])}
    ),
    st.fixed_dictionaries(
        {"type": st.just("redacted_thinking"), "data": st.sampled_from(["x", None])}
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["image", None])}),
)
_anthropic_messages = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "assistant", "system", None]),
        "content": st.lists(_blocks, max_size=3) | st.none(),
    }
) | st.fixed_dictionaries(  # one block alone decides whether a turn is empty
    {"role": st.just("assistant"), "content": st.lists(_blocks, min_size=1, max_size=1)}
)
_anthropic_answered = st.builds(
    lambda call_id, said: [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": "f", "input": {"n": 2}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": said}],
        },
    ],
    _ids,
    _texts,
)
_anthropic_rows = st.lists(
    st.fixed_dictionaries(
        {
            "system": st.sampled_from([None, "", " ", "Be brief."]),
            "messages": st.builds(
                lambda head, tail: head + tail,
                _anthropic_answered | st.just([]),
                st.lists(_anthropic_messages, max_size=4),
            ),
        }
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_anthropic_rows)
def test_anthropic_rows_flatten_as_the_decoder_reads_them(rows: list[dict[str, Any]]) -> None:
    assert_flattened_as_decoded(ANTHROPIC, pa.Table.from_pylist(rows, schema=ANTHROPIC_SCHEMA))


def test_anthropic_turns_of_one_block_flatten_as_decoded() -> None:
    alone = [{"type": "text", "text": t} for t in ("", " ", "x")] + [
        {"type": "thinking", "thinking": " "},
        {"type": "thinking", "thinking": "why"},
        {"type": "thinking", "thinking": "", "signature": "s"},
        {"type": "redacted_thinking", "data": "x"},
        {"type": "image"},
        {"type": "tool_use", "id": "a", "name": "f", "input": {"n": 1}},
    ]
    said = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    rows = [
        {"system": None, "messages": [said, {"role": "assistant", "content": [block]}]}
        for block in alone
    ]
    table = pa.Table.from_pylist(rows, schema=ANTHROPIC_SCHEMA)
    view = assert_flattened_as_decoded(ANTHROPIC, table)
    assert view.unread.sum() == 0
    assert ConversationsWalk(view).rows_empty.sum() == 3  # two blank texts and blank thinking


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_anthropic_batches_agree_on_both_paths(config: Config) -> None:
    rows = [
        row for row, _ in generate_rows(600, "anthropic", seed=8, rates=every_rates("anthropic"))
    ]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, ANTHROPIC)


# ---------------------------------------------------------------------------------------------
# ShareGPT's flattener, held to its decoder

SHAREGPT = get_format("sharegpt")
SHAREGPT_SCHEMA = pa.schema(
    [
        ("system", pa.string()),
        ("conversations", pa.list_(pa.struct([("from", pa.string()), ("value", pa.string())]))),
    ]
)
_one_call = '{"name": "f", "arguments": {"n": 1}}'
_call_values = st.sampled_from(
    [
        _one_call,
        f"[{_one_call}, {_one_call}]",
        '{"name": "f", "arguments": "{\\"n\\": 1}"}',  # arguments as text
        '{"name": "f", "arguments": "not json"}',  # invalid arguments (R2)
        '{"name": "f", "arguments": {"x": NaN}}',  # read by loads, not strict JSON
        '{"name": 5}',
        "not json",
        "[]",
    ]
)
_observations = st.sampled_from(
    [
        '["18 C", "20 C"]',
        '["a"]',
        "18 C",
        "",
        " ",
        '[1, {"a": 2}]',
        '[{"t": "18 C", "n": 1.5}, {"t": "é"}]',  # split over the column (`sharegpt.lists`)
        '[{"a": 1, "a": 2}, {"b": " "}]',  # a key twice: split one by one
        '[{"t": " "}, {}, {}]',
    ]
)
_turns = st.one_of(
    st.builds(lambda v: {"from": "human", "value": v}, _texts),
    st.builds(lambda v: {"from": "gpt", "value": v}, _texts),
    st.builds(lambda v: {"from": "function_call", "value": v}, _call_values),
    st.builds(lambda v: {"from": "observation", "value": v}, _observations),
    st.builds(lambda v: {"from": "system", "value": v}, _texts),
    st.fixed_dictionaries({"from": st.sampled_from(["robot", None]), "value": _texts}),
)
_sharegpt_rows = st.lists(
    st.fixed_dictionaries(
        {
            "system": st.sampled_from([None, "", " ", "Be brief."]),
            "conversations": st.lists(_turns, max_size=7),
        }
    ),
    min_size=1,
    max_size=6,
)


def _assert_sharegpt_flattened_as_decoded(rows: list[dict[str, Any]]) -> None:
    assert_flattened_as_decoded(SHAREGPT, pa.Table.from_pylist(rows, schema=SHAREGPT_SCHEMA))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_sharegpt_rows)
def test_sharegpt_rows_flatten_as_the_decoder_reads_them(rows: list[dict[str, Any]]) -> None:
    _assert_sharegpt_flattened_as_decoded(rows)


@pytest.mark.parametrize(
    "turns",
    [
        [("function_call", f"[{_one_call}, {_one_call}]"), ("observation", '["a", "b"]')],
        [("function_call", f"[{_one_call}, {_one_call}]"), ("observation", "a")],
        [("function_call", _one_call), ("system", "s"), ("observation", "a"), ("gpt", "ok")],
        [("function_call", _one_call), ("gpt", ""), ("observation", "18 C")],
        [("gpt", "a"), ("function_call", _one_call), ("observation", "r"), ("observation", "")],
        [("human", "q"), ("observation", "x"), ("gpt", "a")],
    ],
)
def test_sharegpt_calls_and_results_pair_as_the_decoder_pairs_them(
    turns: list[tuple[str, str]],
) -> None:
    conversation = [{"from": f, "value": v} for f, v in turns]
    _assert_sharegpt_flattened_as_decoded([{"system": None, "conversations": conversation}])


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_sharegpt_batches_agree_on_both_paths(config: Config) -> None:
    rows = [row for row, _ in generate_rows(600, "sharegpt", seed=8, rates=every_rates("sharegpt"))]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, SHAREGPT)


# A function_call value as it may come: strict JSON or not, a call or a list of them, names and
# arguments of any type, duplicate keys, NaN, numbers past 64 bits, lone surrogates.
_json_leaves = json_leaves(st.text(max_size=3))
_json_values = json_values(_json_leaves)
_raw_calls = st.one_of(
    st.builds(
        lambda name, arguments: {"name": name, "arguments": arguments},
        st.one_of(st.sampled_from(["f", "get_weather"]), _json_leaves),
        st.one_of(_json_values, st.sampled_from(['{"n": 1}', "not json", "[1]", '{"x": NaN}'])),
    ),
    _json_values,
)


def _as_text(value: Any) -> str:
    return json.dumps(value)  # NaN, Infinity and big integers written as json writes them


_call_texts = st.one_of(
    st.builds(_as_text, _raw_calls),
    st.builds(_as_text, st.lists(_raw_calls, max_size=3)),
    st.sampled_from(
        [
            '{"name": "f", "name": "g", "arguments": {"a": 1, "a": 2}}',  # duplicate keys
            '{"name": "f", "arguments": {"s": "\\ud800"}}',  # a lone surrogate
            '{"name": "f", "arguments": {"n": 1e999}}',
            '[{"name": "f", "arguments": {}}, 3]',
            '{"name": "f", "arguments": {}',  # cut short
            "[]",
            "{}",
        ]
    ),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_call_texts)
def test_sharegpt_calls_are_read_as_the_decoders_helpers_read_them(text: str) -> None:
    assert sharegpt_flatten._calls(text) == sharegpt_flatten._read_calls(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_json_values, st.text(max_size=3)), max_size=4))
def test_sharegpt_observation_lists_split_as_json_dumps_writes_their_items(
    items: list[Any],
) -> None:
    text = json.dumps(items)
    read = loads(text)  # as the decoder reads the value
    expected = [i if isinstance(i, str) else json.dumps(i, ensure_ascii=False) for i in read]
    assert split_list(text, len(items)) == expected
