"""The audit's words: the terminal text, the JSON document and the Markdown report."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from transcript_clean import markdown as md
from transcript_clean.audit.baseline import Drift
from transcript_clean.audit.measure import Gate
from transcript_clean.audit.profile_drift import ProfileDrift
from transcript_clean.audit.run import AuditResult
from transcript_clean.audit.samples import Sample
from transcript_clean.explain import render_message, render_transcript
from transcript_clean.model import Message
from transcript_clean.rows import RepairStep
from transcript_clean.stats import render_accounting, render_table

__all__ = [
    "render_drift",
    "render_gates",
    "render_json",
    "render_markdown",
    "render_text",
    "sample_to_dict",
]

MAX_LINES = 40
"""A sample's transcript is shown up to this many messages; the rest is summed up in one line."""
CONTEXT = 2
"""Unchanged messages shown around what a repair changed."""


def pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def pp(value: float) -> str:
    # Rounded first, so that a change too small to show is "+0.00 pp", never "-0.00 pp".
    return f"{round(100 * value, 2) + 0.0:+.2f} pp"


def trend(change: float) -> str:
    """`up`, `down`, or "" for a change of a share that shows as none (`pp`'s 0.00): the class
    that colours it, so that nothing unchanged is drawn as a rise or a fall."""
    shown = round(100 * change, 2)
    return "up" if shown > 0 else "down" if shown < 0 else ""


def explain_command(sample: Sample, summary: Mapping[str, Any]) -> str:
    """The command that explains a sample's row, to copy into a shell: its file and row, the
    format, and the config when it is a built-in one (a file's is known only by its name)."""
    from transcript_clean.policy import builtin_configs

    args = ["transcript-clean", "explain", sample.source, "--row", str(sample.row)]
    args += ["--format", summary["format"]]
    if summary["config"]["name"] in builtin_configs():
        args += ["--config", summary["config"]["name"]]
    return shlex.join(args)


def transcript_text(messages: Sequence[Message]) -> str:
    lines = render_transcript(messages, indent="").splitlines()
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"… {len(lines) - MAX_LINES} more messages"]
    return "\n".join(lines)


def changed(before: Sequence[Message], after: Sequence[Message]) -> tuple[str, str]:
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
    before, after = changed(step.before, step.after)
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
        "transcript": transcript_text(sample.transcript),
    }


def render_json(result: AuditResult) -> dict[str, Any]:
    """One JSON-able document: the summary, drift, gates and samples (for `--json`)."""
    return {
        **result.summary,
        "baseline": result.baseline.path if result.baseline is not None else None,
        "drift": [d.to_dict() for d in result.drift] if result.drift is not None else None,
        "profile_drift": None
        if result.profile_drift is None
        else [d.to_dict() for d in result.profile_drift],
        "gates": [g.to_dict() for g in result.gates],
        "failed_gates": [g.describe() for g in result.failed],
        "passed": result.passed,
        "samples": {
            code: [sample_to_dict(s) for s in samples] for code, samples in result.samples.items()
        },
    }


# ---------------------------------------------------------------------------------------------
# terminal text


def render_drift(drift: Sequence[Drift], *, markdown: bool = False) -> str:
    """The drift table: per code, the previous share, the current share and the change."""
    header = ["code", "previous", "current", "change"]
    body = [[d.code, pct(d.previous), pct(d.current), pp(d.change)] for d in drift]
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


def render_profile_drift(drift: Sequence[ProfileDrift], *, markdown: bool = False) -> str:
    """The profile's figures beside the baseline's: turn-class shares, lengths' p50 and p95,
    calls per tool."""
    header = ["figure", "baseline", "now", "change"]
    body = [[d.name, d.show(d.previous), d.show(d.current), d.show_change()] for d in drift]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|---:|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells))

    return "\n".join(line(row) for row in [header, ["-" * w for w in widths], *body])


def render_profile(profile: dict[str, Any]) -> str:
    """The profile in a few lines: the turn classes, and the lengths per row and per turn."""
    turns = ", ".join(
        f"{name} {pct(share)}" for name, share in profile["turn_shares"].items() if share
    )
    lines = [f"assistant turns: {turns or 'none'}"]
    sections = [
        ("per row", profile["per_row"]),
        ("per assistant turn", profile["per_assistant_turn"]),
    ]
    for where, section in sections:
        for name, d in section.items():
            lines.append(
                f"{name} {where}: mean {d['mean']:,.1f}, p5 {d['p5']:,}, p50 {d['p50']:,}, "
                f"p95 {d['p95']:,}, max {d['max']:,}"
            )
    lines.append(f"rows with a system message: {pct(profile['system_share'])}")
    return "\n".join(lines)


