"""The ShareGPT fast path against the per-row path: a differential test, as for OpenAI."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
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
from transcript_clean.formats.sharegpt import ShareGPTFormat
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules import (
    CONSECUTIVE_ASSISTANT,
    EMPTY_ASSISTANT_TURN,
    MALFORMED_ROW,
    NO_ASSISTANT_TURN,
    ORPHAN_TOOL_RESULT,
    UNANSWERED_TOOL_CALL,
    UNKNOWN_ROLE,
)

SHAREGPT = get_format("sharegpt")
TURN = pa.struct([("from", pa.string()), ("value", pa.string())])
SCHEMA = pa.schema([("conversations", pa.list_(TURN)), ("system", pa.string())])


@pytest.mark.parametrize("seed", [0, 1])
def test_verdicts_equal_on_generated_data_of_every_defect_kind(seed: int) -> None:
    assert_verdicts_equal_on_generated_rows(SHAREGPT, seed, kinds=8)


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
@pytest.mark.parametrize("size", [1, 10, 500])
def test_fast_and_slow_batches_give_identical_output(config: Config, size: int) -> None:
    rows = [row for row, _ in generate_rows(size, format="sharegpt", seed=size)]
    assert_fast_and_slow_agree(pa.Table.from_pylist(rows), config, SHAREGPT)


def call(name: object = "f", arguments: object = None) -> dict[str, Any]:
    return {"name": name, "arguments": {} if arguments is None else arguments}


CALLS = st.sampled_from(
    [
        json.dumps(call()),
        json.dumps([call(), call("g", {"x": 1})]),
        json.dumps([call()]),
        json.dumps([]),
        json.dumps(call(arguments='{"x": 1}')),
        json.dumps(call(arguments="[1]")),
        json.dumps(call(arguments="{oops")),
        json.dumps({"arguments": {}}),
        json.dumps(call(name=3)),
        json.dumps("f"),
        "{not json",
        " ",
    ]
)
OBSERVATIONS = st.sampled_from(["18 C", "", '["a", "b"]', "[1, 2, 3]", ' ["x"]', "[oops", "{}"])
TEXTS = st.sampled_from(["hi", "", " ", "\u3000", "\x1f"])


TAGS = ("human", "gpt", "gpt", "system", "function_call", "function_call", "observation", "robot")


@st.composite
def turns(draw: st.DrawFn) -> dict[str, Any]:
    tag = draw(st.sampled_from(TAGS))
    if tag == "function_call":
        value = draw(CALLS)
    elif tag == "observation":
        value = draw(OBSERVATIONS)
    else:
        value = draw(TEXTS)
    return {"from": tag, "value": draw(st.sampled_from([value, value, value, None]))}


ROWS = st.lists(
    st.tuples(st.lists(turns(), max_size=8), st.sampled_from([None, "", "Be brief."])),
    min_size=1,
    max_size=8,
)


def turn(tag: str | None, value: str | None) -> dict[str, Any]:
    return {"from": tag, "value": value}


def table_of(rows: list[tuple[list[dict[str, Any]], str | None]]) -> pa.Table:
    return pa.Table.from_pylist([{"conversations": c, "system": s} for c, s in rows], schema=SCHEMA)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ROWS)
def test_fast_path_never_passes_a_row_the_per_row_path_flags(
    rows: list[tuple[list[dict[str, Any]], str | None]],
) -> None:
    table = table_of(rows)
    mask = clean_mask(SHAREGPT, table.column("conversations"))
    assert mask is not None
    for fast, row in zip(mask.tolist(), table.to_pylist(), strict=True):
        assert not fast or per_row_clean(row, SHAREGPT), row


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ROWS, st.sampled_from([DEFAULT, STRICT]))
def test_fast_and_slow_batches_agree_on_any_rows(
    rows: list[tuple[list[dict[str, Any]], str | None]], config: Config
) -> None:
    assert_fast_and_slow_agree(table_of(rows), config, SHAREGPT)


def test_clean_rows_and_calls_pending_at_the_end_are_settled() -> None:
    fc = {"from": "function_call", "value": json.dumps([call(), call("g")])}
    rows = [
        [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}],
        [{"from": "human", "value": "q"}, fc, {"from": "observation", "value": '["1", "2"]'}],
        [{"from": "human", "value": "q"}, {"from": "gpt", "value": ""}, fc],  # pending at end
        [{"from": "human", "value": "q"}, {"from": "gpt", "value": " "}],  # empty turn
        [{"from": "human", "value": "q"}, fc, {"from": "observation", "value": '["1", "2", "3"]'}],
    ]
    table = table_of([(r, None) for r in rows])
    verdicts = fast_verdicts(SHAREGPT, table.column("conversations"), keep_trailing=True)
    assert verdicts is not None
    assert verdicts.clean.tolist() == [True, True, False, False, False]
    assert verdicts.trailing.tolist() == [False, False, True, False, False]
    assert verdicts.trailing_calls.tolist()[2] == 2
    assert_fast_and_slow_agree(table, DEFAULT, SHAREGPT)


def test_the_formats_tags_are_read() -> None:
    fmt = ShareGPTFormat(tags={"user": "user", "assistant": "assistant", "tool": "observation"})
    rows = [
        [{"from": "user", "value": "q"}, {"from": "assistant", "value": "a"}],
        [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}],  # unknown tags here
    ]
    table = table_of([(r, None) for r in rows])
    mask = clean_mask(fmt, table.column("conversations"))
    assert mask is not None and mask.tolist() == [True, False]
    assert_fast_and_slow_agree(table, DEFAULT, fmt)


def test_a_system_column_that_is_not_text_means_no_fast_path() -> None:
    turns_ = [[{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]]
    table = pa.table({"conversations": turns_, "system": [[1]]})
    assert fast_verdicts(SHAREGPT, table.column("conversations"), schema=table.schema) is None
    assert_fast_and_slow_agree(table, DEFAULT, SHAREGPT)
    assert np.asarray(clean_mask(SHAREGPT, table.column("conversations"))).all()


@st.composite
def near_valid(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid conversation of a few exchanges, now and then with a defect or a turn taken out
    or put in: the rows the fast path must get exactly right."""

    one, two = json.dumps(call()), json.dumps([call(), call("g", '{"x": 1}')])
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        out.append(turn(draw(st.sampled_from(["human", "human", "system"])), "q"))
        kind = draw(
            st.sampled_from(
                ["chat", "one", "two", "list", "split", "said", "chat", "twice", "stray"]
            )
        )
        if kind == "stray":  # a blank result of no call, which the Arrow side drops (R3)
            out += [turn("observation", draw(st.sampled_from(["", " "]))), turn("gpt", "a")]
            continue
        if kind in ("chat", "twice"):
            out.append(turn("gpt", draw(st.sampled_from(["a", "a", " ", ""]))))
            if kind == "twice":
                out.append(turn("gpt", draw(st.sampled_from(["a", "b", " "]))))
            continue
        if kind == "said":
            out.append(turn("gpt", draw(st.sampled_from(["let me look", "", " "]))))
        if kind == "split":
            out += [turn("function_call", one), turn("function_call", one)]
        else:
            out.append(turn("function_call", one if kind in ("one", "said") else two))
        answers = 1 if kind in ("one", "said") else 2
        if kind == "list":
            items = draw(st.sampled_from([2, 2, 1, 3]))
            out.append(turn("observation", json.dumps([f"r{k}" for k in range(items)])))
        else:
            out += [turn("observation", "r")] * answers
        out.append(turn("gpt", "done"))
    if draw(st.integers(0, 3)) == 0:  # a call pending at the end
        out += [turn("human", "q"), turn("function_call", draw(st.sampled_from([one, two])))]
    if draw(st.integers(0, 2)) == 0:
        at = draw(st.integers(0, len(out) - 1))
        extra = draw(st.sampled_from(["human", "gpt", "observation", "function_call", "system"]))
        # Blank, as the orphan observations the Arrow side drops are (issue 27, item 4); one
        # that says something is the per-row path's (the synthetic rows' orphans say something).
        value = draw(st.sampled_from(["", " "])) if extra == "observation" else "x"
        out.insert(at, turn(extra, one if extra == "function_call" else value))
    if draw(st.integers(0, 2)) == 0:
        out.pop(draw(st.integers(0, len(out) - 1)))
    return out


