from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from transcript_clean.audit import (
    STATS_FILES,
    Baseline,
    BaselineError,
    Gate,
    audit,
    code_shares,
    compute_drift,
    load_baseline,
    parse_code_limit,
    parse_fraction,
)
from transcript_clean.cli import main
from transcript_clean.errors import OutputError
from transcript_clean.report import render_html, render_markdown
from transcript_clean.run import clean
from transcript_clean.stats import Stats


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


CLEAN = [u("hi"), a("yo")]
CONSECUTIVE = [u("hi"), a("one"), a("two")]
ORPHAN = [u("hi"), {"role": "tool", "tool_call_id": "x", "content": "r"}, a("yo")]
EMPTY = [u("hi"), a("  "), u("again"), a("yo")]
NO_ASSISTANT = [u("hi")]
SCRIPT = [u("<script>alert(1)</script>"), a("one"), a("two </pre> & more")]

# Ten rows, by hand: 5 clean; consecutive_assistant in rows 1 and 7 (20%), orphan_tool_result in
# row 3, empty_assistant_turn in row 4, no_assistant_turn in row 6 (10% each): 5 rows of 10 have
# a violation.
ROWS = [CLEAN, CONSECUTIVE, CLEAN, ORPHAN, EMPTY, CLEAN, NO_ASSISTANT, SCRIPT, CLEAN, CLEAN]
SHARES = {
    "empty_assistant_turn": 0.1,
    "orphan_tool_result": 0.1,
    "consecutive_assistant": 0.2,
    "no_assistant_turn": 0.1,
}


def write_jsonl(path: Path, rows: list[list[dict[str, Any]]]) -> Path:
    path.write_text("".join(json.dumps({"messages": m}) + "\n" for m in rows), encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "train.jsonl", ROWS)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["audit", *map(str, args)])


def write_summary(path: Path, rows_in: int, stats: list[tuple[str, str, int]]) -> Path:
    records = [
        {"code": c, "action": act, "rows": n, "occurrences": n, "share": n / rows_in}
        for c, act, n in stats
    ]
    path.write_text(json.dumps({"rows_in": rows_in, "stats": records}), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# the same stats as clean


# Every message {role, content: str}: Arrow types the column, so the fast path runs on its rows.
TYPED = [CLEAN, CONSECUTIVE, CLEAN, EMPTY, NO_ASSISTANT, CLEAN, CLEAN, CONSECUTIVE, CLEAN]


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


def test_code_shares_sum_over_actions() -> None:
    stats = Stats(rows_in=8)
    stats.codes = {}
    from transcript_clean.stats import CodeStats

    stats.codes[("orphan_tool_result", "repaired")] = CodeStats(rows=2, occurrences=3)
    stats.codes[("orphan_tool_result", "rejected")] = CodeStats(rows=1, occurrences=1)
    stats.codes[("consecutive_assistant", "repaired")] = CodeStats(rows=4, occurrences=4)
    assert code_shares(stats) == {"orphan_tool_result": 3 / 8, "consecutive_assistant": 0.5}


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


def test_gate_describes_itself() -> None:
    assert Gate("max-error-rate", 0.124, 0.1).describe() == "gate max-error-rate: 12.40% > 10.00%"
    assert not Gate("max x", 0.1, 0.1).exceeded
    assert Gate("max-drift", 0.015, 0.02, "c", unit="pp").describe() == (
        "gate max-drift: 1.50 pp <= 2.00 pp (c)"
    )


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0.0), ("0.05", 0.05), ("5%", 0.05), (" 100% ", 1.0), ("1", 1.0)]
)
def test_parse_fraction(text: str, value: float) -> None:
    assert parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["-0.1", "101%", "", "%", "nan%x"])
def test_parse_fraction_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_fraction(text)


def test_parse_code_limit() -> None:
    assert parse_code_limit("orphan_tool_result=2%") == ("orphan_tool_result", 0.02)
    with pytest.raises(ValueError, match="unknown code"):
        parse_code_limit("orphan=0.1")


# ---------------------------------------------------------------------------------------------
# drift


