"""The ShareGPT format: LLaMA-Factory's tags, calls by position, and rows written back as they
came in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_clean.errors import FormatError
from transcript_clean.formats import Decoded, DecodeError, ShareGPTFormat
from transcript_clean.model import (
    AssistantMessage,
    Message,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
    assistant,
    system,
    user,
)
from transcript_clean.transcript import is_empty_assistant_turn, not_executed, transcript_errors

FMT = ShareGPTFormat()


def roundtrip(row: dict[str, Any], fmt: ShareGPTFormat = FMT) -> Decoded:
    decoded = fmt.decode(row)
    assert fmt.encode(decoded, decoded.messages) == row
    return decoded


def turn(tag: str, value: str) -> dict[str, str]:
    return {"from": tag, "value": value}


def fc(*calls: tuple[str, Any]) -> dict[str, str]:
    objects = [{"name": name, "arguments": args} for name, args in calls]
    return turn("function_call", json.dumps(objects[0] if len(objects) == 1 else objects))


def call(id: str, name: str, args: Any, raw: str | None = None) -> ToolCall:
    return ToolCall(id, name, args, raw)


def result(id: str, text: str, name: str | None = None) -> ToolResult:
    return ToolResult(id, (Text(text),), name)


def rows_of(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]  # some files hold ONE row object


# ---------------------------------------------------------------------------------------------
# the shared data


def test_glaive_has_300_rows_and_211_calls_each_answered(shared_data: Path) -> None:
    rows = rows_of(shared_data / "sharegpt" / "glaive_toolcall_en_demo.json")
    decoded = [roundtrip(row) for row in rows]
    assert len(decoded) == 300
    calls = [
        c
        for d in decoded
        for m in d.messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
    ]
    assert len(calls) == 211
    assert [e for d in decoded for e in transcript_errors(d.messages)] == []
    assert all(isinstance(d.row["tools"], str) for d in decoded)  # the tools column is kept


def test_fastchat_rows_round_trip(shared_data: Path) -> None:
    rows = rows_of(shared_data / "sharegpt" / "fastchat_dummy_conversation.json")
    decoded = [roundtrip(row) for row in rows]
    assert len(decoded) == 500
    assert decoded[0].row["id"] == "identity_0"
    assert [e for d in decoded for e in transcript_errors(d.messages)] == []


def test_axolotl_empty_gpt_turn_is_an_empty_assistant_turn(shared_data: Path) -> None:
    rows = rows_of(shared_data / "sharegpt" / "axolotl_conversation_missingturns.json")
    assert len(rows) == 1
    decoded = roundtrip(rows[0])
    assert len(decoded.messages) == 12
    second = decoded.messages[1]
    assert isinstance(second, AssistantMessage)
    assert second.content == (Text(""),)
    assert is_empty_assistant_turn(second.content)
    assert not any(
        is_empty_assistant_turn(m.content)
        for m in decoded.messages[2:]
        if isinstance(m, AssistantMessage)
    )


# ---------------------------------------------------------------------------------------------
# edge shapes


EDGE_SHAPES: dict[str, tuple[list[dict[str, str]], list[Message]]] = {
    "a call answered by an observation": (
        [turn("human", "Go"), fc(("f", {"a": 1})), turn("observation", "ok"), turn("gpt", "Done")],
        [
            user("Go"),
            assistant(call("call_1_0", "f", {"a": 1})),
            user(result("call_1_0", "ok", "f")),
            assistant("Done"),
        ],
    ),
    "text then a call: one assistant turn": (
        [turn("human", "Go"), turn("gpt", "Let me see."), fc(("f", {})), turn("observation", "ok")],
        [
            user("Go"),
            assistant("Let me see.", call("call_2_0", "f", {})),
            user(result("call_2_0", "ok", "f")),
        ],
    ),
    "parallel calls, one observation each": (
        [
            turn("human", "Go"),
            fc(("f", {}), ("g", {})),
            turn("observation", "1"),
            turn("observation", "2"),
        ],
        [
            user("Go"),
            assistant(call("call_1_0", "f", {}), call("call_1_1", "g", {})),
            user(result("call_1_0", "1", "f"), result("call_1_1", "2", "g")),
        ],
    ),
    "parallel calls, one observation with a JSON list": (
        [turn("human", "Go"), fc(("f", {}), ("g", {})), turn("observation", '["1", {"t": 2}]')],
        [
            user("Go"),
            assistant(call("call_1_0", "f", {}), call("call_1_1", "g", {})),
            user(result("call_1_0", "1", "f"), result("call_1_1", '{"t": 2}', "g")),
        ],
    ),
    "consecutive function_call turns: one assistant turn": (
        [
            turn("human", "Go"),
            fc(("f", {})),
            fc(("g", {})),
            turn("observation", "1"),
            turn("observation", "2"),
        ],
        [
            user("Go"),
            assistant(call("call_1_0", "f", {}), call("call_2_0", "g", {})),
            user(result("call_1_0", "1", "f"), result("call_2_0", "2", "g")),
        ],
    ),
    "string arguments, parsed or not": (
        [
            turn("human", "Go"),
            fc(("f", '{"a": 1}'), ("g", "{bad")),
            turn("observation", "1"),
            turn("observation", "2"),
        ],
        [
            user("Go"),
            assistant(
                call("call_1_0", "f", {"a": 1}, '{"a": 1}'), call("call_1_1", "g", None, "{bad")
            ),
            user(result("call_1_0", "1", "f"), result("call_1_1", "2", "g")),
        ],
    ),
    "an observation that answers nothing": (
        [turn("human", "Go"), turn("observation", "stray"), turn("gpt", "Hi")],
        [user("Go"), user(result("result_1", "stray")), assistant("Hi")],
    ),
    "more observations than calls": (
        [turn("human", "Go"), fc(("f", {})), turn("observation", "1"), turn("observation", "2")],
        [
            user("Go"),
            assistant(call("call_1_0", "f", {})),
            user(result("call_1_0", "1", "f"), result("result_3", "2")),
        ],
    ),
    "a system turn and consecutive gpt turns": (
        [
            turn("system", "Be brief."),
            turn("human", "Hi"),
            turn("gpt", "Hello"),
            turn("gpt", "Again"),
        ],
        [system("Be brief."), user("Hi"), assistant("Hello"), assistant("Again")],
    ),
}


@pytest.mark.parametrize("case", EDGE_SHAPES, ids=list(EDGE_SHAPES))
def test_edge_shapes_decode_and_round_trip(case: str) -> None:
    turns, expected = EDGE_SHAPES[case]
    decoded = roundtrip({"conversations": turns, "tools": "[]", "id": 3})
    assert decoded.messages == expected
    calls = [
        c.id for m in decoded.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    assert set(calls) <= decoded.minted  # ShareGPT has no ids: every one is minted


def test_the_system_column_is_a_leading_system_message() -> None:
    row = {"conversations": [turn("human", "Hi"), turn("gpt", "Hello")], "system": "Be brief."}
    assert roundtrip(row).messages == [system("Be brief."), user("Hi"), assistant("Hello")]
    for empty in ("", None):
        assert roundtrip({**row, "system": empty}).messages == [user("Hi"), assistant("Hello")]


def test_tags_are_configurable() -> None:
    fmt = ShareGPTFormat(
        tags={
            "user": "user",
            "assistant": "assistant",
            "tool": "observation",
            "fn": "function_call",
        }
    )
    row = {
        "conversations": [
            turn("user", "Go"),
            fc(("f", {})),
            turn("tool", "ok"),
            turn("assistant", "Done"),
        ]
    }
    row["conversations"][1]["from"] = "fn"
    decoded = roundtrip(row, fmt)
    assert transcript_errors(decoded.messages) == []
    assert fmt.encode(Decoded([], {}), [user("a"), assistant("b")])["conversations"] == [
        turn("user", "a"),
        turn("assistant", "b"),
    ]
    with pytest.raises(FormatError, match="stand for no role"):
        ShareGPTFormat(tags={"human": "person"})


@pytest.mark.parametrize(
    ("turns", "code", "message"),
    [
        (
            [turn("human", "Hi"), turn("bing", "Hello")],
            "unknown_role",
            'conversations[1].from: unknown tag "bing"',
        ),
        ([{"value": "Hi"}], "malformed_row", 'conversations[0]: missing "from"'),
        ([{"from": "human", "value": None}], "malformed_row", 'conversations[0]: missing "value"'),
        (
            [{"from": "human", "value": 3}],
            "malformed_row",
            "conversations[0].value: expected a string",
        ),
        (
            [turn("function_call", "get_weather(Paris)")],
            "malformed_row",
            "conversations[0].value: expected JSON",
        ),
        ([turn("function_call", "[]")], "malformed_row", "conversations[0].value: expected JSON"),
        (
            [turn("function_call", '{"arguments": {}}')],
            "malformed_row",
            'conversations[0].value: missing "name"',
        ),
        (
            [turn("function_call", '[{"name": "f"}, 3]')],
            "malformed_row",
            "conversations[0].value[1]: expected an object",
        ),
    ],
)
def test_unreadable_rows_raise_decode_error_naming_the_field(
    turns: list[dict[str, Any]], code: str, message: str
) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode({"conversations": turns})
    assert err.value.code == code
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("row", [{}, {"conversations": None}, {"conversations": [], "system": 4}])
def test_a_row_without_turns_is_malformed(row: dict[str, Any]) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode(row)
    assert err.value.code == "malformed_row"


# ---------------------------------------------------------------------------------------------
# writing canonical messages


def test_encode_writes_fresh_messages_idiomatically() -> None:
    messages = [
        system("Be brief."),
        user("Go"),
        assistant(
            "Checking.", call("c1", "f", {"a": "é"}, '{"a": "é"}'), call("c2", "g", None, "{x")
        ),
        user(result("c1", '{"ok": true}'), result("c2", "plain")),
        assistant("One.", "Two."),
    ]
    row = FMT.encode(Decoded([], {"id": 1}), messages)
    assert row == {
        "id": 1,
        "system": "Be brief.",
        "conversations": [
            turn("human", "Go"),
            turn("gpt", "Checking."),
            turn(
                "function_call",
                '[{"name": "f", "arguments": {"a": "é"}}, {"name": "g", "arguments": "{x"}]',
            ),
            turn("observation", '[{"ok": true}, "plain"]'),
            turn("gpt", "One.\n\nTwo."),
        ],
    }
    back = FMT.decode(row).messages
    answers = back[3]
    assert isinstance(answers, UserMessage)
    assert [r.content for r in answers.content if isinstance(r, ToolResult)] == [
        (Text('{"ok": true}'),),
        (Text("plain"),),
    ]
    assert transcript_errors(back) == []


def test_results_of_adjacent_user_messages_are_written_as_one_run() -> None:
    messages = [
        user("Go"),
        assistant(call("c1", "f", {}), call("c2", "g", {})),
        user(result("c1", "1"), result("c2", "2")),
        user(result("c9", "stray")),
    ]
    row = FMT.encode(Decoded([], {}), messages)
    # Not one JSON-list observation followed by another: that would read as two results.
    assert row["conversations"][2:] == [
        turn("observation", "1"),
        turn("observation", "2"),
        turn("observation", "stray"),
    ]
    assert [e.code for e in transcript_errors(FMT.decode(row).messages)] == ["orphan_tool_result"]


def test_a_repair_writes_results_back_in_the_observation_shape() -> None:
    row = {
        "conversations": [
            turn("human", "Go"),
            fc(("f", "{x"), ("g", {})),
            turn("observation", '["1", "2"]'),
            turn("gpt", "Done"),
        ]
    }
    decoded = FMT.decode(row)
    turn_ = decoded.messages[1]
    assert isinstance(turn_, AssistantMessage)
    bad, good = turn_.tool_calls
    repaired = [
        *decoded.messages[:2],
        user(result(bad.id, "retry", "f"), not_executed(good)),
        decoded.messages[3],
    ]
    out = FMT.encode(decoded, repaired)
    assert out["conversations"][:2] == row["conversations"][:2]
    assert json.loads(out["conversations"][2]["value"])[0] == "retry"
    assert out["conversations"][3] == row["conversations"][3]
    assert transcript_errors(FMT.decode(out).messages) == []


def test_a_result_added_for_an_unanswered_call_is_its_own_observation() -> None:
    row = {
        "conversations": [turn("human", "Go"), fc(("f", {}), ("g", {})), turn("observation", "1")]
    }
    decoded = FMT.decode(row)
    assert [e.code for e in transcript_errors(decoded.messages)] == ["unanswered_tool_call"]
    turn_ = decoded.messages[1]
    assert isinstance(turn_, AssistantMessage)
    answers = decoded.messages[2]
    assert isinstance(answers, UserMessage)
    added = UserMessage((*answers.content, result(turn_.tool_calls[1].id, "interrupted")))
    out = FMT.encode(decoded, [*decoded.messages[:2], added])
    assert out["conversations"][2:] == [
        turn("observation", "1"),
        turn("observation", "interrupted"),
    ]
    assert transcript_errors(FMT.decode(out).messages) == []


def test_rows_through_arrow_round_trip() -> None:
    rows = [
        {"conversations": turns, "system": "s" if i % 2 else None}
        for i, (turns, _) in enumerate(EDGE_SHAPES.values())
    ]
    arrow_rows = pa.Table.from_pylist(rows).to_pylist()
    for row, arrow_row in zip(rows, arrow_rows, strict=True):
        assert roundtrip(arrow_row).messages == FMT.decode(row).messages


TEXT = st.sampled_from(
    ["", "a", "{}", '{"x": 1}', "{x", '["a", "b"]', "[1, 2, 3]", '{"name": "f"}']
)
VALUE = TEXT | st.builds(
    json.dumps,
    st.lists(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["f", "g"])}, optional={"arguments": TEXT | st.just({"a": 1})}
        ),
        min_size=1,
        max_size=3,
    )
    | st.fixed_dictionaries({"name": st.sampled_from(["f", 3])}, optional={"arguments": TEXT}),
)
TURN = st.fixed_dictionaries(
    {
        "from": st.sampled_from(["human", "gpt", "system", "function_call", "observation", "bing"]),
        "value": VALUE,
    },
    optional={"weight": st.integers(0, 1)},
)


@settings(max_examples=400, deadline=None)
@given(turns=st.lists(TURN, max_size=8), system_=st.none() | TEXT | st.integers())
def test_decode_raises_only_decode_error_and_what_it_reads_round_trips(
    turns: list[Any], system_: Any
) -> None:
    row = {"conversations": turns, "system": system_}
    try:
        decoded = FMT.decode(row)
    except DecodeError:
        return
    assert FMT.encode(decoded, decoded.messages) == row


@pytest.mark.parametrize("key", ["thinking", "reasoning_content", "reasoning"])
def test_a_gpt_turn_with_only_reasoning_is_kept_and_written_back(key: str) -> None:
    from transcript_clean.pipeline import clean_batch

    fmt = ShareGPTFormat()
    row = {
        "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "", key: "hm"}]
    }
    decoded = fmt.decode(row)
    assert fmt.encode(decoded, decoded.messages) == row
    table = pa.Table.from_pylist([row])
    assert clean_batch(table, format=fmt).kept.to_pylist() == table.to_pylist()