NEAR = st.lists(st.tuples(near_valid(), st.sampled_from([None, "Be brief."])), max_size=8)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(NEAR.filter(bool), st.sampled_from([DEFAULT, STRICT]))
def test_fast_and_slow_batches_agree_near_valid_rows(
    rows: list[tuple[list[dict[str, Any]], str | None]], config: Config
) -> None:
    assert_fast_and_slow_agree(table_of(rows), config, SHAREGPT)


def test_near_valid_rows_reach_every_verdict() -> None:
    tables = st.lists(st.tuples(near_valid(), st.none()), min_size=10, max_size=10).map(table_of)
    seen = verdicts_reached(tables, SHAREGPT)
    assert min(seen) >= 20, seen  # clean, pending at the end, and left to the per-row path


def test_empty_assistant_turns_are_dropped_in_arrow() -> None:
    t = turn  # short, so that each row stays on one line
    fc = t("function_call", json.dumps(call()))
    rows = [
        [t("human", "q"), t("gpt", " "), t("human", "q2"), t("gpt", "a")],  # dropped here
        # two in a row: each is dropped before the second could count as a second assistant turn
        [t("human", "q"), t("gpt", "a"), t("human", "q2"), t("gpt", ""), t("gpt", "")],
        [t("human", "q"), t("gpt", " ")],  # no assistant turn would be left
        [t("human", "q"), t("gpt", ""), t("human", "q2"), fc],  # and calls pending at the end
        [t("human", "q"), fc, t("observation", "r"), t("gpt", "\u3000")],  # ends on the results
        [t("human", "q"), t("gpt", "a"), t("gpt", " ")],  # dropped before it is a second turn
    ]
    table = table_of([(r, "Be brief.") for r in rows])
    verdicts = fast_verdicts(
        SHAREGPT, table.column("conversations"), repair=[EMPTY_ASSISTANT_TURN], keep_trailing=True
    )
    assert verdicts is not None
    assert verdicts.repaired.tolist() == [True, True, False, False, True, True]
    assert verdicts.repaired_column is not None
    assert verdicts.repaired_column.to_pylist()[:2] == [
        [rows[0][0], rows[0][2], rows[0][3]],
        rows[1][:3],
    ]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, SHAREGPT)


