"""`explain`: one row's transcript, violations and repairs, in words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from test_cli import CHAT, WEATHER

from transcript_clean.cli import main


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_a_text_with_newlines_shows_them_as_line_breaks(tmp_path: Path) -> None:
    row = {
        "messages": [
            {"role": "user", "content": "line one\nline two"},
            {"role": "assistant", "content": "a"},
        ]
    }
    source = write_jsonl(tmp_path / "t.jsonl", [row])
    result = CliRunner().invoke(main, ["explain", str(source), "--row", "0"])
    assert result.exit_code == 0, result.output
    assert "\\n" not in result.output
    lines = result.output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.endswith('"line one'))
    assert lines[first + 1].strip() == 'line two"'
    assert lines[first + 1].index("line two") == lines[first].index("line one")  # aligned


def test_every_candidate_of_a_preference_row_is_shown(tmp_path: Path) -> None:
    row = {
        "conversations": [{"from": "human", "value": "hi"}],
        "chosen": {"from": "gpt", "value": "hello"},
        "rejected": [{"from": "gpt", "value": "go"}, {"from": "gpt", "value": "away"}],
    }
    source = write_jsonl(tmp_path / "t.jsonl", [row])
    result = CliRunner().invoke(main, ["explain", str(source), "--row", "0"])
    assert result.exit_code == 0, result.output
    assert "rejected: message 2" in result.output  # the violation is in the second candidate
    assert "Canonical transcript (the prompt and `chosen`):" in result.output
    assert "Canonical transcript (the prompt and `rejected`):" in result.output
    shown = result.output.split("`rejected`):")[1].split("Violations:")[0]
    assert '"go"' in shown and '"away"' in shown


def test_a_row_without_tools_among_rows_with_them_is_explained(tmp_path: Path) -> None:
    """Issue 27, finding 16: read alone, a JSON Lines row that declares no tools holds a list
    of tools (their schemas typed `pa.json_()`) null; explaining its repair once crashed."""
    twice = {"messages": [*CHAT, {"role": "assistant", "content": "again"}]}
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(twice) + "\n" + json.dumps(WEATHER) + "\n")
    for fmt in ("auto", "openai"):
        result = CliRunner().invoke(main, ["explain", str(source), "--row", "0", "--format", fmt])
        assert result.exit_code == 0, result.output
        assert "consecutive_assistant" in result.output
        assert "Outcome: kept, repaired" in result.output
    result = CliRunner().invoke(main, ["explain", str(source), "--row", "1"])
    assert result.exit_code == 0, result.output
    assert "get_weather" in result.output and "Outcome: kept unchanged" in result.output


def test_a_lone_surrogate_in_a_rejects_line_is_printed_escaped(tmp_path: Path) -> None:
    """JSON's `"\\ud800"` (a lone surrogate) in a line the tool rejected, kept in its rejects'
    `_raw_line`, reads into a string with no UTF-8 form: explaining that row printed nothing
    but a `UnicodeEncodeError`. It prints, with the surrogate as its escape."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"messages": [{"role": "user", "content": "hi \\ud800"}]}\n')
    run = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "out")])
    assert run.exit_code == 0, run.output
    rejects = tmp_path / "out" / "rejects" / "part-00000.parquet"
    result = CliRunner().invoke(main, ["explain", str(rejects), "--row", "0"])
    assert result.exit_code == 0, result.output
    assert '"hi \\ud800"' in result.output
