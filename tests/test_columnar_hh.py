"""hh-rlhf transcripts in the columnar view (issue 29): each row's one text split into its turns
in Arrow, held to `parse_hh` row for row, and the fast path held to the per-row path."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree, assert_verdicts_equal_on_generated_rows
from flattened import assert_flattened_as_decoded, truth
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import generate_rows

from transcript_clean.formats import get_format
from transcript_clean.formats.text import HHFormat
from transcript_clean.pipeline import batch_verdicts
from transcript_clean.policy import DEFAULT, STRICT
from transcript_clean.rows import clean_row

HH_PAIRS = Path(__file__).parent / "data" / "text" / "hh_rlhf_harmless_rows.jsonl"

# What a transcript is made of, and what could make a split go wrong: markers with and without
# their blank line and space, blank lines of three, white space Python's `\s` has and Arrow's
# trim may not, a NUL (the flattener's cut), text that is not ASCII.
PIECES = [
    "\n\nHuman:",
    "\n\nAssistant:",
    "\n\nHuman: ",
    "\n\nAssistant: ",
    "Human:",
    "Assistant:",
    "\n\n\nHuman:",
    "\n\nSystem:",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\r",
    "\t",
    "\x0b",
    "\x0c",
    "\u00a0",
    "\u2028",
    "\x1c",
    "\x00",
    "hi",
    "Hello there.",
    "é ü",
    ":",
]

texts = st.one_of(
    st.none(),
    st.lists(st.sampled_from(PIECES), max_size=10).map("".join),
)

# Texts the flattener reads: white space Python's `\s` and RE2's both have before the first
# marker, and no NUL. Any other text the decoder reads is one the flattener may leave unread.
READABLE = re.compile(r"[ \t\n\r\f\v]*(?:Human|Assistant):")


def hh_table(values: list[str | None]) -> pa.Table:
    return pa.table({"text": pa.array(values, pa.string())})


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, min_size=1, max_size=20))
def test_any_text_flattens_as_parse_hh_splits_it(values: list[str | None]) -> None:
    fmt = get_format("hh")
    view = assert_flattened_as_decoded(fmt, hh_table(values), unread_superset=True)
    for r, value in enumerate(values):
        if view.unread[r] and truth(fmt, {"text": value}) is not None:
            assert value is not None and ("\x00" in value or not READABLE.match(value)), value


def test_generated_and_real_transcripts_are_all_read() -> None:
    rows = [row for row, _ in generate_rows(600, "hh", seed=8, rates={})]
    view = assert_flattened_as_decoded(get_format("hh"), pa.Table.from_pylist(rows))
    assert not view.unread.any() and view.messages > 1200
    real = [json.loads(line) for line in HH_PAIRS.read_text(encoding="utf-8").splitlines()]
    for column in ("chosen", "rejected"):
        table = pa.Table.from_pylist(real)
        view = assert_flattened_as_decoded(HHFormat(column), table)
        assert not view.unread.any()


def test_broken_generated_rows_are_unread_and_the_rest_read() -> None:
    rows = [row for row, _ in generate_rows(400, "hh", seed=3, rates={"malformed_row": 0.3})]
    view = assert_flattened_as_decoded(get_format("hh"), pa.Table.from_pylist(rows))
    assert 60 < view.unread.sum() < 200


def test_a_column_of_another_type_has_no_view() -> None:
    table = pa.table({"text": pa.array([[1, 2]], pa.list_(pa.int64()))})
    assert get_format("hh").flatten(table.column("text").combine_chunks()) is None


def test_message_counts_are_the_decoders() -> None:
    fmt = get_format("hh")
    values: list[str | None] = [
        "\n\nHuman: a\n\nAssistant: b",
        "Human: a",
        "\u00a0\n\nHuman: a\n\nAssistant: b\n\nHuman: c",  # read by the decoder, not in Arrow
        "no marker",
        None,
        "\n\nHuman: a\x00\n\nAssistant: b",
    ]
    counts = fmt.message_counts(hh_table(values))
    assert counts.tolist() == [fmt.message_count({"text": v}) for v in values]
    assert counts.tolist() == [2, 1, 3, 0, 0, 2]


@settings(max_examples=40, deadline=None)
@given(st.lists(texts, min_size=1, max_size=30))
def test_fast_and_per_row_paths_agree_on_any_text(values: list[str | None]) -> None:
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(hh_table(values), config, get_format("hh"))


@settings(max_examples=100, deadline=None)
@given(st.lists(texts, min_size=1, max_size=30))
def test_the_settled_rows_messages_are_counted_from_the_view(values: list[str | None]) -> None:
    fmt = get_format("hh")
    table = hh_table(values)
    verdicts = batch_verdicts(table, STRICT, format=fmt)
    assert verdicts is not None and verdicts.messages is not None
    settled = verdicts.handled
    assert verdicts.messages[settled].tolist() == fmt.message_counts(table)[settled].tolist()


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_generated_rows_agree_on_both_paths_and_clean_ones_stay_arrow(config: Any) -> None:
    fmt = get_format("hh")
    rows = [row for row, _ in generate_rows(1500, "hh", seed=4)]
    table = pa.Table.from_pylist(rows)
    assert_fast_and_slow_agree(table, config, fmt)
    verdicts = batch_verdicts(table, config, format=fmt)
    unchanged = [clean_row(r, fmt, config).status == "unchanged" for r in rows]
    assert verdicts is not None and verdicts.clean.tolist() == unchanged
    assert sum(unchanged) > 1200


def test_the_fast_path_finds_clean_what_the_per_row_path_keeps_unchanged() -> None:
    assert_verdicts_equal_on_generated_rows(get_format("hh"), seed=6, kinds=4)


# Transcripts built turn by turn, to reach R1 and R4: empty and blank assistant turns, runs of
# assistant turns (repeated ones too), texts holding what looks like a marker, white space
# before the first marker and after each.
SAID = st.sampled_from(
    ["", " ", "  ", "\n", " \t", "x", "Hello there.", "é ü", "Human: hi", "\nHuman: hi",
     "Assistant: no", "\nAssistant:", "a\n", "a\n\n", "\u00a0", "ok\r"]
)  # fmt: skip
TURN = st.tuples(
    st.sampled_from(["Human", "Assistant", "Assistant"]), st.sampled_from(["", " "]), SAID
)


def _transcript(lead: str, turns: list[tuple[str, str, str]]) -> str:
    """`lead`, then each turn's marker (after a blank line, but for the first), white space and
    text."""
    return lead + "".join(
        ("\n\n" if k else "") + f"{name}:{space}{said}"
        for k, (name, space, said) in enumerate(turns)
    )


transcripts = st.builds(
    _transcript,
    st.sampled_from(["", "\n\n", " ", "\t\n\n", "\r\n"]),
    st.lists(TURN, min_size=1, max_size=7),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(transcripts, min_size=1, max_size=12))
def test_rows_repaired_in_arrow_are_the_per_row_paths(values: list[str]) -> None:
    fmt = get_format("hh")
    table = hh_table(list(values))
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    if verdicts.repaired.any():
        assert verdicts.repaired_column is not None
        written = verdicts.repaired_column.to_pylist()
        rows = [values[k] for k in np.flatnonzero(verdicts.repaired)]
        for value, text in zip(rows, written, strict=True):
            result = clean_row({"text": value}, fmt, DEFAULT)
            assert result.status == "repaired" and result.row is not None
            assert text == result.row["text"], value
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, fmt)


def test_empty_turns_and_runs_of_answers_are_repaired_in_arrow() -> None:
    fmt = get_format("hh")
    values = [
        "\n\nHuman: a\n\nAssistant:  \n\nHuman: b\n\nAssistant: c",  # R1
        " \t\n\nAssistant: \n\nHuman: b\n\nAssistant: c",  # R1, the first turn: the lead stays
        "\n\nHuman: a\n\nAssistant: x\n\nAssistant:y",  # R4
        "Human: a\n\nAssistant: x\n\nAssistant: x\n\nAssistant:\n\nAssistant: z",  # R1 + R4
        "\n\nHuman: a\n\nAssistant: ok",
    ]
    verdicts = batch_verdicts(hh_table(values), DEFAULT, format=fmt)
    assert verdicts is not None and verdicts.handled.all()
    assert verdicts.repaired.tolist() == [True, True, True, True, False]
    assert verdicts.repaired_column is not None
    assert verdicts.repaired_column.to_pylist() == [
        "\n\nHuman: a\n\nHuman: b\n\nAssistant: c",
        " \t\n\nHuman: b\n\nAssistant: c",
        "\n\nHuman: a\n\nAssistant: x\n\ny",
        "Human: a\n\nAssistant: x\n\nz",
    ]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(hh_table(values), config, fmt)