def test_orphan_observations_are_left_to_the_per_row_path() -> None:
    """The flattened view drops no result in Arrow (R3 is the per-row path's): a row with an
    orphan observation is never settled by the view, and both paths agree."""
    t = turn  # short, so that each row stays on one line
    fc = t("function_call", json.dumps(call()))
    rows = [
        [t("human", "q"), t("observation", ""), t("gpt", "a")],  # dropped here
        [t("observation", ""), t("observation", " "), t("human", "q"), t("gpt", "a")],  # a run
        [t("human", "q"), t("gpt", "a"), t("observation", "\n"), t("human", "q2")],
        # between two assistant turns: left merged, with a second code, by the per-row path
        [t("human", "q"), t("gpt", "look"), t("observation", "x"), fc, t("observation", "r")],
        [t("human", "q"), fc, t("observation", "r"), t("observation", ""), t("gpt", "a")],
        [t("human", "q"), t("gpt", " "), t("observation", "x"), t("human", "q"), t("gpt", "a")],
        # an orphan that says something, which the next turn may quote: the per-row path's
        [t("human", "q"), t("observation", "x"), t("gpt", "a")],
        [t("human", "q"), fc, t("observation", "r"), t("observation", "r"), t("gpt", "a")],
    ]  # the fifth: one call, two results; the second, past the calls, is dropped
    table = table_of([(r, None) for r in rows])
    repair = [EMPTY_ASSISTANT_TURN, ORPHAN_TOOL_RESULT]
    verdicts = fast_verdicts(SHAREGPT, table.column("conversations"), repair=repair)
    assert verdicts is not None
    assert not verdicts.handled.any()
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, SHAREGPT)


@pytest.mark.parametrize("code", [EMPTY_ASSISTANT_TURN, UNANSWERED_TOOL_CALL])
def test_near_valid_rows_reach_each_repair(code: str) -> None:
    repaired = [0]

    @settings(max_examples=200, derandomize=True, database=None, deadline=None)
    @given(NEAR.filter(bool))
    def collect(rows: list[tuple[list[dict[str, Any]], str | None]]) -> None:
        table = table_of(rows)
        verdicts = fast_verdicts(SHAREGPT, table.column("conversations"), repair=[code])
        assert verdicts is not None
        repaired[0] += int(verdicts.repaired.sum())

    collect()
    assert repaired[0] >= 10, repaired


