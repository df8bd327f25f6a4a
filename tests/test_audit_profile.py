"""The profile in the audit: drift against a baseline's, its gates, the history of earlier
nights, and the same numbers for any number of workers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from audit_rows import NIGHT_ROWS, generated_rows, plant_reasoning_only, write_rows
from click.testing import CliRunner

from transcript_clean.audit import audit
from transcript_clean.audit.baseline import BaselineError
from transcript_clean.audit.history import load_history
from transcript_clean.audit.profile_drift import DriftLimit, ProfileDrift, parse_drift_limit
from transcript_clean.cli import main
from transcript_clean.run import clean


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Night 1's data and its stats folder; night 2 the same data with reasoning-only turns
    planted; night 3 with every text twice as long."""
    folder = tmp_path_factory.mktemp("nights")
    first = write_rows(folder / "night1.parquet", generated_rows())
    second_rows = generated_rows()
    assert plant_reasoning_only(second_rows, 10) > 60
    second = write_rows(folder / "night2.parquet", second_rows)
    third_rows = generated_rows()
    for row in third_rows:
        for message in row["messages"]:
            if message.get("content"):
                message["content"] = message["content"] * 2
    third = write_rows(folder / "night3.parquet", third_rows)
    audit(first, stats_out=folder / "stats" / "night1")
    return {"first": first, "second": second, "third": third, "stats": folder / "stats"}


def test_a_drift_gate_fails_when_reasoning_only_turns_are_planted(nights: dict[str, Path]) -> None:
    gate = [parse_drift_limit("turns.reasoning_only=2pp")]
    baseline = nights["stats"] / "night1"
    same = audit(nights["first"], baseline=baseline, max_profile_drift=gate)
    assert same.passed
    assert same.gates[0].measured == 0.0
    planted = audit(nights["second"], baseline=baseline, max_profile_drift=gate)
    assert not planted.passed
    (failed,) = planted.failed
    assert failed.name == "max-drift turns.reasoning_only"
    assert failed.measured > 0.02 and "0.00% -> " in failed.describe()
    assert planted.profile_drift is not None
    by_name = {d.name: d for d in planted.profile_drift}
    assert by_name["turns.reasoning_only"].previous == 0.0
    assert by_name["turns.text"].change < 0  # the planted turns were text turns


def test_a_ratio_gate_on_lengths_holds_both_ways(nights: dict[str, Path]) -> None:
    gate = [parse_drift_limit("chars.p95=1.25x")]
    baseline = nights["stats"] / "night1"
    longer = audit(nights["third"], baseline=baseline, max_profile_drift=gate)
    assert [g.name for g in longer.failed] == ["max-drift chars.p95"]
    assert longer.failed[0].measured > 1.6
    # The longer night as the baseline: the first night's texts shrank by as much.
    audit(nights["third"], stats_out=nights["stats"] / "night3")
    shorter = audit(nights["first"], baseline=nights["stats"] / "night3", max_profile_drift=gate)
    assert not shorter.passed
    assert shorter.failed[0].measured == pytest.approx(longer.failed[0].measured, rel=0.05)


def test_the_report_shows_each_figure_beside_its_baseline(
    nights: dict[str, Path], tmp_path: Path
) -> None:
    runner = CliRunner()
    args = ["audit", str(nights["second"]), "--baseline", str(nights["stats"] / "night1")]
    report = tmp_path / "audit.md"
    result = runner.invoke(
        main,
        [*args, "--max-drift", "turns.reasoning_only=2pp", "--max-drift", "2%",
         "--report", str(report)],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "profile drift against" in result.output
    assert "FAIL  gate max-drift turns.reasoning_only:" in result.output
    line = next(x for x in result.output.splitlines() if x.startswith("turns.reasoning_only "))
    assert "0.00%" in line and "pp" in line
    text = report.read_text()
    assert "## Profile drift" in text and "| turns.reasoning_only | 0.00% |" in text


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("turns.reasoning_only=2pp", DriftLimit("turns.reasoning_only", 0.02, "pp")),
        ("turns.empty: white space=0.5%", DriftLimit("turns.empty: white space", 0.005, "pp")),
        ("chars.p95=1.25x", DriftLimit("chars.p95", 1.25, "x")),
        ("turn_tokens.p50=2", DriftLimit("turn_tokens.p50", 2.0, "x")),
        ("tools.get_weather=3x", DriftLimit("tools.get_weather", 3.0, "x")),
    ],
)
def test_drift_limits_parse(text: str, limit: DriftLimit) -> None:
    assert parse_drift_limit(text) == limit


