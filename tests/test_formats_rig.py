"""The rig format: histories as rig serializes its `Message`, written back as they came in."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_clean.formats import Decoded, DecodeError, RigFormat
from transcript_clean.model import (
    AssistantMessage,
    Encrypted,
    Media,
    Message,
    Reasoning,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    assistant,
    dump_messages,
    system,
    user,
)
from transcript_clean.transcript import (
    is_empty_assistant_turn,
    tool_result_message,
    transcript_errors,
)

FMT = RigFormat()


def roundtrip(row: dict[str, Any]) -> Decoded:
    decoded = FMT.decode(row)
    assert FMT.encode(decoded, decoded.messages) == row
    return decoded


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def toolcall(id: str, name: str, arguments: Any, **extra: Any) -> dict[str, Any]:
    return {
        "type": "toolcall",
        "id": id,
        "function": {"name": name, "arguments": arguments},
        **extra,
    }


def toolresult(call: str, value: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "toolresult", "call": call, "name": name, "content": [text(value)], **extra}


def rig_user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


def rig_assistant(*parts: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "id": id, "content": list(parts)}


EDGE_SHAPES: dict[str, tuple[list[dict[str, Any]], list[Message]]] = {
    "a call and its result": (
        [
            {"role": "system", "content": "Be brief."},
            rig_user(text("Weather?")),
            rig_assistant(
                toolcall("c1", "w", {"city": "Paris"}, signature=None, additional_params=None),
                id="msg_1",
            ),
            rig_user(toolresult("c1", "sunny", "w")),
            rig_assistant(text("Sunny.")),
        ],
        [
            system("Be brief."),
            user("Weather?"),
            assistant(ToolCall("c1", "w", {"city": "Paris"}), id="msg_1"),
            user(ToolResult("c1", (Text("sunny"),), "w")),
            assistant("Sunny."),
        ],
    ),
    "parallel calls, string arguments, an error result": (
        [
            rig_user(text("Go")),
            rig_assistant(
                toolcall("a", "f", '{"n": 1}'), toolcall("b", "f", "{x", signature="sig")
            ),
            rig_user(toolresult("a", "1"), toolresult("b", "bad", status="error")),
        ],
        [
            user("Go"),
            assistant(
                ToolCall("a", "f", {"n": 1}, '{"n": 1}'), ToolCall("b", "f", None, "{x", "sig")
            ),
            user(ToolResult("a", (Text("1"),)), ToolResult("b", (Text("bad"),), status="error")),
        ],
    ),
    "a result that answers nothing": (
        [rig_user(toolresult("zz", "stray")), rig_assistant(text("Hi"))],
        [user(ToolResult("zz", (Text("stray"),))), assistant("Hi")],
    ),
    "reasoning, annotated text, media": (
        [
            rig_user({"type": "image", "data": {"type": "url", "value": "u"}}, text("What?")),
            rig_assistant(
                {
                    "type": "reasoning",
                    "id": "r1",
                    "signature": None,
                    "content": [
                        {"type": "text", "text": "Hmm."},
                        {"type": "summary", "text": "S."},
                        {"type": "encrypted", "data": "e"},
                    ],
                },
                {"type": "text", "text": "", "additional_params": {"cite": 1}},
            ),
        ],
        [
            user(Media("image", {"data": {"type": "url", "value": "u"}}), "What?"),
            AssistantMessage(
                (
                    Reasoning(
                        (ReasoningText("Hmm."), ReasoningText("S.", "summary"), Encrypted("e")),
                        id="r1",
                    ),
                    Text("", {"cite": 1}),
                )
            ),
        ],
    ),
}


@pytest.mark.parametrize("case", EDGE_SHAPES, ids=list(EDGE_SHAPES))
def test_edge_shapes_decode_and_round_trip(case: str) -> None:
    messages, expected = EDGE_SHAPES[case]
    decoded = roundtrip({"messages": messages, "id": 9})
    assert decoded.messages == expected
    assert dump_messages(decoded.messages) == dump_messages(expected)


def test_an_annotated_empty_text_is_not_an_empty_turn() -> None:
    decoded = roundtrip({"messages": EDGE_SHAPES["reasoning, annotated text, media"][0]})
    turn = decoded.messages[1]
    assert isinstance(turn, AssistantMessage)
    assert not is_empty_assistant_turn(turn.content)
    empty = roundtrip({"messages": [rig_assistant(text(" "))]}).messages[0]
    assert isinstance(empty, AssistantMessage)
    assert is_empty_assistant_turn(empty.content)


@pytest.mark.parametrize(
    ("messages", "code", "message"),
    [
        (
            [{"role": "tool", "content": []}],
            "unknown_role",
            'messages[0].role: unknown role "tool"',
        ),
        ([{"role": "user"}], "malformed_row", 'messages[0]: missing "content"'),
        (
            [{"role": "user", "content": "hi"}],
            "malformed_row",
            "messages[0].content: expected a list",
        ),
        (
            [{"role": "system", "content": ["x"]}],
            "malformed_row",
            "messages[0].content: expected a string",
        ),
        (
            [rig_user({"type": "tool_result"})],
            "malformed_row",
            'messages[0].content[0].type: unknown user part type "tool_result"',
        ),
        (
            [rig_user({"type": "toolresult", "content": []})],
            "malformed_row",
            'messages[0].content[0]: missing "call"',
        ),
        (
            [rig_user(toolresult("a", "x", status="done"))],
            "malformed_row",
            "messages[0].content[0].status",
        ),
        (
            [rig_assistant({"type": "toolcall", "id": "a"})],
            "malformed_row",
            'messages[0].content[0]: missing "function"',
        ),
        (
            [rig_assistant(toolcall("a", None, {}))],
            "malformed_row",
            'messages[0].content[0].function: missing "name"',
        ),
        (
            [rig_assistant({"type": "toolcall", "function": {"name": "f"}})],
            "malformed_row",
            'messages[0].content[0]: missing "id"',
        ),
        (
            [rig_assistant(text("x"), id=5)],
            "malformed_row",
            "messages[0].id: expected a string or null",
        ),  # type: ignore[arg-type]
        (
            [rig_assistant({"type": "reasoning", "content": [{"type": "x"}]})],
            "malformed_row",
            "messages[0].content[0].content[0].type",
        ),
    ],
)
def test_unreadable_rows_raise_decode_error_naming_the_field(
    messages: list[Any], code: str, message: str
) -> None:
    with pytest.raises(DecodeError) as err:
        FMT.decode({"messages": messages})
    assert err.value.code == code
    assert str(err.value).startswith(message)


def test_encode_writes_fresh_messages_in_rigs_shape() -> None:
    messages: list[Message] = [
        user("Go"),
        AssistantMessage(
            (
                Reasoning((ReasoningText("t"),)),
                ToolCall("c1", "f", {"a": 1}, '{"a": 1}'),
                ToolCall("c2", "f", None, "{x"),
            ),
            id="m1",
        ),
        user(
            ToolResult("c1", (Text("1"),), "f"),
            tool_result_message(ToolCall("c2", "f", None), "retry"),
        ),
    ]
    row = FMT.encode(Decoded([], {"id": 3}), messages)
    assert row == {
        "id": 3,
        "messages": [
            rig_user(text("Go")),
            rig_assistant(
                {"type": "reasoning", "id": None, "signature": None, "content": [text("t")]},
                toolcall("c1", "f", {"a": 1}, signature=None, additional_params=None),
                toolcall("c2", "f", "{x", signature=None, additional_params=None),
                id="m1",
            ),
            rig_user(toolresult("c1", "1", "f"), toolresult("c2", "retry", "f", status="error")),
        ],
    }
    assert transcript_errors(FMT.decode(row).messages) == []
    assert not FMT.joins_text


def test_a_changed_message_keeps_its_source_keys() -> None:
    row = {
        "messages": [
            rig_user(text("Hi")),
            {**rig_assistant(text("Hello.")), "created": 1},
            rig_assistant(
                {"type": "reasoning", "id": None, "signature": "s", "content": [text("t")], "x": 1},
                text("More."),
            ),
        ]
    }
    decoded = FMT.decode(row)
    first, second = decoded.messages[1:]
    assert isinstance(first, AssistantMessage) and isinstance(second, AssistantMessage)
    out = FMT.encode(
        decoded, [decoded.messages[0], replace(first, content=first.content + second.content)]
    )
    # The merged-in reasoning has no source part in the first message: it is written fresh.
    assert out["messages"][1] == {
        **rig_assistant(
            text("Hello."),
            {"type": "reasoning", "id": None, "signature": "s", "content": [text("t")]},
            text("More."),
        ),
        "created": 1,
    }


def test_rows_through_arrow_round_trip() -> None:
    rows = [
        {"messages": EDGE_SHAPES["a call and its result"][0][1:]},
        {"messages": EDGE_SHAPES["parallel calls, string arguments, an error result"][0][:1]},
        {"messages": EDGE_SHAPES["reasoning, annotated text, media"][0][1:]},
        {"messages": EDGE_SHAPES["a result that answers nothing"][0]},
    ]
    arrow_rows = pa.Table.from_pylist(rows).to_pylist()
    assert arrow_rows[0]["messages"][0]["content"][0]["call"] is None
    for row, arrow_row in zip(rows, arrow_rows, strict=True):
        decoded = roundtrip(arrow_row)
        assert [type(m) for m in decoded.messages] == [type(m) for m in FMT.decode(row).messages]
        assert transcript_errors(decoded.messages) == transcript_errors(FMT.decode(row).messages)


ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "a"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=8,
)
TEXT = st.sampled_from(["", " ", "a", "{}", '{"x": 1}', "{x"])
IDS = st.sampled_from(["a", "b"]) | st.none()
PIECE = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "summary", "encrypted"])},
    optional={"text": TEXT, "data": TEXT},
)
EXTRA = {
    "x": ANY,
    "signature": TEXT | st.none(),
    "additional_params": st.none() | st.just({"k": 1}),
}
PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}, optional=EXTRA),
    st.fixed_dictionaries(
        {
            "type": st.just("toolcall"),
            "id": IDS,
            "function": st.fixed_dictionaries(
                {"name": TEXT}, optional={"arguments": TEXT | st.just({"a": 1}) | ANY}
            )
            | ANY,
        },
        optional=EXTRA,
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("toolresult"),
            "call": IDS,
            "content": st.lists(
                st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}), max_size=2
            )
            | ANY,
        },
        optional={
            "name": TEXT | st.none(),
            "status": st.sampled_from(["success", "error"]),
            "x": ANY,
        },
    ),
    st.fixed_dictionaries(
        {"type": st.just("reasoning"), "content": st.lists(PIECE, max_size=2)},
        optional={"id": IDS, **EXTRA},
    ),
    st.fixed_dictionaries({"type": st.just("image")}, optional={"data": ANY}),
    ANY,
)
MESSAGE = st.one_of(
    st.fixed_dictionaries({"role": st.just("system"), "content": TEXT}, optional={"x": ANY}),
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant"]), "content": st.lists(PART, max_size=3)},
        optional={"id": IDS, "x": ANY},
    ),
    ANY,
)


@settings(max_examples=400, deadline=None)
@given(messages=st.lists(MESSAGE, max_size=6))
def test_decode_raises_only_decode_error_and_what_it_reads_round_trips(messages: Any) -> None:
    row = {"messages": messages}
    try:
        decoded = FMT.decode(row)
    except DecodeError:
        return
    assert FMT.encode(decoded, decoded.messages) == row


def test_system_message_is_kept_in_place() -> None:
    decoded = roundtrip({"messages": [rig_user(text("a")), {"role": "system", "content": "mid"}]})
    assert decoded.messages[1] == SystemMessage("mid")
