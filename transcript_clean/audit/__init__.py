"""`audit`: a cleaning run's stats without its data, checked against gates and a baseline.

The measuring part: `measure` (error rate, shares, gates), `baseline` (drift against a previous
run), `samples` (each code's first rows) and `run` (the audit, block by block on an engine).
The renderers import these, never the other way round: `render` (terminal text, JSON,
Markdown), `html` (the HTML page, from a Jinja2 template) and `report` (the report file).
"""

from __future__ import annotations

from transcript_clean.audit.baseline import (
    Baseline,
    BaselineError,
    Drift,
    compute_drift,
    load_baseline,
)
from transcript_clean.audit.measure import (
    Gate,
    code_shares,
    error_rate,
    parse_code_limit,
    parse_fraction,
)
from transcript_clean.audit.run import DEFAULT_SAMPLES, STATS_FILES, AuditResult, audit, write_stats
from transcript_clean.audit.samples import Sample

__all__ = [
    "DEFAULT_SAMPLES",
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
    "error_rate",
    "load_baseline",
    "parse_code_limit",
    "parse_fraction",
    "write_stats",
]
