"""R2 (`invalid_tool_arguments`) settled in Arrow for every flattened format: the rows the
per-row path rejects for it are rejected by the fast path, with its words (each such row where
the config rejects R2; where it repairs R2, those whose invalid call has a real result), and the
rows R2 repairs are left to the per-row path."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree
from synthetic import generate_rows

from transcript_clean.columnar.walk import ConversationsWalk
from transcript_clean.fastpath import ConversationsView, FastReject, arrow_view
from transcript_clean.fastpath.declared import raw_input_calls
from transcript_clean.formats.base import Format
from transcript_clean.formats.registry import get_format
from transcript_clean.model import (
    AssistantMessage,
    Message,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
)
from transcript_clean.pipeline import clean_batch, clean_row
from transcript_clean.pipeline.verdicts import batch_verdicts
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.rules.invalid_tool_arguments import (
    CODE,
    arrow_rejects,
    shown_arguments,
)
from transcript_clean.transcript import invalid_arguments_feedback

BAD = "city=Paris"
WORSE = '{"city": "Paris"'
FEEDBACK = invalid_arguments_feedback("get_weather", BAD)


def _call(call_id: str, raw: str) -> ToolCall:
    return ToolCall(call_id, "get_weather", None, raw)


def _result(call_id: str, text: str, status: str = "success") -> ToolResult:
    return ToolResult(call_id, (Text(text),), "get_weather", status)  # type: ignore[arg-type]


def _turns(calls: tuple[ToolCall, ...], results: tuple[ToolResult, ...]) -> list[Message]:
    return [
        UserMessage((Text("Weather in Paris?"),)),
        AssistantMessage((Text("Checking."), *calls)),
        UserMessage(results),
        AssistantMessage((Text("It is 18C and sunny."),)),
    ]


# Each row's transcript, and whether the default config (which repairs R2) rejects it: only a
# row whose invalid call has a real result. The strict config rejects every one with a call.
ROWS: list[tuple[str, list[Message], bool]] = [
    ("real result", _turns((_call("c1", BAD),), (_result("c1", "18C, sunny"),)), True),
    ("R2's own feedback", _turns((_call("c1", BAD),), (_result("c1", FEEDBACK),)), False),
    (
        "feedback, then a real result",
        _turns(
            (_call("c1", BAD), _call("c2", WORSE)),
            (_result("c1", FEEDBACK), _result("c2", "18C, sunny")),
        ),
        True,
    ),
    ("blank result", _turns((_call("c1", '"Paris"'),), (_result("c1", " "),)), True),
    (
        "no invalid call",
        [UserMessage((Text("Hi"),)), AssistantMessage((Text("Hello! How can I help?"),))],
        False,
    ),
]
# Formats whose results carry an error flag: an invalid call answered by an error is repaired.
ERROR_ROW = ("error result", _turns((_call("c1", BAD),), (_result("c1", "bad", "error"),)), False)
WITH_ERRORS = {"anthropic", "rig", "bedrock"}

# Gemini's calls hold their arguments as a struct (`args`): an invalid one holds a number that
# is not finite, and the words that show it are not told from the struct (a JSON Lines row
# reads its line, where a struct's missing keys stay missing): such rows are the per-row path's.
FLATTENED = ("sharegpt", "llamafactory", "responses", "anthropic", "rig", "bedrock")


def _table(fmt: Format, transcripts: list[list[Message]]) -> pa.Table:
    """The transcripts as rows of `fmt`, written by its encoder over a row it generates."""
    base, _ = next(generate_rows(1, fmt.name, seed=1, rates={}))
    decoded = fmt.decode(base)
    rows = [fmt.encode(decoded, messages) for messages in transcripts]
    for row in rows:  # no declared tools: the calls' only question is R2's
        for column in fmt.declaring_columns:
            row.pop(column, None)
    if fmt.name == "anthropic":  # a message of one text is written as text: blocks throughout
        for row in rows:
            for message in row["messages"]:
                if isinstance(message["content"], str):
                    message["content"] = [{"type": "text", "text": message["content"]}]
    return pa.Table.from_pylist(rows)


def _cases(fmt: str) -> list[tuple[str, list[Message], bool]]:
    return [*ROWS, ERROR_ROW] if fmt in WITH_ERRORS else ROWS


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["repair", "reject"])
@pytest.mark.parametrize("name", FLATTENED)
def test_r2_rejects_are_settled_in_arrow_in_the_per_row_paths_words(
    name: str, config: Config
) -> None:
    fmt = get_format(name)
    cases = _cases(name)
    table = _table(fmt, [messages for _, messages, _ in cases])
    rows = table.to_pylist()
    verdicts = batch_verdicts(table, config, format=fmt)
    assert verdicts is not None and isinstance(verdicts.view, ConversationsView)
    rejected = [r for r in verdicts.rejects if r.code == CODE]
    fast = {
        int(row): words
        for r in rejected
        for row, words in zip(np.flatnonzero(r.rows), r.messages, strict=True)
    }
    strict = config is STRICT
    wanted = [k for k, (_, _, real) in enumerate(cases) if real or (strict and k != 4)]
    # Whether an invalid call's result is real is read from the results' texts and errors.
    conversations = verdicts.view.conversations
    assert conversations.result_text is not None and conversations.result_error is not None
    assert sorted(fast) == wanted, [cases[k][0] for k in sorted(fast)]
    for k, words in fast.items():
        result = clean_row(rows[k], fmt, config)
        assert result.status == "rejected" and result.actions[CODE] == "rejected"
        assert words == result.reject_message
    # The rows R2 repairs are the per-row path's: not settled here.
    repaired = [k for k in range(len(cases)) if k not in wanted and k != 4]
    assert not verdicts.handled[repaired].any()
    assert_fast_and_slow_agree(table, config, fmt)


def _r2_reject(table: pa.Table, config: Config, fmt: Format) -> FastReject:
    """The fast path's one R2 reject of `table`."""
    verdicts = batch_verdicts(table, config, format=fmt)
    assert verdicts is not None
    (reject,) = [r for r in verdicts.rejects if r.code == CODE]
    return reject