@pytest.mark.parametrize(
    "text", ["turns.thinking=2pp", "chars.p99=1.2x", "chars.p95=0.8x", "tools.=2x", "chars.p95"]
)
def test_bad_drift_limits_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"turns|ratio|NAME=LIMIT|tool|figure"):
        parse_drift_limit(text)


def test_a_ratio_of_a_figure_that_appears_is_new() -> None:
    appeared = ProfileDrift("tools.search", 0.0, 0.5, "x")
    assert math.isinf(appeared.deviation) and appeared.show_change() == "new"
    assert ProfileDrift("chars.p50", 0.0, 0.0, "x").deviation == 1.0


def test_a_baseline_without_a_profile_cannot_gate_it(
    nights: dict[str, Path], tmp_path: Path
) -> None:
    data = json.loads((nights["stats"] / "night1" / "summary.json").read_text())
    del data["profile"]
    (tmp_path / "summary.json").write_text(json.dumps(data))
    gate = [parse_drift_limit("chars.p95=1.25x")]
    with pytest.raises(BaselineError, match="no profile"):
        audit(nights["first"], baseline=tmp_path / "summary.json", max_profile_drift=gate)


def test_history_reads_earlier_summaries_in_order(nights: dict[str, Path], tmp_path: Path) -> None:
    for k, day in enumerate(["2026-11-28", "2026-11-29"]):
        data = json.loads((nights["stats"] / "night1" / "summary.json").read_text())
        data["audited_at"] = f"{day}T03:00:00+00:00"
        data["profile"]["turn_shares"]["reasoning_only"] = 0.01 * k
        (tmp_path / f"{day}.json").write_text(json.dumps(data))
    (tmp_path / "notes.json").write_text("[]")  # not a summary: skipped
    history = load_history(tmp_path)
    assert [n.label for n in history] == ["2026-11-28", "2026-11-29"]
    assert [n.figures["turns.reasoning_only"] for n in history] == [0.0, 0.01]
    assert history[0].figures["rows_in"] == NIGHT_ROWS
    (tmp_path / "empty").mkdir()
    with pytest.raises(BaselineError, match=r"no summary\.json"):
        load_history(tmp_path / "empty")


@pytest.mark.parametrize("workers", [1, 2])
def test_the_profile_is_the_same_for_any_workers(
    nights: dict[str, Path], tmp_path: Path, workers: int
) -> None:
    one = audit(nights["second"], rows_per_block=300, workers=1).summary["profile"]
    many = audit(nights["second"], rows_per_block=300, workers=workers).summary["profile"]
    assert many == one
    result = clean(nights["second"], tmp_path / "out", rows_per_shard=300, workers=workers)
    assert json.loads((tmp_path / "out" / "profile.json").read_text()) == one
    assert result.summary["profile"] == one
    assert one["rows"] == NIGHT_ROWS


def test_history_does_not_count_a_set_aside_output_as_a_night(
    nights: dict[str, Path], tmp_path: Path
) -> None:
    summary = (nights["stats"] / "night1" / "summary.json").read_text()
    for name in ("2026-11-28", "2026-11-29", "2026-11-29.old"):  # a rerun with --overwrite
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(summary)
    assert len(load_history(tmp_path)) == 2
    (tmp_path / "2026-11-29").rename(tmp_path / "2026-11-30")  # no longer set aside: counted
    assert len(load_history(tmp_path)) == 3


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s.update(counts="oops", error_rate=None),
        lambda s: s["profile"].update(turn_shares="oops"),
        lambda s: s["profile"].update(per_row=[]),
    ],
    ids=["counts", "turn-shares", "per-row"],
)
def test_a_damaged_night_in_the_history_is_exit_2_naming_it(
    nights: dict[str, Path], tmp_path: Path, damage: Any
) -> None:
    summary = json.loads((nights["stats"] / "night1" / "summary.json").read_text())
    damage(summary)
    night = tmp_path / "history" / "2026-11-29.json"
    night.parent.mkdir()
    night.write_text(json.dumps(summary))
    result = CliRunner().invoke(
        main, ["audit", str(nights["first"]), "--history", str(night.parent), "--quiet"]
    )
    assert result.exit_code == 2, result.output
    assert f"history {night}" in result.output
    assert "Traceback" not in result.output
