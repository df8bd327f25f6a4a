"""The profile: turn classes in every format, Arrow against the per-row path, quantiles against
NumPy, and merging in any order."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import arrow_schema, generate_rows

from transcript_clean.batch_profile import arrow_measures
from transcript_clean.columnar.arrays import text_lengths
from transcript_clean.engine.local import with_verdicts
from transcript_clean.fastpath import arrow_view
from transcript_clean.formats import get_format
from transcript_clean.pipeline import clean_batch, clean_batch_parts
from transcript_clean.policy import DEFAULT
from transcript_clean.profile import (
    EXACT_BELOW,
    QUANTILES,
    RELATIVE_ERROR,
    Histogram,
    Profile,
    measure_transcripts,
)
from transcript_clean.transcript import TURN_CLASSES

CALL_OPENAI = {
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": "{}"},
}
TOOL_USE = {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}
FUNCTION_CALL = '{"name": "get_weather", "arguments": {}}'


def _openai(turn: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", **turn}]}


def _sharegpt(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"conversations": [{"from": "human", "value": "Hi"}, *turns]}


def _anthropic(*blocks: dict[str, Any]) -> dict[str, Any]:
    user = {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
    return {"messages": [user, {"role": "assistant", "content": list(blocks)}]}


def _rig(*parts: dict[str, Any]) -> dict[str, Any]:
    user = {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
    return {"messages": [user, {"role": "assistant", "content": list(parts)}]}


def _thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text}


def _reasoning(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "content": [{"type": "text", "text": text}]}


RIG_CALL = {"type": "toolcall", "id": "c1", "function": {"name": "get_weather", "arguments": {}}}

# Per format, one hand-made assistant turn of each class the format can hold.
TURNS: dict[str, dict[str, dict[str, Any]]] = {
    "openai": {
        "text": _openai({"content": "Hello"}),
        "tool_call": _openai({"content": None, "tool_calls": [CALL_OPENAI]}),
        "text+tool_call": _openai({"content": "Let me look", "tool_calls": [CALL_OPENAI]}),
        "reasoning_only": _openai({"content": None, "reasoning_content": "Hmm."}),
        "reasoning+text": _openai({"content": "Hello", "reasoning_content": "Hmm."}),
        "reasoning+tool_call": _openai(
            {"content": "", "reasoning_content": "Hmm.", "tool_calls": [CALL_OPENAI]}
        ),
        "empty: no content": _openai({"content": ""}),
        "empty: white space": _openai({"content": " \n\u3000"}),
        "empty: empty reasoning": _openai({"content": None, "reasoning_content": "  "}),
    },
    "sharegpt": {
        "text": _sharegpt({"from": "gpt", "value": "Hello"}),
        "tool_call": _sharegpt({"from": "function_call", "value": FUNCTION_CALL}),
        "text+tool_call": _sharegpt(
            {"from": "gpt", "value": "Let me look"},
            {"from": "function_call", "value": FUNCTION_CALL},
        ),
        "empty: no content": _sharegpt({"from": "gpt", "value": ""}),
        "empty: white space": _sharegpt({"from": "gpt", "value": "\t "}),
    },
    "anthropic": {
        "text": _anthropic({"type": "text", "text": "Hello"}),
        "tool_call": _anthropic(TOOL_USE),
        "text+tool_call": _anthropic({"type": "text", "text": "Let me look"}, TOOL_USE),
        "reasoning_only": _anthropic(_thinking("Hmm.")),
        "reasoning+text": _anthropic(_thinking("Hmm."), {"type": "text", "text": "Hello"}),
        "reasoning+tool_call": _anthropic(_thinking("Hmm."), TOOL_USE),
        "empty: no content": _anthropic(),
        "empty: white space": _anthropic({"type": "text", "text": "  "}),
        "empty: empty reasoning": _anthropic(_thinking("")),
    },
    "rig": {
        "text": _rig({"type": "text", "text": "Hello"}),
        "tool_call": _rig(RIG_CALL),
        "text+tool_call": _rig({"type": "text", "text": "Let me look"}, RIG_CALL),
        "reasoning_only": _rig(_reasoning("Hmm.")),
        "reasoning+text": _rig(_reasoning("Hmm."), {"type": "text", "text": "Hello"}),
        "reasoning+tool_call": _rig(_reasoning("Hmm."), RIG_CALL),
        "empty: no content": _rig(),
        "empty: white space": _rig({"type": "text", "text": " "}),
        "empty: empty reasoning": _rig(_reasoning(" ")),
    },
}
CASES = [(fmt, name) for fmt, turns in TURNS.items() for name in turns]


def _table(fmt: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=arrow_schema(fmt))


@pytest.mark.parametrize(("fmt", "name"), CASES, ids=[f"{f}-{n}" for f, n in CASES])
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "per-row"])
def test_each_turn_class_is_counted_in_every_format(fmt: str, name: str, fast: bool) -> None:
    profile = clean_batch(_table(fmt, [TURNS[fmt][name]]), format=fmt, fast=fast).stats.profile
    assert profile.turns == {name: 1}
    assert profile.report()["turn_shares"][name] == 1.0


def test_every_class_is_in_the_tests() -> None:
    assert set(TURNS["openai"]) == set(TURN_CLASSES) == set(TURNS["anthropic"])


def _arrow_and_python(table: pa.Table) -> tuple[dict[str, Any], dict[str, Any]]:
    """The openai Arrow measures of the rows its view reads, and the per-row path's."""
    fmt = get_format("openai")
    column = table.column("messages").combine_chunks()
    view = arrow_view(fmt, column, table.schema)
    assert view is not None
    read = ~view.unread
    rows = table.filter(pa.array(read)).to_pylist()
    arrow, python, from_view = Profile(), Profile(), Profile()
    found = arrow_measures(fmt, table, read)
    assert found is not None
    measures, measured = found
    assert (measured == read).all()
    arrow.add(measures)
    python.add(measure_transcripts([fmt.decode(row).messages for row in rows]))
    measures = view.measures(read)  # what a run measures: from the verdicts' own view
    assert measures is not None
    from_view.add(measures)
    assert from_view.report() == arrow.report()
    return arrow.report(), python.report()


