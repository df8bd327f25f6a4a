"""`explain`: one row's transcript, violations and repairs, in words."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from test_cli import CHAT, WEATHER

from transcript_clean.cli import main


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