def test_rows_with_no_assistant_turn_are_rejected_in_arrow() -> None:
    t = turn  # short, so that each row stays on one line
    rows = [
        [t("human", "q")],  # rejected here
        [t("system", "s"), t("human", "q"), t("human", "again")],  # rejected here
        [t("human", "q"), t("observation", "x")],  # and an orphan result
        [],  # nothing at all
        [t("human", "q"), t("gpt", "a")],
    ]
    table = table_of([(r, "Be brief.") for r in rows])
    column = table.column("conversations")
    verdicts = fast_verdicts(SHAREGPT, column, reject=[NO_ASSISTANT_TURN])
    assert verdicts is not None
    [reject] = verdicts.rejects
    # The empty row too: the decoder reads it as the system prompt alone.
    assert reject.rows.tolist() == [True, True, False, True, False]
    assert reject.messages == ["the transcript has no assistant turn"] * 3
    unasked = fast_verdicts(SHAREGPT, column)
    assert unasked is not None and not unasked.rejects
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, SHAREGPT)


def test_consecutive_assistant_turns_of_plain_text_are_merged_in_arrow() -> None:
    """R4 joins plain texts in Arrow (the turn's value, joined with a blank line); a pair with
    calls is the per-row path's, which merges one and rejects the other."""
    t = turn  # short, so that each row stays on one line
    fc = t("function_call", json.dumps(call()))
    rows = [
        [t("human", "q"), t("gpt", "a"), t("gpt", "b")],  # merged here
        [t("human", "q"), t("gpt", "a"), t("gpt", "a"), t("human", "q2"), t("gpt", "c")],  # same
        [t("human", "q"), t("gpt", "a"), t("gpt", "b"), t("gpt", "c")],  # three in a row
        [t("human", "q"), t("gpt", "a"), t("gpt", "b"), fc, t("observation", "r")],  # and calls
        [t("human", "q"), fc, t("observation", "r"), t("gpt", "a"), t("gpt", "b")],  # merged here
        [t("human", "q"), fc, t("gpt", "b"), t("observation", "r")],  # after calls: unrepairable
    ]
    table = table_of([(r, None) for r in rows])
    verdicts = fast_verdicts(
        SHAREGPT, table.column("conversations"), repair=[CONSECUTIVE_ASSISTANT]
    )
    assert verdicts is not None
    assert verdicts.handled.tolist() == [True, True, True, False, True, False]
    assert verdicts.repaired_column is not None
    values = [[x["value"] for x in row] for row in verdicts.repaired_column.to_pylist()]
    assert values == [
        ["q", "a\n\nb"],
        ["q", "a", "q2", "c"],
        ["q", "a\n\nb\n\nc"],
        ["q", fc["value"], "r", "a\n\nb"],
    ]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, SHAREGPT)


WEIGHTED = pa.list_(
    pa.struct([("from", pa.string()), ("value", pa.string()), ("weight", pa.int64())])
)


@pytest.mark.parametrize(
    ("code", "turns", "fixed"),
    [
        (EMPTY_ASSISTANT_TURN, [("human", "q", 0), ("gpt", " ", 1), ("human", "q2", None),
          ("gpt", "a", 1)], [("human", "q", 0), ("human", "q2", None), ("gpt", "a", 1)]),
        (UNANSWERED_TOOL_CALL, [("human", "q", 0), ("gpt", "a", 1), ("human", "q2", None),
          ("function_call", json.dumps(call()), 1), ("human", "q3", 0), ("gpt", "b", 1)],
         [("human", "q", 0), ("gpt", "a", 1), ("human", "q2", None)]),
        (CONSECUTIVE_ASSISTANT, [("human", "q", 0), ("gpt", "a", 1), ("gpt", "b", 1)],
         [("human", "q", 0), ("gpt", "a\n\nb", 1)]),
    ],
)  # fmt: skip
def test_a_repair_in_arrow_leaves_the_other_fields_of_the_turns_alone(
    code: str, turns: list[tuple[str, str, int | None]], fixed: list[tuple[str, str, int | None]]
) -> None:
    def rows(spec: list[tuple[str, str, int | None]]) -> list[dict[str, Any]]:
        return [{"from": f, "value": v, "weight": w} for f, v, w in spec]

    table = pa.table({"conversations": pa.array([rows(turns)], WEIGHTED)})
    verdicts = fast_verdicts(SHAREGPT, table.column("conversations"), repair=[code])
    assert verdicts is not None and verdicts.repaired_column is not None
    assert verdicts.repaired_column.to_pylist() == [rows(fixed)]
    assert_fast_and_slow_agree(table, DEFAULT, SHAREGPT)


