"""The generator of synthetic rows, and scripts/make_synthetic.py."""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from synthetic import (
    ALSO,
    CODES,
    DEFAULT_RATES,
    EVERY_RATES,
    FORMATS,
    PLAIN,
    TOOLS_RATES,
    UNSUPPORTED,
    arrow_schema,
    default_rates,
    generate_rows,
)

from transcript_clean.formats import DecodeError, get_format
from transcript_clean.model import AssistantMessage, Reasoning, UserMessage
from transcript_clean.tools import arguments_error, read_row_declarations
from transcript_clean.transcript import is_empty_assistant_turn, transcript_errors

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "make_synthetic.py"


def strict_codes(fmt_name: str, row: dict[str, Any]) -> set[str]:
    """The codes a strict cleaner finds in `row`, by their definitions: the decoder's code, or
    those of the transcript after its empty assistant turns are dropped."""
    try:
        messages = get_format(fmt_name).decode(row).messages
    except DecodeError as err:
        return {err.code}
    codes = set()
    kept = []
    for message in messages:
        if isinstance(message, AssistantMessage) and is_empty_assistant_turn(message.content):
            codes.add("empty_assistant_turn")
        else:
            kept.append(message)
    calls = [c for m in kept if isinstance(m, AssistantMessage) for c in m.tool_calls]
    if any(not isinstance(c.arguments, dict) for c in calls):
        codes.add("invalid_tool_arguments")
    for m in kept:
        ids = [c.id for c in m.tool_calls] if isinstance(m, AssistantMessage) else []
        if len(set(ids)) < len(ids):
            codes.add("duplicate_call_id")
    declared = read_row_declarations(row, ("tools",))
    if declared is not None and declared.problems:
        codes.add("invalid_tool_declaration")
    if declared is not None:
        if any(c.name not in declared.tools for c in calls):
            codes.add("unknown_tool")
        for c in calls:
            tool = declared.tools.get(c.name)
            if not (tool and tool.schema_key and isinstance(c.arguments, dict)):
                continue
            if arguments_error(tool.schema_key, c.arguments):
                codes.add("tool_arguments_schema")
    for error in transcript_errors(kept):
        code = error.code
        later = kept[error.index + 1 :]
        if code == "unanswered_tool_call" and not any(
            isinstance(m, UserMessage | AssistantMessage) for m in later
        ):
            code = "trailing_tool_call"  # pending at the very end of the history
        codes.add(code)
    if not any(isinstance(m, AssistantMessage) for m in kept):
        codes.add("no_assistant_turn")
    return codes


def written_back(fmt: str, row: dict[str, Any]) -> dict[str, Any]:
    """`row` as its codec writes back its own messages: the row itself, but for Claude Code,
    whose encoder writes a streamed answer (events with one `message.id`, one after the other)
    as one event, the first, holding the blocks of all, and puts an event holding no message
    after the event before it by uuid, last where that one is no longer written
    (`formats/claude_code/codec.py`)."""
    if fmt != "claude-code":
        return row
    events: list[dict[str, Any]] = []
    last: list[dict[str, Any]] = []
    gone = False  # the last message event was joined into the one before
    for event in row["events"]:
        message = event.get("message")
        if message is None:
            (last if gone else events).append(event)
            continue
        before = next((e for e in reversed(events) if e.get("message") is not None), None)
        gone = (
            event["type"] == "assistant"
            and before is not None
            and before["type"] == "assistant"
            and message["id"] == before["message"]["id"]
        )
        if gone:
            assert before is not None
            joined = before["message"]["content"] + message["content"]
            events[events.index(before)] = {
                **before,
                "message": {**before["message"], "content": joined},
            }
        else:
            events.append(event)
    return {**row, "events": events + last}


def supported(fmt: str) -> list[str]:
    return [c for c in CODES if c not in UNSUPPORTED.get(fmt, ())]


@pytest.mark.parametrize("fmt", FORMATS)
def test_clean_rows_have_no_violation_and_round_trip(fmt: str) -> None:
    codec = get_format(fmt)
    rows = list(generate_rows(300, fmt, seed=1, rates={}))
    assert all(planted == frozenset() for _, planted in rows)
    for row, _ in rows:
        decoded = codec.decode(row)
        assert strict_codes(fmt, row) == set(), row
        assert codec.encode(decoded, decoded.messages) == written_back(fmt, row)


