"""The audit as one self-contained HTML page, from `templates/report.html.j2`.

Jinja2 escapes every value the template shows (autoescape), so the data (users' messages, file
names, codes) is text on the page, never markup. Here only the chart's geometry is worked out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from transcript_clean.audit.profile_html import histograms, history_charts, turn_bar
from transcript_clean.audit.render import (
    changed,
    explain_command,
    pct,
    pp,
    shows_reject,
    transcript_text,
    trend,
)
from transcript_clean.audit.run import AuditResult
from transcript_clean.markdown import printable
from transcript_clean.stats import ACTIONS

if TYPE_CHECKING:
    import jinja2

__all__ = ["render_html"]

COLORS = {
    "dropped": "#66a61e",
    "repaired": "#1f78b4",
    "kept": "#e6ab02",
    "rejected": "#d95f02",
    "present": "#bdbdbd",
}

EXPECTED_OUTCOME = {
    "repaired": "repaired",
    "dropped": "repaired",
    "kept": "unchanged",
    "rejected": "rejected",
    "present": "rejected",
}
"""The row's fate a code's action implies; a sample says when another code decided otherwise."""


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("transcript_clean.audit", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render_html(result: AuditResult) -> str:
    """The report as one self-contained HTML page: inline CSS and SVG, no scripts."""
    stats = result.stats
    cards = [
        (f"{stats.rows_in:,}", "rows in"),
        (pct(result.error_rate), f"with violations ({stats.rows_with_violations:,})"),
        (f"{stats.rows_kept:,}", "kept"),
        (f"{stats.rows_repaired:,}", "of which repaired"),
        (f"{stats.rows_rejected:,}", "rejected"),
    ]
    page = (
        _environment()
        .get_template("report.html.j2")
        .render(
            summary=result.summary,
            gates=result.gates,
            passed=result.passed,
            failed=len(result.failed),
            cards=cards,
            chart=chart(result),
            stats=stats.records(),
            baseline=result.baseline,
            drift=result.drift,
            profile=result.summary["profile"],
            turn_bar=turn_bar(result.summary["profile"]),
            histograms=histograms(result.summary["profile"]),
            profile_drift=result.profile_drift,
            history=history_charts(result),
            samples=result.samples,
            expected_outcome=EXPECTED_OUTCOME,
            pct=pct,
            pp=pp,
            trend=trend,
            explain_command=explain_command,
            changed=changed,
            shows_reject=shows_reject,
            transcript_text=transcript_text,
            zip=zip,
        )
    )
    return printable(page)


# ---------------------------------------------------------------------------------------------
# the chart: one bar per code, its share of the rows in, split by action


@dataclass(frozen=True, slots=True)
class Bar:
    action: str
    x: str
    width: str
    color: str
    share: str


@dataclass(frozen=True, slots=True)
class ChartRow:
    code: str
    y: int
    bars: list[Bar]
    total_x: str
    total: str


@dataclass(frozen=True, slots=True)
class Chart:
    """Where everything goes in the SVG, in its own units; the numbers formatted to print."""

    width: int
    height: int
    left: int
    grid_top: int
    bar_height: int
    legend: list[tuple[int, str, str]]
    """(x, colour, action) of each legend swatch."""
    ticks: list[tuple[str, str]]
    """(x, label) of each grid line."""
    rows: list[ChartRow]


LEFT, WIDTH, RIGHT, ROW_HEIGHT, TOP = 210, 560, 90, 30, 44


def chart(result: AuditResult) -> Chart | None:
    """The chart of `result`'s shares, or None when there is nothing to chart."""
    per_code: dict[str, dict[str, float]] = {}
    for record in result.stats.records():
        per_code.setdefault(record["code"], {})[record["action"]] = record["share"]
    if not per_code:
        return None
    marks = ticks(max(sum(a.values()) for a in per_code.values()))
    top_value = marks[-1]
    height = TOP + ROW_HEIGHT * len(per_code) + 24
    rows = []
    for i, (code, actions) in enumerate(per_code.items()):
        x0 = float(LEFT)
        bars = []
        for action in ACTIONS:
            share = actions.get(action, 0.0)
            if share <= 0:
                continue
            w = max(WIDTH * share / top_value, 1.5)
            bars.append(
                Bar(action, f"{x0:.1f}", f"{w:.1f}", COLORS.get(action, "#999"), pct(share))
            )
            x0 += w
        total = pct(sum(actions.values()))
        rows.append(ChartRow(code, TOP + i * ROW_HEIGHT, bars, f"{x0 + 6:.1f}", total))
    return Chart(
        width=LEFT + WIDTH + RIGHT,
        height=height,
        left=LEFT,
        grid_top=TOP - 6,
        bar_height=ROW_HEIGHT - 10,
        legend=[(LEFT + 95 * k, COLORS[action], action) for k, action in enumerate(ACTIONS)],
        ticks=[(f"{LEFT + WIDTH * m / top_value:.1f}", _tick(m)) for m in marks],
        rows=rows,
    )


def ticks(top: float) -> list[float]:
    """The grid of a share axis that reaches `top`: 0 and 2 to 5 more marks, each a multiple
    of one step of 1, 2 or 5 × 10^k (never 0.625%), the last at or above `top` and at most 1."""
    top = min(max(top, 1e-6), 1.0)
    for exponent in range(-6, 1):
        for unit in (1, 2, 5):
            step = unit * 10.0**exponent
            count = math.ceil(top / step - 1e-9)
            if count <= 5:
                # k * step, rounded to the step's digits: 3 * 0.1 is 0.30000000000000004
                return [round(k * step, 8 - exponent) for k in range(count + 1)]
    return [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


def _tick(value: float) -> str:
    text = f"{100 * value:.6f}".rstrip("0").rstrip(".")
    return f"{text}%"
