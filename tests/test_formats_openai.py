"""The OpenAI format: decoding every shape of SPEC section 6, and writing each row back as it
came in."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_clean.formats import Decoded, DecodeError, OpenAIFormat
from transcript_clean.model import (
    AssistantMessage,
    Encrypted,
    Media,
    Message,
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
from transcript_clean.transcript import (
    is_empty_assistant_turn,
    not_executed,
    tool_result_message,
    transcript_errors,
)

FMT = OpenAIFormat()


def roundtrip(row: dict[str, Any]) -> Decoded:
    """Decodes `row`, checks that it is written back value for value, and returns it decoded."""
    decoded = FMT.decode(row)
    assert FMT.encode(decoded, decoded.messages) == row
    return decoded


def call(id: str, name: str, args: Any, raw: str | None = None) -> ToolCall:
    return ToolCall(id, name, args, raw)


def result(id: str, text: str, name: str | None = None) -> ToolResult:
    return ToolResult(id, (Text(text),), name)


def tool_call(id: str | None, name: str, arguments: Any) -> dict[str, Any]:
    out: dict[str, Any] = {} if id is None else {"id": id}
    out.update(type="function", function={"name": name, "arguments": arguments})
    return out


# ---------------------------------------------------------------------------------------------
# the shared data


def test_functionary_calls_pair_with_results_by_position(shared_data: Path) -> None:
    row = json.loads((shared_data / "openai" / "functionary_test_case.json").read_text())
    decoded = roundtrip(row)
    messages = decoded.messages
    assert transcript_errors(messages) == []
    parallel = messages[3]
    assert isinstance(parallel, AssistantMessage)
    assert [c.arguments for c in parallel.tool_calls] == [
        {"car_name": "Song"},
        {"car_name": "Tang"},
    ]
    answers = messages[4]
    assert isinstance(answers, UserMessage)
    assert [r.call for r in answers.content if isinstance(r, ToolResult)] == [
        c.id for c in parallel.tool_calls
    ]
    assert [r.content for r in answers.content if isinstance(r, ToolResult)] == [
        (Text('{"price": {"price": "$25000"}}'),),
        (Text('{"price": {"price": "$20000"}}'),),
    ]
    # Every call id was minted (the file has none), and none is written back.
    calls = [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(calls) == 6
    assert decoded.minted == {c.id for c in calls}
    # The python tool's arguments are raw code: kept verbatim, not parsed.
    python = [c for c in calls if c.name == "python"]
    assert [c.arguments for c in python] == [None, None]
    assert python[1].raw_arguments == "l.remove(round(3.6))\nl"


def test_toy_fine_tuning_rows_round_trip(shared_data: Path) -> None:
    lines = (shared_data / "openai" / "toy_chat_fine_tuning.jsonl").read_text().splitlines()
    decoded = [roundtrip(json.loads(line)) for line in lines]
    assert len(decoded) == 5
    assert not any(isinstance(m, UserMessage) for m in decoded[3].messages)  # row 4: no user
    longest = decoded[4].messages[-1]
    assert isinstance(longest, AssistantMessage)
    assert len(longest.content[0].text) == 26000  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# edge shapes: each decodes to what it means, and is written back as it came in


EDGE_SHAPES: dict[str, tuple[list[dict[str, Any]], list[Message]]] = {
    "null content with tool calls": (
        [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [tool_call("c1", "w", "{}")]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        [user("Weather?"), assistant(call("c1", "w", {}, "{}")), user(result("c1", "sunny", "w"))],
    ),
    "empty content with tool calls": (
        [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "", "tool_calls": [tool_call("c1", "w", "{}")]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        [
            user("Weather?"),
            assistant("", call("c1", "w", {}, "{}")),
            user(result("c1", "sunny", "w")),
        ],
    ),
    "parallel calls answered out of order": (
        [
            {"role": "user", "content": "Compare"},
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [tool_call("a", "p", '{"x": 1}'), tool_call("b", "p", '{"x": 2}')],
            },
            {"role": "tool", "tool_call_id": "b", "content": "2"},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "assistant", "content": "Done."},
        ],
        [
            user("Compare"),
            assistant(
                "Looking.",
                call("a", "p", {"x": 1}, '{"x": 1}'),
                call("b", "p", {"x": 2}, '{"x": 2}'),
            ),
            user(result("b", "2", "p"), result("a", "1", "p")),
            assistant("Done."),
        ],
    ),
    "id-less calls and results pair by position": (
        [
            {"role": "user", "content": "Compare"},
            {
                "role": "assistant",
                "tool_calls": [tool_call(None, "p", "{}"), tool_call(None, "q", "{}")],
            },
            {"role": "tool", "name": "p", "content": "1"},
            {"role": "tool", "content": "2"},
        ],
        [
            user("Compare"),
            assistant(call("call_1_0", "p", {}, "{}"), call("call_1_1", "q", {}, "{}")),
            user(result("call_1_0", "1", "p"), result("call_1_1", "2", "q")),
        ],
    ),
    "string and object arguments": (
        [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "tool_calls": [tool_call("a", "f", '{"n": 1}'), tool_call("b", "f", {"n": 2})],
            },
            {"role": "tool", "tool_call_id": "a", "content": "x"},
            {"role": "tool", "tool_call_id": "b", "content": "y"},
        ],
        [
            user("Go"),
            assistant(call("a", "f", {"n": 1}, '{"n": 1}'), call("b", "f", {"n": 2})),
            user(result("a", "x", "f"), result("b", "y", "f")),
        ],
    ),
    "arguments that do not parse": (
        [
            {"role": "user", "content": "Go"},
            {"role": "assistant", "tool_calls": [tool_call("a", "f", '{"n": ')]},
            {"role": "tool", "tool_call_id": "a", "content": "x"},
        ],
        [user("Go"), assistant(call("a", "f", None, '{"n": ')), user(result("a", "x", "f"))],
    ),
    "a result that answers nothing": (
        [
            {"role": "user", "content": "Hi"},
            {"role": "tool", "content": "stray"},
            {"role": "assistant", "content": "Hello"},
        ],
        [user("Hi"), user(result("result_1", "stray")), assistant("Hello")],
    ),
    "an id-less result beyond the calls": (
        [
            {"role": "user", "content": "Go"},
            {"role": "assistant", "tool_calls": [tool_call(None, "f", "{}")]},
            {"role": "tool", "content": "1"},
            {"role": "tool", "content": "extra"},
        ],
        [
            user("Go"),
            assistant(call("call_1_0", "f", {}, "{}")),
            user(result("call_1_0", "1", "f"), result("result_3", "extra")),
        ],
    ),
    "legacy function_call and function role": (
        [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": "{}"},
            },
            {"role": "function", "name": "f", "content": "ok"},
            {"role": "assistant", "content": "Done"},
        ],
        [
            user("Go"),
            assistant(call("call_1_0", "f", {}, "{}")),
            user(result("call_1_0", "ok", "f")),
            assistant("Done"),
        ],
    ),
    "reasoning_content, developer role, extra keys": (
        [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "Hi", "name": "ann", "weight": 0},
            {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."},
        ],
        [
            system("Be brief."),
            user("Hi"),
            AssistantMessage((Reasoning((ReasoningText("Greet back."),)), Text("Hello"))),
        ],
    ),
    "content parts with an image": (
        [
            {
                "role": "system",
                "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ],
            },
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't say."}]},
        ],
        [
            system("A\n\nB"),
            user("What is this?", Media("image", {"image_url": {"url": "https://x/y.png"}})),
            assistant("I can't say."),
        ],
    ),
    "null and empty content": (
        [
            {"role": "user", "content": None},
            {"role": "assistant", "content": ""},
            {"role": "assistant", "content": None},
        ],
        [UserMessage(()), assistant(""), AssistantMessage(())],
    ),
}


@pytest.mark.parametrize("case", EDGE_SHAPES, ids=list(EDGE_SHAPES))
def test_edge_shapes_decode_and_round_trip(case: str) -> None:
    messages, expected = EDGE_SHAPES[case]
    row = {
        "id": 1,
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    decoded = roundtrip(row)
    assert decoded.messages == expected
    assert decoded.row["tools"] == row["tools"]


def test_minted_ids_avoid_real_ids_and_are_listed() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "tool_calls": [tool_call("call_1_1", "f", "{}"), tool_call(None, "g", "{}")],
            },
            {"role": "tool", "tool_call_id": "call_1_1", "content": "1"},
            {"role": "tool", "content": "2"},
        ]
    }
    decoded = roundtrip(row)
    calls = decoded.messages[1].tool_calls  # type: ignore[union-attr]
    assert calls[0].id == "call_1_1"
    assert calls[1].id == "call_1_1_"
    assert decoded.minted == {"call_1_1_"}
    assert transcript_errors(decoded.messages) == []


@pytest.mark.parametrize(
    ("content", "empty"),
    [("", True), (None, True), ("  \n", True), ("Hi", False)],
)
def test_assistant_without_calls_is_empty_when_its_content_is_blank(
    content: str | None, empty: bool
) -> None:
    decoded = roundtrip({"messages": [{"role": "assistant", "content": content}]})
    message = decoded.messages[0]
    assert isinstance(message, AssistantMessage)
    assert is_empty_assistant_turn(message.content) is empty


# ---------------------------------------------------------------------------------------------
# rows that cannot be read


@pytest.mark.parametrize(
    ("row", "code", "message"),
    [
        ({}, "malformed_row", "messages: no such column in the row"),
        ({"messages": None}, "malformed_row", "messages: expected a list, got null"),
        ({"messages": "hi"}, "malformed_row", "messages: expected a list, got a string"),
        ({"messages": [3]}, "malformed_row", "messages[0]: expected an object, got a number"),
        ({"messages": [{"content": "x"}]}, "malformed_row", 'messages[0]: missing "role"'),
        (
            {"messages": [{"role": "user", "content": 5}]},
            "malformed_row",
            "messages[0].content: expected a list, got a number",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "malformed_row",
            'messages[0].content[0]: missing "text"',
        ),
        (
            {"messages": [{"role": "user", "content": "x"}, {"role": "narrator", "content": "y"}]},
            "unknown_role",
            'messages[1].role: unknown role "narrator"',
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "user", "content": "x"},
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]},
                ]
            },
            "malformed_row",
            'messages[3].tool_calls[0].function: missing "name"',
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "a"}]}]},
            "malformed_row",
            'messages[0].tool_calls[0]: missing "function"',
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": {"id": "a"}}]},
            "malformed_row",
            "messages[0].tool_calls: expected a list, got an object",
        ),
        (
            {"messages": [{"role": "tool", "tool_call_id": 7, "content": "x"}]},
            "malformed_row",
            "messages[0].tool_call_id: expected a string or null, got a number",
        ),
        (
            {"messages": [{"role": "assistant", "content": "x", "reasoning_content": ["a"]}]},
            "malformed_row",
            "messages[0].reasoning_content: expected a string or null, got a list",
        ),
    ],
)
def test_unreadable_rows_raise_decode_error_naming_the_field(
    row: dict[str, Any], code: str, message: str
) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode(row)
    assert err.value.code == code
    assert str(err.value).startswith(message)


# ---------------------------------------------------------------------------------------------
# writing canonical messages


def test_encode_writes_fresh_messages_idiomatically() -> None:
    messages: list[Message] = [
        system("Be brief."),
        user("Weather?"),
        AssistantMessage(
            (
                Reasoning((ReasoningText("Look it up."),)),
                call("c1", "w", {"city": "Paris"}),
                call("c2", "w", None, "{bad"),
            )
        ),
        UserMessage((result("c1", "sunny", "w"), result("c2", "?", "w"), Text("thanks"))),
        assistant("One.", "Two."),
    ]
    row = FMT.encode(Decoded(messages=[], row={"id": 7}), messages)
    assert row == {
        "id": 7,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "Look it up.",
                "tool_calls": [
                    tool_call("c1", "w", '{"city": "Paris"}'),
                    tool_call("c2", "w", "{bad"),
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "c2", "content": "?"},
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "One.\n\nTwo."},
        ],
    }
    assert FMT.decode(row).messages == [
        *messages[:2],
        AssistantMessage(
            (
                Reasoning((ReasoningText("Look it up."),)),
                call("c1", "w", {"city": "Paris"}, '{"city": "Paris"}'),
                call("c2", "w", None, "{bad"),
            )
        ),
        UserMessage((result("c1", "sunny", "w"), result("c2", "?", "w"))),
        user("thanks"),
        assistant("One.\n\nTwo."),
    ]


def id_less_row() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [tool_call(None, "f", "{x"), tool_call(None, "g", "{}")],
            },
            {"role": "tool", "name": "f", "content": "1", "weight": 1},
            {"role": "tool", "name": "g", "content": "2", "weight": 1},
            {"role": "assistant", "content": "Done"},
        ]
    }


def test_a_repair_of_an_id_less_row_writes_no_minted_id() -> None:
    row = id_less_row()
    decoded = FMT.decode(row)
    turn = decoded.messages[1]
    assert isinstance(turn, AssistantMessage)
    bad, good = turn.tool_calls
    # What R2 does: the results become the feedback and not_executed, as fresh results.
    repaired = list(decoded.messages)
    repaired[2] = UserMessage((tool_result_message(bad, "retry"), not_executed(good)))
    out = FMT.encode(decoded, repaired)
    assert out["messages"][:2] == row["messages"][:2]
    assert out["messages"][2] == {"role": "tool", "name": "f", "content": "retry"}
    assert out["messages"][3]["role"] == "tool"
    assert "tool_call_id" not in out["messages"][3]
    assert out["messages"][4] == row["messages"][4]


def test_a_changed_result_keeps_its_source_keys() -> None:
    row = id_less_row()
    decoded = FMT.decode(row)
    answers = decoded.messages[2]
    assert isinstance(answers, UserMessage)
    first = answers.content[0]
    assert isinstance(first, ToolResult)
    changed = replace(first, content=(Text("changed"),), status="error")
    repaired = [
        *decoded.messages[:2],
        UserMessage((changed, answers.content[1])),
        *decoded.messages[3:],
    ]
    out = FMT.encode(decoded, repaired)
    assert out["messages"][2] == {"role": "tool", "name": "f", "content": "changed", "weight": 1}


def test_a_result_created_for_a_minted_call_is_placed_in_call_order() -> None:
    row = id_less_row()
    del row["messages"][2]  # the first call is unanswered; the result of the second remains
    decoded = FMT.decode(row)
    turn = decoded.messages[1]
    assert isinstance(turn, AssistantMessage)
    # Read by position, the one remaining result answers the FIRST call.
    assert transcript_errors(decoded.messages)[0].call_id == turn.tool_calls[1].id
    answers = decoded.messages[2]
    assert isinstance(answers, UserMessage)
    interrupted = tool_result_message(turn.tool_calls[1], "interrupted")
    repaired = [
        *decoded.messages[:2],
        UserMessage((*answers.content, interrupted)),
        *decoded.messages[3:],
    ]
    out = FMT.encode(decoded, repaired)
    assert [m.get("content") for m in out["messages"][2:4]] == ["2", "interrupted"]
    assert transcript_errors(FMT.decode(out).messages) == []


def test_merged_assistant_messages_join_their_texts() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello.", "weight": 1},
            {"role": "assistant", "content": "How can I help?"},
        ]
    }
    decoded = FMT.decode(row)
    first, second = decoded.messages[1:]
    assert isinstance(first, AssistantMessage) and isinstance(second, AssistantMessage)
    merged = replace(first, content=first.content + second.content)
    out = FMT.encode(decoded, [decoded.messages[0], merged])
    assert out["messages"][1] == {
        "role": "assistant",
        "content": "Hello.\n\nHow can I help?",
        "weight": 1,
    }
    assert FMT.joins_text


def test_another_formats_messages_are_written_fresh() -> None:
    from transcript_clean.formats import ShareGPTFormat

    sharegpt = ShareGPTFormat()
    source = {
        "conversations": [
            {"from": "human", "value": "Go"},
            {"from": "function_call", "value": '{"name": "f", "arguments": {"a": 1}}'},
            {"from": "observation", "value": "ok"},
            {"from": "gpt", "value": "Done"},
        ],
        "system": "Be brief.",
    }
    decoded = sharegpt.decode(source)
    out = FMT.encode(decoded, decoded.messages)
    assert out["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call(None, "f", '{"a": 1}')]},
        {"role": "tool", "name": "f", "content": "ok"},
        {"role": "assistant", "content": "Done"},
    ]
    assert transcript_errors(FMT.decode(out).messages) == []


# ---------------------------------------------------------------------------------------------
# rows as Arrow gives them back, and rows of anything


def test_rows_through_arrow_round_trip() -> None:
    rows = [
        {"id": 1, "messages": [m for m in EDGE_SHAPES["null content with tool calls"][0]]},
        {"id": 2, "messages": EDGE_SHAPES["parallel calls answered out of order"][0]},
        {"id": 3, "messages": EDGE_SHAPES["a result that answers nothing"][0]},
        {"id": 4, "messages": EDGE_SHAPES["reasoning_content, developer role, extra keys"][0]},
        {"id": 5, "messages": EDGE_SHAPES["null and empty content"][0]},
        {"id": 6, **id_less_row()},
    ]
    arrow_rows = pa.Table.from_pylist(rows).to_pylist()
    assert arrow_rows[0]["messages"][0]["tool_calls"] is None  # every key, absent ones as None
    for row, arrow_row in zip(rows, arrow_rows, strict=True):
        assert roundtrip(arrow_row).messages == FMT.decode(row).messages


# Rows of the right shape with anything anywhere: mostly readable, often not.
ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "a", "{}"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=8,
)
TEXT = st.sampled_from(["", " ", "a", "{}", '{"x": 1}', "{x", "[1]"])
IDS = st.sampled_from(["a", "b", "call_1_0"]) | st.none()
PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image_url", "refusal", "input_audio", "other"])},
    optional={"text": TEXT, "image_url": st.just({"url": "u"}), "refusal": TEXT, "x": ANY},
)
CONTENT = st.none() | TEXT | st.lists(PART | ANY, max_size=3)
FUNCTION = st.fixed_dictionaries(
    {}, optional={"name": TEXT | ANY, "arguments": TEXT | st.just({"a": 1}) | ANY}
)
CALL = st.fixed_dictionaries(
    {"function": FUNCTION | ANY}, optional={"id": IDS, "type": st.just("function"), "x": ANY}
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"])},
    optional={
        "content": CONTENT,
        "tool_calls": st.lists(CALL, max_size=3) | ANY,
        "tool_call_id": IDS,
        "name": TEXT,
        "reasoning_content": TEXT | st.none(),
        "function_call": FUNCTION,
        "weight": ANY,
    },
)


@settings(max_examples=400, deadline=None)
@given(messages=st.lists(MESSAGE, max_size=8) | st.lists(MESSAGE | ANY, max_size=3) | ANY)
def test_decode_raises_only_decode_error_and_what_it_reads_round_trips(messages: Any) -> None:
    row = {"messages": messages, "id": 0}
    try:
        decoded = FMT.decode(row)
    except DecodeError:
        return
    assert FMT.encode(decoded, decoded.messages) == row


# ---------------------------------------------------------------------------------------------
# reasoning fields (issue 16, item 2)

REASONING_FIELDS: list[tuple[str, Any, tuple[Any, ...]]] = [
    ("reasoning_content", "because", (ReasoningText("because"),)),
    ("thinking", "because", (ReasoningText("because"),)),
    ("reasoning", "because", (ReasoningText("because"),)),
    (
        "reasoning",
        {"text": "t", "summary": [{"type": "summary_text", "text": "s"}]},
        (ReasoningText("t"), ReasoningText("s", "summary")),
    ),
    ("reasoning", {"encrypted_content": "xyz"}, (Encrypted("xyz"),)),
]


@pytest.mark.parametrize(("key", "value", "pieces"), REASONING_FIELDS)
def test_each_reasoning_field_is_the_turns_reasoning_and_is_written_back(
    key: str, value: Any, pieces: tuple[Any, ...]
) -> None:
    row = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", key: value},
        ]
    }
    decoded = FMT.decode(row)
    assert decoded.messages[1] == AssistantMessage((Reasoning(pieces), Text("")))
    assert not is_empty_assistant_turn(decoded.messages[1].content)
    assert FMT.encode(decoded, decoded.messages) == row


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("key", ["thinking", "reasoning", "reasoning_content"])
def test_a_turn_with_only_reasoning_is_kept_and_an_empty_reasoning_is_blank(
    key: str, fast: bool
) -> None:
    from transcript_clean.pipeline import clean_batch

    def row(reasoning: str) -> dict[str, Any]:
        assistant = {"role": "assistant", "content": "", key: reasoning}
        return {"messages": [{"role": "user", "content": "q"}, assistant]}

    table = pa.Table.from_pylist([row("I should answer"), row("  ")])
    result = clean_batch(table, format=FMT, fast=fast)
    assert result.kept.column("messages").to_pylist() == [table.column("messages")[0].as_py()]
    assert result.rejects.column("_reject_codes").to_pylist() == [
        ["empty_assistant_turn", "no_assistant_turn"]
    ]


def test_merged_reasoning_goes_back_into_the_field_it_came_from() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "thinking": "x"},
            {"role": "assistant", "content": "b", "thinking": "y"},
        ]
    }
    decoded = FMT.decode(row)
    merged = AssistantMessage(decoded.messages[1].content + decoded.messages[2].content)
    merged = replace(merged, origin=decoded.messages[1].origin)
    out = FMT.encode(decoded, [decoded.messages[0], merged])
    assert out["messages"][1] == {"role": "assistant", "content": "a\n\nb", "thinking": "x\n\ny"}


def test_a_reasoning_field_of_another_type_is_malformed() -> None:
    row = {"messages": [{"role": "assistant", "content": "", "thinking": 3}]}
    with pytest.raises(DecodeError, match=r"messages\[0\]\.thinking: expected a string or null"):
        FMT.decode(row)


class _CountedId(str):
    """A call id that counts the comparisons made with it."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountedId.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_results_find_their_calls_without_a_search_per_call() -> None:
    # Issue 27, finding 19: each result was matched to its call by a linear search, so a turn
    # of 40,000 parallel calls took 10 s; the lookup is by id now, about one comparison each.
    n = 2000
    calls = [
        {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for k in range(n)
    ]
    results = [
        {"role": "tool", "tool_call_id": _CountedId(f"c{k}"), "content": "ok"} for k in range(n)
    ]
    row = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [*calls, dict(calls[0], function={"name": "g", "arguments": "{}"})],
            },
            *results,
        ]
    }
    _CountedId.compared = 0
    decoded = OpenAIFormat().decode(row)
    assert _CountedId.compared <= 3 * n
    answers = decoded.messages[2].content
    assert [part.call for part in answers] == [f"c{k}" for k in range(n)]
    assert {part.name for part in answers} == {"f"}  # c0's first call, not its repeat


