"""The audit's words: the terminal text, the Markdown report and the one-file HTML report."""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transcript_clean.explain import render_message, render_transcript
from transcript_clean.model import Message
from transcript_clean.sinks import write_text_atomic
from transcript_clean.stats import ACTIONS, render_accounting, render_table

if TYPE_CHECKING:
    from transcript_clean.audit import AuditResult, Drift, Sample
    from transcript_clean.rows import RepairStep

__all__ = [
    "render_drift",
    "render_html",
    "render_markdown",
    "render_text",
    "sample_to_dict",
    "write_report",
]

MAX_LINES = 40
"""A sample's transcript is shown up to this many messages; the rest is summed up in one line."""
CONTEXT = 2
"""Unchanged messages shown around what a repair changed."""


def _pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def _pp(value: float) -> str:
    return f"{100 * value:+.2f} pp"


def _transcript(messages: Sequence[Message]) -> str:
    lines = render_transcript(messages, indent="").splitlines()
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"… {len(lines) - MAX_LINES} more messages"]
    return "\n".join(lines)


def _changed(before: Sequence[Message], after: Sequence[Message]) -> tuple[str, str]:
    """A repair's before and after, cut to the messages that differ and CONTEXT around them."""
    same = min(len(before), len(after))
    start = next((i for i in range(same) if before[i] != after[i]), same)
    tail = 0
    while tail < same - start and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    low = max(0, start - CONTEXT)

    def window(messages: Sequence[Message]) -> str:
        high = min(len(messages), len(messages) - tail + CONTEXT)
        lines = [f"[{i}] {render_message(messages[i])}" for i in range(low, high)]
        if len(lines) > MAX_LINES:
            lines = [*lines[:MAX_LINES], f"… {len(lines) - MAX_LINES} more messages"]
        if low:
            lines.insert(0, f"… {low} messages before, unchanged")
        if high < len(messages):
            lines.append(f"… {len(messages) - high} messages after, unchanged")
        return "\n".join(lines)

    return window(before), window(after)


def _step_to_dict(step: RepairStep) -> dict[str, str]:
    before, after = _changed(step.before, step.after)
    return {"code": step.code, "before": before, "after": after}


def sample_to_dict(sample: Sample) -> dict[str, Any]:
    """A sample as JSON: its transcripts rendered as text, one message a line; a repair's before
    and after cut to what changed."""
    return {
        "code": sample.code,
        "action": sample.action,
        "source": sample.source,
        "row": sample.row,
        "violations": list(sample.violations),
        "outcome": sample.outcome,
        "reject_message": sample.reject_message,
        "steps": [_step_to_dict(step) for step in sample.steps],
        "transcript": _transcript(sample.transcript),
    }


# ---------------------------------------------------------------------------------------------
# terminal text


def render_drift(drift: Sequence[Drift], *, markdown: bool = False) -> str:
    """The drift table: per code, the previous share, the current share and the change."""
    header = ["code", "previous", "current", "change"]
    body = [[d.code, _pct(d.previous), _pct(d.current), _pp(d.change)] for d in drift]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|---:|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])
    if not body:
        return "no codes in either run"
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells))

    return "\n".join(line(row) for row in [header, ["-" * w for w in widths], *body])


def _headline(result: AuditResult) -> str:
    stats = result.stats
    return (
        f"rows in {stats.rows_in:,}; with violations {stats.rows_with_violations:,} "
        f"({_pct(result.error_rate)})"
    )


def render_text(result: AuditResult) -> str:
    """What `transcript-clean audit` prints: stats, accounting, drift and gates."""
    lines = [render_table(result.stats.records()), "", _headline(result)]
    lines.append(render_accounting(result.stats) + "  (checked)")
    if result.drift is not None and result.baseline is not None:
        lines += ["", f"drift against {result.baseline.path}:", render_drift(result.drift)]
    if result.gates:
        lines += ["", "gates:"]
        lines += [f"  {'FAIL' if g.exceeded else 'ok':<4}  {g.describe()}" for g in result.gates]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Markdown


