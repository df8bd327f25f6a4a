from __future__ import annotations

import pyarrow as pa
import pytest
from canonical import FMT, call, res, row

from transcript_clean.formats.base import Row
from transcript_clean.model import assistant, parse_messages, system, user
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import DEFAULT

GOOD = row(system("s"), user("hi"), assistant(call("c1")), user(res("c1")), assistant("done"))


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