@pytest.mark.parametrize(
    ("fmt", "code"), [(fmt, code) for fmt in FORMATS for code in supported(fmt)]
)
def test_each_code_planted_alone_is_exactly_what_a_strict_cleaner_finds(
    fmt: str, code: str
) -> None:
    rows = list(generate_rows(80, fmt, seed=2, rates={code: 1.0}))
    codes = {code} | ALSO.get((fmt, code), set())
    assert all(planted == codes for _, planted in rows)
    for row, _ in rows:
        assert strict_codes(fmt, row) == codes, row


@pytest.mark.parametrize("fmt", FORMATS)
def test_default_rates_plant_about_ten_percent_and_say_exactly_what(fmt: str) -> None:
    rows = list(generate_rows(3000, fmt, seed=3))
    planted = Counter(code for _, codes in rows for code in codes)
    defective = sum(1 for _, codes in rows if codes)
    share = sum(default_rates(fmt).values())  # 10%, less what the format cannot carry
    assert 0.6 * share * 3000 < defective < 1.4 * share * 3000
    opt_in = set(EVERY_RATES) - set(DEFAULT_RATES)  # planted only when asked for
    also = {c for (f, _), codes in ALSO.items() if f == fmt for c in codes}
    assert set(planted) == (set(supported(fmt)) - opt_in) | also
    assert all(len(codes - also) <= 1 for _, codes in rows)
    for row, codes in rows:
        assert strict_codes(fmt, row) == set(codes), row


@pytest.mark.parametrize("fmt", FORMATS)
def test_rows_type_together_as_arrow_and_survive_it(fmt: str) -> None:
    rows = [row for row, _ in generate_rows(1500, fmt, seed=4)]
    inferred = pa.Table.from_pylist(rows)
    typed = pa.Table.from_pylist(rows, schema=arrow_schema(fmt))
    assert inferred.to_pylist() == typed.to_pylist()
    codec = get_format(fmt)
    for row, arrow_row in zip(rows, typed.to_pylist(), strict=True):
        assert strict_codes(fmt, arrow_row) == strict_codes(fmt, row)
        try:
            decoded = codec.decode(arrow_row)
        except DecodeError:
            continue
        assert codec.encode(decoded, decoded.messages) == written_back(fmt, arrow_row)


@pytest.mark.parametrize("fmt", FORMATS)
def test_rows_look_like_real_data(fmt: str) -> None:
    codec = get_format(fmt)
    rows = [row for row, codes in generate_rows(400, fmt, seed=5, rates={})]
    assert [row["id"] for row in rows] == list(range(400))
    decoded = [codec.decode(row).messages for row in rows]
    turns = [m for messages in decoded for m in messages if isinstance(m, AssistantMessage)]
    widths = Counter(len(m.tool_calls) for m in turns)
    if fmt in PLAIN:  # strings: no calls
        assert set(widths) == {0}
    else:
        assert widths[1] > 0 and widths[2] + widths[3] > 0  # single and parallel calls
    reasoning = any(isinstance(p, Reasoning) for m in turns for p in m.content)
    assert reasoning == (fmt != "sharegpt" and fmt not in PLAIN)
    systems = sum(1 for messages in decoded if type(messages[0]).__name__ == "SystemMessage")
    assert (systems > 0) == (fmt not in ("rig", "completion", "hh", "claude-code"))  # `_RENDER`
    if fmt in ("openai", "sharegpt"):
        assert all(json.loads(row["tools"]) for row in rows)
    if fmt == "completion":  # one question and its answer
        assert {len(m) for m in decoded} == {2}
    else:
        assert max(len(m) for m in decoded) >= 8


def test_the_same_seed_gives_the_same_rows() -> None:
    assert list(generate_rows(50, "openai", seed=9)) == list(generate_rows(50, "openai", seed=9))
    assert list(generate_rows(50, "openai", seed=9)) != list(generate_rows(50, "openai", seed=10))


