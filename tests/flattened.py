"""What the flatteners' tests share: a format's `Conversations` held to its decoder, row for row
(as `test_columnar.py` holds rig's)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from transcript_clean.columnar.conversations import ROLES, Conversations
from transcript_clean.columnar.walk import ConversationsWalk
from transcript_clean.formats.base import DecodeError, Format
from transcript_clean.model import (
    AssistantMessage,
    Message,
    SystemMessage,
    Text,
    ToolResult,
    UserMessage,
    message_texts,
)
from transcript_clean.rules import get_rule
from transcript_clean.rules.base import Walk
from transcript_clean.rules.empty_assistant_turn import drop_empty_turns

# Each walk attribute a rule's columnar check reads, by the rule whose `find` it stands for.
CHECKED = {
    "consecutive_assistant": "rows_consecutive",
    "orphan_tool_result": "rows_orphan",
    "unanswered_tool_call": "rows_unanswered",
    "trailing_tool_call": "rows_trailing",
    "duplicate_call_id": "rows_duplicate_id",
    "no_assistant_turn": "rows_no_assistant",
    "invalid_tool_arguments": "rows_invalid_arguments",
}


def truth(fmt: Format, row: dict[str, Any]) -> dict[str, Any] | None:
    """What the per-row path finds in a row: None when the decoder does not read it."""
    try:
        messages: list[Message] = list(fmt.decode(row).messages)
    except DecodeError:
        return None
    kept, dropped = drop_empty_turns(messages)
    walk = Walk(kept)
    found: dict[str, Any] = {}
    for code, attr in CHECKED.items():
        find = get_rule(code).find
        assert find is not None
        found[attr] = bool(list(find(walk)))
    found["rows_empty"] = bool(dropped)
    found["trailing_calls"] = 0 if walk.trailing is None else len(walk.trailing[1])
    found["messages"] = [
        "system"
        if isinstance(m, SystemMessage)
        else "assistant"
        if isinstance(m, AssistantMessage)
        else "user"
        for m in messages
    ]
    found["chars"] = [sum(len(t) for t in message_texts(m)) for m in messages]
    found["results"] = [
        (part.call, _one_text(part))
        for m in messages
        if isinstance(m, UserMessage)
        for part in m.content
        if isinstance(part, ToolResult)
    ]
    found["errors"] = [
        part.status == "error"
        for m in messages
        if isinstance(m, UserMessage)
        for part in m.content
        if isinstance(part, ToolResult)
    ]
    return found


def _one_text(result: ToolResult) -> str | None:
    """A result's text where the whole of what it says is one text part (R3 compares them)."""
    if len(result.content) == 1 and isinstance(result.content[0], Text):
        return result.content[0].text
    return None


def assert_flattened_as_decoded(
    fmt: Format, table: pa.Table, *, unread_superset: bool = False
) -> Conversations:
    """`fmt.flatten` of the table's conversation column reads each row the decoder reads, and
    marks unread each one it does not (with `unread_superset`, maybe some it does read too);
    on each row read, the messages' roles and characters are the decoder's and each walk
    attribute is what the rule's `find` finds."""
    side = {
        n: table.column(n).combine_chunks() for n in fmt.side_columns if n in table.schema.names
    }
    view = fmt.flatten(table.column(fmt.column).combine_chunks(), table.schema, side)
    assert view is not None
    view.check()
    walk = ConversationsWalk(view)
    result_row = view.message_row[view.result_message]
    result_ids = view.result_call.to_pylist()
    result_texts = None if view.result_text is None else view.result_text().to_pylist()
    result_errors = None if view.result_error is None else view.result_error.tolist()
    for r, row in enumerate(table.to_pylist()):
        found = truth(fmt, row)
        if found is None or not unread_superset:
            assert view.unread[r] == (found is None), (r, row)
        if found is None or view.unread[r]:
            continue
        mine = view.message_row == r
        assert [ROLES[k] for k in view.role[mine]] == found["messages"], row
        assert view.chars[mine].tolist() == found["chars"], row
        for attr in (*CHECKED.values(), "rows_empty"):
            assert getattr(walk, attr)[r] == found[attr], (attr, row)
        assert walk.trailing_calls[r] == found["trailing_calls"], row
        if result_texts is not None:  # what R3's rejects in Arrow name and compare
            mine_ = (result_row == r).tolist()
            ids = [i for i, m in zip(result_ids, mine_, strict=True) if m]
            texts = [t for t, m in zip(result_texts, mine_, strict=True) if m]
            assert list(zip(ids, texts, strict=True)) == found["results"], row
        if result_errors is not None:  # what tells R2 a real result in Arrow
            errors = [
                e for e, m in zip(result_errors, (result_row == r).tolist(), strict=True) if m
            ]
            assert errors == found["errors"], row
    return view