def test_the_words_name_the_first_invalid_call_and_the_real_result() -> None:
    fmt = get_format("responses")
    cases = _cases("responses")
    table = _table(fmt, [cases[2][1]])
    reject = _r2_reject(table, DEFAULT, fmt)
    # The first call's result is R2's feedback: the second, with a real result, rejects it.
    assert reject.messages == [
        "message 1: tool call 'c2' to 'get_weather' has arguments that are not a JSON object, "
        "but a real result in message 2: rewriting it would contradict the turns after it"
    ]
    assert reject.occurrences.tolist() == [2]
    reject = _r2_reject(table, STRICT, fmt)
    assert reject.messages == [
        "message 1: tool call 'c1' to 'get_weather' has arguments that are not a JSON object: "
        "'city=Paris'"
    ]


def test_generated_r2_rows_take_no_per_row_path() -> None:
    # The formats whose generated rows carry invalid arguments: every row whose only code is
    # R2 (a real result each: the generator answers every call) is settled in Arrow.
    for name in ("sharegpt", "llamafactory", "responses"):
        fmt = get_format(name)
        generated = list(generate_rows(400, name, seed=4, rates={CODE: 0.3}))
        table = pa.Table.from_pylist([row for row, _ in generated])
        verdicts = batch_verdicts(table, DEFAULT, format=fmt)
        assert verdicts is not None
        planted = np.array([CODE in codes for _, codes in generated])
        assert planted.sum() > 80
        assert verdicts.handled[planted].all(), name
        assert_fast_and_slow_agree(table, DEFAULT, fmt)


def test_gemini_r2_rows_are_the_per_row_paths() -> None:
    fmt = get_format("gemini")
    nan = ToolCall("c1", "get_weather", {"temp": math.nan})
    table = _table(fmt, [_turns((nan,), (_result("c1", "18C, sunny"),))])
    assert clean_row(table.to_pylist()[0], fmt, STRICT).actions == {CODE: "rejected"}
    for config in (DEFAULT, STRICT):
        verdicts = batch_verdicts(table, config, format=fmt)
        assert verdicts is not None and not verdicts.handled.any()
        # (`assert_fast_and_slow_agree` compares rows, and a NaN is equal to no NaN.)
        fast = clean_batch(table, config, format=fmt, source="s")
        slow = clean_batch(table, config, format=fmt, source="s", fast=False)
        assert fast.stats == slow.stats
        for column in ("_reject_codes", "_reject_message"):
            assert (
                fast.rejects.column(column).to_pylist() == slow.rejects.column(column).to_pylist()
            )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (BAD, BAD),  # no JSON: the text the model wrote
        ('["Paris"]', '["Paris"]'),  # JSON written as `json.dumps` writes it: either reading
        ('["Paris",1]', None),  # a value would be shown as '["Paris", 1]': not told
        ("NaN", "NaN"),
        (None, None),
    ],
)
def test_shown_arguments_are_told_where_both_readings_agree(
    text: str | None, shown: str | None
) -> None:
    assert shown_arguments(pa.array([text], pa.string())) == [shown]


def test_a_struct_of_arguments_is_not_told() -> None:
    assert shown_arguments(pa.array([{"temp": math.nan}])) == [None]


def test_a_call_to_a_declared_raw_input_tool_is_never_rejected_for_r2() -> None:
    fmt = get_format("sharegpt")
    python = ToolCall("c1", "code_interpreter", None, "print(1)")
    messages = _turns((python,), (_result("c1", "1"),))
    table = _table(fmt, [messages, messages])
    tools = pa.array(['[{"type": "code_interpreter"}]', None])
    table = table.append_column("tools", tools)
    side = {n: table.column(n).combine_chunks() for n in fmt.side_columns}
    column = table.column(fmt.column).combine_chunks()
    view: Any = arrow_view(fmt, column, table.schema, side)
    assert isinstance(view, ConversationsView)
    view.tools = (tools,)
    raw, unsure = raw_input_calls(view)
    assert raw.tolist() == [True, False] and not unsure.any()
    both = np.ones(2, dtype=bool)
    walk = ConversationsWalk(view.conversations)
    hit, _, _ = arrow_rejects(view.conversations, walk, both, raw, repairing=False)
    assert hit.tolist() == [False, True]  # the row that declares no such tool
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(table, config, fmt)