def test_default_rates() -> None:
    assert sum(DEFAULT_RATES.values()) == pytest.approx(0.10)
    # the declared-tools codes are planted only when asked for (the bench's tools mode)
    assert set(DEFAULT_RATES) == set(CODES) - set(EVERY_RATES).difference(DEFAULT_RATES)
    assert set(TOOLS_RATES) < set(EVERY_RATES) and set(EVERY_RATES) == set(CODES)
    assert "invalid_tool_arguments" not in default_rates("anthropic")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "chatml"}, "unknown format 'chatml'"),
        ({"rates": {"bogus": 0.1}}, "unknown codes ['bogus']"),
        ({"format": "rig", "rates": {"invalid_tool_arguments": 0.1}}, "rig rows cannot carry"),
        ({"rates": {"malformed_row": 0.6, "unknown_role": 0.6}}, "add up to at most 1"),
        ({"rates": {"malformed_row": -0.1}}, "at least 0"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        next(generate_rows(1, **kwargs))


# ---------------------------------------------------------------------------------------------
# scripts/make_synthetic.py


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_synthetic", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_synthetic_writes_parquet_in_row_groups_and_the_planted_codes(tmp_path: Path) -> None:
    script = load_script()
    out = tmp_path / "sample.parquet"
    args = [
        str(out),
        "--rows",
        "250",
        "--format",
        "sharegpt",
        "--seed",
        "3",
        "--rows-per-group",
        "100",
        "--planted",
    ]
    result = CliRunner().invoke(script.main, args)
    assert result.exit_code == 0, result.output
    assert "wrote 250 sharegpt rows" in result.output
    parquet = pq.ParquetFile(out)
    assert parquet.metadata.num_rows == 250
    assert parquet.metadata.num_row_groups == 3
    assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
    expected = list(generate_rows(250, "sharegpt", seed=3))
    assert parquet.read().to_pylist() == pa.Table.from_pylist([r for r, _ in expected]).to_pylist()
    lines = (tmp_path / "sample.planted.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == [sorted(codes) for _, codes in expected]


def test_make_synthetic_writes_json_lines_with_the_rates_asked_for(tmp_path: Path) -> None:
    script = load_script()
    out = tmp_path / "bad.jsonl"
    args = [str(out), "--rows", "40", "--format", "rig", "--rate", "orphan_tool_result=100%"]
    result = CliRunner().invoke(script.main, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 40
    assert all(strict_codes("rig", row) == {"orphan_tool_result"} for row in rows)
    assert not (tmp_path / "bad.planted.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "bogus=1"], "expected CODE=R"),
        (["--rate", "orphan_tool_result=lots"], "is not a number"),
        (["--format", "anthropic", "--rate", "invalid_tool_arguments=0.1"], "cannot carry"),
        (["--format", "chatml"], "Invalid value for '--format'"),
    ],
)
def test_make_synthetic_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(load_script().main, [str(tmp_path / "x.parquet"), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "x.parquet").exists()


def test_make_synthetic_with_no_rows_writes_the_schema(tmp_path: Path) -> None:
    out = tmp_path / "empty.parquet"
    result = CliRunner().invoke(
        load_script().main, [str(out), "--rows", "0", "--format", "anthropic"]
    )
    assert result.exit_code == 0, result.output
    assert pq.read_table(out).schema == arrow_schema("anthropic")


@pytest.mark.parametrize("fmt", ["anthropic", "rig"])
def test_anthropic_and_rig_rows_declare_tools_only_when_asked(fmt: str, tmp_path: Path) -> None:
    # Without a declared-tools code the rows are as they always were (the golden digests are
    # made of them); with one, each row has a `tools` column its format reads, and every
    # planted code is one the tool set's checks find.
    plain = [row for row, _ in generate_rows(50, fmt, seed=4)]
    assert not any("tools" in row for row in plain)
    assert "tools" not in arrow_schema(fmt).names
    out = tmp_path / "tools.parquet"
    rates = ["--rate", "unknown_tool=0.2", "--rate", "tool_arguments_schema=0.2"]
    result = CliRunner().invoke(
        load_script().main, [str(out), "--rows", "200", "--format", fmt, *rates]
    )
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.schema == arrow_schema(fmt, tools=True)
    fmt_ = get_format(fmt)
    for row, planted in generate_rows(200, fmt, seed=0, rates=dict(TOOLS_RATES)):
        declared = read_row_declarations(row, fmt_.tools_columns)
        assert declared is not None and not declared.problems, row
        names = set(declared.tools)
        calls = [c for m in fmt_.decode(row).messages for c in getattr(m, "tool_calls", ())]
        unknown = any(c.name not in names for c in calls)
        assert unknown == ("unknown_tool" in planted), (row, planted)
        if "tool_arguments_schema" in planted:
            keyed = [(declared.tools[c.name].schema_key, c.arguments) for c in calls]
            assert any(key and arguments_error(key, arguments) for key, arguments in keyed)
