"""`auto`: detecting the format from the columns and the first rows; and the registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from synthetic import arrow_schema, generate_rows

from transcript_clean.errors import FormatError
from transcript_clean.formats import (
    FORMAT_NAMES,
    FORMATS,
    AnthropicFormat,
    OpenAIFormat,
    RigFormat,
    ShareGPTFormat,
    get_format,
)
from transcript_clean.shapes.detect import detect_format


def read_rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]


def columns_of(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


@pytest.mark.parametrize(
    ("file", "name", "column"),
    [
        ("sharegpt/glaive_toolcall_en_demo.json", "sharegpt", "conversations"),
        ("sharegpt/fastchat_dummy_conversation.json", "sharegpt", "conversations"),
        ("sharegpt/axolotl_conversation_missingturns.json", "sharegpt", "conversations"),
        ("openai/toy_chat_fine_tuning.jsonl", "openai", "messages"),
        ("openai/functionary_test_case.json", "openai", "messages"),
    ],
)
def test_the_shared_files_are_detected(
    shared_data: Path, file: str, name: str, column: str
) -> None:
    rows = read_rows(shared_data / file)
    fmt = detect_format(columns_of(rows), rows)
    assert (fmt.name, fmt.column) == (name, column)


def openai_row() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "a", "content": "1"},
        ]
    }


def anthropic_row() -> dict[str, Any]:
    return {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1"}],
            },
        ],
    }


def rig_row() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Go"}]},
            {
                "role": "assistant",
                "id": None,
                "content": [
                    {"type": "toolcall", "id": "a", "function": {"name": "f", "arguments": {}}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "toolresult", "call": "a", "content": [{"type": "text", "text": "1"}]}
                ],
            },
        ]
    }


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (openai_row(), OpenAIFormat),
        (anthropic_row(), AnthropicFormat),
        (rig_row(), RigFormat),
        ({"conversations": [{"from": "human", "value": "Hi"}]}, ShareGPTFormat),
        # Plain chat reads the same in OpenAI's and Anthropic's formats: a system column says which.
        ({"messages": [{"role": "user", "content": "Hi"}]}, OpenAIFormat),
        ({"messages": [{"role": "user", "content": "Hi"}], "system": "s"}, AnthropicFormat),
        (
            {
                "messages": [
                    {"role": "assistant", "id": "m", "content": [{"type": "text", "text": "x"}]}
                ]
            },
            RigFormat,
        ),
    ],
)
def test_each_format_is_detected_from_its_keys(row: dict[str, Any], expected: type) -> None:
    # A sample with no assistant turn is a prompt set (issue 27, item 3): read in that format.
    fmt = detect_format(list(row), [row])
    assert type(getattr(fmt, "inner", fmt)) is expected
    assert type(detect_format(list(row), [row], shaped=False)) is expected


def test_a_conversation_column_of_another_name_is_found() -> None:
    row = {"id": 1, "dialogue": openai_row()["messages"]}
    fmt = detect_format(["id", "dialogue"], [row])
    assert (fmt.name, fmt.column) == ("openai", "dialogue")


def test_a_column_stored_as_json_text_is_looked_into() -> None:
    row = {
        "conversations": json.dumps(
            [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Yo"}]
        )
    }
    fmt = detect_format(["conversations"], [row])
    assert fmt.name == "sharegpt"


def test_sharegpt_with_user_and_assistant_tags_gets_those_tags() -> None:
    row = {
        "conversations": [
            {"from": "user", "value": "Go"},
            {"from": "function_call", "value": '{"name": "f", "arguments": {}}'},
            {"from": "tool", "value": "1"},
            {"from": "assistant", "value": "Done"},
        ]
    }
    fmt = detect_format(["conversations"], [row])
    assert isinstance(fmt, ShareGPTFormat)
    assert fmt.tags["tool"] == "observation"
    decoded = fmt.decode(row)
    assert fmt.encode(decoded, decoded.messages) == row
    assert "tags=" in repr(fmt)


def test_the_format_that_reads_the_most_rows_wins() -> None:
    # A rig part type points at rig, but only OpenAI reads these rows.
    rows = [{"messages": [{"role": "tool", "content": [{"type": "reasoning", "x": 1}]}]}] * 3
    assert detect_format(["messages"], rows).name == "openai"


def test_without_rows_the_column_name_decides() -> None:
    assert detect_format(["conversations"], []).name == "sharegpt"
    assert detect_format(["id", "messages"], []).name == "openai"


@pytest.mark.parametrize(
    ("columns", "rows", "seen"),
    [
        (["text"], [{"text": "hello"}], "none (no column holds messages, nor the strings of"),
        (["messages"], [{"messages": [{"role": "bot", "content": "x"}]}], "roles bot"),
        (["chat"], [{"chat": [{"speaker": "a", "line": "x"}]}], "message keys line, speaker"),
    ],
)
def test_when_nothing_fits_the_error_says_what_was_seen_and_tried(
    columns: list[str], rows: list[dict[str, Any]], seen: str
) -> None:
    with pytest.raises(FormatError) as err:
        detect_format(columns, rows)
    message = str(err.value)
    assert f"columns: {', '.join(columns)}" in message
    assert seen in message
    if "roles bot" in seen:
        assert "openai on column 'messages': read 0 of 1 rows" in message
        assert "rig on column 'messages'" in message


def test_the_registry() -> None:
    # The registry's classes are the light list's names, in its order; the four first are the
    # ones detection tries first.
    assert tuple(FORMATS) == FORMAT_NAMES and len(set(FORMAT_NAMES)) == 18
    assert FORMAT_NAMES[:4] == ("openai", "sharegpt", "anthropic", "rig")
    assert all(FORMATS[name].name == name for name in FORMAT_NAMES)
    fmt = get_format("sharegpt", "messages", tags={"user": "user"})
    assert (fmt.column, fmt.tags) == ("messages", {"user": "user"})  # type: ignore[attr-defined]
    assert get_format("openai").column == "messages"
    with pytest.raises(FormatError, match="unknown format 'chatml'"):
        get_format("chatml")
    with pytest.raises(FormatError, match="does not take options"):
        get_format("openai", tags={})


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "anthropic", "rig", "llamafactory"])
@pytest.mark.parametrize("through_arrow", [False, True], ids=["rows", "arrow rows"])
def test_generated_rows_of_each_format_are_detected(fmt: str, through_arrow: bool) -> None:
    rows = [row for row, _ in generate_rows(40, fmt, seed=11)]
    table = pa.Table.from_pylist(rows, schema=arrow_schema(fmt))
    if through_arrow:  # as the cleaner reads them: every key of the schema, absent ones null
        rows = table.slice(0, 20).to_pylist()
    detected = detect_format(table.column_names, rows)
    assert detected.name == fmt
    assert detected.column == ("conversations" if fmt == "sharegpt" else "messages")


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "anthropic", "rig"])
@pytest.mark.parametrize("seed", range(5))
def test_a_bad_row_in_the_sample_does_not_change_the_format(fmt: str, seed: int) -> None:
    # Generated rows carry planted defects, malformed rows among them: the OpenAI reader takes
    # an Anthropic row missing its content where the Anthropic reader rightly refuses it.
    rows = [row for row, _ in generate_rows(20, format=fmt, seed=seed)]
    assert detect_format(list(rows[0]), rows).name == fmt


@pytest.mark.parametrize(
    ("roles", "mapped", "words"),
    [
        # Cohere's chat fine-tuning files
        (
            ["System", "User", "Chatbot"],
            {"Chatbot": "assistant", "System": "system", "User": "user"},
            "roles Chatbot as assistant, System as system, User as user",
        ),
        # Gemini's name for the assistant in OpenAI-shaped rows
        (["user", "model"], {"model": "assistant"}, "roles model as assistant"),
        # RL rollout logs
        (
            ["environment", "agent"],
            {"agent": "assistant", "environment": "user"},
            "roles agent as assistant, environment as user",
        ),
        (["SYSTEM", "USER", "CHATBOT"], None, None),  # any spelling of a known name
    ],
)
def test_other_role_names_are_read_as_openai_with_the_names_mapped(
    roles: list[str], mapped: dict[str, str] | None, words: str | None
) -> None:
    row = {"messages": [{"role": r, "content": f"{r} says"} for r in roles]}
    fmt = detect_format(["messages"], [row], shaped=False)
    assert isinstance(fmt, OpenAIFormat)
    if mapped is not None:
        assert fmt.roles == mapped
        assert fmt.words == words
    assert fmt.decode(row).messages[-1].content  # read, every role known
    assert fmt.encode(fmt.decode(row), fmt.decode(row).messages) == row


def test_an_unknown_role_name_is_not_mapped() -> None:
    row = {
        "messages": [{"role": "narrator", "content": "Once"}, {"role": "assistant", "content": "x"}]
    }
    with pytest.raises(FormatError, match='unknown role "narrator"'):
        detect_format(["messages"], [row], shaped=False)
