from __future__ import annotations

import pytest

from transcript_clean.model import (
    AssistantMessage,
    Message,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
    assistant,
    system,
    user,
)
from transcript_clean.rules import Unrepairable
from transcript_clean.rules.base import trailing_calls
from transcript_clean.rules.consecutive_assistant import merge_consecutive_assistant
from transcript_clean.rules.empty_assistant_turn import drop_empty_turns
from transcript_clean.rules.invalid_tool_arguments import answer_invalid_calls
from transcript_clean.rules.orphan_tool_result import drop_orphan_results
from transcript_clean.rules.unanswered_tool_call import (
    INTERRUPTED_TEXT,
    answer_unanswered_calls,
    cut_before_unanswered,
)
from transcript_clean.transcript import (
    TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER,
    invalid_arguments_feedback,
    transcript_errors,
)


def call(id: str, args: object = None, raw: str | None = None) -> ToolCall:
    return ToolCall(id, f"tool_{id}", {} if args is None and raw is None else args, raw)


def result(id: str, text: str = "ok", status: str = "success") -> ToolResult:
    return ToolResult(id, (Text(text),), name=f"tool_{id}", status=status)  # type: ignore[arg-type]


def test_drop_empty_turns_returns_the_dropped_indexes() -> None:
    messages: list[Message] = [user("hi"), assistant(" \n"), user("again"), assistant("yes")]
    kept, dropped = drop_empty_turns(messages)
    assert dropped == [1]
    assert kept == [messages[0], messages[2], messages[3]]


def test_invalid_call_gets_feedback_and_peers_not_executed() -> None:
    bad = call("c2", None, "{not json")
    messages: list[Message] = [
        user("go"),
        assistant(call("c1"), bad, call("c3")),
        user(result("c1"), result("c2", "boom", "error"), result("c3"), "and text"),
        assistant("done"),
    ]
    out = answer_invalid_calls(messages)
    answer = out[2]
    assert isinstance(answer, UserMessage)
    texts = [p.content[0].text for p in answer.content if isinstance(p, ToolResult)]  # type: ignore[union-attr]
    assert texts == [
        TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER,
        invalid_arguments_feedback("tool_c2", "{not json"),
        TOOL_NOT_EXECUTED_DUE_TO_INVALID_PEER,
    ]
    assert all(p.status == "error" for p in answer.content if isinstance(p, ToolResult))
    assert answer.content[-1] == Text("and text")
    assert transcript_errors(out) == []
    assert messages[2] != answer  # the input is untouched


def test_invalid_call_without_answer_gets_a_new_user_message() -> None:
    messages: list[Message] = [
        user("go"),
        assistant(call("c1", [1, 2])),
        system("s"),
        assistant("x"),
    ]
    out = answer_invalid_calls(messages)
    assert isinstance(out[2], UserMessage)
    assert [type(m) for m in out] == [
        UserMessage,
        AssistantMessage,
        UserMessage,
        SystemMessage,
        AssistantMessage,
    ]
    assert transcript_errors(out) == []


def test_invalid_call_answer_window_skips_system_messages() -> None:
    messages: list[Message] = [
        user("go"),
        assistant(call("c1", "str")),
        system("s"),
        user(result("c1", "failed", "error")),
    ]
    out = answer_invalid_calls(messages)
    assert len(out) == 4
    assert isinstance(out[3], UserMessage)
    assert out[3].content[0].status == "error"  # type: ignore[union-attr]


def test_invalid_call_with_a_real_result_is_not_rewritten() -> None:
    # The harness ran it anyway, and the turn after it reads its output (functionary's
    # `python` calls): rewriting the result would contradict that turn.
    messages: list[Message] = [
        user("go"),
        assistant(call("c1", None, "l.remove(3.6)"), call("c2")),
        user(result("c1", "ValueError: x not in list"), result("c2")),
        assistant("It failed: 3.6 is not in the list."),
    ]
    with pytest.raises(Unrepairable) as err:
        answer_invalid_calls(messages)
    assert err.value.code == "invalid_tool_arguments"
    assert "'c1' to 'tool_c1'" in str(err.value) and "real result in message 2" in str(err.value)


def test_invalid_call_answered_by_its_own_feedback_is_repaired_again() -> None:
    # A cleaned row written in a format without an error flag reads R2's feedback back as a
    # success: it is no real result, so cleaning the output again repairs as before.
    feedback = invalid_arguments_feedback("tool_c1", "{bad")
    messages: list[Message] = [
        user("go"),
        assistant(call("c1", None, "{bad"), call("c2")),
        user(result("c1", feedback), result("c2", "ran")),
        assistant("retrying"),
    ]
    out = answer_invalid_calls(messages)
    answer = out[2]
    assert isinstance(answer, UserMessage)
    assert [p.status for p in answer.content if isinstance(p, ToolResult)] == ["error", "error"]


