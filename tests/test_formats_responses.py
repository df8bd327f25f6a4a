"""The OpenAI Responses API format: a list of items (`message`, `function_call`,
`function_call_output`, `reasoning`), read into canonical messages and written back as they
came in."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_convert import trl_messages

from transcript_clean.formats import DecodeError, get_format
from transcript_clean.formats.base import Decoded
from transcript_clean.formats.detect import detect_conversation_format
from transcript_clean.formats.responses import ResponsesFormat
from transcript_clean.model import (
    Encrypted,
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
from transcript_clean.run import clean

FMT = ResponsesFormat()
ERROR_RESULT = replace(DEFAULT, interrupted_call="error_result")
REAL = Path(__file__).parent / "data" / "responses_rows.jsonl"

# A request as the Responses API takes it, after a turn whose `output` was appended to `input`
# (openai-python's examples/responses/function_calling_migration.py does so): reasoning with a
# summary and encrypted content, two parallel calls, their outputs, the answer, a follow-up.
WEATHER: dict[str, Any] = {
    "instructions": "You are a helpful weather assistant",
    "input": [
        {"role": "user", "content": "What's the weather in Paris and Tokyo?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Two cities: two calls."}],
            "encrypted_content": "gAAA",
        },
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"location": "Paris"}',
            "status": "completed",
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_2",
            "name": "get_weather",
            "arguments": '{"location": "Tokyo"}',
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temp": 18}'},
        {"type": "function_call_output", "call_id": "call_2", "output": '{"temp": 24}'},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Paris 18, Tokyo 24.", "annotations": []}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "-"}]},
    ],
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"location": {"type": "string"}},
                "required": ["location"],
            },
        }
    ],
}


def roundtrip(row: dict[str, Any]) -> Decoded:
    decoded = FMT.decode(row)
    assert FMT.encode(decoded, decoded.messages) == row
    return decoded


def test_items_read_as_messages_and_are_written_back_as_they_came() -> None:
    decoded = roundtrip(WEATHER)
    assert decoded.messages == [
        system("You are a helpful weather assistant"),
        user("What's the weather in Paris and Tokyo?"),
        assistant(
            Reasoning(
                (ReasoningText("Two cities: two calls.", "summary"), Encrypted("gAAA")), "rs_1"
            ),
            ToolCall("call_1", "get_weather", {"location": "Paris"}, '{"location": "Paris"}'),
            ToolCall("call_2", "get_weather", {"location": "Tokyo"}, '{"location": "Tokyo"}'),
        ),
        user(
            ToolResult("call_1", (Text('{"temp": 18}'),), "get_weather"),
            ToolResult("call_2", (Text('{"temp": 24}'),), "get_weather"),
        ),
        assistant("Paris 18, Tokyo 24."),
        user("Thanks"),
        assistant("-"),
    ]
    assert clean_row(WEATHER, FMT, DEFAULT).status == "unchanged"


def test_declared_tools_are_the_flat_responses_shape() -> None:
    declared = FMT.declared_tools(WEATHER)
    assert declared is not None and declared.names() == ["get_weather"]
    bad = json.loads(json.dumps(WEATHER))
    bad["input"][2]["arguments"] = '{"city": "Paris"}'  # no "location", which is required
    verdict = clean_row(bad, FMT, DEFAULT)
    assert verdict.status == "rejected" and "tool_arguments_schema" in verdict.codes


def test_a_dangling_call_gets_r5s_output_item_before_the_next_user_message() -> None:
    row = json.loads(json.dumps(WEATHER))
    del row["input"][5]  # call_2's output
    verdict = clean_row(row, FMT, ERROR_RESULT)
    assert verdict.status == "repaired" and verdict.row is not None
    items = verdict.row["input"]
    assert items[:5] == row["input"][:5]
    assert items[5] == {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": "The tool call was interrupted before a result was produced.",
    }
    assert items[6:] == row["input"][5:]
    assert verdict.row["instructions"] == row["instructions"]


def test_other_items_and_parts_are_kept_where_they_stand() -> None:
    row = {
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": "https://example.com/cat.png"},
                ],
            },
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "A cat."}],
            },
        ]
    }
    decoded = roundtrip(row)
    said = decoded.messages[1]
    assert said == assistant(Media("web_search_call", row["input"][1]), "A cat.")
    assert decoded.messages[0].content[1] == Media("input_image", row["input"][0]["content"][1])  # type: ignore[union-attr]


def test_input_as_one_string_is_the_users_message() -> None:
    row = {"input": "Hello", "instructions": None}
    decoded = roundtrip(row)
    assert decoded.messages == [user("Hello")]


def test_fresh_messages_are_written_as_items() -> None:
    messages = [
        system("S"),
        user("Q"),
        assistant(Reasoning((ReasoningText("think", "summary"),)), ToolCall("c", "f", {"x": 1})),
        user(ToolResult("c", (Text("ok"),), "f")),
        assistant("A"),
    ]
    row = FMT.encode(Decoded([], {"input": []}, format="openai"), messages)
    assert row == {
        "input": [
            {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "S"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Q"}]},
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"x": 1}'},
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "A"}],
            },
        ]
    }
    again = FMT.decode(row).messages
    assert again[:2] == messages[:2] and again[3:] == messages[3:]
    assert again[2].tool_calls[0].arguments == {"x": 1}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("row", "code", "where"),
    [
        ({"input": [{"role": "tool", "content": "x"}]}, "unknown_role", "input[0].role"),
        (
            {"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
            "malformed_row",
            "input[0]",
        ),
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": 3}]},
            "malformed_row",
            "input[0].output",
        ),
        (
            {"input": [{"type": "reasoning", "summary": [{"type": "summary_text"}]}]},
            "malformed_row",
            "input[0].summary[0]",
        ),
        ({"input": {"role": "user"}}, "malformed_row", "input"),
    ],
)
def test_what_it_cannot_read_names_the_field(row: dict[str, Any], code: str, where: str) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode(row)
    assert (err.value.code, err.value.path) == (code, where)


def test_auto_picks_it_from_the_items() -> None:
    fmt = detect_conversation_format(
        ["model", "input"], [json.loads(REAL.read_text().split("\n")[0])]
    )
    assert fmt.name == "responses" and fmt.column == "input"
    items = detect_conversation_format(["items"], [{"items": WEATHER["input"]}])
    assert (items.name, items.column) == ("responses", "items")
    assert get_format("responses").column == "input"


def test_a_real_file_is_cleaned_and_kept_rows_come_back_byte_for_byte(tmp_path: Path) -> None:
    result = clean(REAL, tmp_path / "out", output_format="jsonl")
    lines = REAL.read_text().splitlines()
    assert result.stats.rows_in == 2 and result.stats.rows_kept == 1
    kept = (tmp_path / "out" / "data" / "part-00000.jsonl").read_text().splitlines()
    assert kept == [lines[0]]  # openai-python's function_call_inputs.py input, as it came
    rejects = (tmp_path / "out" / "rejects" / "part-00000.jsonl").read_text().splitlines()
    assert [json.loads(r)["_reject_codes"] for r in rejects] == [["no_assistant_turn"]]


def test_to_openai_loads_with_datasets_as_trl_wants(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    source = tmp_path / "in.jsonl"
    plain = json.loads(json.dumps(WEATHER))
    del plain["input"][1]["encrypted_content"]  # which OpenAI's chat messages have no place for
    rows = [REAL.read_text(), json.dumps(plain) + "\n", json.dumps(WEATHER) + "\n"]
    source.write_text("".join(rows))
    result = clean(source, tmp_path / "out", to="openai", output_format="jsonl")
    assert result.stats.rows_kept == 2
    rejects = (tmp_path / "out" / "rejects" / "part-00000.jsonl").read_text().splitlines()
    lossy = json.loads(rejects[-1])
    assert lossy["_reject_codes"] == ["lossy_conversion"] and lossy["_source_row"] == 3
    files = sorted(str(p) for p in (tmp_path / "out" / "data").glob("*.jsonl"))
    loaded = datasets.load_dataset(
        "json", data_files=files, split="train", cache_dir=str(tmp_path / "cache")
    )
    assert {"messages", "tools"} <= set(loaded.column_names)
    for row in loaded:
        trl_messages(row["messages"])
    real, weather = loaded[0], loaded[1]
    assert [m["role"] for m in real["messages"]] == ["system", "user", "assistant", "tool"]
    assert real["messages"][3]["tool_call_id"] == "call_123"
    assert weather["messages"][0]["content"] == "You are a helpful weather assistant"
    assert weather["tools"][0]["function"]["name"] == "get_weather"
    assert weather["messages"][2]["reasoning_content"] == "Two cities: two calls."


def test_the_docs_example_is_repaired_as_the_docs_say() -> None:
    text = (Path(__file__).parent.parent / "docs" / "formats.md").read_text()
    section = text[text.index("## responses") : text.index("## claude-code")]
    before, after = section.split("```json\n")[1:3]
    row = json.loads(before.split("```")[0])
    verdict = clean_row(row, FMT, ERROR_RESULT)
    assert verdict.status == "repaired" and verdict.row is not None
    shown = [json.loads(line.rstrip(",")) for line in after.split("```")[0].splitlines()]
    assert verdict.row["input"][5:7] == shown
    assert verdict.row["input"][:5] == row["input"][:5]
    assert verdict.row["input"][7:] == row["input"][6:]


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3))
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_part = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["input_text", "output_text", "refusal", "input_image"]) | _json,
        "text": _json,
        "refusal": _json,
    },
)
_item = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(
            ["message", "function_call", "function_call_output", "reasoning", "web_search_call"]
        )
        | _json,
        "role": st.sampled_from(["user", "assistant", "system", "developer"]) | _json,
        "content": st.lists(_part | _json, max_size=3) | _json,
        "call_id": st.sampled_from(["a", "b"]) | _json,
        "name": st.sampled_from(["get_weather"]) | _json,
        "arguments": st.sampled_from(['{"location": "x"}', "{", "[]"]) | _json,
        "output": st.lists(_part, max_size=2) | _json,
        "summary": st.lists(_part | _json, max_size=2) | _json,
        "encrypted_content": _json,
        "id": _json,
    },
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_item | _json, max_size=6), _json)
def test_any_items_are_read_or_rejected_never_a_crash(items: list[Any], instructions: Any) -> None:
    row = {"input": items, "instructions": instructions, "tools": WEATHER["tools"]}
    try:
        decoded = FMT.decode(row)
    except DecodeError:
        return
    assert FMT.encode(decoded, decoded.messages) == row
    clean_row(row, FMT, ERROR_RESULT)


def test_a_log_of_input_and_output_items_reads_as_prompt_and_completion(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from transcript_clean.cli import main

    row = {
        "input": [{"role": "user", "content": "Hi"}],
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello"}],
            },
        ],
    }
    source = tmp_path / "log.jsonl"
    source.write_text(json.dumps(row) + "\n")
    args = ["clean", str(source), str(tmp_path / "out"), "--output-format", "jsonl"]
    alone = CliRunner().invoke(main, args)
    assert (
        alone.exit_code == 2 and "several columns hold conversations: input, output" in alone.output
    )
    typed = ["--type", "prompt-completion", "--prompt-column", "input", "--candidates", "output"]
    result = CliRunner().invoke(main, args + typed)
    assert result.exit_code == 0, result.output
    assert (
        "as responses prompt-completion rows: prompt `input`, completion `output`" in result.output
    )
    written = (tmp_path / "out" / "data" / "part-00000.jsonl").read_text()
    assert written == source.read_text()