def test_openai_arrow_measures_equal_the_per_row_ones_on_hand_made_rows() -> None:
    rows = list(TURNS["openai"].values())
    second = {**CALL_OPENAI, "id": "c2"}
    rows.append(
        {
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {"role": "assistant", "content": None, "tool_calls": [CALL_OPENAI, second]},
                {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
                {"role": "tool", "tool_call_id": "c2", "content": "20 C"},
                {"role": "assistant", "content": "Paris 18 C, Rome 20 C: é😀"},
            ]
        }
    )
    # Texts that start with a white-space byte, or with the lead byte of one, say something.
    for text in ("  hi", "\u00a9", "\u2014 dash", "\u00a0x", "\x1f"):
        rows.append(_openai({"content": text, "reasoning_content": text}))
    arrow, python = _arrow_and_python(_table("openai", rows))
    assert arrow == python
    assert arrow["rows_measured"] == len(rows)
    assert arrow["per_row"]["messages"]["max"] == 5  # the two tool messages are one
    assert arrow["calls_per_tool"] == {"get_weather": 5}
    assert arrow["turns"]["reasoning+text"] == 1 + 4
    assert arrow["turns"]["empty: empty reasoning"] == 1 + 1  # "\x1f" is white space
    sliced, python = _arrow_and_python(_table("openai", rows).slice(3))  # offsets not from 0
    assert sliced == python


@pytest.mark.parametrize("key", ["reasoning", "thinking"])
def test_every_reasoning_field_is_measured_in_arrow_as_the_decoder_reads_it(key: str) -> None:
    user = {"role": "user", "content": "Hi"}
    rows = [
        {"messages": [user, {"role": "assistant", "content": "Hello", key: "Let me think"}]},
        {"messages": [user, {"role": "assistant", "content": "Hello", key: " "}]},
        {"messages": [user, {"role": "assistant", "reasoning_content": " ", key: "Deep"}]},
    ]
    table = pa.Table.from_pylist(rows)
    arrow, python = _arrow_and_python(table)
    assert arrow == python
    assert arrow["rows_measured"] == 3
    assert arrow["turns"]["text"] == arrow["turns"]["reasoning_only"] == 1
    assert arrow["turns"]["reasoning+text"] == 1
    assert arrow["per_row"]["chars"]["max"] == len("Hi" + "Hello" + "Let me think")
    fast = clean_batch(table, format="openai").stats.profile.report()
    assert fast == clean_batch(table, format="openai", fast=False).stats.profile.report()


