"""The LLaMA-Factory v1 format: `{type, value}` content items, calls as JSON text, results by
position, `loss_weight` kept; rows written back as they came in."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from transcript_clean.cli import main
from transcript_clean.formats import DecodeError, get_format
from transcript_clean.formats.base import Decoded
from transcript_clean.formats.llamafactory import LlamaFactoryFormat
from transcript_clean.model import (
    Media,
    Reasoning,
    ReasoningText,
    Text,
    ToolCall,
    ToolResult,
    assistant,
    system,
    user,
)
from transcript_clean.policy import DEFAULT
from transcript_clean.rows import clean_row
from transcript_clean.shapes.detect import detect_format

DATA = Path(__file__).parent / "data" / "llamafactory"
FMT = LlamaFactoryFormat()
ERROR_RESULT = replace(DEFAULT, interrupted_call="error_result")


def lines(name: str) -> list[str]:
    return (DATA / name).read_text(encoding="utf-8").splitlines()


def rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(name)]


def item(type_: str, value: str) -> dict[str, Any]:
    return {"type": type_, "value": value}


def call(name: str, arguments: Any) -> dict[str, Any]:
    return item("tool_call", json.dumps({"name": name, "arguments": arguments}))


def message(role: str, *items: dict[str, Any], weight: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "content": list(items)}
    if weight is not None:
        out["loss_weight"] = weight
    return out


def test_a_row_decodes_to_the_canonical_transcript() -> None:
    row = {
        "messages": [
            message("system", item("text", "Be brief.")),
            message("user", item("text", "Weather?"), item("image_url", "a.png"), weight=0.0),
            message(
                "assistant",
                item("reasoning", "Look it up."),
                call("get_weather", {"city": "Paris"}),
                call("get_weather", {"city": "Rome"}),
                weight=1.0,
            ),
            message("tool", item("text", "18 C")),
            message("tool", item("text", "24 C")),
            message("assistant", item("text", "18 and 24."), weight=0.5),
        ],
        "tools": "[]",
    }
    decoded = FMT.decode(row)
    paris, rome = decoded.messages[2].tool_calls  # type: ignore[union-attr]
    assert decoded.messages == [
        system("Be brief."),
        user("Weather?", Media("image", {"value": "a.png"})),
        assistant(
            Reasoning((ReasoningText("Look it up."),)),
            ToolCall(paris.id, "get_weather", {"city": "Paris"}),
            ToolCall(rome.id, "get_weather", {"city": "Rome"}),
        ),
        user(
            ToolResult(paris.id, (Text("18 C"),), "get_weather"),
            ToolResult(rome.id, (Text("24 C"),), "get_weather"),
        ),
        assistant("18 and 24."),
    ]
    assert decoded.minted == {paris.id, rome.id}  # the format has no ids: none is written
    assert FMT.encode(decoded, decoded.messages) == row


def test_one_tool_message_holding_a_json_list_answers_every_call() -> None:
    # As LLaMA-Factory's reason_tool_use_demo writes parallel results.
    packed = json.dumps([{"name": "f", "content": "1"}, {"name": "f", "content": "2"}])
    row = {
        "messages": [
            message("user", item("text", "Go")),
            message("assistant", call("f", {"x": 1}), call("f", {"x": 2})),
            message("tool", item("text", packed)),
            message("assistant", item("text", "Done.")),
        ]
    }
    decoded = FMT.decode(row)
    results = decoded.messages[2].content
    assert [r.call for r in results] == [c.id for c in decoded.messages[1].tool_calls]  # type: ignore[union-attr]
    assert [r.content[0].text for r in results] == [  # type: ignore[union-attr]
        json.dumps({"name": "f", "content": "1"}),
        json.dumps({"name": "f", "content": "2"}),
    ]
    assert FMT.encode(decoded, decoded.messages) == row
    assert list(clean_row(row, FMT, DEFAULT).codes) == []


@pytest.mark.parametrize(
    ("items", "path"),
    [
        (
            [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            'messages[0].content[0]: missing "value"',
        ),
        (
            [message("assistant", item("tool_call", "not json"))],
            "messages[0].content[0]: expected the JSON text",
        ),
        (
            [message("assistant", item("tool_call", '{"arguments": {}}'))],
            'messages[0].content[0].value: missing "name"',
        ),
        (
            [message("system", item("image_url", "a.png"))],
            "messages[0].content[0]: a system message holds only text",
        ),
        (
            [message("user", item("reasoning", "hm"))],
            'messages[0].content[0]: a "reasoning" item belongs',
        ),
        ([{"role": "user", "content": "Hi"}], "messages[0].content: expected a list, got a string"),
    ],
)
def test_what_it_cannot_read_is_a_malformed_row_naming_the_field(
    items: list[Any], path: str
) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode({"messages": items})
    assert err.value.code == "malformed_row"
    assert str(err.value).startswith(path)


def test_an_unknown_role_is_unknown_role() -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode({"messages": [message("observation", item("text", "1"))]})
    assert err.value.code == "unknown_role"
    assert "messages[0].role" in str(err.value)


def test_string_arguments_are_kept_verbatim_and_bad_ones_found() -> None:
    row = {
        "messages": [
            message("user", item("text", "Go")),
            message("assistant", call("f", '{"x": 1}'), call("g", "{oops")),
        ]
    }
    decoded = FMT.decode(row)
    good, bad = decoded.messages[1].tool_calls  # type: ignore[union-attr]
    assert (good.arguments, good.raw_arguments) == ({"x": 1}, '{"x": 1}')
    assert (bad.arguments, bad.raw_arguments) == (None, "{oops")
    assert FMT.encode(decoded, decoded.messages) == row
    assert "invalid_tool_arguments" in clean_row(row, FMT, DEFAULT).codes


def test_a_repaired_row_keeps_each_untouched_message_and_its_weight() -> None:
    row = {
        "messages": [
            message("user", item("text", "Go"), weight=0.0),
            message("assistant", call("f", {}), weight=1.0),
            message("user", item("text", "Well?"), weight=0.0),
            message("assistant", item("text", "Sorry."), weight=1.0),
        ]
    }
    result = clean_row(row, FMT, ERROR_RESULT)
    assert list(result.codes) == ["unanswered_tool_call"]
    out = result.row
    assert out is not None
    # R5's error result, in the format's own shape, weighted as LLaMA-Factory weighs a tool turn
    fresh = out["messages"][2]
    assert fresh["role"] == "tool"
    assert fresh["loss_weight"] == 0.0
    assert fresh["content"][0]["type"] == "text"
    assert "interrupted" in fresh["content"][0]["value"]
    assert out["messages"][:2] + out["messages"][3:] == row["messages"]


def test_fresh_messages_get_no_weight_where_the_row_has_none() -> None:
    decoded = Decoded(messages=[], row={"id": 7})
    out = FMT.encode(decoded, [user("Hi"), assistant("Hello", ToolCall("c", "f", {}))])
    assert out == {
        "id": 7,
        "messages": [
            message("user", item("text", "Hi")),
            message("assistant", item("text", "Hello"), call("f", {})),
        ],
    }
    assert FMT.decode(out).messages[0] == user("Hi")


@pytest.mark.parametrize("name", ["reason_tool_use_rows.jsonl", "v1_sft_rows.jsonl"])
def test_the_real_files_are_detected_and_each_row_written_back_as_it_came(name: str) -> None:
    real = rows(name)
    fmt = detect_format(list(real[0]), real)
    assert isinstance(fmt, LlamaFactoryFormat)
    assert fmt.column == "messages"
    for row in real:
        decoded = fmt.decode(row)
        assert fmt.encode(decoded, decoded.messages) == row
    assert get_format("llamafactory").name == "llamafactory"


def test_clean_reads_the_real_file_and_writes_kept_rows_byte_for_byte(tmp_path: Path) -> None:
    source = DATA / "reason_tool_use_rows.jsonl"
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["clean", str(source), str(out), "--output-format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert "as llamafactory (column 'messages'; LLaMA-Factory v1 messages" in result.output
    rejected = [json.loads(x) for x in (out / "rejects" / "part-00000.jsonl").open()]
    # row 3 declares a tool whose parameters say "type": "dict", which is no JSON Schema type
    assert [(r["_source_row"], r["_reject_codes"]) for r in rejected] == [
        (3, ["invalid_tool_declaration"])
    ]
    kept = (out / "data" / "part-00000.jsonl").read_text(encoding="utf-8").splitlines()
    source_lines = lines("reason_tool_use_rows.jsonl")
    assert kept == source_lines[:3] + source_lines[4:]
    stats = {r["code"]: r for r in json.loads((out / "summary.json").read_text())["stats"]}
    assert stats["trailing_tool_call"]["rows"] == 3  # the demo's rows that stop at the call
    assert stats["trailing_tool_call"]["action"] == "kept"


def test_the_real_parallel_results_answer_both_calls() -> None:
    row = rows("reason_tool_use_rows.jsonl")[4]
    decoded = FMT.decode(row)
    turn = decoded.messages[2]
    results = decoded.messages[3].content
    assert len(turn.tool_calls) == 2  # type: ignore[union-attr]
    assert [r.call for r in results] == [c.id for c in turn.tool_calls]  # type: ignore[union-attr]
    assert '"area": 7.0686' not in results[0].content[0].text  # type: ignore[union-attr]
    assert "7.0686" in results[0].content[0].text  # type: ignore[union-attr]
    assert "28.2743" in results[1].content[0].text  # type: ignore[union-attr]
    assert list(clean_row(row, FMT, DEFAULT).codes) == []


def test_to_openai_writes_trl_rows(tmp_path: Path) -> None:
    source = DATA / "reason_tool_use_rows.jsonl"
    out = tmp_path / "out"
    args = ["clean", str(source), str(out), "--output-format", "jsonl", "--to", "openai"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    written = [json.loads(x) for x in (out / "data" / "part-00000.jsonl").open()]
    assert len(written) == 4
    for row in written:
        assert set(row) == {"messages", "tools"}
        assert {m["role"] for m in row["messages"]} <= {"system", "user", "assistant", "tool"}
        assert all(t["type"] == "function" for t in row["tools"])
    first = written[0]["messages"]
    assert first[-1]["tool_calls"][0]["function"]["name"] == "get_products_in_category"
    assert first[-1]["reasoning_content"].startswith("Okay, the user wants")
    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset("json", data_files=str(out / "data" / "*.jsonl"))["train"]
    assert loaded.num_rows == 4
    # the packed parallel results became one tool message per call
    last = written[-1]["messages"]
    assert [m["role"] for m in last].count("tool") == 5
