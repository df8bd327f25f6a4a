"""`audit`: a cleaning run's stats without its data, checked against gates and a baseline.

The audit runs the very `clean_batch` a cleaning run runs, over the same rows, and merges the
batches' `Stats` in input order, so it reports exactly the stats `clean` would; it writes no data.
On top it measures the error rate and each code's share, compares them with a previous run's
(drift), checks the gates, and keeps the first rows of each code as samples for the report.
"""

from __future__ import annotations

import bisect
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from transcript_clean.errors import OutputError, TranscriptCleanError
from transcript_clean.fastpath import Verdicts
from transcript_clean.formats.base import Format, Row
from transcript_clean.model import Message
from transcript_clean.pipeline import clean_batch_parts
from transcript_clean.policy import Config, load_config
from transcript_clean.rows import RepairStep, RowResult, clean_row
from transcript_clean.rules import TRAILING_TOOL_CALL, UNANSWERED_TOOL_CALL, codes
from transcript_clean.sinks import write_table_atomic, write_text_atomic
from transcript_clean.sources import DEFAULT_BATCH_SIZE, Source, open_source
from transcript_clean.stats import Stats, run_summary

__all__ = [
    "STATS_FILES",
    "AuditResult",
    "Baseline",
    "BaselineError",
    "Drift",
    "Gate",
    "Sample",
    "audit",
    "code_shares",
    "compute_drift",
    "load_baseline",
    "parse_code_limit",
    "parse_fraction",
    "write_stats",
]

DEFAULT_SAMPLES = 3
STATS_FILES = ("stats.parquet", "stats.csv", "summary.json")
"""What `--stats-out` writes: the stats files of a cleaning run's OUTPUT, same names and layout."""
REPORT_SUFFIXES = (".md", ".markdown", ".html", ".htm")


class BaselineError(TranscriptCleanError):
    """A baseline that cannot be read: missing, not JSON or Parquet, or without stats."""


# ---------------------------------------------------------------------------------------------
# what an audit measures


def code_shares(stats: Stats) -> dict[str, float]:
    """Each code's share of the rows in: rows with the code, whatever its action, / rows in."""
    rows: dict[str, int] = {}
    for (code, _action), entry in stats.codes.items():
        rows[code] = rows.get(code, 0) + entry.rows
    return {code: n / stats.rows_in if stats.rows_in else 0.0 for code, n in _by_code(rows)}


def error_rate(stats: Stats) -> float:
    """Rows with any violation (kept-as-is codes included) / rows in."""
    return stats.rows_with_violations / stats.rows_in if stats.rows_in else 0.0


def _code_rank(code: str) -> tuple[int, str]:
    order = codes()
    return (order.index(code) if code in order else len(order), code)


def _by_code(values: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return sorted(values.items(), key=lambda kv: _code_rank(kv[0]))


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
        raise ValueError(f"unknown code {code!r}; the codes are {', '.join(codes())}")
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
    """How the numbers read: `%` for shares, `pp` (percentage points) for a change of share."""

    @property
    def exceeded(self) -> bool:
        return self.measured > self.limit

    def describe(self) -> str:
        """`gate max-error-rate: 12.40% > 10.00%`."""
        sign = ">" if self.exceeded else "<="
        text = f"gate {self.name}: {self.show(self.measured)} {sign} {self.show(self.limit)}"
        return f"{text} ({self.detail})" if self.detail else text

    def show(self, value: float) -> str:
        """`value` in the gate's unit: `12.40%` or `1.50 pp`."""
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


# ---------------------------------------------------------------------------------------------
# drift against a baseline


@dataclass(slots=True, frozen=True)
class Baseline:
    """A previous run's per-code shares, from its summary.json or stats.parquet."""

    path: str
    shares: dict[str, float]
    rows_in: int | None = None
    config: str | None = None
    format: str | None = None


@dataclass(slots=True, frozen=True)
class Drift:
    """One code's share before and now; `change` = current - previous."""

    code: str
    previous: float
    current: float

    @property
    def change(self) -> float:
        return self.current - self.previous

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "previous": self.previous,
            "current": self.current,
            "change": self.change,
        }


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """A baseline from a clean or audit run: its summary.json, its stats.parquet, or a folder
    holding either (summary.json preferred). Raises `BaselineError` naming the file."""
    target = Path(path)
    if target.is_dir():
        for name in ("summary.json", "stats.parquet"):
            if (target / name).is_file():
                target = target / name
                break
        else:
            raise BaselineError(f"baseline {path}: the folder has no summary.json or stats.parquet")
    elif not target.exists():
        raise BaselineError(f"baseline {path}: no such file or folder")
    if target.suffix == ".parquet":
        return _baseline_from_parquet(target)
    return _baseline_from_summary(target)


