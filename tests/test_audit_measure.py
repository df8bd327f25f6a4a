"""The audit's measures: shares, the error rate, the gates and the limits they take."""

from __future__ import annotations

import pytest

from transcript_clean.audit import Gate, code_shares, parse_code_limit, parse_fraction
from transcript_clean.stats import Stats


def test_code_shares_sum_over_actions() -> None:
    stats = Stats(rows_in=8)
    stats.codes = {}
    from transcript_clean.stats import CodeStats

    stats.codes[("orphan_tool_result", "repaired")] = CodeStats(rows=2, occurrences=3)
    stats.codes[("orphan_tool_result", "rejected")] = CodeStats(rows=1, occurrences=1)
    stats.codes[("consecutive_assistant", "repaired")] = CodeStats(rows=4, occurrences=4)
    assert code_shares(stats) == {"orphan_tool_result": 3 / 8, "consecutive_assistant": 0.5}


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


def test_a_mistyped_code_gets_a_did_you_mean() -> None:
    with pytest.raises(ValueError, match="did you mean 'orphan_tool_result'"):
        parse_code_limit("orphan_tol_result=0.1")
