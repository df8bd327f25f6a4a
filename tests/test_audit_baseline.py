"""Baselines and drift: a previous run's shares against this one's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from audit_rows import CLEAN, ROWS, SHARES, run, write_jsonl, write_summary

from transcript_clean.audit import Baseline, BaselineError, audit, compute_drift, load_baseline
from transcript_clean.run import clean


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "train.jsonl", ROWS)


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


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s["profile"].update(turn_shares="oops"),  # a string where a mapping belongs
        lambda s: s["profile"].update(per_row={"chars": "oops"}),
        lambda s: s["profile"].update(per_assistant_turn=None),
        lambda s: s.update(stats=[{"code": "orphan_tool_result", "action": "repaired"}]),
    ],
    ids=["turn-shares", "per-row", "per-turn", "missing-stat"],
)
@pytest.mark.parametrize("gate", [[], ["--max-drift", "chars.p95=1.25x"]])
def test_a_damaged_baseline_is_exit_2_naming_it(
    data: Path, tmp_path: Path, damage: Any, gate: list[str]
) -> None:
    import json

    audit(data, stats_out=tmp_path / "night")
    summary = json.loads((tmp_path / "night" / "summary.json").read_text())
    damage(summary)
    baseline = tmp_path / "damaged.json"
    baseline.write_text(json.dumps(summary))
    result = run(data, "--baseline", baseline, *gate)
    assert result.exit_code == 2, result.output  # not 1, which says "a gate was exceeded"
    assert f"baseline {baseline}" in result.stderr
    assert "Traceback" not in result.output


def test_an_unfinished_baseline_names_the_keyword_a_python_caller_passes() -> None:
    """From Python the way to finish the run is `resume=True`, not the CLI's `--resume`."""
    import fsspec

    fsspec.filesystem("memory").pipe("/unfinished/data/part-00000.parquet", b"x")
    with pytest.raises(BaselineError, match="not complete") as raised:
        load_baseline("memory://unfinished")
    assert "resume=True" in str(raised.value) and "--resume" not in str(raised.value)