def _baseline_from_summary(path: Path) -> Baseline:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BaselineError(f"baseline {path}: cannot read it as JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("stats"), list):
        raise BaselineError(f"baseline {path}: not a summary.json (it has no 'stats' list)")
    rows_in = data.get("rows_in")
    rows_in = rows_in if isinstance(rows_in, int) and not isinstance(rows_in, bool) else None
    config = data.get("config")
    return Baseline(
        str(path),
        _shares_of(path, data["stats"], rows_in),
        rows_in,
        config.get("name") if isinstance(config, dict) else None,
        data.get("format") if isinstance(data.get("format"), str) else None,
    )


def _baseline_from_parquet(path: Path) -> Baseline:
    import pyarrow.parquet as pq

    try:
        records = pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowException) as err:
        raise BaselineError(f"baseline {path}: cannot read it as Parquet ({err})") from None
    return Baseline(str(path), _shares_of(path, records, None))


def _shares_of(path: Path, records: list[Any], rows_in: int | None) -> dict[str, float]:
    """Per-code shares of a stats table: rows / rows in (share when rows in is unknown), summed
    over the code's actions."""
    shares: dict[str, float] = {}
    for i, record in enumerate(records):
        try:
            code = str(record["code"])
            share = record["rows"] / rows_in if rows_in else float(record["share"])
        except (KeyError, TypeError, ValueError) as err:
            raise BaselineError(
                f"baseline {path}: stats row {i} has no usable code, rows and share ({err!r})"
            ) from None
        shares[code] = shares.get(code, 0.0) + share
    return dict(_by_code(shares))


def compute_drift(previous: Mapping[str, float], current: Mapping[str, float]) -> list[Drift]:
    """Every code in either run, in the codes' order; a code absent from one run has share 0."""
    codes = sorted(set(previous) | set(current), key=_code_rank)
    return [Drift(c, previous.get(c, 0.0), current.get(c, 0.0)) for c in codes]


def _largest_drift(drift: list[Drift]) -> Drift | None:
    return max(drift, key=lambda d: abs(d.change), default=None)


# ---------------------------------------------------------------------------------------------
# samples


@dataclass(slots=True, frozen=True)
class Sample:
    """One row showing a code: where it is, what is wrong, and what the cleaner did about it."""

    code: str
    action: str
    source: str
    row: int
    violations: tuple[str, ...]
    """This code's violations in the row, in words."""
    outcome: str
    """unchanged, repaired or rejected: the row's fate."""
    reject_message: str | None
    steps: tuple[RepairStep, ...]
    """The repairs of this code: before and after."""
    transcript: tuple[Message, ...]
    """The decoded transcript (empty when the row could not be decoded)."""