def _headline(result: AuditResult) -> str:
    stats = result.stats
    return (
        f"rows in {stats.rows_in:,}; with violations {stats.rows_with_violations:,} "
        f"({pct(result.error_rate)})"
    )


TEMPLATE_CODES = (
    "template_error", "template_drops_content", "template_prunes_history", "no_trained_tokens",
)  # fmt: skip


def render_template(result: AuditResult) -> list[str]:
    """With `--chat-template`, its section: rows rendered, each template code's rows, and the
    rendered and trained tokens per row kept; nothing without one."""
    template = result.summary["config"].get("chat_template")
    if template is None:
        return []
    profile = result.summary["profile"]
    rows: dict[str, int] = {}
    for (code, _), stat in result.stats.codes.items():
        rows[code] = rows.get(code, 0) + stat.rows
    lines = [
        f"chat template {template}: rows rendered {profile.get('rendered_rows', 0):,}",
        "  " + "; ".join(f"{code} {rows.get(code, 0):,} rows" for code in TEMPLATE_CODES),
    ]
    for name in ("rendered_tokens", "trained_tokens"):
        d = profile["per_row"].get(name)
        if d is not None:
            lines.append(
                f"  {name.replace('_', ' ')} per row kept: mean {d['mean']:,.1f}, p50 "
                f"{d['p50']:,}, p95 {d['p95']:,}, max {d['max']:,}"
            )
    if "trained_tokens" not in profile["per_row"]:
        lines.append("  trained tokens: not counted (no {% generation %}, or no tokenizer)")
    return lines


def render_text(result: AuditResult) -> str:
    """What `transcript-clean audit` prints: stats, accounting, drift and gates."""
    lines = [render_table(result.stats.records()), "", _headline(result)]
    lines.append(render_accounting(result.stats) + "  (checked)")
    section = render_template(result)
    if section:
        lines += ["", *section]
    if result.drift is not None and result.baseline is not None:
        lines += ["", f"drift against {result.baseline.path}:", render_drift(result.drift)]
    lines += ["", "profile:", render_profile(result.summary["profile"])]
    if result.profile_drift is not None and result.baseline is not None:
        lines += ["", f"profile drift against {result.baseline.path}:"]
        lines.append(render_profile_drift(result.profile_drift))
    if result.gates:
        lines += ["", "gates:", *render_gates(result.gates)]
    return md.printable("\n".join(lines))


def render_gates(gates: Sequence[Gate]) -> list[str]:
    """A line per gate: `  FAIL  gate max-error-rate: 12.40% > 10.00%`, or `ok`."""
    return [f"  {'FAIL' if g.exceeded else 'ok':<4}  {g.describe()}" for g in gates]


# ---------------------------------------------------------------------------------------------
# Markdown


def _fenced(text: str, language: str = "text") -> str:
    """A code block no backticks in `text` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def shows_reject(sample: Sample) -> bool:
    """Whether the reject message adds to the violations listed (another code, or words)."""
    return (
        sample.outcome == "rejected"
        and sample.reject_message is not None
        and sample.reject_message not in sample.violations
    )


def _sample_text(sample: Sample) -> str:
    lines = [*(f"- {v}" for v in sample.violations)]
    if shows_reject(sample):
        lines.append(f"rejected: {sample.reject_message}")
    for step in sample.steps:
        before, after = changed(step.before, step.after)
        lines += ["", f"repair {step.code}, before:", before, "", "after:", after]
    if not sample.steps and sample.transcript:
        lines += ["", "transcript:", transcript_text(sample.transcript)]
    return "\n".join(lines)


def render_markdown(result: AuditResult) -> str:
    """The report as Markdown: summary, gates, stats, drift and samples."""
    s = result.summary
    out = [
        f"# Audit of {md.code(s['source'])}",
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
    section = render_template(result)
    if section:
        out += ["", "## Chat template", "", _fenced("\n".join(section))]
    out += ["", "## Profile", "", _fenced(render_profile(result.summary["profile"]))]
    if result.profile_drift is not None and result.baseline is not None:
        out += ["", "## Profile drift", "", f"Against `{result.baseline.path}`.", ""]
        out.append(render_profile_drift(result.profile_drift, markdown=True))
    if result.samples:
        out += ["", "## Samples"]
        for code, samples in result.samples.items():
            out += ["", f"### {code}"]
            for sample in samples:
                out += ["", f"**{md.text(sample.source)} row {sample.row}**: {sample.action}", ""]
                out += [_fenced(explain_command(sample, s), "bash"), ""]
                out.append(_fenced(_sample_text(sample)))
    return md.printable("\n".join(out) + "\n")
