"""What an audit measures and checks: the error rate, each code's share, and the gates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from transcript_clean.rules import codes, unknown_code
from transcript_clean.stats import Stats

__all__ = [
    "Gate",
    "by_code",
    "code_shares",
    "error_rate",
    "parse_code_limit",
    "parse_fraction",
    "share_gates",
]


def code_shares(stats: Stats) -> dict[str, float]:
    """Each code's share of the rows in: rows where the code was acted on (repaired, dropped,
    kept, or rejected: it decided the row) / rows in. A code merely `present` on a row another
    code rejected is not counted: a gate on it must fire only for what it did."""
    rows: dict[str, int] = {}
    for (code, action), entry in stats.codes.items():
        if action != "present":
            rows[code] = rows.get(code, 0) + entry.rows
    return {code: n / stats.rows_in if stats.rows_in else 0.0 for code, n in by_code(rows)}


def error_rate(stats: Stats) -> float:
    """Rows with any violation (kept-as-is codes included) / rows in."""
    return stats.rows_with_violations / stats.rows_in if stats.rows_in else 0.0


def code_rank(code: str) -> tuple[int, str]:
    """Where `code` goes in a table: the codes' own order, unknown codes last by name."""
    order = codes()
    return (order.index(code) if code in order else len(order), code)


def by_code(values: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """`values`' items in the codes' order."""
    return sorted(values.items(), key=lambda kv: code_rank(kv[0]))


def parse_fraction(text: str) -> float:
    """A limit as the command line gives it: a fraction in [0, 1] (`0.05`) or a percentage
    (`5%`). Raises `ValueError` saying what was expected."""
    value = text.strip()
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise ValueError(f"{text!r} is not a fraction (0.05) or a percentage (5%)") from None
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{text!r} is not between 0 and 1 (0% and 100%)")
    return number


def parse_code_limit(text: str) -> tuple[str, float]:
    """`CODE=R` (as for `--max`): the code, checked against the known codes, and its limit."""
    code, sep, limit = text.partition("=")
    code = code.strip()
    if not sep:
        raise ValueError(f"{text!r} is not CODE=R, e.g. orphan_tool_result=0.01")
    if code not in codes():
        raise ValueError(unknown_code(code))
    return code, parse_fraction(limit)


@dataclass(slots=True, frozen=True)
class Gate:
    """One limit the audit checks: `measured` against `limit`, both fractions of the rows in."""

    name: str
    """`max-error-rate`, `max CODE` or `max-drift`."""
    measured: float
    limit: float
    detail: str | None = None
    unit: str = "%"
    """How the numbers read: `%` for shares, `pp` (percentage points) for a change of share, `x`
    for a ratio (a profile figure's drift)."""

    @property
    def exceeded(self) -> bool:
        return self.measured > self.limit

    def describe(self) -> str:
        """`gate max-error-rate: 12.40% > 10.00%`."""
        sign = ">" if self.exceeded else "<="
        text = f"gate {self.name}: {self.show(self.measured)} {sign} {self.show(self.limit)}"
        return f"{text} ({self.detail})" if self.detail else text

    def show(self, value: float) -> str:
        """`value` in the gate's unit: `12.40%`, `1.50 pp` or `1.25x`."""
        if self.unit == "x":
            return "new" if value == float("inf") else f"{value:.2f}x"
        return f"{100 * value:.2f}%" if self.unit == "%" else f"{100 * value:.2f} pp"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "measured": self.measured,
            "limit": self.limit,
            "passed": not self.exceeded,
            "detail": self.detail,
            "text": self.describe(),
        }


def share_gates(
    stats: Stats, max_error_rate: float | None, max_share: Mapping[str, float]
) -> list[Gate]:
    """The gates on this run alone: the error rate, and each code's share."""
    gates = []
    if max_error_rate is not None:
        detail = f"{stats.rows_with_violations:,} of {stats.rows_in:,} rows"
        gates.append(Gate("max-error-rate", error_rate(stats), max_error_rate, detail))
    shares = code_shares(stats)
    for code, limit in by_code(max_share):
        gates.append(Gate(f"max {code}", shares.get(code, 0.0), limit))
    return gates