def test_raw_input_tools_calls_are_never_invalid() -> None:
    messages: list[Message] = [
        user("go"),
        assistant(call("c1", None, "print(1)")),
        user(result("c1", "1")),
        assistant("It printed 1."),
    ]
    assert answer_invalid_calls(messages, frozenset({"tool_c1"})) == messages


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        # never called
        ([user("a"), user(result("r9")), assistant("b")], [user("a"), assistant("b")]),
        # answered twice: the second goes
        (
            [user("a"), assistant(call("c1")), user(result("c1"), result("c1", "again"))],
            [user("a"), assistant(call("c1")), user(result("c1"))],
        ),
        # answered after its window closed; the message keeps its text
        (
            [user("a"), assistant(call("c1")), user("b"), user(result("c1"), "t")],
            [user("a"), assistant(call("c1")), user("b"), user("t")],
        ),
    ],
)
def test_drop_orphan_results(messages: list[Message], expected: list[Message]) -> None:
    out = drop_orphan_results(messages)
    assert out == expected
    assert not any(e.code == "orphan_tool_result" for e in transcript_errors(out))


def test_merge_consecutive_assistant() -> None:
    same = [user("a"), assistant("x"), assistant("x")]
    assert merge_consecutive_assistant(same) == [user("a"), assistant("x")]
    merged = merge_consecutive_assistant([user("a"), assistant("x"), assistant("y", call("c1"))])
    assert merged == [user("a"), assistant("x", "y", call("c1"))]
    chain = merge_consecutive_assistant([user("a"), assistant("x"), assistant("y"), assistant("z")])
    assert chain == [user("a"), assistant("x", "y", "z")]
    with pytest.raises(Unrepairable) as err:
        merge_consecutive_assistant([user("a"), assistant(call("c1")), assistant("y")])
    assert err.value.code == "consecutive_assistant"


def test_merge_keeps_the_merged_run_for_the_next_comparison() -> None:
    # A third message equal to the first two merged is dropped; one equal to the first alone
    # is not (it is compared with what the run has become).
    merged = merge_consecutive_assistant([user("a"), assistant("x"), assistant("y")])
    assert merge_consecutive_assistant([*merged, assistant("x", "y")]) == merged
    three = [user("a"), assistant("x"), assistant("y"), assistant("x"), user("b"), assistant("z")]
    assert merge_consecutive_assistant(three) == [
        user("a"),
        assistant("x", "y", "x"),
        user("b"),
        assistant("z"),
    ]


def test_merge_of_a_hundred_thousand_messages() -> None:
    # R4 used to join tuples message by message: 190 s for this row (issue 14). Linear now;
    # scripts time it, this checks the result.
    n = 100_000
    messages: list[Message] = [user("a"), *(assistant(f"part {i}") for i in range(n))]
    out = merge_consecutive_assistant(messages)
    assert len(out) == 2
    merged = out[1]
    assert isinstance(merged, AssistantMessage)
    assert [p.text for p in merged.content if isinstance(p, Text)] == [
        f"part {i}" for i in range(n)
    ]


def test_identical_assistant_messages_with_calls_collapse() -> None:
    messages: list[Message] = [
        user("a"),
        assistant(call("c1")),
        assistant(call("c1")),
        user(result("c1")),
    ]
    out = merge_consecutive_assistant(messages)
    assert out == [user("a"), assistant(call("c1")), user(result("c1"))]
    assert transcript_errors(out) == []


def test_trailing_calls() -> None:
    assert trailing_calls([user("a"), assistant(call("c1"), call("c1"))]) == (1, ("c1",))
    assert trailing_calls([user("a"), assistant(call("c1")), system("s")]) == (1, ("c1",))
    assert trailing_calls([user("a"), assistant(call("c1")), user("b")]) is None
    assert trailing_calls([user("a"), assistant("x")]) is None


def test_cut_before_unanswered() -> None:
    messages: list[Message] = [
        user("a"),
        assistant("x"),
        user("b"),
        assistant(call("c1")),
        user("c"),
        assistant("y"),
    ]
    assert cut_before_unanswered(messages) == messages[:3]
    trailing: list[Message] = [user("a"), assistant("x"), user("b"), assistant(call("c1"))]
    assert cut_before_unanswered(trailing) == trailing
    assert cut_before_unanswered(trailing, include_trailing=True) == trailing[:3]
    with pytest.raises(Unrepairable) as err:
        cut_before_unanswered([user("a"), assistant(call("c1")), user("b"), assistant("y")])
    assert err.value.code == "unanswered_tool_call"


def test_answer_unanswered_calls_with_error_results() -> None:
    messages: list[Message] = [
        user("a"),
        assistant(call("c1"), call("c2")),
        user(result("c1")),
        assistant("y"),
    ]
    out = answer_unanswered_calls(messages)
    answer = out[2]
    assert isinstance(answer, UserMessage)
    added = answer.content[-1]
    assert isinstance(added, ToolResult)
    assert (added.call, added.status, added.content) == ("c2", "error", (Text(INTERRUPTED_TEXT),))
    assert transcript_errors(out) == []
    # no user message to hold the answer: one is made right after the turn
    out = answer_unanswered_calls([user("a"), assistant(call("c1")), assistant("y")])
    assert isinstance(out[2], UserMessage)
    assert [e.code for e in transcript_errors(out)] == []
