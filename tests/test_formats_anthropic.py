"""The Anthropic format: string or block content, the system column, and rows written back as
they came in."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_clean.formats import AnthropicFormat, Decoded, DecodeError
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
from transcript_clean.transcript import is_empty_assistant_turn, not_executed, transcript_errors

FMT = AnthropicFormat()


def roundtrip(row: dict[str, Any]) -> Decoded:
    decoded = FMT.decode(row)
    assert FMT.encode(decoded, decoded.messages) == row
    return decoded


def tool_use(id: str | None, name: str, input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def tool_result(id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": id, "content": content, **extra}


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def call(id: str, name: str, args: Any, raw: str | None = None) -> ToolCall:
    return ToolCall(id, name, args, raw)


def result(id: str, text: str, name: str | None = None, status: str = "success") -> ToolResult:
    return ToolResult(id, (Text(text),), name, status)  # type: ignore[arg-type]


EDGE_SHAPES: dict[str, tuple[list[dict[str, Any]], list[Message]]] = {
    "a call and its result": (
        [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [tool_use("t1", "w", {"city": "Paris"})]},
            {"role": "user", "content": [tool_result("t1", "sunny")]},
            {"role": "assistant", "content": "Sunny."},
        ],
        [
            user("Weather?"),
            assistant(call("t1", "w", {"city": "Paris"})),
            user(result("t1", "sunny", "w")),
            assistant("Sunny."),
        ],
    ),
    "parallel calls, an error result, block content": (
        [
            {"role": "user", "content": [text("Compare")]},
            {
                "role": "assistant",
                "content": [text("Looking."), tool_use("a", "p", {}), tool_use("b", "p", {})],
            },
            {
                "role": "user",
                "content": [
                    tool_result("a", [text("1")]),
                    tool_result("b", "boom", is_error=True),
                    text("and?"),
                ],
            },
        ],
        [
            user("Compare"),
            assistant("Looking.", call("a", "p", {}), call("b", "p", {})),
            user(
                ToolResult("a", (Text("1"),), "p"),
                result("b", "boom", "p", "error"),
                "and?",
            ),
        ],
    ),
    "input as a JSON string, parsed or not": (
        [
            {"role": "user", "content": "Go"},
            {
                "role": "assistant",
                "content": [tool_use("a", "f", '{"n": 1}'), tool_use("b", "f", "{x")],
            },
            {
                "role": "user",
                "content": [tool_result("a", "1"), tool_result("b", "2", is_error=False)],
            },
        ],
        [
            user("Go"),
            assistant(call("a", "f", {"n": 1}, '{"n": 1}'), call("b", "f", None, "{x")),
            user(result("a", "1", "f"), result("b", "2", "f")),
        ],
    ),
    "a result that answers nothing": (
        [
            {"role": "user", "content": [tool_result("zz", "stray")]},
            {"role": "assistant", "content": "Hi"},
        ],
        [user(result("zz", "stray")), assistant("Hi")],
    ),
    "thinking, redacted thinking, an image": (
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": "u"}},
                    text("What?"),
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Hmm.", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    text("A cat."),
                ],
            },
        ],
        [
            user(Media("image", {"source": {"type": "url", "url": "u"}}), "What?"),
            AssistantMessage(
                (
                    Reasoning((ReasoningText("Hmm."),), signature="sig"),
                    Reasoning((Encrypted("opaque"),)),
                    Text("A cat."),
                )
            ),
        ],
    ),
    "empty assistant turns": (
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": []},
            {"role": "user", "content": "Hi?"},
            {"role": "assistant", "content": [text(" ")]},
        ],
        [user("Hi"), AssistantMessage(()), user("Hi?"), assistant(" ")],
    ),
}


@pytest.mark.parametrize("case", EDGE_SHAPES, ids=list(EDGE_SHAPES))
def test_edge_shapes_decode_and_round_trip(case: str) -> None:
    messages, expected = EDGE_SHAPES[case]
    decoded = roundtrip({"messages": messages, "id": 5})
    assert decoded.messages == expected
    assert decoded.minted == frozenset()


def test_empty_turns_are_empty() -> None:
    decoded = roundtrip({"messages": EDGE_SHAPES["empty assistant turns"][0]})
    assert [
        is_empty_assistant_turn(m.content)
        for m in decoded.messages
        if isinstance(m, AssistantMessage)
    ] == [
        True,
        True,
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Be brief.", [system("Be brief.")]),
        ([text("Be"), text("brief.")], [system("Be\n\nbrief.")]),
        ("", []),
        (None, []),
    ],
)
def test_the_system_column_is_a_leading_system_message(value: Any, expected: list[Message]) -> None:
    decoded = roundtrip({"system": value, "messages": [{"role": "user", "content": "Hi"}]})
    assert decoded.messages == [*expected, user("Hi")]


@pytest.mark.parametrize(
    ("row", "code", "message"),
    [
        (
            {"messages": [{"role": "system", "content": "x"}]},
            "unknown_role",
            'messages[0].role: unknown role "system"',
        ),
        ({"messages": [{"role": "user"}]}, "malformed_row", 'messages[0]: missing "content"'),
        (
            {"messages": [{"role": "user", "content": 4}]},
            "malformed_row",
            "messages[0].content: expected a list",
        ),
        (
            {"messages": [{"role": "assistant", "content": [tool_use(None, "f", {})]}]},
            "malformed_row",
            'messages[0].content[0]: missing "id"',
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
            "malformed_row",
            'messages[0].content[0]: missing "tool_use_id"',
        ),
        (
            {"messages": [{"role": "user", "content": [tool_result("a", "x", is_error="yes")]}]},
            "malformed_row",
            "messages[0].content[0].is_error: expected a boolean",
        ),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "thinking"}]}]},
            "malformed_row",
            'messages[0].content[0]: missing "thinking"',
        ),
        (
            {"system": [{"type": "image"}], "messages": []},
            "malformed_row",
            "system[0]: the system prompt holds only text",
        ),
        ({"system": 3, "messages": []}, "malformed_row", "system: expected a list"),
    ],
)
def test_unreadable_rows_raise_decode_error_naming_the_field(
    row: dict[str, Any], code: str, message: str
) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode(row)
    assert err.value.code == code
    assert str(err.value).startswith(message)


def test_encode_writes_fresh_messages_idiomatically() -> None:
    messages = [
        system("Be brief."),
        user("Weather?"),
        AssistantMessage(
            (
                Reasoning((ReasoningText("Look."),), signature="s"),
                call("t1", "w", {"city": "Paris"}, '{"city": "Paris"}'),
            )
        ),
        user(result("t1", "Paris is not a tool result", status="error")),
        assistant("Sorry."),
    ]
    row = FMT.encode(Decoded([], {"id": 2}), messages)
    assert row == {
        "id": 2,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Look.", "signature": "s"},
                    tool_use("t1", "w", {"city": "Paris"}),
                ],
            },
            {
                "role": "user",
                "content": [tool_result("t1", "Paris is not a tool result", is_error=True)],
            },
            {"role": "assistant", "content": "Sorry."},
        ],
    }
    assert transcript_errors(FMT.decode(row).messages) == []
    assert not FMT.joins_text


def test_a_repaired_result_keeps_its_block_keys() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "Go"},
            {"role": "assistant", "content": [tool_use("a", "f", "{x"), tool_use("b", "g", {})]},
            {
                "role": "user",
                "content": [
                    tool_result("a", "1", cache_control={"type": "ephemeral"}),
                    tool_result("b", [text("2")]),
                ],
            },
        ]
    }
    decoded = FMT.decode(row)
    answers = decoded.messages[2]
    assert isinstance(answers, UserMessage)
    first, second = answers.content
    assert isinstance(first, ToolResult) and isinstance(second, ToolResult)
    turn = decoded.messages[1]
    assert isinstance(turn, AssistantMessage)
    repaired = [
        *decoded.messages[:2],
        UserMessage(
            (
                replace(first, content=(Text("retry"),), status="error"),
                not_executed(turn.tool_calls[1]),
            )
        ),
    ]
    out = FMT.encode(decoded, repaired)
    assert out["messages"][2]["content"] == [
        tool_result("a", "retry", cache_control={"type": "ephemeral"}, is_error=True),
        tool_result("b", not_executed(turn.tool_calls[1]).content[0].text, is_error=True),  # type: ignore[union-attr]
    ]


def test_merged_assistant_messages_keep_their_blocks() -> None:
    row = {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, text("More.")],
            },
        ]
    }
    decoded = FMT.decode(row)
    first, second = decoded.messages[1:]
    assert isinstance(first, AssistantMessage) and isinstance(second, AssistantMessage)
    out = FMT.encode(
        decoded, [decoded.messages[0], replace(first, content=first.content + second.content)]
    )
    assert out["messages"][1] == {
        "role": "assistant",
        "content": [
            text("Hello."),
            {"type": "thinking", "thinking": "t", "signature": "s"},
            text("More."),
        ],
    }


def test_rows_through_arrow_round_trip() -> None:
    rows = [
        {"system": "s", "messages": EDGE_SHAPES["a call and its result"][0][1:3]},
        {"system": None, "messages": EDGE_SHAPES["thinking, redacted thinking, an image"][0]},
        {"system": "t", "messages": EDGE_SHAPES["empty assistant turns"][0][1:2]},
        {"system": None, "messages": EDGE_SHAPES["a result that answers nothing"][0][:1]},
    ]
    arrow_rows = pa.Table.from_pylist(rows).to_pylist()
    assert arrow_rows[1]["messages"][1]["content"][0]["data"] is None  # every key of the schema
    for row, arrow_row in zip(rows, arrow_rows, strict=True):
        assert media_without_nulls(roundtrip(arrow_row).messages) == FMT.decode(row).messages


def media_without_nulls(messages: list[Message]) -> list[Message]:
    """The messages with the null keys Arrow adds to a media block left out (the block is kept
    as the source wrote it, so Arrow's nulls are in it)."""

    def clean(part: Any) -> Any:
        if isinstance(part, Media):
            return Media(part.kind, {k: v for k, v in part.data.items() if v is not None})
        return part

    return [
        replace(m, content=tuple(clean(p) for p in m.content))
        if isinstance(m, UserMessage | AssistantMessage)
        else m
        for m in messages
    ]


ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "a"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=8,
)
TEXT = st.sampled_from(["", " ", "a", "{}", '{"x": 1}', "{x"])
IDS = st.sampled_from(["a", "b"]) | st.none()
BLOCK = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image"]
        )
    },
    optional={
        "text": TEXT,
        "id": IDS,
        "name": TEXT,
        "input": st.just({"a": 1}) | TEXT | ANY,
        "tool_use_id": IDS,
        "content": TEXT
        | st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}) | ANY, max_size=2
        ),
        "is_error": st.booleans() | st.none(),
        "thinking": TEXT,
        "signature": TEXT | st.none(),
        "data": TEXT,
        "x": ANY,
    },
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": TEXT | st.lists(BLOCK, max_size=4)},
    optional={"x": ANY},
)


@settings(max_examples=400, deadline=None)
@given(
    messages=st.lists(MESSAGE, max_size=6) | st.lists(MESSAGE | ANY, max_size=3),
    system_=st.none()
    | TEXT
    | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}), max_size=2)
    | ANY,
)
def test_decode_raises_only_decode_error_and_what_it_reads_round_trips(
    messages: Any, system_: Any
) -> None:
    row = {"messages": messages, "system": system_}
    try:
        decoded = FMT.decode(row)
    except DecodeError:
        return
    assert FMT.encode(decoded, decoded.messages) == row