def test_openai_arrow_measures_equal_the_per_row_ones_on_generated_rows() -> None:
    rows = [row for row, _ in generate_rows(3000, format="openai", seed=5)]
    arrow, python = _arrow_and_python(_table("openai", rows))
    assert arrow == python
    assert arrow["rows_measured"] > 2500


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "anthropic", "rig"])
def test_the_fast_path_and_the_per_row_path_give_one_profile(fmt: str) -> None:
    rows = [row for row, _ in generate_rows(1500, format=fmt, seed=9)]
    table = _table(fmt, rows)
    fast = clean_batch(table, format=fmt).stats.profile.report()
    slow = clean_batch(table, format=fmt, fast=False).stats.profile.report()
    assert fast == slow
    assert fast["rows"] == 1500
    turns = fast["per_row"]["assistant_turns"]["mean"] * fast["rows_measured"]
    assert sum(fast["turns"].values()) == pytest.approx(turns, abs=1)


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
def test_a_run_measures_settled_rows_with_the_verdicts_as_the_per_row_path_does(fmt: str) -> None:
    # Six batches are what the test needs, not 6,000 rows: 3,000 in batches of 500.
    rows = [row for row, _ in generate_rows(3000, format=fmt, seed=11)]
    table = _table(fmt, rows)
    batches = iter(table.to_batches(max_chunksize=500))
    run, measured_ahead = Profile(), 0
    for batch, verdicts in with_verdicts(batches, DEFAULT, get_format(fmt)):
        measured_ahead += verdicts is not None and verdicts.profile is not None
        run.merge(clean_batch_parts(batch, format=fmt, verdicts=verdicts).stats.profile)
    slow = clean_batch(table, format=fmt, fast=False).stats.profile
    assert run.report() == slow.report()
    assert run.rows == 3000
    # Each view measures the rows it settled (ShareGPT's through its flattened view).
    assert measured_ahead == 6


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
def test_preference_rows_settled_ahead_are_measured_as_the_per_row_path_reads_them(
    fmt: str,
) -> None:
    # Defects planted in prompts and single candidates: some rows are settled (clean, or
    # repaired in a candidate), others take the per-row path; all are profiled as they came in.
    from synthetic import generate_preference_rows, preference_schema

    from transcript_clean.shapes import ShapedFormat
    from transcript_clean.shapes.detect import detect_format

    # Six batches are what the test needs, not 6,000 rows: 3,000 in batches of 500.
    rows = [row for row, _ in generate_preference_rows(3000, format=fmt, seed=3)]
    for row in rows[::97]:  # a candidate the decoder stops at: the per-row path's
        if fmt == "openai":
            row["chosen"] = [{"role": "critic", "content": "Too long."}, *row["chosen"]]
        else:
            row["chosen"] = {"from": "critic", "value": "Too long."}
    table = pa.Table.from_pylist(rows, preference_schema(fmt))
    kind = detect_format(table.schema.names, rows[:20])
    assert isinstance(kind, ShapedFormat)
    batches = iter(table.to_batches(max_chunksize=500))
    run, measured_ahead, unsettled = Profile(), 0, 0
    for batch, verdicts in with_verdicts(batches, DEFAULT, kind):
        assert verdicts is not None
        measured_ahead += verdicts.profile is not None
        unsettled += int((~verdicts.read).sum())
        run.merge(clean_batch_parts(batch, format=kind, verdicts=verdicts).stats.profile)
    slow = clean_batch(table, format=kind, fast=False).stats.profile
    assert run.report() == slow.report()
    assert run.rows == 3000
    assert unsettled > 0
    # A dataset type's settled rows are measured ahead, from the view that read each prompt
    # with its first candidate (rows whose prompt was repaired there, read again as they came
    # in): every batch here has both kinds, and the report is the per-row path's all the same.
    assert measured_ahead == 6


