"""ms-swift's `{human, assistant}` pairs in the columnar view (issue 29): held to the decoder row
for row, and the fast path held to the per-row path."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree, assert_verdicts_equal_on_generated_rows
from flattened import assert_flattened_as_decoded
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import generate_rows

from transcript_clean.formats import get_format
from transcript_clean.pipeline import batch_verdicts
from transcript_clean.policy import DEFAULT, STRICT
from transcript_clean.rows import clean_row

TEXTS = [None, "", " ", "\n", "q", "Explain it.", "早上好", "é ü"]

pairs = st.fixed_dictionaries(
    {"human": st.sampled_from(TEXTS), "assistant": st.sampled_from(TEXTS)}
).map(lambda p: p if p["human"] is not None or p["assistant"] != "q" else None)
rows = st.fixed_dictionaries(
    {
        "system": st.sampled_from([None, "", " ", "Be brief."]),
        "conversation": st.one_of(st.none(), st.lists(pairs, max_size=4)),
    }
)

PAIR = pa.struct([("human", pa.string()), ("assistant", pa.string())])
SCHEMA = pa.schema([("system", pa.string()), ("conversation", pa.list_(PAIR))])


@settings(max_examples=200, deadline=None)
@given(st.lists(rows, min_size=1, max_size=20))
def test_any_rows_flatten_as_the_decoder_reads_them(values: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(values, schema=SCHEMA)
    assert_flattened_as_decoded(get_format("pairs"), table)


def test_generated_rows_flatten_and_broken_ones_are_unread() -> None:
    fmt = get_format("pairs")
    clean = [row for row, _ in generate_rows(600, "pairs", seed=8, rates={})]
    view = assert_flattened_as_decoded(fmt, pa.Table.from_pylist(clean))
    assert not view.unread.any() and (view.role == 0).any()  # system prompts among them
    broken = [row for row, _ in generate_rows(400, "pairs", seed=3, rates={"malformed_row": 0.3})]
    view = assert_flattened_as_decoded(fmt, pa.Table.from_pylist(broken))
    assert 60 < view.unread.sum() < 200


def test_types_the_decoder_reads_row_by_row_have_no_view() -> None:
    fmt = get_format("pairs")
    only_human = pa.array([[{"human": "q"}]], pa.list_(pa.struct([("human", pa.string())])))
    assert fmt.flatten(only_human, None, {}) is None
    texts = pa.array(["q"], pa.string())
    assert fmt.flatten(texts, None, {}) is None
    good = pa.array([[{"human": "q", "assistant": "a"}]], pa.list_(PAIR))
    assert fmt.flatten(good, None, {"system": pa.array([1], pa.int64())}) is None


def test_message_counts_are_the_decoders() -> None:
    fmt = get_format("pairs")
    values = [
        {"system": "Be brief.", "conversation": [{"human": "q", "assistant": "a"}] * 2},
        {"system": None, "conversation": [{"human": "q", "assistant": "a"}]},
        {"system": "", "conversation": []},
        {"system": "x", "conversation": None},
        {"system": None, "conversation": [{"human": "q", "assistant": None}]},
    ]
    counts = fmt.message_counts(pa.Table.from_pylist(values, schema=SCHEMA))
    assert counts.tolist() == [fmt.message_count(v) for v in values] == [5, 2, 0, 0, 0]


@settings(max_examples=40, deadline=None)
@given(st.lists(rows, min_size=1, max_size=30))
def test_fast_and_per_row_paths_agree_on_any_rows(values: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(values, schema=SCHEMA)
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, get_format("pairs"))


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_generated_rows_agree_on_both_paths_and_clean_ones_stay_arrow(config: Any) -> None:
    fmt = get_format("pairs")
    generated = [row for row, _ in generate_rows(1500, "pairs", seed=4)]
    table = pa.Table.from_pylist(generated)
    assert_fast_and_slow_agree(table, config, fmt)
    verdicts = batch_verdicts(table, config, format=fmt)
    unchanged = [clean_row(r, fmt, config).status == "unchanged" for r in generated]
    assert verdicts is not None and verdicts.clean.tolist() == unchanged
    assert sum(unchanged) > 1300


def test_the_fast_path_finds_clean_what_the_per_row_path_keeps_unchanged() -> None:
    assert_verdicts_equal_on_generated_rows(get_format("pairs"), seed=6, kinds=3)