def test_drift_against_a_hand_computed_baseline(data: Path, tmp_path: Path) -> None:
    # Yesterday, 20 rows: consecutive_assistant in 2 (10%), orphan_tool_result in 4 (20%: 3
    # repaired, 1 rejected), unanswered_tool_call in 1 (5%).
    base = write_summary(
        tmp_path / "summary.json",
        20,
        [
            ("orphan_tool_result", "repaired", 3),
            ("orphan_tool_result", "rejected", 1),
            ("consecutive_assistant", "repaired", 2),
            ("unanswered_tool_call", "repaired", 1),
        ],
    )
    result = audit(str(data), baseline=base, max_drift=0.15)
    assert result.drift is not None
    got = {d.code: (d.previous, d.current, d.change) for d in result.drift}
    assert list(got) == [
        "empty_assistant_turn",
        "orphan_tool_result",
        "consecutive_assistant",
        "unanswered_tool_call",
        "no_assistant_turn",
    ]
    expected = {
        "empty_assistant_turn": (0.0, 0.1, 0.1),
        "orphan_tool_result": (0.2, 0.1, -0.1),
        "consecutive_assistant": (0.1, 0.2, 0.1),
        "unanswered_tool_call": (0.05, 0.0, -0.05),
        "no_assistant_turn": (0.0, 0.1, 0.1),
    }
    for code, values in expected.items():
        assert got[code] == pytest.approx(values), code
    [gate] = result.gates
    assert gate.measured == pytest.approx(0.1) and not gate.exceeded

    text = run(data, "--baseline", base).stdout
    assert f"drift against {base}:" in text
    assert "orphan_tool_result       20.00%   10.00%  -10.00 pp" in text
    assert "unanswered_tool_call      5.00%    0.00%   -5.00 pp" in text


def test_baseline_from_a_clean_run_folder_shows_no_drift(data: Path, tmp_path: Path) -> None:
    clean(str(data), tmp_path / "out")
    result = audit(str(data), baseline=tmp_path / "out", max_drift=0)
    assert result.drift is not None and len(result.drift) == len(SHARES)
    assert all(d.change == 0 for d in result.drift)
    assert result.passed


def test_baseline_from_stats_parquet_uses_the_shares(data: Path, tmp_path: Path) -> None:
    audit(str(data), stats_out=tmp_path / "stats")
    (tmp_path / "stats" / "summary.json").unlink()
    baseline = load_baseline(tmp_path / "stats")
    assert baseline.path.endswith("stats.parquet")
    assert baseline.shares == pytest.approx(SHARES)


