"""The Gemini format: `contents` of `parts`, calls paired by position, rows written back as
they came in."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

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