def _values(seed: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    rng = np.random.default_rng(seed)
    return np.concatenate(
        [
            rng.integers(0, 200, 500),
            rng.lognormal(7, 2, 3000).astype(np.int64),
            np.array([0, 1, EXACT_BELOW - 1, EXACT_BELOW, 10**12]),
        ]
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quantiles_are_numpys_within_the_error_bound(seed: int) -> None:
    values = _values(seed)
    histogram = Histogram()
    histogram.add(values)
    summary = histogram.summary()
    assert summary["count"] == len(values)
    assert summary["max"] == values.max()
    assert summary["mean"] == pytest.approx(values.mean(), abs=1e-3)
    for name, q in QUANTILES.items():
        exact = int(np.quantile(values, q, method="inverted_cdf"))
        got = summary[name]
        assert got <= exact
        if exact < EXACT_BELOW:
            assert got == exact
        else:
            assert exact - got <= RELATIVE_ERROR * exact


def test_histograms_merge_in_any_order() -> None:
    values = _values(3)
    parts = np.array_split(values, 7)
    forward, backward, whole = Histogram(), Histogram(), Histogram()
    whole.add(values)
    for part in parts:
        one = Histogram()
        one.add(part)
        forward.merge(one)
    for part in reversed(parts):
        one = Histogram()
        one.add(part)
        backward.merge(Histogram.from_dict(json.loads(json.dumps(one.to_dict()))))
    assert forward == backward == whole


def test_a_profile_survives_json() -> None:
    rows = [row for row, _ in generate_rows(300, format="openai", seed=1)]
    profile = clean_batch(_table("openai", rows), format="openai").stats.profile
    again = Profile.from_dict(json.loads(json.dumps(profile.to_dict())))
    assert again == profile
    assert again.report()["system_share"] > 0


@pytest.mark.parametrize("fmt", ["sharegpt", "anthropic", "rig"])
def test_rows_are_measured_in_arrow_as_the_decoder_reads_them(fmt: str) -> None:
    """ShareGPT's rows without tools, Anthropic's rows, rig's flattened rows: measured in
    Arrow, as decoded."""
    from transcript_clean.batch_profile import arrow_measures
    from transcript_clean.fastpath import arrow_view

    rows = [row for row, _ in generate_rows(1000, format=fmt, seed=6)]
    rows += list(TURNS[fmt].values())
    if fmt != "rig":
        rows[0]["system"] = "  "  # a system prompt of white space is a system message too
        rows[1]["system"] = ""  # an empty one is none
    table = _table(fmt, rows)
    form = get_format(fmt)
    side = {n: table.column(n).combine_chunks() for n in form.side_columns}
    view = arrow_view(form, table.column(form.column).combine_chunks(), table.schema, side)
    found = arrow_measures(form, table, ~view.unread) if view is not None else None
    assert view is not None and found is not None
    measures, measured = found
    assert measured.sum() > 300 and measured[-len(TURNS[fmt]) :].any()
    arrow, python = Profile(), Profile()
    arrow.add(measures)
    picked = table.filter(pa.array(measured)).to_pylist()
    python.add(measure_transcripts([form.decode(row).messages for row in picked]))
    assert arrow.report() == python.report()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.text(max_size=8), st.text(alphabet="ab \\n", max_size=8))),
    st.integers(0, 3),
    st.booleans(),
)
def test_text_lengths_are_pythons_len(texts: list[str | None], start: int, wide: bool) -> None:
    array = pa.array(texts, pa.large_string() if wide else pa.string()).slice(start)
    expected = [0 if t is None else len(t) for t in texts[start:]]
    assert text_lengths(array).tolist() == expected


