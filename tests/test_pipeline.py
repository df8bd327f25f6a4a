from __future__ import annotations

import pyarrow as pa
import pytest
from canonical import FMT, call, res, row
from synthetic import generate_rows

from transcript_clean.errors import FormatError
from transcript_clean.formats import get_format
from transcript_clean.formats.base import Row
from transcript_clean.model import assistant, parse_messages, system, user
from transcript_clean.pipeline import batch_verdicts, clean_batch
from transcript_clean.policy import DEFAULT, STRICT, Config

OPENAI = get_format("openai")
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


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
@pytest.mark.parametrize("size", [1, 37, 600])
def test_verdicts_computed_ahead_give_the_same_result(config: Config, size: int) -> None:
    t = pa.Table.from_pylist([r for r, _ in generate_rows(size, format="openai", seed=size)])
    verdicts = batch_verdicts(t, config, format=OPENAI)
    assert verdicts is not None
    ahead = clean_batch(t, config, format=OPENAI, source="s", first_row=5, verdicts=verdicts)
    here = clean_batch(t, config, format=OPENAI, source="s", first_row=5)
    assert ahead.kept.equals(here.kept)
    assert ahead.rejects.equals(here.rejects)
    assert ahead.stats == here.stats
    assert ahead.kept.schema == t.schema


def test_verdicts_without_codes_leave_every_row_with_a_code_to_on_row() -> None:
    t = pa.Table.from_pylist([r for r, _ in generate_rows(300, format="openai", seed=3)])
    seen: dict[str, list[int]] = {"ahead": [], "here": []}
    for name, verdicts in [
        ("ahead", batch_verdicts(t, format=OPENAI, codes=False)),
        ("here", None),
    ]:
        result = clean_batch(
            t,
            format=OPENAI,
            verdicts=verdicts,
            on_row=lambda i, _row, result, name=name: seen[name].append(i),
        )
        assert result.stats.rows_in == 300
    assert seen["ahead"] == seen["here"]
    assert 0 < len(seen["here"]) < 300


def test_no_verdicts_for_json_text_or_formats_without_a_fast_path() -> None:
    import json

    as_text = pa.table({"messages": [json.dumps(GOOD["messages"])]})
    assert batch_verdicts(as_text, format=FMT) is None
    rig = pa.table({"messages": [[{"role": "user", "content": [{"text": "x"}]}]]})
    assert batch_verdicts(rig, format="rig") is None
    with pytest.raises(FormatError, match="no column 'conversations'"):
        batch_verdicts(pa.table({"messages": [[{"role": "user"}]]}), format="sharegpt")


def test_verdicts_for_another_batch_are_refused() -> None:
    rows = [r for r, _ in generate_rows(3, format="openai", seed=1)]
    verdicts = batch_verdicts(pa.Table.from_pylist(rows), format=OPENAI)
    with pytest.raises(ValueError, match="verdicts for 3 rows given for a batch of 2"):
        clean_batch(pa.Table.from_pylist(rows[:2]), format=OPENAI, verdicts=verdicts)


def test_kept_rows_come_in_one_chunk_of_the_input_schema() -> None:
    empty = [user("q"), assistant(""), user("q"), assistant("a")]  # repaired: R1
    rows = [row(*empty) if i % 3 == 0 else row(user("q"), assistant("a")) for i in range(7)]
    t = pa.concat_tables([table(rows[:3]), table(rows[3:])])
    for fast in (True, False):
        kept, _, stats = clean_batch(t, DEFAULT, format=FMT, fast=fast)
        assert kept.schema == t.schema
        assert [c.num_chunks for c in kept.columns] == [1]
        assert kept.num_rows == 7 and stats.rows_repaired == 3
