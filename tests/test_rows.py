from __future__ import annotations

import pytest
from canonical import FMT, call, res, row

from transcript_clean.formats import OpenAIFormat
from transcript_clean.formats.base import Row
from transcript_clean.model import (
    Text,
    ToolResult,
    assistant,
    system,
    user,
)
from transcript_clean.policy import DEFAULT, STRICT, Config, config_from_dict
from transcript_clean.rows import clean_row
from transcript_clean.transcript import transcript_errors

ERROR = ToolResult("c1", (Text("failed"),), name="f", status="error")
BLANK = ToolResult("r9", (Text(" "),), name="f")
"""An empty result of no call: R3 drops it, since no later turn can have read anything in it."""
GOOD = row(system("s"), user("hi"), assistant(call("c1")), user(res("c1")), assistant("done"))

# (transcript, codes found, outcome under the default config)
CASES: list[tuple[Row, list[str], str]] = [
    (GOOD, [], "unchanged"),
    (
        row(user("hi"), assistant(""), user("x"), assistant("y")),
        ["empty_assistant_turn"],
        "repaired",
    ),
    (
        row(user("hi"), assistant(call("c1", raw="nope")), user(res("c1")), assistant("y")),
        ["invalid_tool_arguments"],
        "rejected",  # its result is a real one: R2 never writes over it
    ),
    (
        row(user("hi"), assistant(call("c1", raw="nope")), user(ERROR), assistant("y")),
        ["invalid_tool_arguments"],
        "repaired",  # its result is an error already: R2 answers it
    ),
    (row(user("hi"), user(BLANK), assistant("y")), ["orphan_tool_result"], "repaired"),
    # a result of no call the next turn may quote (issue 27, item 4): dropping it would leave
    # that turn stating a result it never saw
    (row(user("hi"), user(res("r9")), assistant("y")), ["orphan_tool_result"], "rejected"),
    (row(user("hi"), assistant("a"), assistant("b")), ["consecutive_assistant"], "repaired"),
    (
        row(user("hi"), assistant(call("c1")), assistant("b")),
        ["consecutive_assistant", "unanswered_tool_call"],
        "rejected",
    ),
    (
        row(
            user("hi"), assistant("a"), user("q"), assistant(call("c1")), user("no"), assistant("z")
        ),
        ["unanswered_tool_call"],
        "repaired",
    ),
    (
        row(user("hi"), assistant(call("c1")), user("no"), assistant("z")),
        ["unanswered_tool_call"],
        "rejected",
    ),
    (row(user("hi"), assistant(call("c1"))), ["trailing_tool_call"], "unchanged"),
    (row(system("s"), user("hi")), ["no_assistant_turn"], "rejected"),
    (row(user("hi"), assistant("  ")), ["empty_assistant_turn", "no_assistant_turn"], "rejected"),
    ({"messages": [{"role": "robot", "content": "x"}]}, ["malformed_row"], "rejected"),
]


@pytest.mark.parametrize(("data", "codes", "outcome"), CASES)
def test_default_config(data: Row, codes: list[str], outcome: str) -> None:
    result = clean_row(data, FMT, DEFAULT)
    assert result.codes == codes
    assert result.status == outcome
    if outcome != "rejected":
        assert result.messages is not None
        allowed = {"unanswered_tool_call"} if "trailing_tool_call" in codes else set()
        assert {e.code for e in transcript_errors(result.messages)} <= allowed


@pytest.mark.parametrize(("data", "codes", "outcome"), CASES)
def test_strict_rejects_exactly_the_codes_found(data: Row, codes: list[str], outcome: str) -> None:
    result = clean_row(data, FMT, STRICT)
    assert result.status == ("unchanged" if not codes else "rejected")
    assert result.codes == codes
    assert set(result.actions.values()) <= {"rejected"}


def test_unchanged_rows_are_not_reencoded() -> None:
    result = clean_row(GOOD, FMT, DEFAULT)
    assert result.status == "unchanged" and result.row is None


