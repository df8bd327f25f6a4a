"""The audit's words: JSON, Markdown and the HTML page."""

from __future__ import annotations

import html
import json
import re
import shlex
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest
from audit_rows import CLEAN, CONSECUTIVE, ROWS, SHARES, a, run, u, write_jsonl, write_summary

from transcript_clean.audit import audit
from transcript_clean.audit.html import _environment, render_html
from transcript_clean.audit.render import render_markdown
from transcript_clean.audit.report import write_report


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "train.jsonl", ROWS)


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
    write_report(audit(str(data), max_error_rate=0.9), report)
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "two &lt;/pre&gt; &amp; more" in page
    assert "<svg" in page and page.count("<table>") == 3  # gates, stats, the profile
    for attribute in ("src=", "@import", "url("):
        assert attribute not in page
    assert re.findall(r'href="([^#][^"]*)"', page) == []  # links within the page only
    assert render_html(audit(str(data))).count("<rect") >= len(SHARES)


def test_html_report_with_no_violations(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "clean.jsonl", [CLEAN])
    page = render_html(audit(str(source)))
    assert "No violations: nothing to chart." in page
    assert "No violations were found." in page


def test_the_measuring_part_imports_no_renderer() -> None:
    """The renderers import the measures, never the reverse: no cycle, and no Jinja2 for an
    audit that renders nothing."""
    code = (
        "import json, sys, transcript_clean.audit\n"
        "names = ('transcript_clean.audit.', 'jinja2')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(names))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert loaded == [
        "transcript_clean.audit.baseline",
        "transcript_clean.audit.history",
        "transcript_clean.audit.measure",
        "transcript_clean.audit.profile_drift",
        "transcript_clean.audit.run",
        "transcript_clean.audit.samples",
    ]


def test_the_template_ships_with_the_package_and_escapes() -> None:
    template = resources.files("transcript_clean.audit") / "templates" / "report.html.j2"
    assert template.is_file()
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    shipped = pyproject["tool"]["setuptools"]["package-data"]["transcript_clean"]
    assert any(fnmatch("audit/templates/report.html.j2", pattern) for pattern in shipped)
    page = _environment().from_string("{{ text }}").render(text="<b>&")
    assert page == "&lt;b&gt;&amp;"


def test_an_unchanged_drift_figure_is_not_drawn_as_a_change(data: Path, tmp_path: Path) -> None:
    # 2 of 10 rows tonight; 2,000,001 of 10,000,000 before: a change that prints as 0.00 pp.
    base = write_summary(
        tmp_path / "summary.json", 10_000_000, [("consecutive_assistant", "repaired", 2_000_001)]
    )
    page = render_html(audit(str(data), baseline=str(base)))
    row = page[page.index('<td><code>consecutive_assistant</code></td><td class="num">20.00%') :]
    row = row[: row.index("</tr>")]
    assert "0.00 pp" in row
    assert 'class="up"' not in row and 'class="down"' not in row


def test_the_chart_ticks_are_round_numbers(tmp_path: Path) -> None:
    from transcript_clean.audit.html import ticks

    for top in (0.025, 0.003, 0.07, 0.5, 0.2, 1.0, 0.0012):
        marks = ticks(top)
        assert marks[0] == 0 and marks[-1] >= top and len(marks) <= 6
        step = marks[1]
        assert f"{step:.1e}"[0] in "125", (top, marks)  # 1, 2 or 5 times a power of ten
        assert all(abs(m - k * step) < 1e-12 for k, m in enumerate(marks))
    # One row in 40 with a violation: 2.5%, which quarters cut into 0.625% steps.
    source = write_jsonl(tmp_path / "one_in_40.jsonl", [CONSECUTIVE] + [CLEAN] * 39)
    page = render_html(audit(str(source)))
    labels = re.findall(r'text-anchor="middle">([^<]*%)</text>', page)
    assert labels and labels[0] == "0%" and labels[-1] == "2.5%"
    for label in labels:  # 0.625% was one: at most two significant digits
        assert len(label.rstrip("%").replace(".", "").strip("0")) <= 2, label


def test_a_flat_history_line_sits_inside_its_axis(data: Path) -> None:
    from transcript_clean.audit.history import Night, figures_of
    from transcript_clean.audit.profile_html import history_charts

    result = audit(str(data))
    tonight = figures_of(result.summary)
    result.history = [Night("n1", dict(tonight)), Night("n2", dict(tonight))]
    charts = history_charts(result)
    rows = next(c for c in charts if c.name == "rows_in")
    assert (rows.low, rows.high) != ("10", "20")  # not v to 2v, with the line on the floor
    ys = {float(y) for _, y, _ in rows.dots}
    assert len(ys) == 1 and 14 < ys.pop() < 118  # between the top and the bottom, not on them


def test_the_report_has_contents_and_an_explain_command_per_sample(
    data: Path, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from transcript_clean.cli import main

    page = render_html(audit(str(data), samples=1))
    toc = page[page.index('<nav class="toc">') : page.index("</nav>")]
    for anchor in re.findall(r'href="#([^"]+)"', toc):
        assert f'id="{anchor}"' in page, anchor
    assert 'href="#stats"' in toc and 'href="#samples"' in toc
    commands = re.findall(r'<pre class="command"><code>([^<]+)</code></pre>', page)
    assert len(commands) == len(SHARES)
    for command in commands:
        args = shlex.split(html.unescape(command))
        assert args[:2] == ["transcript-clean", "explain"]
        result = CliRunner().invoke(main, args[1:])
        assert result.exit_code == 0, result.output
        assert "Violations:" in result.output
    text = render_markdown(audit(str(data), samples=1))
    assert text.count("transcript-clean explain ") == len(SHARES)


def test_a_lone_surrogate_in_the_samples_is_written_escaped(tmp_path: Path) -> None:
    """A rejects row's `_raw_line` holding JSON's `"\\ud800"` reads into a string with no
    UTF-8 form: the reports that sample it were not written (`UnicodeEncodeError`). They are,
    with the surrogate as its escape; so is what the audit prints."""
    from transcript_clean.run import clean

    line = '{"messages": [{"role": "user", "content": "hi \\ud800"}, ' + (
        '{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]}\n'
    )
    (tmp_path / "in.jsonl").write_text(line)
    clean(str(tmp_path / "in.jsonl"), str(tmp_path / "out"))
    rejects = str(tmp_path / "out" / "rejects" / "part-00000.parquet")
    for name in ("audit.md", "audit.html"):
        result = run(rejects, "--report", str(tmp_path / name))
        assert result.exit_code == 0, result.output
        assert "consecutive_assistant" in result.stdout
        assert "hi \\ud800" in (tmp_path / name).read_text(encoding="utf-8")