def test_a_prompt_and_candidate_are_measured_as_one_conversation() -> None:
    """A dataset type's settled row is measured from the batch as the per-row path reads it,
    its prompt then its first candidate, flattened as one conversation."""
    from transcript_clean.batch_profile import profile_batch
    from transcript_clean.shapes import ShapedFormat, make_shape

    user, answer = {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "18"}
    calls = {"role": "assistant", "content": None, "tool_calls": [CALL_OPENAI]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "18 C"}
    second = {**result, "tool_call_id": "c2", "content": "20 C"}
    both = {**calls, "tool_calls": [CALL_OPENAI, {**CALL_OPENAI, "id": "c2"}]}
    pairs = [
        ([user], [answer]),
        ([{"role": "system", "content": "Be brief."}, user, both, result], [second, answer]),
        ([user, calls], [result, answer]),  # the run starts in the candidate
        ([], [user, answer]),
        ([user, answer, user], []),
    ]
    messages = arrow_schema("openai").field("messages").type
    table = pa.table(
        {
            "prompt": pa.array([p for p, _ in pairs], messages),
            "chosen": pa.array([c for _, c in pairs], messages),
            "rejected": pa.array([[answer] for _ in pairs], messages),
        }
    )
    fmt = ShapedFormat(get_format("openai"), make_shape("preference", table.column_names))
    rows = np.array([True, True, True, True, False])
    parts = profile_batch(table, fmt, rows, {})
    one = Profile()
    openai = get_format("openai")
    one.add(
        measure_transcripts([openai.decode({"messages": p + c}).messages for p, c in pairs[:4]])
    )
    assert parts.report()["rows_measured"] == one.report()["rows_measured"] == 4
    assert {k: v for k, v in parts.report().items() if k != "rows"} == {
        k: v for k, v in one.report().items() if k != "rows"
    }
    assert parts.per_row["messages"].max == 5  # not 6: the two results are one message
    assert parts.system_rows == 1


def test_bins_are_the_edges_search_whether_looked_up_or_searched() -> None:
    from transcript_clean.profile import LOOKED_UP_BELOW, _edges, bins_of

    rng = np.random.default_rng(3)
    values = np.concatenate(
        [np.arange(0, 3000), rng.integers(0, 4 * LOOKED_UP_BELOW, 20000), [LOOKED_UP_BELOW - 1]]
    ).astype(np.int64)
    searched = np.searchsorted(_edges(), values, side="right") - 1
    assert (bins_of(values) == searched).all()
    assert (bins_of(values[values < LOOKED_UP_BELOW]) == searched[values < LOOKED_UP_BELOW]).all()


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("typed", ["plain", "json"])
def test_a_preference_row_with_no_prompt_is_not_measured(fast: bool, typed: str) -> None:
    """A preference row rejected as `malformed_row` (no prompt) has nothing to measure
    (docs/audit.md): a plainly typed set counted it in `rows_measured`, a JSON-typed one not."""
    from transcript_clean.shapes import ShapedFormat, make_shape

    def turn(role: str, text: str) -> dict[str, str]:
        return {"role": role, "content": text}

    rows: list[dict[str, Any]] = [
        {"prompt": [turn("user", f"q{i}")], "chosen": [turn("assistant", "c")]} for i in range(4)
    ]
    rows.append({"prompt": None, "chosen": [turn("assistant", "c")]})
    for row in rows:
        row["rejected"] = [turn("assistant", "r")]
    table = pa.Table.from_pylist(rows)
    if typed == "json":
        table = pa.table({name: [json.dumps(row[name]) for row in rows] for name in rows[0]})
    fmt = ShapedFormat(get_format("openai"), make_shape("preference", table.column_names))
    cleaned = clean_batch_parts(table, DEFAULT, format=fmt, fast=fast)
    assert cleaned.stats.rows_rejected == 1
    assert cleaned.stats.profile.report()["rows_measured"] == 4


@pytest.mark.parametrize("fmt", ["openai", "sharegpt"])
def test_a_dataset_types_settled_rows_are_measured_without_decoding(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settled rows of a dataset type are measured in Arrow, with the inner format's flattener
    over each prompt and first candidate put together: no row is decoded for the profile."""
    from synthetic import generate_preference_rows, preference_schema

    from transcript_clean.batch_profile import profile_batch
    from transcript_clean.shapes import ShapedFormat
    from transcript_clean.shapes.detect import detect_format

    rows = [row for row, _ in generate_preference_rows(200, format=fmt, seed=4)]
    table = pa.Table.from_pylist(rows, preference_schema(fmt))
    kind = detect_format(table.schema.names, rows[:20])
    assert isinstance(kind, ShapedFormat)
    expected = profile_batch(table, kind, np.zeros(len(rows), dtype=bool), {
        i: kind.decode(row).messages for i, row in enumerate(rows)
    })  # fmt: skip

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a settled row was decoded for the profile")

    monkeypatch.setattr(type(kind), "decode", refuse)
    monkeypatch.setattr(type(kind.inner), "decode", refuse)
    measured = profile_batch(table, kind, np.ones(len(rows), dtype=bool), {})
    assert measured.report() == expected.report()
    assert measured.report()["rows_measured"] == len(rows)
