"""Dataset types (issue 16): prompt-only, prompt-completion, preference, implicit-prompt
preference, unpaired (KTO), OpenAI preference and LLaMA-Factory ranking rows."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from differential import assert_fast_and_slow_agree
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import generate_preference_rows, preference_schema

from transcript_clean.cli import main
from transcript_clean.errors import FormatError
from transcript_clean.formats import get_format
from transcript_clean.pipeline import batch_verdicts, clean_batch
from transcript_clean.policy import DEFAULT, STRICT
from transcript_clean.rows import clean_row
from transcript_clean.shapes import ShapedFormat, make_shape
from transcript_clean.shapes.detect import detect_format, detect_shape

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "preference"


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str | None, **more: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **more}


def call(id: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": "f", "arguments": arguments}}


def tool(id: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": id, "content": text}


def shaped(kind: str, row: dict[str, Any], format: str = "openai", **names: Any) -> ShapedFormat:
    return ShapedFormat(get_format(format), make_shape(kind, list(row), **names))


def preference(prompt: list[Any], chosen: list[Any], rejected: list[Any]) -> dict[str, Any]:
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected}


# ---------------------------------------------------------------------------------------------
# detection: each type from a row shaped like it


SHAPED_ROWS: list[tuple[dict[str, Any], str, str]] = [
    ({"prompt": [u("q")]}, "prompt", "prompt-only rows: prompt `prompt`"),
    (
        {"prompt": [u("q")], "completion": [a("x")]},
        "prompt-completion",
        "prompt-completion rows: prompt `prompt`, completion `completion`",
    ),
    (
        preference([u("q")], [a("x")], [a("y")]),
        "preference",
        "preference rows: prompt `prompt`, candidates `chosen`, `rejected`",
    ),
    (
        {"chosen": [u("q"), a("x")], "rejected": [u("q"), a("y")]},
        "implicit-preference",
        "implicit-prompt preference rows: candidates `chosen`, `rejected`",
    ),
    (
        {"prompt": [u("q")], "completion": [a("x")], "label": True},
        "unpaired",
        "unpaired preference (KTO) rows: prompt `prompt`, completion `completion`, label `label`",
    ),
    (
        {"messages": [u("q"), a("x")], "label": False},
        "unpaired",
        "unpaired preference (KTO) rows: conversation `messages`, label `label`",
    ),
    (
        {
            "input": {"messages": [u("q")], "tools": []},
            "preferred_output": [a("x")],
            "non_preferred_output": [a("y")],
        },
        "openai-preference",
        "preference rows: prompt `input.messages`, candidates `preferred_output`, "
        "`non_preferred_output`",
    ),
    (
        {
            "conversations": [{"from": "human", "value": "q"}],
            "chosen": {"from": "gpt", "value": "x"},
            "rejected": {"from": "gpt", "value": "y"},
        },
        "ranking",
        "ranking rows: prompt `conversations`, candidates `chosen`, `rejected`",
    ),
]


@pytest.mark.parametrize(("row", "kind", "words"), SHAPED_ROWS)
def test_each_type_is_detected_and_reported(row: dict[str, Any], kind: str, words: str) -> None:
    fmt = detect_format(list(row), [row])
    assert isinstance(fmt, ShapedFormat)
    assert fmt.shape.kind == kind
    assert fmt.shape.describe() == words
    assert fmt.describe().startswith(("openai ", "sharegpt "))


@pytest.mark.parametrize(("row", "kind", "words"), SHAPED_ROWS)
def test_each_type_cleans_a_valid_row_unchanged(row: dict[str, Any], kind: str, words: str) -> None:
    fmt = detect_format(list(row), [row])
    for config in (DEFAULT, STRICT):
        result = clean_row(row, fmt, config)
        assert (result.status, result.codes) == ("unchanged", [])


def test_whole_conversations_as_candidates_are_implicit_whatever_else_the_row_holds() -> None:
    # UltraFeedback's binarized rows: a text prompt, and `messages` repeating `chosen`
    chosen, rejected = [u("q"), a("x")], [u("q"), a("y")]
    row = {"prompt": "q", "chosen": chosen, "rejected": rejected, "messages": chosen}
    fmt = detect_format(list(row), [row])
    assert isinstance(fmt, ShapedFormat)
    assert fmt.shape == make_shape("implicit-preference", list(row))


def test_one_conversation_column_is_no_type() -> None:
    row = {"messages": [u("q"), a("x")], "id": 3}
    assert detect_shape(list(row), [row]) is None
    assert not isinstance(detect_format(list(row), [row]), ShapedFormat)


def test_several_conversation_columns_stop_detection_naming_the_options() -> None:
    row = {"messages": [u("q"), a("x")], "other": [u("r"), a("y")]}
    with pytest.raises(FormatError, match=r"messages, other.*--column.*--type"):
        detect_format(list(row), [row])
    # naming the column settles it
    assert detect_format(list(row), [row], column="other").column == "other"


def test_a_type_named_without_its_columns_says_which() -> None:
    with pytest.raises(FormatError, match=r"prompt, chosen.*with prompt_column and candidates"):
        make_shape("preference", ["messages"])


# ---------------------------------------------------------------------------------------------
# cleaning: the prompt once, each candidate after it


def test_prompt_only_needs_no_assistant_turn_and_may_end_on_calls() -> None:
    rows = [
        {"prompt": [{"role": "developer", "content": "be brief"}, u("q")]},
        {"prompt": [u("q"), a(None, tool_calls=[call("c1")])]},
    ]
    fmt = shaped("prompt", rows[0])
    for row in rows:
        for config in (DEFAULT, STRICT):
            assert clean_row(row, fmt, config).status == "unchanged"


def test_a_defect_in_one_candidate_is_rejected_strict_and_repaired_there_by_default() -> None:
    row = preference([u("q")], [a("x"), a("")], [a("y")])  # chosen ends on an empty turn
    fmt = shaped("preference", row)
    strict = clean_row(row, fmt, STRICT)
    assert strict.status == "rejected"
    assert strict.codes == ["empty_assistant_turn"]
    assert strict.reject_message == "chosen: message 2: empty assistant turn"
    repaired = clean_row(row, fmt, DEFAULT)
    assert repaired.status == "repaired"
    assert repaired.row == {**row, "chosen": [a("x")]}  # the prompt and `rejected` as they were


def test_a_prompt_defect_is_repaired_once_for_every_candidate() -> None:
    prompt = [u("q"), a("a1"), a("a2"), u("more")]  # consecutive assistant messages
    row = preference(prompt, [a("x")], [a("y")])
    fmt = shaped("preference", row)
    result = clean_row(row, fmt, DEFAULT)
    assert result.status == "repaired"
    assert result.actions == {"consecutive_assistant": "repaired"}
    assert result.row is not None
    assert result.row["prompt"] == [u("q"), a("a1\n\na2"), u("more")]
    assert result.row["chosen"] == [a("x")] and result.row["rejected"] == [a("y")]
    assert [v.message for v in result.violations] == [
        "prompt: message 2: an assistant message follows another assistant message"
    ]
    strict = clean_row(row, fmt, STRICT)
    assert strict.reject_message is not None and strict.reject_message.startswith("prompt: ")


def test_a_repair_reaching_into_the_prompt_is_a_reject_that_says_so() -> None:
    # The prompt ends on an assistant text; the candidate's first message is another one: R4
    # would merge the candidate into the prompt.
    row = preference([u("q"), a("thinking aloud")], [a("x")], [u("again"), a("y")])
    result = clean_row(row, shaped("preference", row), DEFAULT)
    assert result.status == "rejected"
    assert result.codes == ["consecutive_assistant"]
    assert result.reject_message == (
        "chosen: its repair would change the prompt, which every candidate shares"
    )


def test_calls_pending_at_the_prompts_end_are_answered_by_the_candidates() -> None:
    prompt = [u("q"), a(None, tool_calls=[call("c1")])]
    row = preference(prompt, [tool("c1"), a("x")], [tool("c1"), a("y")])
    assert clean_row(row, shaped("preference", row), STRICT).status == "unchanged"
    unanswered = preference(prompt, [tool("c1"), a("x")], [a("y")])
    result = clean_row(unanswered, shaped("preference", unanswered), STRICT)
    assert result.status == "rejected"
    assert result.reject_message is not None and result.reject_message.startswith("rejected: ")


def test_a_candidate_that_is_not_a_conversation_is_malformed_naming_it() -> None:
    row = preference([u("q")], [a("x")], [a("y")])
    result = clean_row({**row, "rejected": "nope"}, shaped("preference", row), DEFAULT)
    assert result.codes == ["malformed_row"]
    assert result.reject_message is not None and result.reject_message.startswith("rejected: ")


TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
"""A valid declaration (one without a name would be an `invalid_tool_declaration`)."""


def test_openai_preference_reads_the_prompt_inside_input() -> None:
    row = {
        "input": {"messages": [u("q"), a("a1"), a("a1"), u("r")], "tools": [TOOL]},
        "preferred_output": [a("x")],
        "non_preferred_output": [a("y")],
    }
    fmt = detect_format(list(row), [row])
    result = clean_row(row, fmt, DEFAULT)
    assert result.status == "repaired"  # the repeated message dropped, once
    assert result.row is not None
    assert result.row["input"] == {
        "messages": [u("q"), a("a1"), u("r")],
        "tools": [TOOL],
    }
    assert result.row["preferred_output"] == [a("x")]


def test_a_ranking_candidate_left_without_its_turn_is_rejected_naming_it() -> None:
    row = {
        "conversations": [{"from": "human", "value": "q"}],
        "chosen": {"from": "gpt", "value": "x"},
        "rejected": {"from": "gpt", "value": " "},
    }
    fmt = detect_format(list(row), [row])
    result = clean_row(row, fmt, DEFAULT)
    # R1 drops the empty turn: nothing is left to learn from
    assert result.status == "rejected"
    assert result.codes == ["empty_assistant_turn", "no_assistant_turn"]
    assert result.reject_message == "rejected: the transcript has no assistant turn"


def test_stats_count_rows_and_name_the_column_in_the_example() -> None:
    rows = [
        preference([u("q")], [a("x")], [a("y")]),
        preference([u("q")], [a("x"), a("")], [a("y")]),
        preference([u("q")], [a("x")], [a("y"), a(" ")]),
    ]
    table = pa.Table.from_pylist(rows)
    fmt = detect_format(table.column_names, rows)
    strict = clean_batch(table, STRICT, format=fmt)
    assert strict.kept.num_rows == 1
    assert strict.rejects.column("_reject_message").to_pylist() == [
        "chosen: message 2: empty assistant turn",
        "rejected: message 2: empty assistant turn",
    ]
    row = strict.stats.records()
    assert [(r["code"], r["action"], r["rows"]) for r in row] == [
        ("empty_assistant_turn", "rejected", 2)
    ]


def test_an_empty_turn_on_a_row_another_code_rejects_is_present_not_rejected() -> None:
    # Issue 27, item 5: `chosen` loses an empty turn (a repair), `rejected` calls an undeclared
    # tool; unknown_tool decides the row, the empty turn is merely present.
    bad = {"id": "c1", "type": "function", "function": {"name": "g", "arguments": "{}"}}
    row = {
        "prompt": [u("q")],
        "chosen": [a(" "), a("x")],
        "rejected": [a(None, tool_calls=[bad]), tool("c1"), a("y")],
        "tools": [TOOL],
    }
    table = pa.Table.from_pylist([row])
    fmt = detect_format(table.column_names, [row])
    result = clean_batch(table, DEFAULT, format=fmt)
    assert result.rejects.column("_reject_codes").to_pylist() == [
        ["empty_assistant_turn", "unknown_tool"]
    ]
    assert [(r["code"], r["action"]) for r in result.stats.records()] == [
        ("empty_assistant_turn", "present"),
        ("unknown_tool", "rejected"),
    ]


# ---------------------------------------------------------------------------------------------
# the real files


def _real(name: str) -> list[dict[str, Any]]:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here")
    rows: list[dict[str, Any]] = json.loads(path.read_text())
    return rows


@pytest.mark.parametrize(
    ("name", "kind", "inner"),
    [("llamafactory_dpo_en_demo.json", "ranking", "sharegpt"),
     ("llamafactory_kto_en_demo.json", "unpaired", "openai")],
)  # fmt: skip
@pytest.mark.parametrize("config", [DEFAULT, STRICT])
def test_llamafactory_preference_rows_are_all_kept_unchanged(
    name: str, kind: str, inner: str, config: Any
) -> None:
    rows = _real(name)
    fmt = detect_format(list(rows[0]), rows[:20])
    assert isinstance(fmt, ShapedFormat)
    assert (fmt.shape.kind, fmt.inner.name) == (kind, inner)
    assert len(rows) == 300
    assert {clean_row(row, fmt, config).status for row in rows} == {"unchanged"}


def test_the_summary_names_the_type_its_parts_and_the_output_format(tmp_path: Path) -> None:
    source = DATA / "llamafactory_dpo_en_demo.json"
    _real(source.name)
    jsonl = ["--output-format", "jsonl"]
    for args, output in (([], ["parquet", "zstd"]), (jsonl, ["jsonl", "none"])):
        out = tmp_path / output[0]
        result = CliRunner().invoke(main, ["clean", str(source), str(out), "-q", *args])
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "summary.json").read_text())
        assert (summary["type"], summary["format"]) == ("ranking", "sharegpt")
        assert summary["parts"] == {"prompt": "conversations", "candidates": ["chosen", "rejected"]}
        assert summary["output"] == {"format": output[0], "compression": output[1]}


@pytest.mark.parametrize(
    ("name", "header", "title"),
    [("llamafactory_dpo_en_demo.json",
      "(format sharegpt ranking rows: prompt `conversations`, candidates `chosen`, `rejected`)",
      "Canonical transcript (the prompt and `chosen`):"),
     ("llamafactory_kto_en_demo.json",
      "(format openai unpaired preference (KTO) rows: conversation `messages`, label `label`)",
      "Canonical transcript:")],
)  # fmt: skip
def test_explain_names_the_type_and_which_transcript_it_shows(
    name: str, header: str, title: str
) -> None:
    _real(name)
    result = CliRunner().invoke(main, ["explain", str(DATA / name), "--row", "3"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith(f"row 3 {header}")
    assert lines[2] == title


# ---------------------------------------------------------------------------------------------
# generated rows, Parquet and the fast path


@pytest.mark.parametrize("format", ["openai", "sharegpt"])
def test_generated_preference_rows_strict_codes_are_the_planted_ones(
    format: str, tmp_path: Path
) -> None:
    rows = list(generate_preference_rows(600, format, seed=3))
    planted = [codes for _, codes in rows]
    assert {c for codes in planted for c in codes} >= {
        "empty_assistant_turn",
        "consecutive_assistant",
    }
    # through Parquet, as a run reads them
    path = tmp_path / "pref.parquet"
    pq.write_table(pa.Table.from_pylist([r for r, _ in rows], preference_schema(format)), path)
    table = pq.read_table(path)
    fmt = detect_format(table.column_names, table.slice(0, 20).to_pylist())
    assert isinstance(fmt, ShapedFormat) and fmt.inner.name == format
    results = [clean_row(row, fmt, STRICT) for row in table.to_pylist()]
    assert [set(r.codes) for r in results] == [set(c) for c in planted]
    # the fast path settles exactly the clean rows, in Arrow, once it can read the declared
    # tools: held as JSON text here, they send every row that declares them per-row
    verdicts = batch_verdicts(table, STRICT, format=fmt)
    assert (
        verdicts is not None and not (verdicts.clean & np.array([bool(c) for c in planted])).any()
    )
    verdicts = batch_verdicts(table.drop_columns(["tools"]), STRICT, format=fmt)
    assert verdicts is not None
    assert verdicts.clean.tolist() == [not codes for codes in planted]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, fmt)


def test_default_repairs_prompt_and_candidate_defects_and_keeps_the_rows() -> None:
    rows = list(generate_preference_rows(600, "openai", seed=4))
    table = pa.Table.from_pylist([r for r, _ in rows], preference_schema("openai"))
    result = clean_batch(table, DEFAULT, format=detect_format(table.column_names, [rows[0][0]]))
    assert result.rejects.num_rows == 0
    assert result.stats.counts()["rows_repaired"] == sum(1 for _, codes in rows if codes)


def test_generated_openai_preference_rows_are_all_settled_in_arrow() -> None:
    """Every planted defect (an empty turn at a candidate's end after a reasoning turn, too)
    is repaired in Arrow by default: no generated row takes the per-row path."""
    rows = [r for r, _ in generate_preference_rows(3000, "openai", seed=0)]
    table = pa.Table.from_pylist(rows, preference_schema("openai"))
    fmt = detect_format(table.column_names, rows[:20])
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    assert verdicts.handled.all()
    assert verdicts.repaired.sum() > 200
    assert_fast_and_slow_agree(table, DEFAULT, fmt)


@pytest.mark.parametrize("config", [DEFAULT, STRICT])
def test_the_fast_path_settles_only_rows_clean_as_a_whole(config: Any) -> None:
    pending = [u("q"), a(None, tool_calls=[call("c1")])]
    rows = [
        preference([u("q")], [a("x")], [a("y")]),  # clean
        preference([u("q"), a("p")], [a("x")], [u("r"), a("y")]),  # assistant meets assistant
        preference(pending, [tool("c1"), a("x")], [tool("c1"), a("y")]),  # answered after: clean
        preference([u("q")], [a("x")], [a("y", weight=1)]),  # another field: clean
        preference([u("q"), a("")], [a("x")], [a("y")]),  # empty turn in the prompt
        preference([u("q")], [a("x")], [a("y"), a("y")]),  # consecutive in a candidate
        preference(pending, [tool("c1"), a("x")], [a("y")]),  # one leaves the call unanswered
    ]
    table = pa.Table.from_pylist(rows)
    fmt = detect_format(table.column_names, rows)
    verdicts = batch_verdicts(table, config, format=fmt)
    assert verdicts is not None
    assert verdicts.clean.tolist() == [True, False, True, True, False, False, False]
    assert [clean_row(r, fmt, config).status for r in table.to_pylist()][:4:3] == [
        "unchanged",
        "unchanged",
    ]
    assert_fast_and_slow_agree(table, config, fmt)


def test_prompt_only_rows_are_settled_fast_with_calls_pending_at_the_end() -> None:
    rows = [{"prompt": [u("q")]}, {"prompt": [u("q"), a(None, tool_calls=[call("c1")])]}]
    table = pa.Table.from_pylist(rows)
    fmt = detect_format(table.column_names, rows)
    verdicts = batch_verdicts(table, STRICT, format=fmt)
    assert verdicts is not None and verdicts.clean.all()
    assert_fast_and_slow_agree(table, STRICT, fmt)


# ---------------------------------------------------------------------------------------------
# the command line


def _ranking_file(tmp_path: Path) -> Path:
    rows = [
        {
            "conversations": [{"from": "human", "value": f"q{i}"}],
            "chosen": {"from": "gpt", "value": "good"},
            "rejected": {"from": "gpt", "value": "bad"},
        }
        for i in range(5)
    ]
    path = tmp_path / "ranking.json"
    path.write_text(json.dumps(rows))
    return path


def test_clean_reports_the_type_it_read(tmp_path: Path) -> None:
    source = _ranking_file(tmp_path)
    result = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (
        "as sharegpt ranking rows: prompt `conversations`, candidates `chosen`, `rejected`"
        in result.output
    )
    assert "kept 5" in result.output


def test_the_type_and_its_columns_can_be_named(tmp_path: Path) -> None:
    source = _ranking_file(tmp_path)
    args = ["clean", str(source), str(tmp_path / "out"), "--type", "preference"]
    result = CliRunner().invoke(main, [*args, "--prompt-column", "conversations"])
    assert result.exit_code == 0, result.output
    assert "preference rows: prompt `conversations`, candidates `chosen`, `rejected`" in (
        result.output
    )
    alone = CliRunner().invoke(main, [*args[:3], "--prompt-column", "conversations"])
    assert alone.exit_code == 2
    assert "--prompt-column and --candidates go with --type" in alone.output


def test_several_conversation_columns_stop_the_run_naming_column(tmp_path: Path) -> None:
    row = {"messages": [u("q"), a("x")], "other": [u("r"), a("y")]}
    source = tmp_path / "two.jsonl"
    source.write_text(json.dumps(row) + "\n")
    result = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "several columns hold conversations: messages, other" in result.output
    assert "--column" in result.output
    named = ["clean", str(source), str(tmp_path / "out2"), "--column", "other"]
    assert CliRunner().invoke(main, named).exit_code == 0


def test_a_candidates_empty_turn_or_merge_is_repaired_in_arrow_as_per_row() -> None:
    rows = [
        preference([u("q")], [a("x"), a(" ")], [a("y")]),  # empty turn in chosen
        preference([u("q")], [a("x")], [a("y"), a("z")]),  # two in a row in rejected
        preference([u("q")], [a(""), a("x")], [a("y"), a("")]),  # both, in both
        preference([u("q"), a("p")], [a(" "), a("x")], [u("r"), a("y")]),  # meets the prompt
        preference([u("q"), a("p")], [a(" ")], [u("r"), a("y")]),  # nothing left, as per-row
    ]
    table = pa.Table.from_pylist(rows)
    fmt = detect_format(table.column_names, rows)
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    assert verdicts.repaired.tolist() == [True, True, True, False, True]
    assert verdicts.repaired_column is not None
    assert verdicts.repaired_column.to_pylist()[2] == {"chosen": [a("x")], "rejected": [a("y")]}
    assert_fast_and_slow_agree(table, DEFAULT, fmt)
    kept = clean_batch(table, DEFAULT, format=fmt).kept.to_pylist()
    assert kept[1]["rejected"] == [a("y\n\nz")]
    # the strict config repairs nothing: every such row is the per-row path's, and rejected
    assert not batch_verdicts(table, STRICT, format=fmt).repaired.any()  # type: ignore[union-attr]
    assert_fast_and_slow_agree(table, STRICT, fmt)


@pytest.mark.parametrize("config", [DEFAULT, STRICT])
def test_a_candidates_empty_turn_after_a_reasoning_turn_is_dropped_in_arrow(config: Any) -> None:
    thought = a("x", reasoning_content="r")
    rows = [
        preference([u("q")], [thought, a(" ")], [a("y")]),
        preference(
            [u("q")], [a("y")], [a(None, tool_calls=[call("c1")]), tool("c1"), thought, a("")]
        ),
        preference([u("q"), thought, a(""), u("r")], [a("x")], [a("y")]),  # in the prompt
        preference([u("q")], [a("x"), a(" "), a("z")], [a("y")]),  # then R4, with R1
    ]
    table = pa.Table.from_pylist(rows)
    fmt = detect_format(table.column_names, rows)
    verdicts = batch_verdicts(table, config, format=fmt)
    assert verdicts is not None
    assert verdicts.repaired.tolist() == [config is DEFAULT] * 4
    assert_fast_and_slow_agree(table, config, fmt)


@pytest.mark.parametrize("config", [DEFAULT, STRICT])
def test_the_parts_share_the_rows_declarations_in_arrow(config: Any) -> None:
    """The declared tools are read once for the prompt and every candidate, and for the scan of
    a candidate repaired in Arrow: a call there to a tool the row does not declare, or breaking
    its schema, still sends the row to the per-row path."""
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

    def declaring(*names: str) -> str:
        return json.dumps(
            [{"type": "function", "function": {"name": n, "parameters": schema}} for n in names]
        )

    def answer(arguments: str = '{"x": 1}', name: str = "f") -> list[Any]:
        made = {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
        return [a(None, tool_calls=[made]), tool("c1"), a("x")]

    rows = [
        preference([u("q")], answer(), [a("y")]),
        preference([u("q")], [*answer(), a(" ")], [a("y")]),  # R1 in Arrow
        preference([u("q")], [*answer(name="g"), a(" ")], [a("y")]),  # then an unknown tool
        preference([u("q")], [a("y")], [*answer('{"x": "1"}'), a("")]),  # then a schema break
        preference([u("q"), *answer(name="g"), u("r")], [a("x")], [a("y")]),  # in the prompt
    ]
    # The second row declares `g` too: read for the third, its calls to `g` would pass.
    tools = [declaring("f"), declaring("f", "g"), declaring("f"), declaring("f"), declaring("f")]
    table = pa.Table.from_pylist([{**r, "tools": t} for r, t in zip(rows, tools, strict=True)])
    fmt = detect_format(table.column_names, rows)
    verdicts = batch_verdicts(table, config, format=fmt)
    assert verdicts is not None
    assert verdicts.clean.tolist() == [True, False, False, False, False]
    assert verdicts.repaired.tolist() == [False, config is DEFAULT, False, False, False]
    assert not verdicts.handled[2:4].any()
    assert_fast_and_slow_agree(table, config, fmt)


def test_a_prompt_defect_is_repaired_once_in_arrow_as_per_row() -> None:
    rows = [
        preference([u("q"), a(""), u("r")], [a("x")], [a("y")]),  # empty turn
        preference([u("q"), a("a1"), a("a2"), u("r")], [a("x")], [a("y")]),  # merged
        preference([u("q"), a("a1"), a(" ")], [u("r"), a("x")], [a("y")]),  # ends on a1: meets y
        preference([u("q"), a(None, tool_calls=[call("c1")]), a(" ")], [tool("c1"), a("x")], []),
    ]
    table = pa.Table.from_pylist(rows)
    fmt = detect_format(table.column_names, rows)
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    assert verdicts.repaired.tolist() == [True, True, False, False]
    assert verdicts.repaired_column is not None
    prompt = verdicts.repaired_column.to_pylist()[1]["prompt"]
    assert [(m["role"], m["content"]) for m in prompt] == [
        ("user", "q"),
        ("assistant", "a1\n\na2"),
        ("user", "r"),
    ]
    assert_fast_and_slow_agree(table, DEFAULT, fmt)
    assert_fast_and_slow_agree(table, STRICT, fmt)


def test_a_preference_set_with_json_typed_messages_runs_in_batches_of_one(tmp_path: Path) -> None:
    """Issue 27 (the family of findings 1, 8 and 16): a prompt whose `content` is text in one
    row and parts in another is typed `pa.json_()`; a batch of the row without a prompt holds
    that list null in every row, which Arrow could not flatten (the edges of the fast path,
    the profile's measures). Each batch size gives the same outputs."""
    text = [{"role": "user", "content": "hi"}]
    parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    said = [{"role": "assistant", "content": "a"}]
    said_in_parts = [{"role": "assistant", "content": [{"type": "text", "text": "a"}]}]
    rows = [
        {"chosen": said, "rejected": said},
        {"prompt": text, "chosen": said_in_parts, "rejected": said},
        {"prompt": parts, "chosen": said, "rejected": said_in_parts},
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    outputs = []
    for size in ("1", "100"):
        out = tmp_path / f"out-{size}"
        args = ["clean", str(source), str(out), "--batch-size", size]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        assert "rows in 3 = kept 2 (repaired 0) + rejected 1" in result.output
        outputs.append([(out / name).read_bytes() for name in ("stats.csv", "profile.json")])
        result = CliRunner().invoke(main, ["audit", str(source), "--batch-size", size])
        assert result.exit_code == 0, result.output
    assert outputs[0] == outputs[1]


# ---------------------------------------------------------------------------------------------
# prompt sets under --type auto (issue 27, item 3)

_RFT_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
}


def _rft_rows(n: int = 10) -> list[dict[str, Any]]:
    """OpenAI reinforcement fine-tuning rows: `messages` ending on a user turn, `tools`, and
    grader fields (`reference_answer`) beside them."""
    return [
        {
            "messages": [
                {"role": "developer", "content": "Answer with the order's status."},
                u(f"Where is order {k}?"),
            ],
            "tools": [_RFT_TOOL],
            "reference_answer": {"status": "shipped", "order": k},
        }
        for k in range(n)
    ]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "rows",
    [_rft_rows(), [{"messages": [u(f"Say {k}.")]} for k in range(3)]],
    ids=["openai-rft", "single-prompts"],
)
def test_auto_reads_a_set_whose_rows_hold_no_assistant_turn_as_prompts(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    source = _jsonl(tmp_path / "rft.jsonl", rows)
    result = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (
        f"reading {source} as openai prompt-only rows: prompt `messages` (no assistant turn in "
        f"its first {len(rows)} rows: a prompt set; --type conversation reads conversations)"
    ) in result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert (summary["type"], summary["rows_kept"], summary["rows_rejected"]) == (
        "prompt",
        len(rows),
        0,
    )
    kept = pq.read_table(tmp_path / "out" / "data").to_pylist()
    assert [r["messages"] for r in kept] == [r["messages"] for r in rows]


def test_one_assistant_turn_in_the_first_rows_makes_them_conversations() -> None:
    rows = [*_rft_rows(3), {"messages": [u("q"), a("x")]}]
    fmt = detect_format(["messages", "tools", "reference_answer"], rows)
    assert not isinstance(fmt, ShapedFormat)
    assert fmt.name == "openai"


def test_a_forced_conversation_type_says_what_to_pass_for_a_prompt_set(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "rft.jsonl", _rft_rows())
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["clean", str(source), str(out), "--type", "conversation"])
    assert result.exit_code == 0, result.output
    hint = (
        "no row has an assistant turn: a prompt set (RL fine-tuning)? read it with --type prompt "
        "--prompt-column messages"
    )
    assert f"hint: {hint}" in result.stdout
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["rows_rejected"] == 10 and summary["hint"] == hint
    # and what the hint says works
    args = ["clean", str(source), str(tmp_path / "again"), "--type", "prompt"]
    again = CliRunner().invoke(main, [*args, "--prompt-column", "messages"])
    assert again.exit_code == 0, again.output
    assert "rows in 10 = kept 10 (repaired 0) + rejected 0" in again.stdout
    assert "hint:" not in again.stdout


def test_a_type_whose_parts_hold_no_messages_names_its_columns_not_ours(tmp_path: Path) -> None:
    source = tmp_path / "pc.jsonl"
    source.write_text(json.dumps({"prompt": 4, "completion": 2}) + "\n")
    result = CliRunner().invoke(
        main, ["clean", str(source), str(tmp_path / "out"), "--type", "prompt-completion"]
    )
    assert result.exit_code == 2, result.output
    assert "columns: the `prompt` + `completion`" in result.output
    assert "__" not in result.output


# ---------------------------------------------------------------------------------------------
# the fast path over drawn rows: the parts read as the per-row path reads them, whatever they hold

_MESSAGES = st.sampled_from(
    [
        u("q"),
        u(""),
        a("x"),
        a(" "),
        a(""),
        a("y", reasoning_content="r"),
        a(None, tool_calls=[call("c1")]),
        a(None, tool_calls=[call("c1"), call("c2")]),
        a(None, tool_calls=[call("c2", '{"x": ')]),
        tool("c1"),
        tool("c2"),
        tool("c9"),
        {"role": "system", "content": "s"},
    ]
)
_PARTS = st.lists(_MESSAGES, max_size=4)
_PROMPTS = st.one_of(
    st.just([u("q")]),
    st.just([u("q"), a(None, tool_calls=[call("c1")])]),
    _PARTS.map(lambda part: [u("q"), *part]),
)
_CANDIDATES = st.one_of(
    st.sampled_from([[a("x")], [tool("c1"), a("x")], [a("x"), a(" ")], [a("x"), a("y")]]),
    _PARTS,
)


@pytest.mark.parametrize("name", ["default", "strict", "error_result", "cut"])
def test_drawn_preference_rows_agree_on_both_paths(name: str) -> None:
    """Prompts that end on calls, candidates that answer them or not, that meet the prompt
    with an assistant message, empty turns on either side, a missing candidate: the fast path
    settles what it can read as the per-row path reads it, and both agree."""
    config = STRICT if name == "strict" else DEFAULT
    if name in ("error_result", "cut"):
        config = replace(DEFAULT, interrupted_call=name)
    settled = [0, 0, 0]  # clean, repaired, left per-row

    @settings(max_examples=30, deadline=None, derandomize=True, database=None)
    @given(
        st.lists(
            st.tuples(_PROMPTS, _CANDIDATES, st.one_of(_CANDIDATES, _CANDIDATES, st.none())),
            min_size=1,
            max_size=6,
        )
    )
    def agree(drawn: list[tuple[list[Any], list[Any], list[Any] | None]]) -> None:
        table = pa.Table.from_pylist([preference(p, c, r) for p, c, r in drawn])
        fmt = ShapedFormat(get_format("openai"), make_shape("preference", table.column_names))
        assert_fast_and_slow_agree(table, config, fmt)
        verdicts = batch_verdicts(table, config, format=fmt)
        if verdicts is None:  # a part null in every row: a column Arrow gives no type
            settled[2] += table.num_rows
            return
        settled[0] += int(verdicts.clean.sum())
        settled[1] += int(verdicts.repaired.sum())
        settled[2] += int((~verdicts.handled).sum())

    agree()
    # The cases reach all three verdicts (else they would test one path).
    assert settled[0] > 0 and settled[2] > 0
    assert settled[1] > 0 or config is STRICT


def test_candidates_of_another_type_than_the_prompt_are_read_after_it_in_arrow() -> None:
    """A prompt's messages and a candidate's need not share a type (one has fields the other
    lacks): read as one, the row is settled in Arrow and written back in the column's type."""
    prompt = pa.array([[u("q")], [u("q"), a(None, tool_calls=[call("c1")])]])
    chosen = pa.array([[a("x", weight=1.0), a(" ")], [tool("c1"), a("x", weight=0.0)]])
    rejected = pa.array([[a("y")], [tool("c1"), a("y")]])
    table = pa.table({"prompt": prompt, "chosen": chosen, "rejected": rejected})
    fmt = ShapedFormat(get_format("openai"), make_shape("preference", table.column_names))
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    assert verdicts.repaired.tolist() == [True, False] and verdicts.clean.tolist() == [False, True]
    assert verdicts.repaired_column is not None
    assert verdicts.repaired_column.type.field("chosen").type == chosen.type
    assert_fast_and_slow_agree(table, DEFAULT, fmt)
    assert_fast_and_slow_agree(table, STRICT, fmt)


def test_a_single_message_candidate_repaired_away_is_rejected_in_arrow_as_per_row() -> None:
    """A ranking candidate held as one message that R1 drops leaves no message where its
    column holds one: rejected in Arrow in the per-row path's words, where that part's code
    alone decides; with another part's code beside it (the prompt's, an earlier candidate's),
    or two codes repaired, the row stays the per-row path's."""

    def ranking(prompt: list[Any], chosen: Any, rejected: Any) -> dict[str, Any]:
        return {"conversations": prompt, "chosen": chosen, "rejected": rejected}

    human = {"from": "human", "value": "q"}
    gpt = {"from": "gpt", "value": "a"}
    empty = {"from": "gpt", "value": " "}
    rows = [
        ranking([human, gpt, human], empty, gpt),  # chosen emptied: rejected in Arrow
        ranking([human, gpt, human], gpt, empty),  # rejected emptied, chosen clean: the same
        ranking([human, gpt, gpt, human], empty, gpt),  # the prompt has a code too
        ranking([human, gpt, human], empty, empty),  # chosen decides; rejected is not read
        ranking([human], empty, gpt),  # no assistant turn left: the per-row path's words
    ]
    table = pa.Table.from_pylist(rows)
    fmt = detect_format(table.column_names, rows)
    assert isinstance(fmt, ShapedFormat) and fmt.shape.kind == "ranking"
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    rejected = {
        int(at): words
        for r in verdicts.rejects
        for at, words in zip(np.flatnonzero(r.rows), r.messages, strict=True)
    }
    assert rejected == {
        0: "chosen: its repair leaves 0 messages where the column holds one",
        1: "rejected: its repair leaves 0 messages where the column holds one",
        3: "chosen: its repair leaves 0 messages where the column holds one",
    }
    assert verdicts.handled.tolist() == [True, True, False, True, False]
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, fmt)
