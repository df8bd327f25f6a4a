"""The audit's words: JSON, Markdown and the HTML page."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest
from audit_rows import CLEAN, ROWS, SHARES, a, run, u, write_jsonl, write_summary

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
    for attribute in ("src=", "href=", "@import", "url("):
        assert attribute not in page
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
