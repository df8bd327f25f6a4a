"""Tests for transcript_clean.transcript: SPEC sections 2 (blank parts), 3 (rules), 4 (results)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import PLANTS, Planted, planted_transcripts, valid_transcripts

from transcript_clean.errors import TranscriptCleanError
from transcript_clean.model import (
    AssistantPart,
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
    system,
    user,
)
from transcript_clean.transcript import (
    TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER,
    TranscriptError,
    assistant_text_from_choice,
    invalid_arguments_feedback,
    invalid_call_feedback,
    is_blank,
    is_empty_assistant_turn,
    not_executed,
    tool_result_message,
    tool_result_output,
    transcript_errors,
    validate_canonical,
)

PROPERTY = settings(max_examples=500, deadline=None)

# ---------------------------------------------------------------------------------------------
# SPEC section 3: the example table, in its own notation


def call(call_id: str, name: str = "lookup") -> ToolCall:
    return ToolCall(call_id, name, {"q": call_id})


def result(call_id: str) -> ToolResult:
    return ToolResult(call_id, (Text(f"result of {call_id}"),), name="lookup")


def transcript(notation: str) -> list[Message]:
    """Messages from the SPEC's notation: `S`, `U`, `A`, `A[c1,c2]` (calls), `U[r1]` (the result
    for c1)."""
    out: list[Message] = []
    for token in notation.split():
        match = re.fullmatch(r"([SUA])(?:\[(.*)\])?", token)
        assert match, token
        role, items = match[1], (match[2].split(",") if match[2] else [])
        if role == "S":
            out.append(system("be brief"))
        elif role == "A":
            out.append(assistant("thinking", *(call(c) for c in items)))
        else:
            # rN is the result for cN: the table's "orphan_tool_result r9" answers call id c9.
            out.append(user("ok", *(result("c" + r.removeprefix("r")) for r in items)))
    return out


SPEC_TABLE = [
    ("U A", []),
    ("U A A", [("consecutive_assistant", 2, None)]),
    ("U A S A", []),
    ("U A[c1] U[r1] A", []),
    ("U A[c1] S U[r1] A", []),
    ("U A[c1] S A", [("unanswered_tool_call", 1, "c1")]),
    ("U A[c1,c1] U[r1] A", []),
    ("U A[c1,c2] U[r1] A", [("unanswered_tool_call", 1, "c2")]),
    ("U A[c1] U U[r1]", [("unanswered_tool_call", 1, "c1"), ("orphan_tool_result", 3, "c1")]),
    ("U A[c1] U[r1,r1]", [("orphan_tool_result", 2, "c1")]),
    ("U U[r9] A", [("orphan_tool_result", 1, "c9")]),
    ("U A[c1]", [("unanswered_tool_call", 1, "c1")]),
]


def found(messages: list[Message]) -> list[tuple[str, int, str | None]]:
    return [(e.code, e.index, e.call_id) for e in transcript_errors(messages)]


@pytest.mark.parametrize(("notation", "expected"), SPEC_TABLE, ids=[row[0] for row in SPEC_TABLE])
def test_spec_table(notation: str, expected: list[tuple[str, int, str | None]]) -> None:
    messages = transcript(notation)
    assert found(messages) == expected
    if not expected:
        assert validate_canonical(messages) is None
        return
    with pytest.raises(TranscriptError) as caught:
        validate_canonical(messages)
    assert (caught.value.code, caught.value.index, caught.value.call_id) == expected[0]


@pytest.mark.parametrize(
    ("notation", "expected"),
    [
        # Consecutive first, then the first turn's calls, then their results one message late.
        (
            "U A[c1,c2] A U[r1,r2]",
            [
                ("consecutive_assistant", 2, None),
                ("unanswered_tool_call", 1, "c1"),
                ("unanswered_tool_call", 1, "c2"),
                ("orphan_tool_result", 3, "c1"),
                ("orphan_tool_result", 3, "c2"),
            ],
        ),
        # Orphans of a message come in part order, before the calls it leaves unanswered.
        (
            "U A[c1,c2] U[r9,r2,r8]",
            [
                ("orphan_tool_result", 2, "c9"),
                ("orphan_tool_result", 2, "c8"),
                ("unanswered_tool_call", 1, "c1"),
            ],
        ),
        # Three answers to one call are two orphans; a repeated id unanswered is reported once.
        ("U A[c1] U[r1,r1,r1]", [("orphan_tool_result", 2, "c1"), ("orphan_tool_result", 2, "c1")]),
        ("U A[c1,c1] S", [("unanswered_tool_call", 1, "c1")]),
        # The answer must be in the very next user message, however many systems come between.
        ("A[c1] S S U[r1] A[c2] S S", [("unanswered_tool_call", 4, "c2")]),
        ("", []),
    ],
)
def test_walk_order(notation: str, expected: list[tuple[str, int, str | None]]) -> None:
    assert found(transcript(notation)) == expected


@pytest.mark.parametrize(
    ("notation", "words"),
    [
        ("U A A", ["message 2", "assistant"]),
        ("U A[c1]", ["message 1", "'c1'"]),
        ("U U[r9]", ["message 1", "'c9'"]),
    ],
)
def test_transcript_error_message_is_readable(notation: str, words: list[str]) -> None:
    with pytest.raises(TranscriptError) as caught:
        validate_canonical(transcript(notation))
    error = caught.value
    assert isinstance(error, TranscriptCleanError)
    for word in words:
        assert word in str(error)


def test_a_transcript_error_is_worded_without_the_rules() -> None:
    # The seed's module is a leaf above the model: its errors' words are its own, so a user of
    # `validate_canonical` alone loads neither the rules nor pyarrow (which the rules load).
    code = (
        "import json, sys\n"
        "from transcript_clean.transcript import transcript_errors\n"
        "from transcript_clean.model import assistant, user, ToolCall, ToolResult\n"
        "calls = assistant(ToolCall('c1', 'f', {}))\n"
        "errors = transcript_errors([user('hi'), calls, calls, user(ToolResult('c9', ()))])\n"
        "words = [str(e) for e in errors]\n"
        "names = ('transcript_clean.', 'pyarrow')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(names))\n"
        "print(json.dumps([words, loaded]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    words, loaded = json.loads(out.stdout)
    assert words == [
        "message 2: an assistant message follows another assistant message",
        "message 1: tool call 'c1' has no result in the next user message",
        "message 3: tool result for 'c9' answers no pending call",
        "message 2: tool call 'c1' has no result in the next user message",
    ]
    assert loaded == [
        "transcript_clean.errors",
        "transcript_clean.model",
        "transcript_clean.transcript",
    ]


# ---------------------------------------------------------------------------------------------
# SPEC section 3: properties


@PROPERTY
@given(valid_transcripts())
def test_valid_transcripts_have_no_violation(messages: list[Message]) -> None:
    assert transcript_errors(messages) == []
    assert validate_canonical(messages) is None


@pytest.mark.parametrize("plant", PLANTS)
@PROPERTY
@given(data=st.data())
def test_one_planted_defect_yields_exactly_its_violations(plant: str, data: st.DataObject) -> None:
    planted: Planted = data.draw(planted_transcripts(plant))
    assert found(planted.messages) == planted.expected
    with pytest.raises(TranscriptError) as caught:
        validate_canonical(planted.messages)
    assert (caught.value.code, caught.value.index, caught.value.call_id) == planted.expected[0]


# ---------------------------------------------------------------------------------------------
# SPEC section 2: blank parts and empty assistant turns


@pytest.mark.parametrize(
    ("part", "blank"),
    [
        (Text(""), True),
        (Text(" \t\n "), True),
        (Text("\u00a0\u2003"), True),  # Unicode white space is white space too
        (Text("hi"), False),
        (Text(" . "), False),
        (Text("", additional_params={"citations": []}), False),
        (Text("  ", additional_params={"cache_control": {"type": "ephemeral"}}), False),
        (Reasoning(), True),
        (Reasoning((ReasoningText(""), ReasoningText(" ", "summary"))), True),
        (Reasoning((ReasoningText("because"),)), False),
        (Reasoning((ReasoningText("", "summary"), ReasoningText("so", "summary"))), False),
        (Reasoning(signature="sig"), False),
        (Reasoning((ReasoningText(" "),), signature="sig"), False),
        (Reasoning((Encrypted("opaque"),)), False),
        (Reasoning((ReasoningText(""), Encrypted(""))), False),
        (Reasoning(id="rs_1"), True),  # an id alone is not something a provider can use
        (ToolCall("c1", "search", {}), False),
        (ToolCall("", "", None, raw_arguments=""), False),
        (Media("image", {"url": "https://example.com/a.png"}), False),
        (Media("image"), False),
    ],
    ids=repr,
)
def test_is_blank(part: AssistantPart, blank: bool) -> None:
    assert is_blank(part) is blank
    assert is_empty_assistant_turn([part]) is blank


@pytest.mark.parametrize(
    ("content", "empty"),
    [
        ([], True),
        ((), True),
        ([Text(""), Text("  "), Reasoning()], True),
        ([Text(""), Text("ok")], False),
        ([Text(" "), ToolCall("c1", "search", {})], False),
        ([Reasoning(), Media("image")], False),
    ],
)
def test_is_empty_assistant_turn(content: list[AssistantPart], empty: bool) -> None:
    assert is_empty_assistant_turn(content) is empty
    assert is_empty_assistant_turn(iter(content)) is empty


# ---------------------------------------------------------------------------------------------
# SPEC section 4: the constructors

WEATHER = ToolCall("call_7", "get_weather", {"city": "Paris"}, raw_arguments='{"city": "Paris"}')


def test_not_executed_text_is_exact() -> None:
    assert TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER == (
        "Tool not executed because another tool call in the same assistant turn was invalid."
    )


@pytest.mark.parametrize(
    "text",
    [
        "the tool timed out",
        "",
        '{"temperature": 18, "unit": "C"}',
        '[{"type": "image", "url": "https://example.com/a.png"}]',
        '{"type": "text", "text": "nested"}',
        "  spaced\n",
    ],
)
def test_tool_result_message_is_an_error_with_the_text_verbatim(text: str) -> None:
    res = tool_result_message(WEATHER, text)
    assert res.call == "call_7"
    assert res.name == "get_weather"
    assert res.status == "error"
    assert res.content == (Text(text),)  # one text part, even when the text looks like JSON


@pytest.mark.parametrize("text", ["18 C, sunny", "", '{"temperature": 18}', "[1, 2]"])
def test_tool_result_output_of_a_string_is_a_success_kept_as_text(text: str) -> None:
    res = tool_result_output(WEATHER, text)
    assert (res.call, res.name, res.status) == ("call_7", "get_weather", "success")
    assert res.content == (Text(text),)


def test_tool_result_output_of_parts_is_a_success_with_those_parts() -> None:
    parts = [Text('{"a": 1}'), Media("image", {"url": "https://example.com/map.png"})]
    res = tool_result_output(WEATHER, parts)
    assert res.status == "success"
    assert res.content == tuple(parts)
    assert tool_result_output(WEATHER, []).content == ()


@pytest.mark.parametrize(
    "exc", [RuntimeError("service unavailable"), TimeoutError("took 30 s"), KeyboardInterrupt()]
)
def test_tool_result_output_of_an_exception_is_an_error(exc: BaseException) -> None:
    res = tool_result_output(WEATHER, exc)
    assert (res.call, res.status) == ("call_7", "error")
    assert res.content == (Text(str(exc)),)


def test_tool_result_output_rejects_parts_of_the_wrong_kind() -> None:
    with pytest.raises(TypeError, match="Text or Media"):
        tool_result_output(WEATHER, [ToolCall("x", "y", {})])  # type: ignore[list-item]


def test_not_executed() -> None:
    res = not_executed(WEATHER)
    assert res == tool_result_message(WEATHER, TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER)
    assert res.status == "error"
    assert res.content == (Text(TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER),)


@pytest.mark.parametrize("raw", ["", "not json", "[1, 2]", '"a string"', "42", "{'city': 'Paris'"])
def test_invalid_arguments_feedback_quotes_short_raw(raw: str) -> None:
    text = invalid_arguments_feedback("get_weather", raw)
    assert text == invalid_arguments_feedback("get_weather", raw)  # deterministic
    assert raw in text
    assert "get_weather" in text
    assert "JSON object" in text
    assert "not executed" in text
    assert "again" in text


def test_invalid_arguments_feedback_shortens_long_raw() -> None:
    raw = "print('hello')\n" * 2000  # raw code sent as arguments, 30,000 characters
    text = invalid_arguments_feedback("python", raw)
    assert text == invalid_arguments_feedback("python", raw)
    assert len(text) < 2000
    assert raw not in text
    assert raw[:200] in text
    assert "python" in text
    assert "JSON object" in text


def test_invalid_arguments_feedback_differs_by_tool_and_raw() -> None:
    assert invalid_arguments_feedback("a", "x") != invalid_arguments_feedback("b", "x")
    assert invalid_arguments_feedback("a", "x") != invalid_arguments_feedback("a", "y")


def test_invalid_call_feedback_answers_every_call_in_order() -> None:
    first, bad, last = call("c1", "search"), call("c2", "python"), call("c3", "get_weather")
    content: list[AssistantPart] = [Text("let me check"), first, Reasoning(), bad, last]
    expected = [not_executed(first), tool_result_message(bad, "bad args"), not_executed(last)]
    assert invalid_call_feedback(content, bad, "bad args") == expected
    assert invalid_call_feedback(content, "c2", "bad args") == expected
    # The results make the turn canonical again, which is what repair R2 relies on.
    validate_canonical([user("hi"), assistant(*content), user(*expected), assistant("done")])


def test_invalid_call_feedback_is_empty_without_tool_calls() -> None:
    assert invalid_call_feedback([Text("hello"), Reasoning()], "c1", "x") == []
    assert invalid_call_feedback([], "c1", "x") == []


def test_invalid_call_feedback_answers_a_repeated_id_once() -> None:
    content = [call("c1"), call("c2"), call("c1"), call("c2")]
    results = invalid_call_feedback(content, "c2", "bad")
    assert [(r.call, r.content) for r in results] == [
        ("c1", (Text(TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER),)),
        ("c2", (Text("bad"),)),
    ]


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (
            [Text("Hello, "), call("c1"), Reasoning((ReasoningText("hmm"),)), Text("world")],
            "Hello, world",
        ),
        ([Text("only")], "only"),
        ([call("c1"), Media("image")], ""),
        ([], ""),
    ],
)
def test_assistant_text_from_choice(content: list[AssistantPart], text: str) -> None:
    assert assistant_text_from_choice(content) == text


def test_system_message_keeps_pending_across_a_long_gap() -> None:
    # A guard on the walk's state: many systems between a call and its answer change nothing.
    messages: list[Message] = [user("hi"), assistant(call("c1"))]
    messages += [SystemMessage(f"note {i}") for i in range(20)]
    messages += [user(result("c1")), assistant("done")]
    assert transcript_errors(messages) == []


def test_the_documented_example_prints_what_it_shows(capsys: pytest.CaptureFixture[str]) -> None:
    section = (Path(__file__).resolve().parents[1] / "docs" / "transcript-api.md").read_text(
        encoding="utf-8"
    )
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shown = re.search(r"prints\n\n```\n(.*?)```", section, re.S)
    assert code and shown, "docs/transcript-api.md lost its example"
    exec(compile(code[1], "transcript-api.md", "exec"), {})
    assert capsys.readouterr().out == shown[1]
