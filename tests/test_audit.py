"""The audit run: the stats `clean` reports, the gates, the exit statuses and --stats-out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from audit_rows import CLEAN, ROWS, SHARES, TYPED, run, write_jsonl, write_summary

from transcript_clean.audit import STATS_FILES, audit
from transcript_clean.errors import OutputError
from transcript_clean.run import clean


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "train.jsonl", ROWS)


# ---------------------------------------------------------------------------------------------
# the same stats as clean


@pytest.mark.parametrize("rows", [ROWS, TYPED], ids=["json-text", "typed"])
@pytest.mark.parametrize("config", ["default", "strict"])
@pytest.mark.parametrize("limit", [None, 7])
def test_audit_reports_the_stats_clean_reports(
    tmp_path: Path, rows: list[list[dict[str, Any]]], config: str, limit: int | None
) -> None:
    data = write_jsonl(tmp_path / "train.jsonl", rows)
    cleaned = clean(str(data), tmp_path / "out", config=config, limit=limit)
    audited = audit(str(data), config=config, limit=limit, stats_out=tmp_path / "stats")

    assert audited.stats.records() == cleaned.stats.records()
    assert audited.stats.counts() == cleaned.stats.counts()
    for name in ("stats.csv", "stats.parquet"):
        assert (tmp_path / "stats" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()
    ours = json.loads((tmp_path / "stats" / "summary.json").read_text(encoding="utf-8"))
    theirs = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert set(theirs) <= set(ours)
    assert ours["stats"] == theirs["stats"]


@pytest.mark.parametrize(
    "name", ["sharegpt/glaive_toolcall_en_demo.json", "openai/toy_chat_fine_tuning.jsonl"]
)
def test_audit_matches_clean_on_real_data(shared_data: Path, tmp_path: Path, name: str) -> None:
    source = str(shared_data / name)
    cleaned = clean(source, tmp_path / "out", config="strict")
    audited = audit(source, config="strict")
    assert audited.stats.records() == cleaned.stats.records()
    assert audited.stats.counts() == cleaned.stats.counts()


def test_audit_measures_error_rate_and_shares(data: Path) -> None:
    result = audit(str(data))
    assert result.stats.rows_in == 10
    assert result.error_rate == pytest.approx(0.5)
    assert result.shares == pytest.approx(SHARES)
    assert result.summary["code_shares"] == result.shares
    assert result.gates == [] and result.passed


# ---------------------------------------------------------------------------------------------
# gates and exit statuses


def test_exit_0_within_every_gate(data: Path, tmp_path: Path) -> None:
    base = write_summary(tmp_path / "summary.json", 10, [("consecutive_assistant", "repaired", 2)])
    result = run(
        data,
        "--max-error-rate", "50%",
        "--max", "consecutive_assistant=0.2",
        "--max", "orphan_tool_result=0.5",
        "--baseline", base,
        "--max-drift", "0.1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "ok    gate max-error-rate: 50.00% <= 50.00% (5 of 10 rows)" in result.stdout
    assert "ok    gate max consecutive_assistant: 20.00% <= 20.00%" in result.stdout
    assert "ok    gate max-drift: 10.00 pp <= 10.00 pp" in result.stdout
    assert "FAIL" not in result.stdout


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["--max-error-rate", "0.1"], "gate max-error-rate: 50.00% > 10.00% (5 of 10 rows)"),
        (["--max", "consecutive_assistant=5%"], "gate max consecutive_assistant: 20.00% > 5.00%"),
        (
            ["--max-drift", "0.05"],
            "gate max-drift: 20.00 pp > 5.00 pp (consecutive_assistant: 0.00% -> 20.00%)",
        ),
    ],
)
def test_exit_1_names_the_gate_exceeded(
    data: Path, tmp_path: Path, options: list[str], line: str
) -> None:
    base = write_summary(tmp_path / "summary.json", 10, [])
    result = run(data, "--baseline", base, *options)
    assert result.exit_code == 1, result.output
    assert f"FAIL  {line}" in result.stdout
    assert "audit failed: 1 gate(s) exceeded" in result.stderr


def test_every_failed_gate_is_listed_and_quiet_prints_only_them(data: Path) -> None:
    result = run(data, "-q", "--max-error-rate", "0.4", "--max", "orphan_tool_result=0", "--max",
                 "no_assistant_turn=0.5")  # fmt: skip
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "gate max-error-rate: 50.00% > 40.00% (5 of 10 rows)",
        "gate max orphan_tool_result: 10.00% > 0.00%",
    ]


def test_a_code_with_no_rows_passes_its_gate(data: Path) -> None:
    result = run(data, "--max", "unanswered_tool_call=0")
    assert result.exit_code == 0
    assert "ok    gate max unanswered_tool_call: 0.00% <= 0.00%" in result.stdout


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--max", "bogus_code=0.1"], "unknown code 'bogus_code'; the codes are malformed_row"),
        (["--max", "orphan_tool_result"], "is not CODE=R"),
        (["--max-error-rate", "1.5"], "'1.5' is not between 0 and 1"),
        (["--max-error-rate", "lots"], "'lots' is not a fraction (0.05) or a percentage (5%)"),
        (["--max-drift", "0.1"], "--max-drift needs --baseline"),
        (["--baseline", "nowhere/summary.json"], "baseline nowhere/summary.json: no such file"),
        (["--report", "report.pdf"], "report report.pdf: the name must end in .md or .html"),
        (["--config", "nope"], "no config named 'nope'"),
        (["--format", "xml"], "Invalid value for '--format'"),
    ],
)
def test_exit_2_for_usage_errors(data: Path, options: list[str], message: str) -> None:
    result = run(data, *options)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read it as JSON"),
        ('{"rows_in": 3}', "not a summary.json (it has no 'stats' list)"),
        ('{"rows_in": 3, "stats": [{"rows": 1}]}', "stats row 0 has no usable code"),
    ],
)
def test_exit_2_for_an_unreadable_baseline(
    data: Path, tmp_path: Path, content: str, message: str
) -> None:
    base = tmp_path / "summary.json"
    base.write_text(content, encoding="utf-8")
    result = run(data, "--baseline", base)
    assert result.exit_code == 2
    assert f"baseline {base}: {message}" in result.stderr


@pytest.mark.parametrize("content", [None, "{not json", ""])
def test_exit_2_for_unreadable_input(tmp_path: Path, content: str | None) -> None:
    source = tmp_path / "train.jsonl"
    if content is not None:
        source.write_text(content, encoding="utf-8")
    result = run(source)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: ")
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------------------------
# --stats-out


def test_stats_out_refuses_to_replace_without_overwrite(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "stats"
    assert run(data, "--stats-out", out).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(STATS_FILES)
    assert pq.read_table(out / "stats.parquet").num_rows == len(SHARES)

    again = run(data, "--stats-out", out)
    assert again.exit_code == 2
    assert "already holds stats.parquet, stats.csv, summary.json" in again.stderr
    assert run(data, "--stats-out", out, "--overwrite").exit_code == 0


def test_stats_out_may_not_be_inside_the_source(tmp_path: Path) -> None:
    folder = tmp_path / "raw"
    folder.mkdir()
    clean(str(write_jsonl(tmp_path / "x.jsonl", [CLEAN])), tmp_path / "out")
    parquet = folder / "part.parquet"
    (tmp_path / "out" / "data" / "part-00000.parquet").rename(parquet)
    with pytest.raises(OutputError, match="is inside the source"):
        audit(str(folder), stats_out=folder / "stats")


# ---------------------------------------------------------------------------------------------
# on the engine: the same audit for any workers and blocks


@pytest.fixture
def generated(tmp_path: Path) -> Path:
    """Two OpenAI Parquet files, 700 + 500 rows, with every kind of defect planted."""
    from synthetic import CODES, generate_rows

    folder = tmp_path / "raw"
    folder.mkdir()
    rates = {code: 0.03 for code in CODES}
    rows = [row for row, _ in generate_rows(1200, format="openai", seed=11, rates=rates)]
    table = pa.Table.from_pylist(rows)
    pq.write_table(table.slice(0, 700), folder / "a.parquet", row_group_size=64)
    pq.write_table(table.slice(700), folder / "b.parquet", row_group_size=64)
    return folder


def test_workers_give_the_same_stats_samples_and_gates(generated: Path) -> None:
    gates: dict[str, Any] = {"max_error_rate": 0.05, "max_share": {"orphan_tool_result": 0.01}}
    one = audit(generated, samples=2, batch_size=50, **gates)
    reported: list[int] = []
    two = audit(
        generated,
        samples=2,
        batch_size=50,
        workers=2,
        rows_per_block=300,
        progress=reported.append,
        **gates,
    )
    assert two.stats.records() == one.stats.records()
    assert two.stats.counts() == one.stats.counts()
    assert two.samples == one.samples
    assert sum(map(len, one.samples.values())) > 10
    assert two.gates == one.gates and not one.passed
    assert sum(reported) == 1200
    # Blocks done here report batch by batch (50 rows); one from the worker process, whole.
    assert 50 in reported and any(n in (200, 300) for n in reported)


def test_cli_audit_with_workers_prints_what_one_process_prints(
    generated: Path, tmp_path: Path
) -> None:
    one = run(generated, "--max-error-rate", "0.05", "--json", "--samples", "1")
    two = run(generated, "--max-error-rate", "0.05", "--json", "--samples", "1", "--workers", "2")
    assert one.exit_code == two.exit_code == 1, two.output
    timing = ("seconds", "rows_per_second", "audited_at")
    first, second = (
        {k: v for k, v in json.loads(r.stdout).items() if k not in timing} for r in (one, two)
    )
    assert second == first
    assert first["rows_in"] == 1200 and first["samples"]


def test_json_lines_mixing_rows_with_and_without_tools_are_audited(tmp_path: Path) -> None:
    """Issue 27, finding 16: a batch of the rows without tools holds their tool schemas (typed
    `pa.json_()`) null in every row; the per-row path once crashed on such a batch."""
    from click.testing import CliRunner
    from test_cli import CHAT, WEATHER

    from transcript_clean.cli import main

    twice = {"messages": [*CHAT, {"role": "assistant", "content": "again"}]}
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(twice) + "\n" + json.dumps(WEATHER) + "\n")
    cleaned = clean(str(source), tmp_path / "out")
    for fmt in ("auto", "openai"):
        result = CliRunner().invoke(main, ["audit", str(source), "--format", fmt])
        assert result.exit_code == 0, result.output
        assert "consecutive_assistant" in result.output
        assert audit(str(source), format=fmt).stats.records() == cleaned.stats.records()


def test_a_gate_counts_a_code_only_where_it_decided_or_was_handled(tmp_path: Path) -> None:
    # Issue 27, item 5: row 1 is rejected for unknown_tool; its trailing call (action keep) is
    # merely present and must not trip a gate on trailing_tool_call.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    call = {"id": "c1", "type": "function", "function": {"name": "launch", "arguments": "{}"}}
    rows = [
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
            ],
            "tools": tools,
        },
    ]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = run(data, "--max", "trailing_tool_call=0", "--max", "unknown_tool=0.4")
    assert result.exit_code == 1, result.output
    assert "ok    gate max trailing_tool_call: 0.00% <= 0.00%" in result.stdout
    assert "FAIL  gate max unknown_tool: 50.00% > 40.00%" in result.stdout


def test_stats_out_inside_the_source_by_dotdot_or_a_link_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "raw"
    folder.mkdir()
    clean(str(write_jsonl(tmp_path / "x.jsonl", ROWS)), tmp_path / "out")
    (tmp_path / "out" / "data" / "part-00000.parquet").rename(folder / "part.parquet")
    (tmp_path / "other").mkdir()
    (tmp_path / "link").symlink_to(folder)
    for stats_out in (tmp_path / "other" / ".." / "raw" / "st", tmp_path / "link" / "st"):
        result = run(folder, "--stats-out", stats_out)
        assert result.exit_code == 2, result.output
        assert "is inside the source" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["part.parquet"]


def test_report_never_replaces_the_source_nor_a_file_without_overwrite(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "data.md", ROWS)  # JSON Lines, whatever its name says
    before = source.read_bytes()
    for extra, said in (([], "exists: pass --overwrite"), (["--overwrite"], "is the source")):
        result = run(source, "--report", source, *extra)
        assert result.exit_code == 2, result.output
        assert f"report {source} {said}" in result.stderr
        assert source.read_bytes() == before
    report = tmp_path / "audit.md"
    report.write_text("my notes\n")
    refused = run(source, "--report", report)
    assert refused.exit_code == 2
    assert f"report {report} exists: pass --overwrite to replace it" in refused.stderr
    assert report.read_text() == "my notes\n"
    assert run(source, "--report", report, "--overwrite").exit_code == 0
    assert report.read_text().startswith("#")


def test_stats_out_takes_the_lock_a_clean_of_that_folder_takes(data: Path, tmp_path: Path) -> None:
    from transcript_clean.output import output_lock, partial_folder

    out = tmp_path / "out"
    with output_lock(partial_folder(out)):  # a clean run writing `out`
        held = run(data, "--stats-out", out)
    assert held.exit_code == 2
    assert f"another run is writing OUTPUT {out}" in held.stderr
    assert not out.exists()

    refused: list[str] = []

    def clean_meanwhile(*_: Any) -> None:  # a clean started while the audit runs
        with pytest.raises(OutputError, match="another run is writing") as err:
            clean(data, out)
        refused.append(str(err.value))

    audit(data, stats_out=out, on_start=clean_meanwhile)
    assert refused
    assert sorted(p.name for p in out.iterdir()) == sorted(STATS_FILES)
    assert not partial_folder(out).exists()


def test_a_kill_while_overwriting_stats_out_leaves_no_summary_of_another_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transcript_clean.audit import run as audit_run
    from transcript_clean.audit.baseline import load_baseline

    out = tmp_path / "stats"
    yesterday = audit(str(write_jsonl(tmp_path / "a.jsonl", ROWS)), stats_out=out)
    tonight = write_jsonl(tmp_path / "b.jsonl", [CLEAN] * 4)
    real = audit_run.write_text_atomic

    def killed_at_summary(path: Path, text: str) -> None:
        if path.name == "summary.json":
            raise KeyboardInterrupt  # the process stopped here
        real(path, text)

    monkeypatch.setattr(audit_run, "write_text_atomic", killed_at_summary)
    with pytest.raises(KeyboardInterrupt):
        audit(str(tonight), stats_out=out, overwrite=True)
    # What a baseline reads there now is tonight's stats, never yesterday's summary beside them.
    assert load_baseline(out).shares != yesterday.shares
    assert load_baseline(out).shares == {}


def test_output_errors_name_the_keywords_a_python_caller_passes(tmp_path: Path) -> None:
    """From Python, `stats_out=` and `overwrite=True`, not the CLI's `--stats-out` and
    `--overwrite` (the CLI's own words are checked by its tests)."""
    from transcript_clean.audit.report import check_report

    source = str(write_jsonl(tmp_path / "x.jsonl", [CLEAN]))
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match=r"^stats_out='.*file' exists and is a file"):
        audit(source, stats_out=str(tmp_path / "file"))
    (tmp_path / "report.md").write_text("")
    with pytest.raises(OutputError, match=r"exists: pass overwrite=True to replace it"):
        check_report(tmp_path / "report.md")
