"""duplicate_call_id (issue 14, item 10): two calls of one turn with the same id."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree

from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.model import Message, Text, ToolCall, ToolResult, assistant, user
from transcript_clean.policy import DEFAULT, STRICT, config_from_dict
from transcript_clean.rows import clean_row
from transcript_clean.rules import DUPLICATE_CALL_ID, find_violations, get_rule
from transcript_clean.transcript import transcript_errors

OPENAI = get_format("openai")
KEEP = config_from_dict({"actions": {DUPLICATE_CALL_ID: "keep"}}, name="keep")


def call(id: str, name: str = "f") -> ToolCall:
    return ToolCall(id, name, {})


def result(id: str) -> ToolResult:
    return ToolResult(id, (Text("ok"),))


def test_the_walk_accepts_a_repeated_id_but_the_rule_names_both_calls() -> None:
    messages: list[Message] = [
        user("hi"),
        assistant(call("c1"), call("c2"), call("c1", "g"), call("c1", "h")),
        user(result("c1"), result("c2")),
        assistant("done"),
    ]
    assert transcript_errors(messages) == []  # SPEC section 3: a repeated id is one pending id
    found = [v for v in find_violations(messages) if v.code == DUPLICATE_CALL_ID]
    assert [(v.index, v.call_id, v.message) for v in found] == [
        (1, "c1", "message 1: tool calls 0 and 2 share the id 'c1'"),
        (1, "c1", "message 1: tool calls 0 and 3 share the id 'c1'"),
    ]


def test_the_same_id_in_two_turns_is_no_duplicate() -> None:
    messages: list[Message] = [
        user("hi"),
        assistant(call("c1")),
        user(result("c1")),
        assistant(call("c1")),
        user(result("c1")),
        assistant("done"),
    ]
    assert not [v for v in find_violations(messages) if v.code == DUPLICATE_CALL_ID]


def openai_row(*ids: str, answered: bool = True) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": f"f{k}", "arguments": "{}"}}
        for k, i in enumerate(ids)
    ]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": calls},
    ]
    if answered:  # one result per id
        messages += [
            {"role": "tool", "tool_call_id": i, "content": "ok"} for i in dict.fromkeys(ids)
        ]
        messages.append({"role": "assistant", "content": "done"})
    return {"messages": messages}


def test_two_calls_with_one_id_and_one_result_are_rejected_by_default() -> None:
    # The row: before, "no violations", and the row was kept.
    result = clean_row(openai_row("c1", "c1"), OPENAI, DEFAULT)
    assert result.status == "rejected"
    assert result.codes == [DUPLICATE_CALL_ID]
    assert result.reject_message == "message 1: tool calls 0 and 1 share the id 'c1'"
    assert clean_row(openai_row("c1", "c1"), OPENAI, STRICT).codes == [DUPLICATE_CALL_ID]


def test_keep_leaves_the_row_as_it_is() -> None:
    assert get_rule(DUPLICATE_CALL_ID).allowed == {"reject", "keep"}
    result = clean_row(openai_row("c1", "c1"), OPENAI, KEEP)
    assert result.status == "unchanged"
    assert result.actions == {DUPLICATE_CALL_ID: "kept"}


@pytest.mark.parametrize("config", [DEFAULT, STRICT, KEEP])
def test_the_fast_path_never_settles_a_turn_with_a_repeated_id(config: Any) -> None:
    rows = [
        openai_row("c1", "c2"),
        openai_row("c1", "c1"),
        openai_row("c1", "c1", answered=False),  # pending at the end: read by the view
        openai_row("c1", "c2", answered=False),
    ]
    table = pa.Table.from_pylist(rows)
    verdicts = fast_verdicts(OPENAI, table.column("messages"), keep_trailing=True)
    assert verdicts is not None
    assert verdicts.clean.tolist() == [True, False, False, False]
    assert verdicts.trailing.tolist() == [False, False, False, True]
    assert_fast_and_slow_agree(table, config, OPENAI)