def test_indexes_refer_to_the_decoded_transcript() -> None:
    # the empty turn at 1 is dropped; the orphan sits at 4 in the decoded transcript
    data = row(
        user("a"), assistant(""), user("b"), assistant("c"), user(BLANK, "t"), assistant("d")
    )
    result = clean_row(data, FMT, DEFAULT, trace=True)
    assert [(v.code, v.index) for v in result.violations] == [
        ("empty_assistant_turn", 1),
        ("orphan_tool_result", 4),
    ]
    assert "message 4" in result.violations[1].message
    assert [s.code for s in result.steps] == ["empty_assistant_turn", "orphan_tool_result"]


def test_a_repair_that_uncovers_a_code_counts_it() -> None:
    # dropping the orphan's message makes two assistant messages meet
    data = row(user("a"), assistant("b"), user(BLANK), assistant("c"))
    result = clean_row(data, FMT, DEFAULT)
    assert result.status == "repaired"
    assert result.actions == {"orphan_tool_result": "repaired", "consecutive_assistant": "repaired"}
    assert result.messages == [user("a"), assistant("b", "c")]


def test_keep_leaves_the_row_as_is() -> None:
    config = config_from_dict({"actions": {"invalid_tool_arguments": "keep"}})
    data = row(user("hi"), assistant(call("c1", raw="[1]")), user(res("c1")), assistant("y"))
    result = clean_row(data, FMT, config)
    assert (result.status, result.actions) == ("unchanged", {"invalid_tool_arguments": "kept"})


def test_error_result_mode_answers_the_interrupted_call() -> None:
    config = config_from_dict({"repair": {"interrupted_call": "error_result"}})
    data = row(user("hi"), assistant(call("c1")), user("no"), assistant("z"))
    result = clean_row(data, FMT, config)
    assert result.status == "repaired"
    assert result.messages is not None and transcript_errors(result.messages) == []


def test_trailing_repair_cuts_when_configured() -> None:
    config = Config(actions={**DEFAULT.actions, "trailing_tool_call": "repair"})
    data = row(user("hi"), assistant("a"), user("b"), assistant(call("c1")))
    result = clean_row(data, FMT, config)
    assert (result.status, result.actions) == ("repaired", {"trailing_tool_call": "repaired"})
    assert result.messages == [user("hi"), assistant("a"), user("b")]


def test_a_row_of_a_hundred_thousand_assistant_messages_is_merged() -> None:
    # Quadratic before issue 14 (190 s); scripts time it, this checks the result.
    n = 100_000
    data = {
        "messages": [
            {"role": "user", "content": "hi"},
            *({"role": "assistant", "content": f"part {i}"} for i in range(n)),
        ]
    }
    result = clean_row(data, OpenAIFormat())
    assert result.status == "repaired"
    assert result.codes == ["consecutive_assistant"]
    assert result.row is not None
    merged = result.row["messages"]
    assert len(merged) == 2
    assert merged[1]["content"] == "\n\n".join(f"part {i}" for i in range(n))


def test_a_row_nested_too_deep_to_write_is_a_malformed_row() -> None:
    # Issue 14, item 5: arguments that are not an object are quoted back to the model (R2) as
    # JSON text; nested deeper than Python's recursion limit, that was a RecursionError out of
    # clean_row.
    deep: list[object] = [1]
    for _ in range(5000):
        deep = [deep]
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep}}
    data = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ]
    }
    result = clean_row(data, OpenAIFormat())
    assert result.status == "rejected"
    assert result.codes == ["malformed_row"]
    assert result.reject_message == "messages: nested too deep to read (Python's recursion limit)"
    assert result.messages_in == 4


def test_a_format_that_cleans_its_own_rows_is_asked_first() -> None:
    # How a dataset type's rows (`shapes.ShapedFormat`) are cleaned part by part, without the
    # row cleaner knowing the dataset types.
    from transcript_clean.rows import RowResult, rejected_row

    class OwnCleaning(OpenAIFormat):
        def clean(self, row: Row, config: Config, *, trace: bool = False) -> RowResult | None:
            return rejected_row("malformed_row", "cleaned by the format", 0)

    result = clean_row({"messages": []}, OwnCleaning(), DEFAULT)
    assert result.reject_message == "cleaned by the format"
    assert clean_row({"messages": []}, OpenAIFormat(), DEFAULT).reject_message != (
        "cleaned by the format"
    )
