"""The Gemini format: `contents` of `parts`, calls paired by position, rows written back as
they came in."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_convert import trl_dataset

from transcript_clean.cli import main
from transcript_clean.convert import converting
from transcript_clean.formats import DecodeError, get_format
from transcript_clean.formats.base import Decoded
from transcript_clean.formats.detect import detect_conversation_format
from transcript_clean.formats.gemini import GeminiFormat
from transcript_clean.model import (
    Reasoning,
    ReasoningText,
    SystemMessage,
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

FMT = GeminiFormat()
ERROR_RESULT = replace(DEFAULT, interrupted_call="error_result")

# The shape of Vertex AI's supervised tuning files ("Prepare supervised fine-tuning data for
# Gemini models", cloud.google.com/vertex-ai/generative-ai/docs/models/gemini-supervised-tuning-
# about): systemInstruction with a role, contents of user / model parts, functionDeclarations
# with Gemini's upper-case types.
WEATHER: dict[str, Any] = {
    "systemInstruction": {"role": "system", "parts": [{"text": "You are a weather bot."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Let me check.", "thought": True, "thoughtSignature": "c2ln"},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"result": "18 C"}}},
                {"functionResponse": {"name": "get_weather", "response": {"temp": 25}}},
            ],
        },
        {"role": "model", "parts": [{"text": "Paris 18 C, Rome 25 C."}]},
    ],
    "tools": [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "parameters": {
                        "type": "OBJECT",
                        "properties": {"city": {"type": "STRING"}},
                        "required": ["city"],
                    },
                }
            ]
        }
    ],
}


def roundtrip(row: dict[str, Any]) -> Decoded:
    decoded = FMT.decode(row)
    assert FMT.encode(decoded, decoded.messages) == row
    return decoded


def test_a_tuning_row_reads_reasoning_parallel_calls_and_results_by_position() -> None:
    decoded = roundtrip(WEATHER)
    paris, rome = decoded.messages[2].tool_calls  # type: ignore[union-attr]
    assert decoded.messages[0] == system("You are a weather bot.")
    assert decoded.messages[2] == assistant(
        Reasoning((ReasoningText("Let me check."),), signature="c2ln"),
        ToolCall(paris.id, "get_weather", {"city": "Paris"}),
        ToolCall(rome.id, "get_weather", {"city": "Rome"}),
    )
    assert decoded.messages[3] == user(
        ToolResult(paris.id, (Text("18 C"),), "get_weather"),
        ToolResult(rome.id, (Text('{"temp": 25}'),), "get_weather"),
    )
    assert decoded.minted == {paris.id, rome.id}
    verdict = clean_row(WEATHER, FMT, DEFAULT)
    assert verdict.status == "unchanged", verdict


def test_declarations_with_upper_case_types_are_checked_as_json_schema() -> None:
    declared = FMT.declared_tools(WEATHER)
    assert declared is not None and declared.names() == ["get_weather"]
    assert not declared.problems
    bad = {**WEATHER, "contents": [*WEATHER["contents"][:1]]}
    bad["contents"].append(
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {}}}]}
    )
    verdict = clean_row(bad, FMT, DEFAULT)
    assert verdict.status == "rejected" and "tool_arguments_schema" in verdict.codes


def test_ids_when_given_pair_by_id_and_are_written_back() -> None:
    row = {
        "contents": [
            {"role": "user", "parts": [{"text": "Go"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "a", "name": "f", "args": {}}}]},
            {
                "role": "function",
                "parts": [{"functionResponse": {"id": "a", "name": "f", "response": {}}}],
            },
            {"role": "model", "parts": [{"text": "Done"}]},
        ]
    }
    decoded = roundtrip(row)
    assert decoded.messages[1].tool_calls[0].id == "a"  # type: ignore[union-attr]
    assert decoded.messages[2] == user(ToolResult("a", (Text("{}"),), "f"))
    assert not decoded.minted


def test_a_dangling_call_gets_r5s_result_as_a_function_response() -> None:
    row = {
        "contents": [
            {"role": "user", "parts": [{"text": "Weather?"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "w", "args": {}}}]},
            {"role": "user", "parts": [{"text": "Well?"}]},
            {"role": "model", "parts": [{"text": "Sorry."}]},
        ]
    }
    verdict = clean_row(row, FMT, ERROR_RESULT)
    assert verdict.status == "repaired" and verdict.row is not None
    parts = verdict.row["contents"][2]["parts"]
    assert parts[0]["functionResponse"]["name"] == "w"
    assert "error" in parts[0]["functionResponse"]["response"]
    assert parts[1] == {"text": "Well?"}
    again = FMT.decode(verdict.row).messages[2]
    assert isinstance(again.content[0], ToolResult) and again.content[0].status == "error"  # type: ignore[union-attr]


def test_fresh_messages_are_written_as_gemini_turns() -> None:
    messages = [
        system("S"),
        user("Q"),
        assistant(ToolCall("c", "f", {"x": 1})),
        user(ToolResult("c", (Text("ok"),), "f")),
        assistant("A"),
    ]
    row = FMT.encode(Decoded([], {"contents": []}, format="openai"), messages)
    assert row == {
        "systemInstruction": {"parts": [{"text": "S"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Q"}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "f", "args": {"x": 1}, "id": "c"}}],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "f", "response": {"result": "ok"}, "id": "c"}}
                ],
            },
            {"role": "model", "parts": [{"text": "A"}]},
        ],
    }
    assert FMT.decode(row).messages == messages


def test_snake_case_keys_read_the_same() -> None:
    row = {
        "system_instruction": {"parts": [{"text": "S"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Q"}]},
            {"role": "model", "parts": [{"function_call": {"name": "f", "args": {}}}]},
        ],
    }
    decoded = roundtrip(row)
    assert isinstance(decoded.messages[0], SystemMessage)
    assert decoded.messages[2].tool_calls[0].name == "f"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("row", "code", "where"),
    [
        ({"contents": [{"role": "assistant", "parts": []}]}, "unknown_role", "contents[0].role"),
        ({"contents": [{"role": "user"}]}, "malformed_row", "contents[0].parts"),
        (
            {"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]},
            "malformed_row",
            "contents[0].parts[0].functionCall",
        ),
    ],
)
def test_unreadable_rows_name_the_field(row: dict[str, Any], code: str, where: str) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode(row)
    assert err.value.code == code and err.value.path == where


def test_auto_reads_contents_as_gemini() -> None:
    fmt = detect_conversation_format(list(WEATHER), [WEATHER])
    assert fmt.name == "gemini" and fmt.column == "contents"
    assert isinstance(get_format("gemini"), GeminiFormat)


# ---------------------------------------------------------------------------------------------
# real files (tests/data/README.md says where each is from)

DATA = Path(__file__).parent / "data" / "gemini"
GLUCOSE = DATA / "vertex_glucose_tuning.jsonl"  # a Vertex tuning file of GoogleCloudPlatform's
CALLING = DATA / "vertex_function_calling_tuning.jsonl"  # Vertex's function-calling examples


@pytest.mark.parametrize(
    ("path", "codes"),
    [
        (GLUCOSE, [[]]),
        # the first and last end on calls the example stops at: kept (trailing_tool_call); the
        # second answers its call in a turn without a role, the user's
        (CALLING, [["trailing_tool_call"], [], ["trailing_tool_call"]]),
    ],
)
def test_vertex_tuning_files_are_detected_kept_and_written_back_byte_for_byte(
    tmp_path: Path, path: Path, codes: list[list[str]]
) -> None:
    lines = path.read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [clean_row(r, FMT, DEFAULT).codes for r in rows] == codes
    out = tmp_path / "out"
    cli = CliRunner().invoke(main, ["clean", str(path), str(out), "--output-format", "jsonl"])
    assert cli.exit_code == 0, cli.output
    assert f"reading {path} as gemini (column 'contents'; " in cli.output
    assert f"rows in {len(rows)} = kept {len(rows)} (repaired 0) + rejected 0" in cli.output
    assert (out / "data" / "part-00000.jsonl").read_text().splitlines() == lines
    assert (out / "rejects" / "part-00000.jsonl").read_text() == ""


def test_the_function_calling_examples_read_their_system_instruction_tools_and_response() -> None:
    _, chat, parallel = (json.loads(line) for line in CALLING.read_text().splitlines())
    decoded = FMT.decode(chat)
    assert decoded.messages[0] == system(
        "You are an assistant that helps users find the best product for them."
    )
    call = decoded.messages[2].content[0]
    assert isinstance(call, ToolCall) and call.arguments == {"product_name": "Pixel 8 Pro 128GB"}
    assert decoded.messages[3] == user(
        ToolResult(call.id, (Text('{"output": "True"}'),), "get_product_sku")
    )
    declared = FMT.declared_tools(chat)
    assert declared is not None and not declared.problems
    assert declared.names() == ["get_product_sku", "get_store_location"]
    # an argument outside the declared enum would be caught: the upper-case schema is read
    wrong = json.loads(json.dumps(parallel).replace('"Pixel 8 Pro 128GB"}', '"Pixel 9"}'))
    assert "tool_arguments_schema" in clean_row(wrong, FMT, DEFAULT).codes


def test_vertex_tuning_files_convert_to_rows_trl_loads(tmp_path: Path) -> None:
    source = tmp_path / "vertex.jsonl"
    source.write_text(GLUCOSE.read_text() + "\n" + CALLING.read_text())
    result = clean(source, tmp_path / "out", to="openai", output_format="jsonl")
    assert (result.stats.rows_in, result.stats.rows_kept) == (4, 4)
    glucose, text, chat, parallel = trl_dataset(tmp_path / "out", tmp_path / "cache")
    assert [m["role"] for m in glucose["messages"]] == ["system", "user", "assistant"]
    assert glucose["tools"] is None
    assert [m["role"] for m in chat["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    asked = chat["messages"][2]["tool_calls"][0]
    assert chat["messages"][3] == {
        "role": "tool",
        "tool_call_id": asked["id"],
        "content": '{"output": "True"}',
    }
    assert len(parallel["messages"][2]["tool_calls"]) == 2
    # Gemini's declarations in OpenAI's shape, their upper-case types as JSON Schema's
    assert [t["function"]["name"] for t in text["tools"]] == [
        "get_product_sku",
        "get_store_location",
    ]
    schema = text["tools"][1]["function"]["parameters"]
    assert schema == {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "Location"}},
    }


def test_a_built_in_tool_no_other_format_holds_is_no_silent_loss() -> None:
    _, chat, _ = (json.loads(line) for line in CALLING.read_text().splitlines())
    searching = {**chat, "tools": [*chat["tools"], {"googleSearch": {}}]}
    result = clean_row(searching, converting(FMT, "openai"))
    assert result.status == "rejected" and result.codes == ["lossy_conversion"]
    assert result.reject_message == "tools[2]: a declaration with no name has no place in openai"


def test_two_model_turns_in_a_row_are_merged_not_rejected() -> None:
    """R4 merges two model turns, the second's parts after the first's: `parts` is what a
    Gemini turn says, not a field that must agree (it had rejected every such row)."""
    row = {
        "contents": [
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [{"text": "a"}]},
            {"role": "model", "parts": [{"text": "b"}]},
        ]
    }
    result = clean_row(row, GeminiFormat(), DEFAULT)
    assert result.status == "repaired", result.reject_message
    assert result.row is not None
    assert result.row["contents"][1:] == [
        {"role": "model", "parts": [{"text": "a"}, {"text": "b"}]}
    ]