def test_rows_the_decoder_cannot_read_are_rejected_for_their_first_bad_turn() -> None:
    """The view leaves them unread, and rejects each for its first bad turn as the per-row path
    does: the decoder's own words."""
    t = turn  # short, so that each row stays on one line
    rows: list[list[Any]] = [
        [t("human", "q"), t("robot", "x"), t("gpt", None)],  # the unknown tag first
        [t("human", "q"), t("gpt", None), t("robot", "x")],  # the missing value first
        [t("human", "q"), t(None, "x"), t("gpt", "a")],  # no tag
        [t("human", "q"), None, t("gpt", "a")],  # no turn
        [t("human", "q"), t("gpt", "a")],
    ]
    table = table_of([(r, None) for r in rows])
    verdicts = fast_verdicts(
        SHAREGPT, table.column("conversations"), reject=[MALFORMED_ROW, UNKNOWN_ROLE]
    )
    assert verdicts is not None
    assert verdicts.view is not None
    assert verdicts.clean.tolist() == [False, False, False, False, True]
    by_code = {fix.code: fix for fix in verdicts.rejects}
    assert by_code[UNKNOWN_ROLE].rows.tolist() == [True, False, False, False, False]
    assert by_code[MALFORMED_ROW].rows.tolist() == [False, True, True, True, False]
    rejects = clean_batch(table, DEFAULT, format=SHAREGPT, fast=False).rejects.to_pylist()
    found = [(r["_reject_codes"], r["_reject_message"]) for r in rejects]
    assert by_code[UNKNOWN_ROLE].messages == [found[0][1]]
    assert by_code[MALFORMED_ROW].messages == [message for _, message in found[1:]]
    assert found[0][0] == [UNKNOWN_ROLE]
    assert found[0][1].startswith('conversations[1].from: unknown tag "robot"')
    assert [codes for codes, _ in found[1:]] == [[MALFORMED_ROW]] * 3
    assert found[1][1] == 'conversations[1]: missing "value"'
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, SHAREGPT)


def test_unanswered_calls_are_cut_in_arrow() -> None:
    t = turn  # short, so that each row stays on one line
    fc = t("function_call", json.dumps(call()))
    rows = [
        [t("human", "q"), t("gpt", "a"), t("human", "q2"), fc, t("human", "q3"), t("gpt", "b")],
        [t("human", "q"), fc, t("human", "q2"), t("gpt", "b")],  # nothing would be left
        # the message the call belongs to starts at its text turn: the cut goes before it
        [t("human", "q"), t("gpt", "a"), t("human", "q2"), t("gpt", "x"), fc, t("human", "q3")],
        [t("human", "q"), t("gpt", "a"), t("human", "q2"), fc, t("system", "s"), t("human", "q")],
    ]
    table = table_of([(r, None) for r in rows])
    verdicts = fast_verdicts(SHAREGPT, table.column("conversations"), repair=[UNANSWERED_TOOL_CALL])
    assert verdicts is not None
    # A system turn keeps the calls pending; the human turn after it leaves them unanswered.
    assert verdicts.repaired.tolist() == [True, False, True, True]
    assert verdicts.repaired_column is not None
    assert verdicts.repaired_column.to_pylist() == [rows[0][:3], rows[2][:3], rows[3][:3]]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, SHAREGPT)


def test_an_empty_turn_between_a_call_and_its_result_is_left_to_the_per_row_path() -> None:
    # The decoder pairs the observation with calls by position before R1 drops the empty turn,
    # so dropping it in Arrow and looking again would pair them differently (hypothesis found
    # this when empty turns were repaired in rows the view does not read).
    fc = turn("function_call", json.dumps(call()))
    table = table_of([([fc, turn("gpt", ""), turn("observation", "18 C")], None)])
    verdicts = fast_verdicts(
        SHAREGPT, table.column("conversations"), repair=[EMPTY_ASSISTANT_TURN], keep_trailing=True
    )
    assert verdicts is not None and not verdicts.handled.any()
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, SHAREGPT)


def test_turns_whose_weights_differ_are_left_to_the_per_row_path_which_rejects_them() -> None:
    turns = [("human", "q", 0), ("gpt", "a", 1), ("gpt", "b", 0)]
    rows = [{"from": f, "value": v, "weight": w} for f, v, w in turns]
    table = pa.table({"conversations": pa.array([rows], WEIGHTED)})
    verdicts = fast_verdicts(
        SHAREGPT, table.column("conversations"), repair=[CONSECUTIVE_ASSISTANT]
    )
    assert verdicts is not None and not verdicts.handled.any()
    assert_fast_and_slow_agree(table, DEFAULT, SHAREGPT)
