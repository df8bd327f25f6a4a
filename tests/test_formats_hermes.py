"""The Hermes format: calls and results as tags inside ShareGPT-like turns, read by position and
written back as they came in."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from transcript_clean.formats import DecodeError, get_format
from transcript_clean.formats.base import Decoded
from transcript_clean.formats.detect import detect_conversation_format
from transcript_clean.formats.hermes import HermesFormat
from transcript_clean.model import (
    Reasoning,
    ReasoningText,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
    assistant,
    system,
    user,
)
from transcript_clean.policy import DEFAULT
from transcript_clean.rows import clean_row

FMT = HermesFormat()
ERROR_RESULT = replace(DEFAULT, interrupted_call="error_result")
DATA = Path(__file__).parent / "data"


def real_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(
        (DATA / "hermes_function_calling_rows.json").read_text()
    )
    return rows


def roundtrip(row: dict[str, Any]) -> Decoded:
    decoded = FMT.decode(row)
    assert FMT.encode(decoded, decoded.messages) == row
    return decoded


def turn(tag: str, value: str) -> dict[str, str]:
    return {"from": tag, "value": value}


def test_the_dataset_cards_tool_use_row_reads_its_call_result_and_declared_tool() -> None:
    flight = real_rows()[0]
    decoded = roundtrip(flight)
    kinds = [type(m).__name__ for m in decoded.messages]
    assert kinds == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    (call,) = decoded.messages[2].tool_calls  # type: ignore[union-attr]
    # A Python literal, True and all.
    assert call.name == "search_flights"
    assert call.arguments["flexible_cancellation"] is True
    assert call.arguments["destination_city"] == "Auckland"
    (result,) = decoded.messages[3].content  # type: ignore[union-attr]
    assert isinstance(result, ToolResult)
    assert result.call == call.id and result.name == "search_flights"
    assert json.loads(result.content[0].text)["flights"][0]["flight_number"] == "AA118"  # type: ignore[union-attr]
    declared = FMT.declared_tools(flight)
    assert declared is not None and declared.names() == ["search_flights"]
    assert not declared.problems
    verdict = clean_row(flight, FMT, DEFAULT)
    assert verdict.status == "unchanged", verdict


def test_a_call_whose_name_sits_inside_its_arguments_is_a_reject_naming_the_turn() -> None:
    # The card's extraction row: `{"arguments": {..., "name": "ExpertQAExtractor"}}` between
    # literal backslash-n characters.
    extraction = real_rows()[1]
    with pytest.raises(DecodeError) as err:
        FMT.decode(extraction)
    assert err.value.code == "malformed_row"
    assert str(err.value).startswith("conversations[2].value: <tool_call> 0:")
    verdict = clean_row(extraction, FMT, DEFAULT)
    assert verdict.status == "rejected" and verdict.codes == ["malformed_row"]


def test_a_json_mode_row_is_plain_chat() -> None:
    movie = real_rows()[2]
    decoded = roundtrip(movie)
    assert decoded.messages[2] == assistant(movie["conversations"][2]["value"])
    assert FMT.declared_tools(movie) is None  # a <schema>, not <tools>


def test_auto_reads_the_real_rows_as_hermes() -> None:
    rows = real_rows()
    fmt = detect_conversation_format(list(rows[0]), rows)
    assert fmt.name == "hermes" and fmt.column == "conversations"


def test_plain_sharegpt_rows_are_not_hermes() -> None:
    rows = [{"conversations": [turn("human", "Hi"), turn("gpt", "Hello")]}]
    assert detect_conversation_format(["conversations"], rows).name == "sharegpt"


AGENT = {
    "conversations": [
        turn(
            "system", 'Tools: <tools>\n{"type": "function", "function": {"name": "ls"}}\n</tools>'
        ),
        turn("human", "List it"),
        turn(
            "gpt",
            "<think>\nI should look.\n</think>\nLooking.\n<tool_call>\n"
            '{"name": "ls", "arguments": {"path": "."}}\n</tool_call>\n<tool_call>\n'
            '{"name": "ls", "arguments": "{\\"path\\": \\"/\\"}"}\n</tool_call>',
        ),
        turn("tool", "<tool_response>\na.txt\n</tool_response>"),
        turn(
            "tool",
            '<tool_response>\n{"name": "ls", "content": {"files": ["etc"]}}\n</tool_response>',
        ),
        turn("gpt", "Done."),
    ],
    "completed": True,
}


def test_reasoning_text_and_parallel_calls_in_one_turn_answered_by_position() -> None:
    decoded = roundtrip(AGENT)
    first, second = decoded.messages[2].tool_calls  # type: ignore[union-attr]
    assert decoded.messages[2] == assistant(
        Reasoning((ReasoningText("I should look."),)),
        "Looking.",
        ToolCall(first.id, "ls", {"path": "."}),
        ToolCall(second.id, "ls", {"path": "/"}, '{"path": "/"}'),
    )
    assert decoded.messages[3] == UserMessage(
        (
            ToolResult(first.id, (Text("a.txt"),), "ls"),
            ToolResult(second.id, (Text('{"files": ["etc"]}'),), "ls"),
        )
    )
    assert decoded.minted == {first.id, second.id}
    # one object per line in <tools>, as Qwen's chat template writes them
    declared = FMT.declared_tools(AGENT)
    assert declared is not None and declared.names() == ["ls"]


def test_a_tools_column_wins_over_the_system_prompt() -> None:
    row = {**AGENT, "tools": json.dumps([{"name": "cat"}])}
    declared = FMT.declared_tools(row)
    assert declared is not None and declared.names() == ["cat"]


def test_a_dangling_call_gets_r5s_result_written_as_a_tool_response() -> None:
    row = {
        "conversations": [
            turn("human", "Weather?"),
            turn("gpt", "<tool_call>\n{'arguments': {'city': 'Paris'}, 'name': 'w'}\n</tool_call>"),
            turn("human", "Well?"),
            turn("gpt", "Sorry."),
        ]
    }
    verdict = clean_row(row, FMT, ERROR_RESULT)
    assert verdict.status == "repaired" and verdict.row is not None
    turns = verdict.row["conversations"]
    assert [t["from"] for t in turns] == ["human", "gpt", "tool", "human", "gpt"]
    assert turns[1] == row["conversations"][1]  # the call, unchanged, as it was written
    assert turns[2]["value"].startswith('<tool_response>\n{"name": "w", "content": ')
    again = FMT.decode(verdict.row)
    (result,) = again.messages[2].content  # type: ignore[union-attr]
    assert isinstance(result, ToolResult) and result.call == again.messages[1].tool_calls[0].id  # type: ignore[union-attr]


def test_fresh_messages_are_written_in_hermes_tags() -> None:
    call = ToolCall("c", "f", {"x": 1})
    messages = [
        system("S"),
        user("Q"),
        assistant(Reasoning((ReasoningText("hm"),)), "Calling.", call),
        user(ToolResult("c", (Text("1"),), "f")),
        assistant("A"),
    ]
    row = FMT.encode(Decoded([], {"conversations": []}, format="openai"), messages)
    assert row["conversations"] == [
        turn("system", "S"),
        turn("human", "Q"),
        turn(
            "gpt",
            '<think>\nhm\n</think>\nCalling.\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}'
            "\n</tool_call>",
        ),
        turn("tool", '<tool_response>\n{"name": "f", "content": "1"}\n</tool_response>'),
        turn("gpt", "A"),
    ]
    back = FMT.decode(row).messages
    assert back[2] == assistant(
        Reasoning((ReasoningText("hm"),)),
        "Calling.",
        ToolCall(back[2].tool_calls[0].id, "f", {"x": 1}),  # type: ignore[union-attr]
    )
    assert back[3] == user(ToolResult(back[2].tool_calls[0].id, (Text("1"),), "f"))  # type: ignore[union-attr]


def test_a_row_using_role_names_as_tags_keeps_them_for_fresh_turns() -> None:
    row = {
        "conversations": [
            turn("user", "Go"),
            turn("assistant", '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'),
            turn("user", "And?"),
            turn("assistant", "Done."),
        ]
    }
    verdict = clean_row(row, FMT, ERROR_RESULT)
    assert verdict.status == "repaired" and verdict.row is not None
    tags = [t["from"] for t in verdict.row["conversations"]]
    assert tags == ["user", "assistant", "tool", "user", "assistant"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("<tool_call>\nnot json\n</tool_call>", "<tool_call> 0: not a JSON object"),
        ("<tool_call>[1]</tool_call>", "<tool_call> 0: expected an object, got a list"),
        ('<tool_call>{"arguments": {}}</tool_call>', '<tool_call> 0: missing "name"'),
        ('<tool_call>{"name": "f"}', "a <tool_call> with no </tool_call>"),
        ("<tool_call>{'name': 'f', 'arguments': {1, 2}}</tool_call>", "<tool_call> 0: not a JSON"),
    ],
)
def test_unreadable_calls_name_the_turn(value: str, problem: str) -> None:
    row = {"conversations": [turn("human", "Q"), turn("gpt", value)]}
    with pytest.raises(DecodeError) as err:
        FMT.decode(row)
    assert err.value.code == "malformed_row"
    assert str(err.value).startswith(f"conversations[1].value: {problem}")


def test_an_unknown_tag_is_unknown_role() -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode({"conversations": [turn("observation", "x")]})
    assert err.value.code == "unknown_role"


def test_a_result_of_no_call_is_an_orphan() -> None:
    row = {"conversations": [turn("human", "Q"), turn("tool", "<tool_response>x</tool_response>")]}
    decoded = roundtrip(row)
    (result,) = decoded.messages[1].content  # type: ignore[union-attr]
    assert isinstance(result, ToolResult) and result.call in decoded.minted
    verdict = clean_row(row, FMT, DEFAULT)
    assert "orphan_tool_result" in verdict.codes


def test_the_registry_names_it() -> None:
    assert isinstance(get_format("hermes"), HermesFormat)


def test_the_codecs_unknown_role_is_the_rules() -> None:
    from transcript_clean.formats.base import UNKNOWN_ROLE
    from transcript_clean.rules import UNKNOWN_ROLE as RULES_UNKNOWN_ROLE

    assert UNKNOWN_ROLE == RULES_UNKNOWN_ROLE


def test_clean_reads_the_real_file_as_hermes_and_writes_kept_rows_back_unchanged(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from transcript_clean.cli import main

    out = tmp_path / "out"
    source = str(DATA / "hermes_function_calling_rows.json")
    result = CliRunner().invoke(main, ["clean", source, str(out), "--output-format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert "as hermes (column 'conversations'; Hermes function calling" in result.output
    kept = [json.loads(line) for line in (out / "data" / "part-00000.jsonl").open()]
    rows = real_rows()
    assert [r["conversations"] for r in kept] == [
        rows[0]["conversations"],
        rows[2]["conversations"],
    ]


def test_a_python_literal_with_an_invalid_escape_reads_the_same_under_any_warning_filter() -> None:
    """A body written as a Python literal is compiled by `ast.literal_eval`; a string in it with
    an escape Python does not know (`'\\<'`) warns, and under `-W error` that warning was a
    SyntaxError, which read the body as no literal at all. It is the data's, not the user's
    code's: it reads the same whatever the warning filters say."""
    import subprocess
    import sys

    code = (
        "from transcript_clean.formats.hermes.values import literal\n"
        "print(literal(\"{'a': '\" + chr(92) + \"<b>'}\"))"
    )
    for flag in ("-Werror", "-Wdefault"):
        out = subprocess.run(
            [sys.executable, flag, "-c", code], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "{'a': '\\\\<b>'}"
        assert out.stderr == ""
