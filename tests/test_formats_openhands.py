"""The OpenHands format: a trajectory's action and observation events read as the agent loop put
them before the model, a trajectory file read as one row, and rows written back as they came."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_convert import trl_messages

from transcript_clean.formats import DecodeError
from transcript_clean.formats.detect import detect_conversation_format
from transcript_clean.formats.openhands import OpenHandsFormat
from transcript_clean.model import AssistantMessage, Text, ToolCall, ToolResult, UserMessage
from transcript_clean.policy import DEFAULT
from transcript_clean.rows import clean_row
from transcript_clean.run import clean

FMT = OpenHandsFormat()
ERROR_RESULT = replace(DEFAULT, interrupted_call="error_result")
DATA = Path(__file__).parent / "data" / "openhands"
CHAT = DATA / "basic_interactions.json"
TOOLS = DATA / "wrong_initial_state_trimmed.json"


def _call(
    event_id: int, call_id: str, name: str, arguments: str, text: str | None
) -> dict[str, Any]:
    """An action event as OpenHands saves one: the call in its model response."""
    message = {
        "content": text,
        "role": "assistant",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }
    return {
        "id": event_id,
        "source": "agent",
        "action": "run",
        "tool_call_metadata": {
            "function_name": name,
            "tool_call_id": call_id,
            "model_response": {"id": f"resp-{event_id}", "choices": [{"message": message}]},
        },
        "args": {"command": "ls", "thought": text or ""},
    }


SYSTEM = {
    "id": 0,
    "source": "agent",
    "action": "system",
    "args": {
        "content": "You are OpenHands agent.",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "execute_bash",
                    "parameters": {
                        "type": "object",
                        "properties": {"command": {"type": "string"}},
                        "required": ["command"],
                    },
                },
            }
        ],
    },
}
USER = {"id": 1, "source": "user", "action": "message", "args": {"content": "List the files."}}
STATE = {"id": 2, "source": "environment", "observation": "agent_state_changed", "extras": {}}
RUN = _call(3, "toolu_1", "execute_bash", '{"command": "ls"}', "Let me look.")
DONE = {
    "id": 4,
    "source": "agent",
    "observation": "run",
    "cause": 3,
    "content": "a.py",
    "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "toolu_1"},
}
ANSWER = {"id": 5, "source": "agent", "action": "message", "args": {"content": "One file: a.py."}}


def test_events_read_as_the_agent_loop_put_them() -> None:
    row = {"history": [SYSTEM, USER, STATE, RUN, DONE, ANSWER]}
    decoded = FMT.decode(row)
    assert FMT.encode(decoded, decoded.messages) == row
    system, user, assistant, results, answer = decoded.messages
    assert system.content == "You are OpenHands agent."  # type: ignore[union-attr]
    assert user == UserMessage((Text("List the files."),))
    assert assistant == AssistantMessage(
        (
            Text("Let me look."),
            ToolCall("toolu_1", "execute_bash", {"command": "ls"}, '{"command": "ls"}'),
        )
    )
    assert results == UserMessage((ToolResult("toolu_1", (Text("a.py"),), "execute_bash"),))
    assert answer == AssistantMessage((Text("One file: a.py."),))
    assert clean_row(row, FMT, DEFAULT).status == "unchanged"


def test_two_messages_of_the_agent_in_a_row_are_merged_by_r4() -> None:
    """R4 joins the second message into the first, as for any format: the events' own ids,
    times and text fields are where each sits and what it says, not fields that must agree."""
    first = {**ANSWER, "timestamp": "t5", "message": "One file: a.py."}
    second = {"id": 6, "source": "agent", "action": "message", "timestamp": "t6",
              "message": "Anything else?", "args": {"content": "Anything else?"}}  # fmt: skip
    verdict = clean_row({"history": [USER, RUN, DONE, first, second]}, FMT, DEFAULT)
    assert verdict.status == "repaired" and verdict.codes == ["consecutive_assistant"]
    assert verdict.row is not None
    events = verdict.row["history"]
    assert [e["id"] for e in events] == [1, 3, 4, 5]
    said = "One file: a.py.\n\nAnything else?"
    assert events[3] == {**first, "message": said, "args": {"content": said}}


def test_the_system_actions_tools_are_the_declared_tools() -> None:
    declared = FMT.declared_tools({"history": [SYSTEM, USER]})
    assert declared is not None and declared.names() == ["execute_bash"]
    bad = _call(3, "toolu_1", "execute_bash", '{"cmd": "ls"}', None)  # no "command"
    verdict = clean_row({"history": [SYSTEM, USER, bad, DONE, ANSWER]}, FMT, DEFAULT)
    assert verdict.status == "rejected" and "tool_arguments_schema" in verdict.codes


def test_an_observation_answers_its_action_by_cause_when_it_has_no_metadata() -> None:
    by_cause = {k: v for k, v in DONE.items() if k != "tool_call_metadata"}
    decoded = FMT.decode({"history": [USER, RUN, by_cause, ANSWER]})
    assert decoded.messages[2] == UserMessage(
        (ToolResult("toolu_1", (Text("a.py"),), "execute_bash"),)
    )
    error = {**DONE, "observation": "error", "content": "command not found"}
    decoded = FMT.decode({"history": [USER, RUN, error, ANSWER]})
    assert decoded.messages[2].content[0].status == "error"  # type: ignore[union-attr]


def test_an_interrupted_call_gets_an_error_observation_after_its_action() -> None:
    row = {"history": [USER, RUN, STATE, {**USER, "id": 6, "args": {"content": "Stop."}}, ANSWER]}
    verdict = clean_row(row, FMT, ERROR_RESULT)
    assert verdict.status == "repaired" and verdict.row is not None
    # a trajectory is an agent loop's record: the default (`auto`) answers the call as its loop
    # does, with the error result
    assert clean_row(row, FMT, DEFAULT).row == verdict.row
    events = verdict.row["history"]
    assert events[:3] == [USER, RUN, STATE]  # the bookkeeping stays after the event it followed
    assert events[3]["observation"] == "error" and events[3]["cause"] == 3
    assert events[3]["tool_call_metadata"]["tool_call_id"] == "toolu_1"
    assert events[4:] == row["history"][3:]
    again = FMT.decode(verdict.row).messages[2]
    assert again == UserMessage(
        (
            ToolResult(
                "toolu_1",
                (Text("The tool call was interrupted before a result was produced."),),
                "execute_bash",
                "error",
            ),
        )
    )
    # a config that says "cut" cuts before the call: nothing would be left
    cut = clean_row(row, FMT, replace(DEFAULT, interrupted_call="cut"))
    assert cut.status == "rejected" and cut.codes == ["unanswered_tool_call"]


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (
            {"id": 7, "source": "user", "action": "run", "args": {"command": "ls"}},
            'history[1]: a "run" action without tool_call_metadata',
        ),
        (
            {"id": 7, "source": "agent", "observation": "run", "content": "x"},
            'history[1]: a "run" observation that answers no tool call',
        ),
        (
            {**RUN, "tool_call_metadata": {**RUN["tool_call_metadata"], "tool_call_id": "other"}},
            'history[1].tool_call_metadata: the model response holds no call "other"',
        ),
    ],
)
def test_a_part_with_no_place_is_a_reject_naming_it(event: dict[str, Any], words: str) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode({"history": [USER, event]})
    assert err.value.code == "malformed_row"
    assert str(err.value).startswith(words)


def test_real_trajectories_are_read_as_one_row_each(tmp_path: Path) -> None:
    result = clean(CHAT, tmp_path / "chat", output_format="jsonl")
    assert (result.stats.rows_in, result.stats.rows_kept) == (1, 1)
    events = json.loads(CHAT.read_text())
    decoded = FMT.decode({"history": events})
    roles = [type(m).__name__ for m in decoded.messages]
    assert roles == ["UserMessage", "AssistantMessage"] * 3
    assert decoded.messages[-1].tool_calls[0].name == "finish"  # type: ignore[union-attr]
    decoded = FMT.decode({"history": json.loads(TOOLS.read_text())})
    calls = [
        c.name for m in decoded.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    assert calls == ["str_replace_editor", "execute_bash", "finish"]
    assert decoded.messages[1].content[0] == Text(  # type: ignore[union-attr]
        "I'll help you rename the file. First, let me check if the file exists and its location."
    )


def test_a_resolver_row_is_detected_and_kept_byte_for_byte(tmp_path: Path) -> None:
    source = tmp_path / "output.jsonl"
    rows = [
        {"instance_id": "a", "history": json.loads(TOOLS.read_text())},
        {"instance_id": "b", "history": [SYSTEM, USER, STATE, RUN, DONE, ANSWER]},
    ]
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    source.write_text("".join(line + "\n" for line in lines))
    assert detect_conversation_format(["instance_id", "history"], rows).name == "openhands"
    result = clean(source, tmp_path / "out", output_format="jsonl")
    assert result.stats.rows_kept == 2
    assert (tmp_path / "out" / "data" / "part-00000.jsonl").read_text().splitlines() == lines


def test_to_openai_loads_with_datasets_as_trl_wants(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    source = tmp_path / "output.jsonl"
    rows = [
        {"instance_id": "a", "history": json.loads(TOOLS.read_text())},
        {"instance_id": "b", "history": [SYSTEM, USER, STATE, RUN, DONE, ANSWER]},
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = clean(source, tmp_path / "out", to="openai", output_format="jsonl")
    assert result.stats.rows_kept == 2
    files = sorted(str(p) for p in (tmp_path / "out" / "data").glob("*.jsonl"))
    loaded = datasets.load_dataset(
        "json", data_files=files, split="train", cache_dir=str(tmp_path / "cache")
    )
    assert {"messages", "tools"} <= set(loaded.column_names)
    for row in loaded:
        trl_messages(row["messages"])
    real, made = loaded[0], loaded[1]
    assert [m["role"] for m in real["messages"]][:3] == ["user", "assistant", "tool"]
    assert made["tools"][0]["function"]["name"] == "execute_bash"
    system = made["messages"][0]
    assert (system["role"], system["content"]) == ("system", "You are OpenHands agent.")


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3))
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_event = st.fixed_dictionaries(
    {},
    optional={
        "id": st.integers(0, 3) | _json,
        "source": st.sampled_from(["user", "agent", "environment"]) | _json,
        "action": st.sampled_from(["message", "run", "system", "null", "recall"]) | _json,
        "observation": st.sampled_from(["run", "error", "null", "agent_state_changed"]) | _json,
        "cause": st.integers(0, 3) | _json,
        "content": _json,
        "args": st.fixed_dictionaries(
            {}, optional={"content": _json, "image_urls": _json, "tools": _json}
        )
        | _json,
        "tool_call_metadata": st.fixed_dictionaries(
            {},
            optional={
                "tool_call_id": st.sampled_from(["a", "b"]) | _json,
                "function_name": st.sampled_from(["f"]) | _json,
                "model_response": _json | st.just(RUN["tool_call_metadata"]["model_response"]),
            },
        )
        | _json,
    },
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_event | _json, max_size=6))
def test_any_events_are_read_or_rejected_never_a_crash(events: list[Any]) -> None:
    row = {"history": events}
    try:
        decoded = FMT.decode(row)
    except DecodeError:
        return
    assert FMT.encode(decoded, decoded.messages) == row
    FMT.declared_tools(row)
    clean_row(row, FMT, ERROR_RESULT)


def test_the_docs_say_what_a_trajectory_becomes(tmp_path: Path) -> None:
    text = (Path(__file__).parent.parent / "docs" / "formats.md").read_text()
    section = " ".join(text[text.index("## openhands") : text.index("## claude-code")].split())
    result = clean(CHAT, tmp_path / "out", to="openai", output_format="jsonl")
    assert result.stats.rows_kept == 1
    row = json.loads((tmp_path / "out" / "data" / "part-00000.jsonl").read_text())
    for message in row["messages"][-2:]:  # the user's last message and the finish call
        shown = json.dumps(message, ensure_ascii=False)
        assert shown in section, shown
