"""The profile's charts in the HTML report: where everything goes in the SVGs, worked out here;
the template draws them (and escapes every label).

- the turn-class bar: the share of each assistant-turn class, one stacked bar;
- the length histograms: rows and assistant turns by characters (tokens too, with a tokenizer),
  in log-spaced buckets;
- the history: each headline figure across earlier nights and tonight, with the gate limits that
  apply to it drawn as dashed lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.audit.history import figures_of
from transcript_clean.transcript import TURN_CLASSES

if TYPE_CHECKING:
    from transcript_clean.audit.run import AuditResult

__all__ = ["Histogram", "History", "TurnBar", "histograms", "history_charts", "turn_bar"]

_PALETTE: Final = "#1f78b4 #33a02c #6a3d9a #e31a1c #fb9a99 #ff7f00 #b0b0b0 #cab2d6 #fdbf6f"
TURN_COLORS: Final = dict(zip(TURN_CLASSES, _PALETTE.split(), strict=True))
WIDTH: Final = 770


@dataclass(frozen=True, slots=True)
class Segment:
    name: str
    x: str
    width: str
    color: str
    share: str


@dataclass(frozen=True, slots=True)
class TurnBar:
    width: int
    height: int
    segments: list[Segment]
    legend: list[tuple[int, int, str, str, str]]
    """(x, y, colour, class, share) of each legend entry."""
    turns: int


def turn_bar(profile: Mapping[str, Any]) -> TurnBar | None:
    """The stacked bar of the turn classes' shares; None with no assistant turns."""
    counts = profile["turns"]
    total = sum(counts.values())
    if not total:
        return None
    x, segments, legend = 0.0, [], []
    for k, name in enumerate(TURN_CLASSES):
        share = counts.get(name, 0) / total
        label = f"{100 * share:.2f}%"
        if share > 0:
            w = WIDTH * share
            segments.append(Segment(name, f"{x:.1f}", f"{w:.1f}", TURN_COLORS[name], label))
            x += w
        legend.append((260 * (k % 3), 56 + 22 * (k // 3), TURN_COLORS[name], name, label))
    return TurnBar(WIDTH, 56 + 22 * 3, segments, legend, total)


@dataclass(frozen=True, slots=True)
class Histogram:
    title: str
    width: int
    height: int
    bars: list[tuple[str, str, str, str, str]]
    """(x, y, width, height, tooltip) of each bar."""
    ticks: list[tuple[str, str]]
    """(x, label) under the bars."""


def _histogram(title: str, buckets: Sequence[Sequence[int]]) -> Histogram | None:
    if not buckets:
        return None
    width, height, base = 360, 150, 125
    step = width / len(buckets)
    top = max(count for _, count in buckets)
    bars, ticks = [], []
    for k, (low, count) in enumerate(buckets):
        h = max(1.0, (base - 10) * count / top)
        x = k * step
        bars.append(
            (
                f"{x + 1:.1f}",
                f"{base - h:.1f}",
                f"{step - 2:.1f}",
                f"{h:.1f}",
                f"≥ {low:,}: {count:,}",
            )
        )
        if k % max(1, len(buckets) // 5) == 0:
            ticks.append((f"{x + step / 2:.1f}", _short(low)))
    return Histogram(title, width, height, bars, ticks)


def histograms(profile: Mapping[str, Any]) -> list[Histogram]:
    """The length histograms: characters (and tokens) per row and per assistant turn."""
    found = [
        _histogram(title, profile["histograms"].get(key, []))
        for key, title in (
            ("chars_per_row", "characters per row"),
            ("chars_per_assistant_turn", "characters per assistant turn"),
            ("tokens_per_row", "tokens per row"),
            ("tokens_per_assistant_turn", "tokens per assistant turn"),
            ("rendered_tokens_per_row", "rendered tokens per row (chat template)"),
            ("trained_tokens_per_row", "trained tokens per row (chat template)"),
        )
    ]
    return [h for h in found if h is not None]


def _short(value: float) -> str:
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


# ---------------------------------------------------------------------------------------------
# the history


@dataclass(frozen=True, slots=True)
class History:
    name: str
    width: int
    height: int
    points: str
    """The polyline's points."""
    dots: list[tuple[str, str, str]]
    """(x, y, tooltip) of each night; the last is tonight."""
    limits: list[tuple[str, str]]
    """(y, label) of each gate limit."""
    labels: list[tuple[str, str]]
    """(x, label) of the first and last nights."""
    low: str
    high: str


HEADLINES: Final = ("error_rate", "rows_in", "chars.p50", "chars.p95", "turn_chars.p95",
                    "tokens.p95", "turn_tokens.p95")  # fmt: skip


def _limits(result: AuditResult, name: str) -> list[tuple[float, str]]:
    """The gate limits on figure `name`, as values of the figure."""
    out: list[tuple[float, str]] = []
    for gate in result.gates:
        if gate.name == "max-error-rate" and name == "error_rate":
            out.append((gate.limit, gate.show(gate.limit)))
        if gate.name != f"max-drift {name}" or result.profile_drift is None:
            continue
        base = next((d.previous for d in result.profile_drift if d.name == name), None)
        if base is None:
            continue
        if gate.unit == "pp":
            out += [(base + gate.limit, f"+{gate.show(gate.limit)}")]
            out += [(max(0.0, base - gate.limit), f"-{gate.show(gate.limit)}")]
        else:
            out += [
                (base * gate.limit, f"×{gate.limit:g}"),
                (base / gate.limit, f"÷{gate.limit:g}"),
            ]
    return out


def _show(name: str, value: float) -> str:
    if name.startswith("turns.") or name == "error_rate":
        return f"{100 * value:.2f}%"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def axis(low: float, high: float) -> tuple[float, float]:
    """The range a history chart's axis spans for values from `low` to `high`: theirs, or,
    for a flat line at v, v ± 10% (0 to 1 for a line at 0), so that the line sits in the
    middle of the chart, not on its floor under an axis from v to 2v."""
    if high > low:
        return low, high
    if low == 0:
        return 0.0, 1.0
    pad = abs(low) / 10
    return low - pad, high + pad


def history_charts(result: AuditResult) -> list[History]:
    """A chart per headline figure across the earlier nights and tonight: the error rate, the
    rows, the turn classes seen in any night, and the lengths."""
    if not result.history:
        return []
    nights = [(n.label, n.figures) for n in result.history]
    nights.append(("tonight", figures_of(result.summary)))
    seen = {name for _, figures in nights for name, value in figures.items() if value}
    names: list[str] = [n for n in HEADLINES[:2] if n in seen]
    names += [f"turns.{c}" for c in TURN_CLASSES if f"turns.{c}" in seen]
    names += [n for n in HEADLINES[2:] if n in seen]
    charts = []
    width, height, left, top, bottom = 360, 150, 8, 14, 118
    for name in names:
        series = [(label, figures.get(name)) for label, figures in nights]
        values = [v for _, v in series if v is not None]
        limits = _limits(result, name)
        low, high = axis(
            min([*values, *(v for v, _ in limits)]), max([*values, *(v for v, _ in limits)])
        )

        def y(value: float, low: float = low, high: float = high) -> float:
            return bottom - (bottom - top) * (value - low) / (high - low)

        step = (width - 2 * left) / max(1, len(series) - 1)
        dots, points = [], []
        for k, (label, value) in enumerate(series):
            if value is None:
                continue
            x = left + k * step if len(series) > 1 else width / 2
            dots.append((f"{x:.1f}", f"{y(value):.1f}", f"{label}: {_show(name, value)}"))
            points.append(f"{x:.1f},{y(value):.1f}")
        charts.append(
            History(
                name,
                width,
                height,
                " ".join(points),
                dots,
                [(f"{y(v):.1f}", label) for v, label in limits],
                [(f"{left}", series[0][0]), (f"{width - left}", series[-1][0])],
                _show(name, low),
                _show(name, high),
            )
        )
    return charts
