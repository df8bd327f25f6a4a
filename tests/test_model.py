"""Tests for transcript_clean.model: the canonical message model of SPEC section 1."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import json_messages, messages

from transcript_clean.errors import ModelError, TranscriptCleanError
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
    UserMessage,
    assistant,
    dump_messages,
    parse_messages,
    system,
    user,
)

PROPERTY = settings(max_examples=500, deadline=None)


@PROPERTY
@given(json_messages)
def test_dump_of_parse_is_the_canonical_json(objs: list[dict[str, Any]]) -> None:
    assert dump_messages(parse_messages(objs)) == objs


@PROPERTY
@given(st.lists(messages, max_size=5))
def test_parse_of_dump_is_the_model_value(values: list[Message]) -> None:
    assert parse_messages(dump_messages(values)) == values


# One row per shape of SPEC section 1, written out by hand.
EVERY_KIND = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is on this map?"},
            {"type": "image", "url": "https://example.com/map.png", "detail": "low"},
            {"type": "document", "data": "JVBERi0=", "media_type": "application/pdf"},
        ],
    },
    {
        "role": "assistant",
        "id": "msg_1",
        "content": [
            {
                "type": "reasoning",
                "id": "rs_1",
                "signature": "sig",
                "content": [
                    {"type": "text", "text": "Look it up."},
                    {"type": "summary", "text": "lookup"},
                    {"type": "encrypted", "data": "gAAAA"},
                ],
            },
            {"type": "text", "text": "", "additional_params": {"citations": []}},
            {
                "type": "tool_call",
                "id": "call_1",
                "name": "python",
                "arguments": None,
                "raw_arguments": "print(1)",
                "signature": None,
                "additional_params": None,
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "call": "call_1",
                "name": "python",
                "content": [{"type": "text", "text": "1"}, {"type": "image", "url": "x.png"}],
                "status": "error",
            }
        ],
    },
]


def test_parse_every_kind() -> None:
    assert parse_messages(EVERY_KIND) == [
        SystemMessage("Be brief."),
        UserMessage(
            (
                Text("What is on this map?"),
                Media("image", {"url": "https://example.com/map.png", "detail": "low"}),
                Media("document", {"data": "JVBERi0=", "media_type": "application/pdf"}),
            )
        ),
        AssistantMessage(
            (
                Reasoning(
                    (
                        ReasoningText("Look it up."),
                        ReasoningText("lookup", "summary"),
                        Encrypted("gAAAA"),
                    ),
                    id="rs_1",
                    signature="sig",
                ),
                Text("", additional_params={"citations": []}),
                ToolCall("call_1", "python", None, raw_arguments="print(1)"),
            ),
            id="msg_1",
        ),
        UserMessage(
            (
                ToolResult(
                    "call_1",
                    (Text("1"), Media("image", {"url": "x.png"})),
                    name="python",
                    status="error",
                ),
            )
        ),
    ]
    assert dump_messages(parse_messages(EVERY_KIND)) == EVERY_KIND


def _user(*parts: object) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


def _assistant(*parts: object, **extra: object) -> dict[str, Any]:
    return {"role": "assistant", "id": None, "content": list(parts), **extra}


SYS = {"role": "system", "content": "hi"}
TEXT = {"type": "text", "text": "hi"}
CALL = {"type": "tool_call", "id": "c1", "name": "search", "arguments": {}}
RESULT = {"type": "tool_result", "call": "c1", "content": []}


@pytest.mark.parametrize(
    ("objs", "message"),
    [
        ({"role": "user"}, "messages: expected a list, got an object"),
        ("[]", "messages: expected a list, got a string"),
        ([[SYS]], "messages[0]: expected an object, got a list"),
        ([SYS, None], "messages[1]: expected an object, got null"),
        ([{"content": "hi"}], 'messages[0]: missing "role"'),
        (
            [SYS, {"role": "tool", "content": []}],
            'messages[1].role: expected "system", "user" or "assistant", got "tool"',
        ),
        ([{"role": 3}], "messages[0].role: expected a string, got int"),
        ([{"role": "system"}], 'messages[0]: missing "content"'),
        (
            [{"role": "system", "content": [TEXT]}],
            "messages[0].content: expected a string, got a list",
        ),
        ([{"role": "user", "content": "hi"}], "messages[0].content: expected a list, got a string"),
        (
            [{"role": "assistant", "content": None}],
            "messages[0].content: expected a list, got null",
        ),
        (
            [SYS, _user(TEXT), _assistant({"type": "text"})],
            'messages[2].content[0]: missing "text"',
        ),
        ([_user(TEXT, {"text": "hi"})], 'messages[0].content[1]: missing "type"'),
        ([_user("hi")], "messages[0].content[0]: expected an object, got a string"),
        (
            [_user({"type": "text", "text": 5})],
            "messages[0].content[0].text: expected a string, got int",
        ),
        ([_user(CALL)], 'messages[0].content[0].type: unknown user part type "tool_call"'),
        (
            [_user({**RESULT, "call": None})],
            "messages[0].content[0].call: expected a string, got null",
        ),
        ([_user({"type": "tool_result", "content": []})], 'messages[0].content[0]: missing "call"'),
        (
            [_user({"type": "tool_result", "call": "c1"})],
            'messages[0].content[0]: missing "content"',
        ),
        (
            [_user({**RESULT, "status": "ok"})],
            'messages[0].content[0].status: expected "success" or "error", got \'ok\'',
        ),
        (
            [_user({**RESULT, "name": 3})],
            "messages[0].content[0].name: expected a string or null, got int",
        ),
        (
            [_user({**RESULT, "content": [{"type": "audio"}]})],
            'messages[0].content[0].content[0].type: expected "text" or "image", got "audio"',
        ),
        (
            [_user({**RESULT, "content": [{"type": "text"}]})],
            'messages[0].content[0].content[0]: missing "text"',
        ),
        (
            [_user(TEXT), _assistant(TEXT, id=7)],
            "messages[1].id: expected a string or null, got int",
        ),
        (
            [_assistant({**TEXT, "additional_params": []})],
            "messages[0].content[0].additional_params: expected an object or null, got a list",
        ),
        (
            [_assistant({"type": "audio"})],
            'messages[0].content[0].type: unknown assistant part type "audio"',
        ),
        (
            [_assistant({**CALL, "id": None})],
            "messages[0].content[0].id: expected a string, got null",
        ),
        (
            [_assistant(TEXT, {k: v for k, v in CALL.items() if k != "name"})],
            'messages[0].content[1]: missing "name"',
        ),
        (
            [_assistant({**CALL, "raw_arguments": {}})],
            "messages[0].content[0].raw_arguments: expected a string or null, got an object",
        ),
        (
            [_assistant({**CALL, "signature": False})],
            "messages[0].content[0].signature: expected a string or null, got a boolean",
        ),
        ([_assistant({"type": "reasoning"})], 'messages[0].content[0]: missing "content"'),
        (
            [_assistant({"type": "reasoning", "content": [{"type": "redacted"}]})],
            'messages[0].content[0].content[0].type: expected "text", "summary" or "encrypted", '
            'got "redacted"',
        ),
        (
            [_assistant({"type": "reasoning", "content": [{"type": "encrypted"}]})],
            'messages[0].content[0].content[0]: missing "data"',
        ),
    ],
)
def test_parse_errors_name_the_index_and_field(objs: Any, message: str) -> None:
    with pytest.raises(ModelError) as caught:
        parse_messages(objs)
    assert str(caught.value) == message
    assert isinstance(caught.value, TranscriptCleanError)
    assert isinstance(caught.value, ValueError)


def test_helpers_make_text_parts_from_strings() -> None:
    call = ToolCall("c1", "search", {"q": "x"})
    assert user("hi", Media("image")) == UserMessage((Text("hi"), Media("image")))
    assert assistant("ok", call, id="m1") == AssistantMessage((Text("ok"), call), id="m1")
    assert system("be brief") == SystemMessage("be brief")


def test_tool_calls_in_order() -> None:
    first, second = ToolCall("c1", "a", {}), ToolCall("c2", "b", {})
    message = assistant("text", first, Reasoning(), second)
    assert message.tool_calls == (first, second)
    assert assistant("no calls").tool_calls == ()


def test_tool_calls_follow_the_content_through_replace_and_pickle() -> None:
    first, second = ToolCall("c1", "a", {}), ToolCall("c2", "b", {})
    message = assistant("text", first)
    assert dataclasses.replace(message, content=(second,)).tool_calls == (second,)
    assert pickle.loads(pickle.dumps(message)).tool_calls == (first,)
    assert "tool_calls" not in repr(message)
    with pytest.raises(TypeError):
        AssistantMessage((first,), tool_calls=())  # type: ignore[call-arg]


def test_origin_is_ignored_by_equality_and_dump_and_kept_by_replace() -> None:
    source = {"role": "assistant", "content": "hi", "weight": 0}
    message = AssistantMessage((Text("hi", origin={"type": "text"}),), origin=source)
    plain = AssistantMessage((Text("hi"),))
    assert message == plain
    assert dump_messages([message]) == dump_messages([plain])
    assert "origin" not in repr(message)
    repaired = dataclasses.replace(message, content=(Text("hello"),))
    assert repaired.origin is source


@pytest.mark.parametrize(
    "value", [Text("a"), ToolCall("c1", "a", {}), SystemMessage("s"), user("u"), Reasoning()]
)
def test_values_are_frozen(value: object) -> None:
    field = dataclasses.fields(value)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)


def test_message_texts_are_the_texts_a_message_holds() -> None:
    from transcript_clean.model import message_texts

    assert list(message_texts(system("be brief"))) == ["be brief"]
    result = ToolResult("c1", (Text("42"), Media("image", {"url": "x"})))
    assert list(message_texts(user("hi", result))) == ["hi", "42"]
    thought = Reasoning((ReasoningText("hmm", kind="summary"),))
    call = ToolCall("c1", "f", {"x": 1})
    assert list(message_texts(assistant(thought, call, "done"))) == ["hmm", "done"]