def test_baseline_folder_without_stats(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"the folder has no summary\.json or stats\.parquet"):
        load_baseline(tmp_path)
    (tmp_path / "stats.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(BaselineError, match="cannot read it as Parquet"):
        load_baseline(tmp_path)


def test_compute_drift_orders_codes_and_fills_zeros() -> None:
    drift = compute_drift({"orphan_tool_result": 0.5}, {"malformed_row": 0.25})
    assert [(d.code, d.previous, d.current, d.change) for d in drift] == [
        ("malformed_row", 0.0, 0.25, 0.25),
        ("orphan_tool_result", 0.5, 0.0, -0.5),
    ]


def test_max_drift_with_no_codes_anywhere(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "clean.jsonl", [CLEAN, CLEAN])
    result = audit(str(source), baseline=Baseline("b", {}), max_drift=0)
    assert result.drift == [] and result.passed
    assert (
        result.gates[0].describe() == "gate max-drift: 0.00 pp <= 0.00 pp (no codes in either run)"
    )


# ---------------------------------------------------------------------------------------------
# --json, --stats-out, samples and the reports


def test_json_is_one_document_with_everything(data: Path, tmp_path: Path) -> None:
    base = write_summary(tmp_path / "summary.json", 10, [("consecutive_assistant", "repaired", 1)])
    result = run(data, "--json", "--baseline", base, "--max-error-rate", "0.2", "--samples", "1")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["rows_in"] == 10 and doc["rows_with_violations"] == 5
    assert doc["error_rate"] == 0.5
    assert doc["passed"] is False
    assert doc["failed_gates"] == ["gate max-error-rate: 50.00% > 20.00% (5 of 10 rows)"]
    assert doc["gates"][0]["measured"] == 0.5 and doc["gates"][0]["limit"] == 0.2
    assert doc["baseline"] == str(base)
    consecutive = next(d for d in doc["drift"] if d["code"] == "consecutive_assistant")
    assert consecutive == pytest.approx(
        {"code": "consecutive_assistant", "previous": 0.1, "current": 0.2, "change": 0.1}
    )
    assert [r["code"] for r in doc["stats"]] == list(SHARES)
    assert {code: len(s) for code, s in doc["samples"].items()} == dict.fromkeys(SHARES, 1)
    assert "gate max-error-rate: 50.00% > 20.00%" in result.stderr


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


def test_samples_are_the_first_rows_of_each_code(data: Path) -> None:
    result = audit(str(data), samples=1)
    where = {code: [(s.source, s.row) for s in samples] for code, samples in result.samples.items()}
    assert where == {
        "empty_assistant_turn": [(str(data), 4)],
        "orphan_tool_result": [(str(data), 3)],
        "consecutive_assistant": [(str(data), 1)],
        "no_assistant_turn": [(str(data), 6)],
    }
    assert [s.row for s in audit(str(data), samples=5).samples["consecutive_assistant"]] == [1, 7]
    assert audit(str(data), samples=0).samples == {}
    typed = write_jsonl(data.with_name("typed.jsonl"), TYPED)
    assert [s.row for s in audit(str(typed)).samples["consecutive_assistant"]] == [1, 7]


def test_samples_carry_the_repair_before_and_after(data: Path) -> None:
    result = audit(str(data))
    [first, _] = result.samples["consecutive_assistant"]
    assert first.action == "repaired" and first.outcome == "repaired"
    assert first.violations and "assistant" in first.violations[0]
    [step] = first.steps
    assert len(step.before) == 3 and len(step.after) == 2

    [rejected] = result.samples["no_assistant_turn"]
    assert rejected.outcome == "rejected" and rejected.steps == ()
    assert rejected.reject_message == "the transcript has no assistant turn"

    strict = audit(str(data), config="strict").samples["consecutive_assistant"][0]
    assert strict.action == "rejected" and strict.steps == ()


def test_markdown_report(data: Path, tmp_path: Path) -> None:
    base = write_summary(tmp_path / "summary.json", 10, [])
    report = tmp_path / "audit.md"
    result = run(data, "--report", report, "--baseline", base, "--max-error-rate", "0.9")
    assert result.exit_code == 0
    assert f"wrote {report}" in result.stdout
    text = report.read_text(encoding="utf-8")
    for heading in ("# Audit of", "## Gates", "## Error stats", "## Drift", "## Samples"):
        assert f"\n{heading}" in "\n" + text
    assert "| consecutive_assistant | repaired | 2 | 2 | 20.00% |" in text
    assert "| consecutive_assistant | 0.00% | 20.00% | +20.00 pp |" in text
    assert "### orphan_tool_result" in text
    assert "repair consecutive_assistant, before:" in text


def test_markdown_fences_outlast_backticks_in_the_data(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "t.jsonl", [[u("```\n# not a heading"), a("x"), a("y")]])
    text = render_markdown(audit(str(source)))
    assert "````text" in text
    assert "\n# not a heading" not in text  # rendered inside the fence, one message a line


def test_html_report_escapes_the_data_and_loads_nothing(data: Path, tmp_path: Path) -> None:
    report = tmp_path / "audit.html"
    audit(str(data), report=report, max_error_rate=0.9)
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "two &lt;/pre&gt; &amp; more" in page
    assert "<svg" in page and page.count("<table>") == 2  # gates and stats
    for attribute in ("src=", "href=", "@import", "url("):
        assert attribute not in page
    assert render_html(audit(str(data))).count("<rect") >= len(SHARES)


def test_html_report_with_no_violations(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "clean.jsonl", [CLEAN])
    page = render_html(audit(str(source)))
    assert "No violations: nothing to chart." in page
    assert "No violations were found." in page


def _per_row_samples(folder: Path, fmt: str, config: str, n: int, batch_size: int) -> Any:
    """The first `n` rows of each code, with the fast path off: every row's codes come from the
    per-row path, in input order."""
    from transcript_clean.pipeline import clean_batch
    from transcript_clean.policy import load_config
    from transcript_clean.sources import open_source

    picked: dict[str, list[tuple[str, int]]] = {}
    src = open_source(str(folder))
    for part in src.parts():

        def on_row(number: int, row: Any, result: Any, name: str = part.name) -> None:
            for code in result.actions:
                if len(picked.setdefault(code, [])) < n:
                    picked[code].append((name, number))

        first = 0
        for batch in src.read(part, batch_size=batch_size):
            clean_batch(
                batch,
                load_config(config),
                format=fmt,
                source=part.name,
                first_row=first,
                on_row=on_row,
                fast=False,
            )
            first += batch.num_rows
    return picked


@pytest.mark.parametrize(
    ("fmt", "config", "n"),
    [
        ("openai", "default", 3),
        ("openai", "strict", 1),
        ("sharegpt", "default", 2),
        ("anthropic", "default", 3),
    ],
)
def test_samples_with_the_fast_path_are_those_of_the_per_row_path(
    tmp_path: Path, fmt: str, config: str, n: int
) -> None:
    """The fast path settles most defective rows without the per-row path's `on_row`; the audit
    still picks each code's first rows in input order, across batches, files and both paths."""
    import pyarrow as pa
    from synthetic import arrow_schema, generate_rows

    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        rows = [row for row, _ in generate_rows(700, format=fmt, seed=20 + i)]
        table = pa.Table.from_pylist(rows, schema=arrow_schema(fmt))
        pq.write_table(table, folder / f"part-{i}.parquet")
    result = audit(folder, config=config, format=fmt, samples=n, batch_size=128)

    expected = _per_row_samples(folder, fmt, config, n, 128)
    got = {code: [(s.source, s.row) for s in chosen] for code, chosen in result.samples.items()}
    assert got == expected
    assert sum(map(len, got.values())) > 4 * n
    reference = clean(folder, tmp_path / "out", config=config, format=fmt)
    assert result.stats.records() == reference.stats.records()