class _SampleCollector:
    """Keeps the first `n` rows of each code, in input order: the per-row path's, as
    `clean_batch`'s `on_row`, and the fast path's (`settled`), batch by batch."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: dict[tuple[str, int], Row] = {}
        self.picked: dict[str, list[tuple[tuple[int, int], str, int, RowResult | None]]] = {}
        """Per code, the rows chosen so far, by (batch, row number), in that order."""
        self.source = ""
        self.batch = 0
        """The batch being looked at, counted from 0 in input order."""

    def __call__(self, number: int, row: Row, result: RowResult) -> None:
        for code in result.actions:
            if self._wants(code, number):
                self._add(code, number, row, result)

    def settled(self, table: pa.Table, verdicts: Verdicts, first_row: int) -> None:
        """Offer the rows of `table` (which starts at row `first_row`) the fast path settled."""
        for code, rows in verdicts.coded():
            for i in np.flatnonzero(rows)[: self.n].tolist():
                if self._wants(code, first_row + i):
                    self._add(code, first_row + i, table.slice(i, 1).to_pylist()[0], None)

    def _wants(self, code: str, number: int) -> bool:
        chosen = self.picked.get(code, [])
        return len(chosen) < self.n or (self.batch, number) < chosen[-1][0]

    def _add(self, code: str, number: int, row: Row, result: RowResult | None) -> None:
        chosen = self.picked.setdefault(code, [])
        bisect.insort(chosen, ((self.batch, number), self.source, number, result))
        self.rows[(self.source, number)] = row
        del chosen[self.n :]

    def samples(self, fmt: Format, config: Config) -> dict[str, list[Sample]]:
        traced: dict[tuple[str, int], RowResult] = {}
        out: dict[str, list[Sample]] = {}
        for code, chosen in _by_code(self.picked):
            out[code] = []
            for _, source, number, result in chosen:
                key = (source, number)
                if key not in traced:
                    traced[key] = _traced(self.rows[key], fmt, config, result)
                out[code].append(_sample(code, source, number, traced[key]))
        return out


def _traced(row: Row, fmt: Format, config: Config, result: RowResult | None) -> RowResult:
    """The row cleaned again with `trace`, for the repairs' before and after. A conversation
    column of JSON text is parsed first, as `clean_batch` does; if it does not parse, the row was
    rejected for it and `result` (the per-row path's: the fast path leaves JSON text alone)
    already says all there is."""
    value = row.get(fmt.column)
    if isinstance(value, str):
        try:
            row = {**row, fmt.column: json.loads(value)}
        except json.JSONDecodeError:
            assert result is not None
            return result
    return clean_row(row, fmt, config, trace=True)


def _sample(code: str, source: str, number: int, result: RowResult) -> Sample:
    action = result.actions.get(code, "")
    steps = [s for s in result.steps if s.code == code]
    if not steps and code == TRAILING_TOOL_CALL:  # repaired along with unanswered calls
        steps = [s for s in result.steps if s.code == UNANSWERED_TOOL_CALL]
    if not steps and action in ("repaired", "dropped"):  # uncovered by another repair
        steps = list(result.steps)
    return Sample(
        code=code,
        action=action,
        source=source,
        row=number,
        violations=tuple(v.message for v in result.violations if v.code == code),
        outcome=result.status,
        reject_message=result.reject_message,
        steps=tuple(steps),
        transcript=tuple(result.decoded.messages) if result.decoded is not None else (),
    )


# ---------------------------------------------------------------------------------------------
# the audit


@dataclass(slots=True)
class AuditResult:
    """Everything an audit found: the summary (a clean run's, plus the audit's measures), the
    stats, samples per code, the drift against a baseline and the gates."""

    summary: dict[str, Any]
    stats: Stats
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    baseline: Baseline | None = None
    drift: list[Drift] | None = None
    gates: list[Gate] = field(default_factory=list)

    @property
    def error_rate(self) -> float:
        return error_rate(self.stats)

    @property
    def shares(self) -> dict[str, float]:
        return code_shares(self.stats)

    @property
    def failed(self) -> list[Gate]:
        return [gate for gate in self.gates if gate.exceeded]

    @property
    def passed(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        """One JSON-able document: the summary, drift, gates and samples (for `--json`)."""
        from transcript_clean.report import sample_to_dict

        return {
            **self.summary,
            "baseline": self.baseline.path if self.baseline is not None else None,
            "drift": [d.to_dict() for d in self.drift] if self.drift is not None else None,
            "gates": [g.to_dict() for g in self.gates],
            "failed_gates": [g.describe() for g in self.failed],
            "passed": self.passed,
            "samples": {
                code: [sample_to_dict(s) for s in samples] for code, samples in self.samples.items()
            },
        }


def audit(
    source: str | os.PathLike[str] | Source,
    *,
    config: Config | str | os.PathLike[str] | None = None,
    format: str | Format = "auto",
    column: str | None = None,
    limit: int | None = None,
    samples: int = DEFAULT_SAMPLES,
    baseline: str | os.PathLike[str] | Baseline | None = None,
    max_error_rate: float | None = None,
    max_share: Mapping[str, float] | None = None,
    max_drift: float | None = None,
    stats_out: str | os.PathLike[str] | None = None,
    report: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    split: str | None = None,
    subset: str | None = None,
    revision: str | None = None,
    streaming: bool = False,
    progress: Callable[[int], None] | None = None,
    on_start: Callable[[Source, Format, int | None], None] | None = None,
) -> AuditResult:
    """Audit `source`: the stats `clean` would report for it, without writing data.

    `max_error_rate`, `max_share` (code -> limit) and `max_drift` (needs `baseline`) are gates,
    fractions of the rows in; `result.failed` lists the ones exceeded. `stats_out` gets
    stats.parquet, stats.csv and summary.json; `report` a Markdown or HTML report (by suffix).
    Everything that can fail before the run (config, baseline, outputs) fails first.

        >>> audit("raw/", config="strict", max_error_rate=0.05).passed  # doctest: +SKIP
    """
    from transcript_clean.engine.local import plan_blocks, with_verdicts
    from transcript_clean.run import DEFAULT_ROWS_PER_SHARD, resolve_format

    started = time.perf_counter()
    unknown = sorted(set(max_share or {}) - set(codes()))
    if unknown:
        raise ValueError(f"unknown code {unknown[0]!r} (codes: {', '.join(codes())})")
    if max_drift is not None and baseline is None:
        raise ValueError("max_drift needs a baseline")
    if samples < 0:
        raise ValueError("samples must be at least 0")
    cfg = config if isinstance(config, Config) else load_config(config)
    base = (
        baseline if baseline is None or isinstance(baseline, Baseline) else load_baseline(baseline)
    )
    if report is not None and Path(report).suffix.lower() not in REPORT_SUFFIXES:
        raise OutputError(f"report {report}: the name must end in .md or .html")
    src = (
        source
        if isinstance(source, Source)
        else open_source(
            os.fspath(source), split=split, subset=subset, revision=revision, streaming=streaming
        )
    )
    if stats_out is not None:
        _check_stats_out(Path(stats_out), src, overwrite)
    fmt = resolve_format(src, format, column)
    rows_total = src.num_rows if limit is None or src.num_rows is None else min(limit, src.num_rows)
    if on_start is not None:
        on_start(src, fmt, rows_total)

    # The blocks `clean` would cut, read in order: the same rows, the same `first_row`s, and
    # the same verdicts, worked out ahead as `clean` does.
    stats = Stats()
    collector = _SampleCollector(samples)
    for block in plan_blocks(src, DEFAULT_ROWS_PER_SHARD, limit):
        row = block.start
        collector.source = block.part.name
        batches = src.read(block.part, block.start, block.stop, batch_size)
        for batch, verdicts in with_verdicts(batches, cfg, fmt):
            cleaned = clean_batch_parts(
                batch,
                cfg,
                format=fmt,
                source=block.part.name,
                first_row=row,
                on_row=collector if samples else None,
                verdicts=verdicts,
            )
            if samples and verdicts is not None:
                collector.settled(cleaned.table, verdicts, row)
            collector.batch += 1
            stats.merge(cleaned.stats)
            row += batch.num_rows
            if progress is not None:
                progress(batch.num_rows)
    stats.check()

    base_shares = base.shares if base is not None else None
    drift = compute_drift(base_shares, code_shares(stats)) if base_shares is not None else None
    gates = _gates(stats, drift, max_error_rate, max_share or {}, max_drift)
    summary = _summary(src, fmt, cfg, stats, limit, time.perf_counter() - started)
    result = AuditResult(summary, stats, collector.samples(fmt, cfg), base, drift, gates)
    if stats_out is not None:
        write_stats(result, stats_out, overwrite=True)
    if report is not None:
        from transcript_clean.report import write_report

        write_report(result, report)
    return result


def _gates(
    stats: Stats,
    drift: list[Drift] | None,
    max_error_rate: float | None,
    max_share: Mapping[str, float],
    max_drift: float | None,
) -> list[Gate]:
    gates = []
    if max_error_rate is not None:
        detail = f"{stats.rows_with_violations:,} of {stats.rows_in:,} rows"
        gates.append(Gate("max-error-rate", error_rate(stats), max_error_rate, detail))
    shares = code_shares(stats)
    for code, limit in _by_code(max_share):
        gates.append(Gate(f"max {code}", shares.get(code, 0.0), limit))
    if max_drift is not None and drift is not None:
        largest = _largest_drift(drift)
        detail = (
            f"{largest.code}: {100 * largest.previous:.2f}% -> {100 * largest.current:.2f}%"
            if largest is not None
            else "no codes in either run"
        )
        measured = abs(largest.change) if largest is not None else 0.0
        gates.append(Gate("max-drift", measured, max_drift, detail, unit="pp"))
    return gates


def _summary(
    src: Source, fmt: Format, cfg: Config, stats: Stats, limit: int | None, seconds: float
) -> dict[str, Any]:
    """A clean run's summary.json keys, plus the audit's own measures."""
    return run_summary(
        stats,
        source=src.name,
        format=fmt.name,
        column=fmt.column,
        config=cfg.to_dict(),
        fingerprint=src.fingerprint(),
        seconds=seconds,
        command="audit",
        limit=limit,
        rows_with_violations=stats.rows_with_violations,
        error_rate=error_rate(stats),
        code_shares=code_shares(stats),
        audited_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


# ---------------------------------------------------------------------------------------------
# the stats files


def _check_stats_out(folder: Path, src: Source, overwrite: bool) -> None:
    """Refuse a folder inside the source (its stats.parquet would be read as data next time), a
    file, or a folder whose stats files `overwrite` does not allow replacing. Other files in the
    folder are left alone."""
    out = folder.absolute()
    for root in src.local_roots():
        root = root.absolute()
        if out == root or out.is_relative_to(root):
            raise OutputError(f"--stats-out {folder} is inside the source {root}: choose another")
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"--stats-out {folder} exists and is a file")
    present = [name for name in STATS_FILES if (folder / name).exists()]
    if present and not overwrite:
        raise OutputError(
            f"--stats-out {folder} already holds {', '.join(present)}: pass --overwrite to "
            "replace them"
        )


def write_stats(
    result: AuditResult, folder: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """stats.parquet, stats.csv and summary.json, as a cleaning run writes them."""
    out = Path(folder)
    present = [name for name in STATS_FILES if (out / name).exists()]
    if present and not overwrite:
        raise OutputError(f"{out} already holds {', '.join(present)}: pass --overwrite")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot create {out}: {err}") from err
    write_table_atomic(out / "stats.parquet", result.stats.table())
    write_text_atomic(out / "stats.csv", result.stats.csv())
    write_text_atomic(out / "summary.json", json.dumps(result.summary, indent=2) + "\n")
