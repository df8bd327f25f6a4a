"""Drift of the profile (what the data is) against a baseline's, and its gates.

Each figure is named as `--max-drift` names it: `turns.CLASS` (the class's share of assistant
turns; a change in percentage points), `METRIC.p50` and `METRIC.p95` (a distribution's quantile,
METRIC one of the profile's per-row names or `turn_chars` / `turn_tokens`; a change as a ratio),
and `tools.NAME` (the tool's calls per row; a ratio). A ratio gate holds both ways: `1.25x`
fails a figure that grew by more than a quarter or shrank below 1/1.25 of the baseline's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from transcript_clean.audit.measure import Gate
from transcript_clean.profile import PER_ROW, PER_TURN
from transcript_clean.transcript import TURN_CLASSES

__all__ = [
    "DriftLimit",
    "ProfileDrift",
    "compute_profile_drift",
    "headline_figures",
    "parse_drift_limit",
    "profile_gates",
]

Unit = Literal["pp", "x"]

STATS: Final = ("p50", "p95")
"""The quantiles compared (as ratios)."""
METRICS: Final = (*PER_ROW, *(f"turn_{name}" for name in PER_TURN))


@dataclass(slots=True, frozen=True)
class ProfileDrift:
    """One figure of the profile then and now."""

    name: str
    previous: float
    current: float
    unit: Unit

    @property
    def change(self) -> float:
        """`pp`: current - previous (fractions); `x`: current / previous (1 when both are 0)."""
        if self.unit == "pp":
            return self.current - self.previous
        if self.previous == 0:
            return 1.0 if self.current == 0 else math.inf
        return self.current / self.previous

    @property
    def deviation(self) -> float:
        """How far it moved, either way: |change| in pp, or the larger of the ratio and its
        inverse."""
        change = self.change
        if self.unit == "pp":
            return abs(change)
        return math.inf if change == 0 else max(change, 1 / change)

    def show(self, value: float) -> str:
        if self.unit == "pp":
            return f"{100 * value:.2f}%"
        return f"{value:,.0f}" if value == int(value) else f"{value:,.3f}"

    def show_change(self) -> str:
        if self.unit == "pp":
            return f"{100 * self.change:+.2f} pp"
        return "new" if math.isinf(self.change) else f"{self.change:.2f}x"

    def to_dict(self) -> dict[str, Any]:
        change = self.change
        return {
            "name": self.name,
            "previous": self.previous,
            "current": self.current,
            "unit": self.unit,
            "change": None if math.isinf(change) else change,
        }


def headline_figures(profile: Mapping[str, Any]) -> dict[str, tuple[float, Unit]]:
    """The figures of a profile report (`Profile.report`, as summary.json holds it) that drift
    is measured on, by name."""
    out: dict[str, tuple[float, Unit]] = {}
    shares = profile.get("turn_shares", {})
    for name in TURN_CLASSES:
        out[f"turns.{name}"] = (float(shares.get(name, 0.0)), "pp")
    sections = {**profile.get("per_row", {})}
    sections.update({f"turn_{n}": s for n, s in profile.get("per_assistant_turn", {}).items()})
    for metric in METRICS:
        if metric in sections:
            for stat in STATS:
                out[f"{metric}.{stat}"] = (float(sections[metric][stat]), "x")
    rows = profile.get("rows_measured") or 0
    for tool, calls in profile.get("calls_per_tool", {}).items():
        out[f"tools.{tool}"] = (calls / rows if rows else 0.0, "x")
    return out


def compute_profile_drift(
    previous: Mapping[str, Any], current: Mapping[str, Any]
) -> list[ProfileDrift]:
    """Every figure in either profile (a tool missing from one has 0 calls there; a
    distribution missing from one, such as tokens, is left out)."""
    before, now = headline_figures(previous), headline_figures(current)
    names = [n for n in now if n in before or n.startswith("tools.")]
    names += [n for n in before if n not in now and n.startswith("tools.")]
    return [
        ProfileDrift(n, before.get(n, (0.0, "x"))[0], now.get(n, (0.0, "x"))[0], unit)
        for n in names
        for unit in [(now.get(n) or before[n])[1]]
    ]


@dataclass(slots=True, frozen=True)
class DriftLimit:
    """A `--max-drift NAME=LIMIT` gate: `2pp` for a turn class, `1.25x` for the others."""

    name: str
    limit: float
    unit: Unit


def parse_drift_limit(text: str) -> DriftLimit:
    """`turns.reasoning_only=2pp`, `chars.p95=1.25x`, `tools.search=2x`. Raises `ValueError`
    saying what was expected."""
    name, sep, value = (part.strip() for part in text.partition("="))
    if not sep:
        raise ValueError(f"{text!r} is not NAME=LIMIT, e.g. turns.reasoning_only=2pp")
    section, _, rest = name.partition(".")
    if section == "turns":
        if rest not in TURN_CLASSES:
            raise ValueError(f"{name!r}: the turn classes are {', '.join(TURN_CLASSES)}")
        number = value.removesuffix("pp").removesuffix("%").strip()
        try:
            return DriftLimit(name, float(number) / 100, "pp")
        except ValueError:
            raise ValueError(f"{text!r}: a turn class's limit is in points, e.g. 2pp") from None
    if section != "tools" and (section not in METRICS or rest not in STATS):
        raise ValueError(
            f"{name!r} is not a profile figure: turns.CLASS, tools.NAME, or METRIC.p50 / "
            f"METRIC.p95 with METRIC one of {', '.join(METRICS)}"
        )
    if not rest:
        raise ValueError(f"{name!r}: name the tool, e.g. tools.search")
    try:
        ratio = float(value.removesuffix("x").strip())
    except ValueError:
        raise ValueError(f"{text!r}: a ratio, e.g. 1.25x") from None
    if ratio < 1:
        raise ValueError(f"{text!r}: a ratio of at least 1 (it holds both ways)")
    return DriftLimit(name, ratio, "x")


def profile_gates(drift: Sequence[ProfileDrift], limits: Sequence[DriftLimit]) -> list[Gate]:
    """One gate per limit: the figure's deviation from the baseline against it."""
    by_name = {d.name: d for d in drift}
    gates = []
    for limit in limits:
        found = by_name.get(limit.name)
        if found is None:  # in neither profile (a tool never called, tokens not counted)
            gates.append(Gate(f"max-drift {limit.name}", 0.0, limit.limit, "not measured", "x"))
            continue
        detail = f"{found.show(found.previous)} -> {found.show(found.current)}"
        measured = found.deviation if limit.unit == "x" else abs(found.change)
        gates.append(Gate(f"max-drift {limit.name}", measured, limit.limit, detail, limit.unit))
    return gates
