"""The Bedrock Converse format: content blocks of one key, rows written back as they came in."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_convert import trl_dataset

from transcript_clean.cli import main
from transcript_clean.formats import DecodeError, get_format
from transcript_clean.formats.base import Decoded
from transcript_clean.formats.bedrock import BedrockFormat
from transcript_clean.formats.detect import detect_conversation_format
from transcript_clean.model import (
    Encrypted,
    Media,
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

FMT = BedrockFormat()
ERROR_RESULT = replace(DEFAULT, interrupted_call="error_result")

# The shape of Bedrock's fine-tuning files (schemaVersion bedrock-conversation-2024) and of
# Converse API requests: system blocks, content blocks of one key, toolConfig.tools[].toolSpec.
WEATHER: dict[str, Any] = {
    "schemaVersion": "bedrock-conversation-2024",
    "system": [{"text": "You are a weather bot."}],
    "messages": [
        {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "Look it up.", "signature": "s"}}},
                {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Paris"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "t1",
                        "content": [{"json": {"temp": 18}}, {"text": "sunny"}],
                        "status": "success",
                    }
                }
            ],
        },
        {"role": "assistant", "content": [{"text": "18 C and sunny."}]},
    ],
    "toolConfig": {
        "tools": [
            {
                "toolSpec": {
                    "name": "get_weather",
                    "inputSchema": {
                        "json": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        }
                    },
                }
            }
        ]
    },
}


def roundtrip(row: dict[str, Any]) -> Decoded:
    decoded = FMT.decode(row)
    assert FMT.encode(decoded, decoded.messages) == row
    return decoded


def test_a_converse_row_reads_reasoning_calls_json_results_and_tool_specs() -> None:
    decoded = roundtrip(WEATHER)
    assert decoded.messages == [
        system("You are a weather bot."),
        user("Weather in Paris?"),
        assistant(
            Reasoning((ReasoningText("Look it up."),), signature="s"),
            ToolCall("t1", "get_weather", {"city": "Paris"}),
        ),
        user(ToolResult("t1", (Text('{"temp": 18}'), Text("sunny")), "get_weather")),
        assistant("18 C and sunny."),
    ]
    declared = FMT.declared_tools(WEATHER)
    assert declared is not None and declared.names() == ["get_weather"] and not declared.problems
    assert clean_row(WEATHER, FMT, DEFAULT).status == "unchanged"


def test_a_cache_point_among_the_tools_declares_nothing_and_stays(tmp_path: Path) -> None:
    """Converse's `toolConfig.tools` may hold `{"cachePoint": ...}` after the specs (prompt
    caching): not a tool, so not a declaration with no name (`invalid_tool_declaration`); the
    row is written back as it came, and `--to` writes the specs alone."""
    tools = [*WEATHER["toolConfig"]["tools"], {"cachePoint": {"type": "default"}}]
    row = {**WEATHER, "toolConfig": {"tools": tools}}
    declared = FMT.declared_tools(row)
    assert declared is not None and declared.names() == ["get_weather"] and not declared.problems
    assert clean_row(row, FMT, DEFAULT).status == "unchanged"
    entries = FMT.declaration_entries(row)
    assert entries is not None and [e["name"] for e in entries] == ["get_weather"]
    source = tmp_path / "cached.jsonl"
    source.write_text(json.dumps(row) + "\n")
    result = clean(source, tmp_path / "out", to="openai", output_format="jsonl")
    assert (result.stats.rows_in, result.stats.rows_kept) == (1, 1)
    written = json.loads((tmp_path / "out" / "data" / "part-00000.jsonl").read_text())
    assert [t["function"]["name"] for t in written["tools"]] == ["get_weather"]


def test_arguments_against_the_tool_spec_are_checked() -> None:
    bad = {**WEATHER, "messages": [*WEATHER["messages"][:1]]}
    bad["messages"].append(
        {
            "role": "assistant",
            "content": [{"toolUse": {"toolUseId": "t", "name": "get_weather", "input": {}}}],
        }
    )
    verdict = clean_row(bad, FMT, DEFAULT)
    assert verdict.status == "rejected" and "tool_arguments_schema" in verdict.codes


def test_error_results_redacted_reasoning_and_other_blocks() -> None:
    row = {
        "messages": [
            {"role": "user", "content": [{"image": {"format": "png"}}, {"text": "What?"}]},
            {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"redactedContent": "b64"}},
                    {"toolUse": {"toolUseId": "a", "name": "f", "input": {}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "a",
                            "content": [{"text": "no"}],
                            "status": "error",
                        }
                    }
                ],
            },
            {"role": "assistant", "content": [{"text": "Failed."}]},
        ]
    }
    decoded = roundtrip(row)
    assert decoded.messages[0] == user(Media("image", {"image": {"format": "png"}}), "What?")
    assert decoded.messages[1] == assistant(Reasoning((Encrypted("b64"),)), ToolCall("a", "f", {}))
    assert decoded.messages[2] == user(ToolResult("a", (Text("no"),), "f", "error"))


def test_a_dangling_call_gets_r5s_result_as_a_tool_result_block() -> None:
    row = {
        "messages": [
            {"role": "user", "content": [{"text": "Weather?"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t", "name": "w", "input": {}}}],
            },
            {"role": "user", "content": [{"text": "Well?"}]},
            {"role": "assistant", "content": [{"text": "Sorry."}]},
        ]
    }
    verdict = clean_row(row, FMT, ERROR_RESULT)
    assert verdict.status == "repaired" and verdict.row is not None
    blocks = verdict.row["messages"][2]["content"]
    result = blocks[0]["toolResult"]  # results first, as Converse wants them
    assert result["toolUseId"] == "t" and result["status"] == "error"
    assert blocks[1:] == [{"text": "Well?"}]


def test_fresh_messages_are_written_as_converse_blocks() -> None:
    messages = [
        system("S"),
        user("Q"),
        assistant(ToolCall("c", "f", {"x": 1})),
        user(ToolResult("c", (Text("ok"),), "f")),
        assistant("A"),
    ]
    row = FMT.encode(Decoded([], {"messages": []}, format="openai"), messages)  # type: ignore[arg-type]
    assert row == {
        "system": [{"text": "S"}],
        "messages": [
            {"role": "user", "content": [{"text": "Q"}]},
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "c", "name": "f", "input": {"x": 1}}}],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "c", "content": [{"text": "ok"}]}}],
            },
            {"role": "assistant", "content": [{"text": "A"}]},
        ],
    }
    assert FMT.decode(row).messages == messages


@pytest.mark.parametrize(
    ("row", "code", "where"),
    [
        ({"messages": [{"role": "system", "content": []}]}, "unknown_role", "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{}]}]},
            "malformed_row",
            "messages[0].content[0]",
        ),
        (
            {"messages": [{"role": "assistant", "content": [{"toolUse": {"name": "f"}}]}]},
            "malformed_row",
            "messages[0].content[0].toolUse",
        ),
    ],
)
def test_unreadable_rows_name_the_field(row: dict[str, Any], code: str, where: str) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode(row)
    assert err.value.code == code and err.value.path == where


def test_auto_reads_converse_blocks_as_bedrock() -> None:
    fmt = detect_conversation_format(list(WEATHER), [WEATHER])
    assert fmt.name == "bedrock" and fmt.column == "messages"
    assert isinstance(get_format("bedrock"), BedrockFormat)
    plain = {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    }
    assert detect_conversation_format(["messages"], [plain]).name == "openai"


# ---------------------------------------------------------------------------------------------
# a real file (tests/data/README.md says where it is from)

NOVA = Path(__file__).parent / "data" / "bedrock" / "nova_conversation_rows.jsonl"


def test_a_nova_fine_tuning_file_is_detected_kept_and_written_back_byte_for_byte(
    tmp_path: Path,
) -> None:
    lines = NOVA.read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    # the tools are described in the system prompt and the calls and results written as text
    # (the sample's own choice): nothing for the tool checks to see, each row a clean exchange
    assert [clean_row(r, FMT, DEFAULT).status for r in rows] == ["unchanged"] * 3
    assert [FMT.declared_tools(r) for r in rows] == [None] * 3
    calls_as_text = FMT.decode(rows[1]).messages
    assert [type(m).__name__ for m in calls_as_text] == [
        "SystemMessage",
        *["UserMessage", "AssistantMessage"] * 2,
    ]
    # `"system": []` is no system prompt
    assert not any(isinstance(m, SystemMessage) for m in FMT.decode(rows[2]).messages)
    out = tmp_path / "out"
    cli = CliRunner().invoke(main, ["clean", str(NOVA), str(out), "--output-format", "jsonl"])
    assert cli.exit_code == 0, cli.output
    assert f"reading {NOVA} as bedrock (column 'messages'; " in cli.output
    assert "rows in 3 = kept 3 (repaired 0) + rejected 0" in cli.output
    # its `<\\/tools>` escapes, `"system":[]` and key order, as they came
    assert (out / "data" / "part-00000.jsonl").read_text().splitlines() == lines


def test_a_nova_file_and_a_converse_row_convert_to_rows_trl_loads(tmp_path: Path) -> None:
    source = tmp_path / "nova.jsonl"
    source.write_text(NOVA.read_text() + json.dumps(WEATHER) + "\n")
    result = clean(source, tmp_path / "out", to="openai", output_format="jsonl")
    assert (result.stats.rows_in, result.stats.rows_kept) == (4, 4)
    pizza, bmi, oxymoron, weather = trl_dataset(tmp_path / "out", tmp_path / "cache")
    assert [m["role"] for m in pizza["messages"]] == ["system", "user", "assistant"]
    assert bmi["messages"][2]["content"].startswith('{"name": "calculate_bmi"')
    assert oxymoron["messages"][0]["role"] == "user" and len(oxymoron["messages"]) == 12
    assert pizza["schemaVersion"] == "bedrock-conversation-2024" and pizza["tools"] is None
    # toolConfig's specs in OpenAI's shape (it was lossy_conversion: 'a declaration with no name')
    assert weather["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    assert weather["messages"][2]["tool_calls"][0]["function"]["name"] == "get_weather"