def _fenced(text: str) -> str:
    """A code block no backticks in `text` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _shows_reject(sample: Sample) -> bool:
    """Whether the reject message adds to the violations listed (another code, or words)."""
    return (
        sample.outcome == "rejected"
        and sample.reject_message is not None
        and sample.reject_message not in sample.violations
    )


def _sample_text(sample: Sample) -> str:
    lines = [*(f"- {v}" for v in sample.violations)]
    if _shows_reject(sample):
        lines.append(f"rejected: {sample.reject_message}")
    for step in sample.steps:
        before, after = _changed(step.before, step.after)
        lines += ["", f"repair {step.code}, before:", before, "", "after:", after]
    if not sample.steps and sample.transcript:
        lines += ["", "transcript:", _transcript(sample.transcript)]
    return "\n".join(lines)


def render_markdown(result: AuditResult) -> str:
    """The report as Markdown: summary, gates, stats, drift and samples."""
    s = result.summary
    out = [
        f"# Audit of `{s['source']}`",
        "",
        f"Format `{s['format']}` (column `{s['column']}`), config `{s['config']['name']}`, "
        f"audited {s['audited_at']}.",
        "",
        f"{_headline(result)}; {render_accounting(result.stats)}.",
    ]
    if result.gates:
        out += ["", "## Gates", ""]
        out += [f"- **{'FAIL' if g.exceeded else 'ok'}** {g.describe()}" for g in result.gates]
    out += ["", "## Error stats", ""]
    records = result.stats.records()
    out.append(render_table(records, markdown=True) if records else "No violations were found.")
    if result.drift is not None and result.baseline is not None:
        out += ["", "## Drift", "", f"Against `{result.baseline.path}`.", ""]
        out.append(render_drift(result.drift, markdown=True))
    if result.samples:
        out += ["", "## Samples"]
        for code, samples in result.samples.items():
            out += ["", f"### {code}"]
            for sample in samples:
                out += ["", f"**{sample.source} row {sample.row}**: {sample.action}", ""]
                out.append(_fenced(_sample_text(sample)))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# HTML: one file, inline CSS and SVG, no scripts, every piece of data escaped

COLORS = {"dropped": "#66a61e", "repaired": "#1f78b4", "kept": "#e6ab02", "rejected": "#d95f02"}

CSS = """
:root { color-scheme: light; --ink: #1d2330; --muted: #5b6474; --line: #e3e6eb; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); background: var(--bg); }
main { max-width: 1080px; margin: 0 auto; padding: 32px 28px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 12px; padding-bottom: 6px;
     border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 24px 0 8px; font-family: ui-monospace, monospace; }
.meta { color: var(--muted); margin: 0 0 20px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
            font-size: 13px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; }
.card .n { font-size: 24px; font-weight: 600; }
.card .l { color: var(--muted); font-size: 13px; }
.badge { display: inline-block; padding: 2px 10px; border-radius: 999px; font-weight: 600;
         font-size: 13px; vertical-align: middle; margin-left: 8px; }
.pass { background: #e3f4e8; color: #17692f; } .fail { background: #fde4e1; color: #a2261b; }
.none { background: #eceef2; color: var(--muted); }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line);
        border-radius: 8px; overflow: hidden; }
th, td { padding: 7px 12px; text-align: left; border-bottom: 1px solid var(--line); }
th { background: #eef0f4; font-size: 13px; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:last-child td { border-bottom: none; }
.src { font-family: ui-monospace, monospace; font-size: 12px; word-break: break-all; }
.up { color: #a2261b; } .down { color: #17692f; }
.chart { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px; }
.chart svg { width: 100%; height: auto; display: block; }
.sample { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px;
          margin: 10px 0; }
.sample .where { font-weight: 600; }
.sample ul { margin: 6px 0; padding-left: 20px; }
.steps { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; }
pre { background: #f3f4f7; border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px;
      margin: 4px 0; white-space: pre-wrap; word-break: break-word; }
.repair { margin: 10px 0 2px; font-weight: 600; font-size: 13px; }
.label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above `value` (at most 1: a share)."""
    for exponent in range(-4, 1):
        for step in (1.0, 2.0, 2.5, 5.0):
            top = step * 10.0**exponent
            if value <= top + 1e-12:
                return min(top, 1.0)
    return 1.0


def render_chart(result: AuditResult) -> str:
    """An inline SVG: one bar per code, its share of the rows in, split by action."""
    per_code: dict[str, dict[str, float]] = {}
    for record in result.stats.records():
        per_code.setdefault(record["code"], {})[record["action"]] = record["share"]
    if not per_code:
        return '<p class="meta">No violations: nothing to chart.</p>'
    left, width, right, row_h, top = 210, 560, 90, 30, 44
    top_value = _nice_ceiling(max(sum(a.values()) for a in per_code.values()))
    height = top + row_h * len(per_code) + 24
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {left + width + right} {height}" '
        f'role="img" aria-label="Share of rows per code" font-family="system-ui, sans-serif">',
        "<title>Share of rows per code, by action</title>",
    ]
    x = left
    for action in ACTIONS:  # legend
        parts.append(f'<rect x="{x}" y="8" width="12" height="12" rx="2" fill="{COLORS[action]}"/>')
        parts.append(f'<text x="{x + 17}" y="18" font-size="12" fill="#5b6474">{action}</text>')
        x += 95
    for k in range(5):  # grid and its labels
        gx = left + width * k / 4
        parts.append(
            f'<line x1="{gx:.1f}" y1="{top - 6}" x2="{gx:.1f}" y2="{height - 20}" '
            'stroke="#e3e6eb"/>'
        )
        parts.append(
            f'<text x="{gx:.1f}" y="{height - 6}" font-size="11" fill="#5b6474" '
            f'text-anchor="middle">{_fmt_tick(top_value * k / 4)}</text>'
        )
    for i, (code, actions) in enumerate(per_code.items()):
        y = top + i * row_h
        parts.append(
            f'<text x="{left - 10}" y="{y + 19}" font-size="13" text-anchor="end" '
            f'fill="#1d2330">{_e(code)}</text>'
        )
        x0 = float(left)
        for action in ACTIONS:
            share = actions.get(action, 0.0)
            if share <= 0:
                continue
            w = max(width * share / top_value, 1.5)
            parts.append(
                f'<rect x="{x0:.1f}" y="{y + 5}" width="{w:.1f}" height="{row_h - 10}" '
                f'fill="{COLORS.get(action, "#999")}"><title>{_e(code)} {action}: '
                f"{_pct(share)}</title></rect>"
            )
            x0 += w
        parts.append(
            f'<text x="{x0 + 6:.1f}" y="{y + 19}" font-size="12" fill="#1d2330">'
            f"{_pct(sum(actions.values()))}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _fmt_tick(value: float) -> str:
    text = f"{100 * value:.3f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> str:
    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(
            f'<{tag} class="num">{c}</{tag}>' if i in numeric else f"<{tag}>{c}</{tag}>"
            for i, c in enumerate(row)
        )

    body = "\n".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    head = f"<thead><tr>{cells('th', header)}</tr></thead>"
    return f"<table>\n{head}\n<tbody>\n{body}\n</tbody>\n</table>"


def _stats_html(result: AuditResult) -> str:
    records = result.stats.records()
    if not records:
        return '<p class="meta">No violations were found.</p>'
    rows = [
        [
            f"<code>{_e(r['code'])}</code>",
            _e(r["action"]),
            f"{r['rows']:,}",
            f"{r['occurrences']:,}",
            _pct(r["share"]),
            f'<span class="src">{_e(r["example_source"])}#{r["example_row"]}</span>'
            if r["example_source"]
            else "",
        ]
        for r in records
    ]
    header = ["code", "action", "rows", "occurrences", "share", "first example"]
    return _table(header, rows, {2, 3, 4})


def _drift_html(drift: Sequence[Drift]) -> str:
    rows = []
    for d in drift:
        trend = "up" if d.change > 0 else "down" if d.change < 0 else ""
        rows.append(
            [
                f"<code>{_e(d.code)}</code>",
                _pct(d.previous),
                _pct(d.current),
                f'<span class="{trend}">{_pp(d.change)}</span>',
            ]
        )
    return _table(["code", "previous", "current", "change"], rows, {1, 2, 3})


EXPECTED_OUTCOME = {
    "repaired": "repaired",
    "dropped": "repaired",
    "kept": "unchanged",
    "rejected": "rejected",
}


def _fate(sample: Sample) -> str:
    """The row's fate, when the code's action alone does not say it (another code decided)."""
    if EXPECTED_OUTCOME.get(sample.action) == sample.outcome:
        return ""
    return f" (the row was {_e(sample.outcome)})"


def _sample_html(sample: Sample) -> str:
    out = [
        '<div class="sample">',
        f'<div class="where">{_e(sample.source)} row {sample.row} '
        f'<span class="meta">· {_e(sample.action)}{_fate(sample)}</span></div>',
    ]
    if sample.violations:
        out.append("<ul>" + "".join(f"<li>{_e(v)}</li>" for v in sample.violations) + "</ul>")
    if _shows_reject(sample):
        out.append(f"<p>Rejected: {_e(sample.reject_message)}</p>")
    for step in sample.steps:
        out.append(f'<div class="repair">repair <code>{_e(step.code)}</code></div>')
        out.append('<div class="steps">')
        for label, text in zip(("before", "after"), _changed(step.before, step.after), strict=True):
            out.append(f'<div><div class="label">{label}</div><pre>{_e(text)}</pre></div>')
        out.append("</div>")
    if not sample.steps and sample.transcript:
        out.append(
            f'<div class="label">transcript</div><pre>{_e(_transcript(sample.transcript))}</pre>'
        )
    out.append("</div>")
    return "\n".join(out)


def _card(number: str, label: str) -> str:
    return f'<div class="card"><div class="n">{number}</div><div class="l">{_e(label)}</div></div>'


def render_html(result: AuditResult) -> str:
    """The report as one self-contained HTML page: inline CSS and SVG, no scripts."""
    s, stats = result.summary, result.stats
    if not result.gates:
        badge = '<span class="badge none">no gates</span>'
    elif result.passed:
        badge = '<span class="badge pass">all gates passed</span>'
    else:
        badge = f'<span class="badge fail">{len(result.failed)} gate(s) failed</span>'
    cards = [
        (f"{stats.rows_in:,}", "rows in"),
        (_pct(result.error_rate), f"with violations ({stats.rows_with_violations:,})"),
        (f"{stats.rows_kept:,}", "kept"),
        (f"{stats.rows_repaired:,}", "of which repaired"),
        (f"{stats.rows_rejected:,}", "rejected"),
    ]
    body = [
        f"<h1>Audit of <code>{_e(s['source'])}</code>{badge}</h1>",
        f'<p class="meta">format <code>{_e(s["format"])}</code> (column '
        f"<code>{_e(s['column'])}</code>) · config <code>{_e(s['config']['name'])}</code> · "
        f"audited {_e(s['audited_at'])} · transcript-clean "
        f"{_e(s['versions']['transcript_clean'])}</p>",
        '<div class="cards">' + "".join(_card(n, label) for n, label in cards) + "</div>",
    ]
    if result.gates:
        rows = [
            [
                _e(g.name),
                _e(g.show(g.measured)),
                _e(g.show(g.limit)),
                '<span class="badge fail">FAIL</span>'
                if g.exceeded
                else '<span class="badge pass">ok</span>',
                _e(g.detail or ""),
            ]
            for g in result.gates
        ]
        body += [
            "<h2>Gates</h2>",
            _table(["gate", "measured", "limit", "result", "detail"], rows, {1, 2}),
        ]
    body += ["<h2>Share of rows per code</h2>", f'<div class="chart">{render_chart(result)}</div>']
    body += ["<h2>Error stats</h2>", _stats_html(result)]
    if result.drift is not None and result.baseline is not None:
        body += [
            "<h2>Drift</h2>",
            f'<p class="meta">against <code>{_e(result.baseline.path)}</code></p>',
            _drift_html(result.drift),
        ]
    if result.samples:
        body.append("<h2>Samples</h2>")
        for code, samples in result.samples.items():
            body.append(f'<h3 id="{_e(code)}">{_e(code)}</h3>')
            body += [_sample_html(sample) for sample in samples]
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Audit of {_e(s["source"])}</title>
<style>{CSS}</style>
</head>
<body>
<main>
{chr(10).join(body)}
</main>
</body>
</html>
"""


def write_report(result: AuditResult, path: str | os.PathLike[str]) -> None:
    """The report in `path`: HTML for .html / .htm, Markdown otherwise."""
    target = Path(path)
    html_report = target.suffix.lower() in (".html", ".htm")
    write_text_atomic(target, render_html(result) if html_report else render_markdown(result))