# The shape of Cohere's chat fine-tuning files ("Preparing the Chat Fine-tuning Data",
# docs.cohere.com/docs/chat-preparing-the-data): roles System / User / Chatbot.
COHERE_ROLES = {"System": "system", "User": "user", "Chatbot": "assistant"}


def cohere_row() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "System", "content": "You are a helpful chatbot."},
            {"role": "User", "content": "Which planets are gas giants?"},
            {"role": "Chatbot", "content": "Jupiter and Saturn."},
        ]
    }


def test_other_role_names_read_as_the_roles_they_stand_for_and_are_written_back() -> None:
    fmt = OpenAIFormat(roles=COHERE_ROLES)
    row = cohere_row()
    decoded = fmt.decode(row)
    assert decoded.messages == [
        system("You are a helpful chatbot."),
        user("Which planets are gas giants?"),
        assistant("Jupiter and Saturn."),
    ]
    assert fmt.encode(decoded, decoded.messages) == row
    assert fmt.words == "roles System as system, User as user, Chatbot as assistant"
    assert "roles=" in repr(fmt)
    with pytest.raises(DecodeError, match='unknown role "System"'):
        OpenAIFormat().decode(row)


def test_a_message_written_fresh_takes_the_rows_name_for_its_role() -> None:
    fmt = OpenAIFormat(roles={"agent": "assistant", "environment": "user"})
    row = {
        "messages": [
            {"role": "environment", "content": "You see a door."},
            {"role": "agent", "content": "Open the door."},
            {"role": "environment", "content": "It opens."},
        ]
    }
    decoded = fmt.decode(row)
    out = fmt.encode(decoded, [*decoded.messages, assistant("Go through.")])
    assert out["messages"][:3] == row["messages"]
    assert out["messages"][3] == {"role": "agent", "content": "Go through."}
    # a row that mixes both names keeps each message's own
    mixed = {"messages": [{"role": "user", "content": "Hi"}, *row["messages"][1:2]]}
    again = fmt.decode(mixed)
    assert fmt.encode(again, again.messages) == mixed


def test_role_names_must_stand_for_a_role() -> None:
    from transcript_clean.errors import FormatError

    with pytest.raises(FormatError, match="stand for no role"):
        OpenAIFormat(roles={"Bot": "robot"})


def test_clean_reads_cohere_rows_says_how_and_writes_them_back(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from transcript_clean.cli import main

    empty = cohere_row()
    empty["messages"] = [*empty["messages"], {"role": "User", "content": "More?"}]
    empty["messages"].append({"role": "Chatbot", "content": ""})
    lines = [json.dumps(cohere_row()), json.dumps(empty)]
    source = tmp_path / "cohere.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["clean", str(source), str(out), "--output-format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert "as openai (column 'messages'; roles Chatbot as assistant, System as system" in (
        result.output
    )
    kept = (out / "data" / "part-00000.jsonl").read_text().splitlines()
    assert kept[0] == lines[0]  # unchanged: byte for byte
    # the empty last turn dropped (R1), every other message as it came, under its own name
    assert json.loads(kept[1]) == {"messages": empty["messages"][:-1]}
