from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from transcript_clean.errors import ModelError
from transcript_clean.formats.base import Decoded, DecodeError, Format, Row
from transcript_clean.model import (
    Message,
    Text,
    ToolCall,
    ToolResult,
    assistant,
    dump_messages,
    parse_messages,
    system,
    user,
)
from transcript_clean.pipeline import clean_batch, clean_row
from transcript_clean.policy import DEFAULT, STRICT, Config, config_from_dict
from transcript_clean.transcript import transcript_errors


class Canonical(Format):
    """SPEC section 1's JSON in a `messages` column: the pipeline tested apart from formats."""

    name: ClassVar[str] = "canonical"
    default_column: ClassVar[str] = "messages"

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        try:
            return Decoded(parse_messages(row[self.column]), dict(row))
        except ModelError as err:
            raise DecodeError("malformed_row", "messages", str(err)) from None

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        return {**decoded.row, self.column: dump_messages(messages)}


FMT = Canonical()


def row(*messages: Message, **extra: Any) -> Row:
    return {"messages": dump_messages(messages), **extra}


def call(id: str, args: object = None, raw: str | None = None) -> ToolCall:
    return ToolCall(id, "f", {} if args is None and raw is None else args, raw)


def res(id: str) -> ToolResult:
    return ToolResult(id, (Text("ok"),), name="f")


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
        "repaired",
    ),
    (row(user("hi"), user(res("r9")), assistant("y")), ["orphan_tool_result"], "repaired"),
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
        user("a"), assistant(""), user("b"), assistant("c"), user(res("r9"), "t"), assistant("d")
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
    data = row(user("a"), assistant("b"), user(res("r9")), assistant("c"))
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


def table(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist(rows)


@pytest.mark.parametrize("size", [1, 10, 64])
def test_clean_batch_splits_rows_in_order(size: int) -> None:
    rows = [
        {**row(user(f"q{i}"), assistant(f"a{i}") if i % 3 else assistant("")), "id": i}
        for i in range(size)
    ]
    kept, rejects, stats = clean_batch(
        table(rows), DEFAULT, format=FMT, source="s.parquet", first_row=100
    )
    assert kept.num_rows + rejects.num_rows == size == stats.rows_in
    stats.check()
    assert kept.schema == table(rows).schema
    assert kept.column("id").to_pylist() == [i for i in range(size) if i % 3]
    assert rejects.column("id").to_pylist() == [i for i in range(size) if not i % 3]
    assert rejects.column("_source_row").to_pylist() == [100 + i for i in range(size) if not i % 3]
    assert set(rejects.column("_source").to_pylist()) <= {"s.parquet"}
    if rejects.num_rows:
        assert rejects.column("_reject_codes")[0].as_py() == [
            "empty_assistant_turn",
            "no_assistant_turn",
        ]


def test_clean_batch_keeps_unchanged_rows_value_for_value_and_repairs_others() -> None:
    good = row(user("hi"), assistant(call("c1", {"q": 1})), user(res("c1")), assistant("done"))
    bad = row(user("hi"), user(res("r9")), assistant("y"))
    t = table([{**good, "id": 0}, {**bad, "id": 1}])
    kept, rejects, stats = clean_batch(t, DEFAULT, format=FMT)
    assert rejects.num_rows == 0
    assert kept.slice(0, 1).to_pylist() == t.slice(0, 1).to_pylist()
    repaired = parse_messages(kept.column("messages")[1].as_py())
    assert repaired == [user("hi"), assistant("y")]
    assert stats.rows_repaired == 1
    assert stats.records()[0]["code"] == "orphan_tool_result"


def test_json_text_columns_are_decoded_and_written_back_as_text() -> None:
    import json

    bad = row(user("hi"), user(res("r9")), assistant("y"))
    t = pa.table({"messages": [json.dumps(GOOD["messages"]), json.dumps(bad["messages"]), "{oops"]})
    kept, rejects, _ = clean_batch(t, DEFAULT, format=FMT)
    assert kept.column("messages")[0].as_py() == json.dumps(GOOD["messages"])
    assert parse_messages(json.loads(kept.column("messages")[1].as_py())) == [
        user("hi"),
        assistant("y"),
    ]
    assert rejects.column("_reject_codes").to_pylist() == [["malformed_row"]]
    assert "not valid JSON" in rejects.column("_reject_message")[0].as_py()
