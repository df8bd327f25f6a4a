"""The error-stats table and the run summary (SPEC section 7)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from transcript_clean import markdown as md
from transcript_clean.errors import AccountingError
from transcript_clean.model import AssistantMessage, ToolCall
from transcript_clean.profile import Profile, add_counts
from transcript_clean.rules import EMPTY_ASSISTANT_TURN, NO_ASSISTANT_TURN, codes
from transcript_clean.tools import calls_per_tool

if TYPE_CHECKING:
    from transcript_clean.rows import RowResult
    from transcript_clean.shapes import Shape

ACTIONS = ("dropped", "repaired", "kept", "rejected", "present")
"""The stats table's actions. A rejected row's codes are `rejected` where they decided its fate
(their action is reject, or their repair failed) and `present` where they were merely there."""

TOP_TOOLS = 20
"""How many tools the tools section names; the rest are summed as "other"."""
TOOL_CODES = ("unknown_tool", "tool_arguments_schema", "invalid_tool_declaration")

STATS_SCHEMA = pa.schema(
    [
        pa.field("code", pa.string()),
        pa.field("action", pa.string()),
        pa.field("rows", pa.int64()),
        pa.field("occurrences", pa.int64()),
        pa.field("share", pa.float64()),
        pa.field("example_source", pa.string()),
        pa.field("example_row", pa.int64()),
    ]
)


@dataclass(slots=True)
class CodeStats:
    rows: int = 0
    occurrences: int = 0
    example_source: str | None = None
    example_row: int | None = None


def _code_order(key: tuple[str, str]) -> tuple[int, str, int]:
    code, action = key
    order = codes()
    rank = order.index(code) if code in order else len(order)
    return (rank, code, ACTIONS.index(action) if action in ACTIONS else len(ACTIONS))


@dataclass(slots=True)
class Stats:
    """Counts of one batch, block or run; `merge` adds another's in input order."""

    rows_in: int = 0
    rows_kept: int = 0
    rows_repaired: int = 0
    rows_rejected: int = 0
    messages_in: int = 0
    messages_out: int = 0
    empty_turns_dropped: int = 0
    rows_clean: int = 0
    """Rows with no code at all."""
    codes: dict[tuple[str, str], CodeStats] = field(default_factory=dict)
    rows_declaring_tools: int = 0
    """Rows that declare their tools (issue 17); the two counts below are of those rows."""
    tools_declared: dict[str, int] = field(default_factory=dict)
    """Per tool name, the rows that declare it."""
    tool_calls: dict[str, int] = field(default_factory=dict)
    """Per tool name, the calls to it."""

    def add_tools(self, rows: int, declared: Mapping[str, int], calls: Mapping[str, int]) -> None:
        """Count `rows` rows that declare tools, with their declared tools and calls."""
        self.rows_declaring_tools += rows
        add_counts(self.tools_declared, declared)
        add_counts(self.tool_calls, calls)

    profile: Profile = field(default_factory=Profile)
    """What the rows are (`transcript_clean.profile`), as they came in."""

    def add_row(self, result: RowResult, source: str, row: int) -> None:
        if result.tools is not None and result.decoded is not None:
            calls = (c.name for m in result.decoded.messages for c in _calls_of(m))
            self.add_tools(1, dict.fromkeys(result.tools.tools, 1), calls_per_tool(calls))
        self.rows_in += 1
        self.messages_in += result.messages_in
        self.messages_out += result.messages_out
        if result.status == "rejected":
            self.rows_rejected += 1
        else:
            self.rows_kept += 1
            self.rows_repaired += result.status == "repaired"
        self.rows_clean += not result.actions
        counts = result.occurrences()
        for code, action in result.actions.items():
            self.add_code(code, action, 1, counts.get(code, 1), source, row)
            if code == EMPTY_ASSISTANT_TURN and action == "dropped":
                self.empty_turns_dropped += counts.get(code, 0)

    def add_code(
        self, code: str, action: str, rows: int, occurrences: int, source: str, first: int
    ) -> None:
        """Count `rows` rows with `code` handled by `action`; `first` is the first of them. Within
        one source the example is the earliest row, whatever order the rows are added in."""
        entry = self.codes.get((code, action))
        if entry is None:
            entry = self.codes[(code, action)] = CodeStats(example_source=source, example_row=first)
        elif entry.example_source == source and (entry.example_row or 0) > first:
            entry.example_row = first
        entry.rows += rows
        entry.occurrences += occurrences

    def add_clean_rows(self, rows: int, messages: int) -> None:
        """Rows kept unchanged with no code (the fast path's), holding `messages` messages."""
        self.add_kept_rows(rows, messages, messages)
        self.rows_clean += rows

    def add_kept_rows(
        self, rows: int, messages_in: int, messages_out: int, *, repaired: bool = False
    ) -> None:
        """Rows kept (repaired ones too) that the fast path settled; their codes go to
        `add_code`."""
        self.rows_in += rows
        self.rows_kept += rows
        self.rows_repaired += rows if repaired else 0
        self.messages_in += messages_in
        self.messages_out += messages_out

    def add_rejected_rows(self, rows: int, messages_in: int) -> None:
        """Rows rejected as they are that the fast path settled; their codes go to `add_code`."""
        self.rows_in += rows
        self.rows_rejected += rows
        self.messages_in += messages_in

    def merge(self, other: Stats) -> None:
        """Add `other`, which comes after `self` in input order (so examples stay the first)."""
        self.rows_in += other.rows_in
        self.rows_kept += other.rows_kept
        self.rows_repaired += other.rows_repaired
        self.rows_rejected += other.rows_rejected
        self.messages_in += other.messages_in
        self.messages_out += other.messages_out
        self.empty_turns_dropped += other.empty_turns_dropped
        self.rows_clean += other.rows_clean
        self.profile.merge(other.profile)
        for key, theirs in other.codes.items():
            mine = self.codes.get(key)
            if mine is None:
                self.codes[key] = CodeStats(**_fields(theirs))
            else:
                mine.rows += theirs.rows
                mine.occurrences += theirs.occurrences
        self.add_tools(other.rows_declaring_tools, other.tools_declared, other.tool_calls)

    def check(self) -> None:
        """The run's invariant: every row in is either kept or rejected, once."""
        if self.rows_in != self.rows_kept + self.rows_rejected:
            raise AccountingError(
                f"row accounting failed: {self.rows_in} rows in, but {self.rows_kept} kept + "
                f"{self.rows_rejected} rejected = {self.rows_kept + self.rows_rejected}"
            )

    @property
    def rows_with_violations(self) -> int:
        """Rows with any code (a kept-as-is code counts): the audit's error rate numerator."""
        return self.rows_in - self.rows_clean

    def records(self) -> list[dict[str, Any]]:
        """The error-stats table as rows: code, action, rows, occurrences, share, example."""
        return [
            {
                "code": code,
                "action": action,
                "rows": entry.rows,
                "occurrences": entry.occurrences,
                "share": entry.rows / self.rows_in if self.rows_in else 0.0,
                "example_source": entry.example_source,
                "example_row": entry.example_row,
            }
            for (code, action), entry in sorted(
                self.codes.items(), key=lambda kv: _code_order(kv[0])
            )
        ]

    def table(self) -> pa.Table:
        return pa.Table.from_pylist(self.records(), schema=STATS_SCHEMA)

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=STATS_SCHEMA.names, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: _csv_cell(v) for k, v in r.items()} for r in self.records())
        return out.getvalue()

    def counts(self) -> dict[str, int]:
        return {
            "rows_in": self.rows_in,
            "rows_kept": self.rows_kept,
            "rows_repaired": self.rows_repaired,
            "rows_rejected": self.rows_rejected,
            "rows_clean": self.rows_clean,
            "messages_in": self.messages_in,
            "messages_out": self.messages_out,
            "empty_turns_dropped": self.empty_turns_dropped,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.counts(),
            "codes": [[c, a, _fields(s)] for (c, a), s in self.codes.items()],
            "rows_declaring_tools": self.rows_declaring_tools,
            "tools_declared": self.tools_declared,
            "tool_calls": self.tool_calls,
            "profile": self.profile.to_dict(),
        }

    def tools_summary(self, top: int = TOP_TOOLS) -> dict[str, Any]:
        """The tools section of summary.json and the dataset card: the rows that declare tools,
        the tools declared (rows each) and the calls per tool, each the `top` most and
        "other"; `table`, both counts for one list of tools (`tool_table`); and the rows with
        each declared-tools code."""
        codes: dict[str, int] = dict.fromkeys(TOOL_CODES, 0)
        for (code, _), entry in self.codes.items():
            if code in codes:
                codes[code] += entry.rows
        return {
            "rows_declaring_tools": self.rows_declaring_tools,
            "distinct_tools": len(self.tools_declared),
            "tools_declared": top_counts(self.tools_declared, top),
            "calls_per_tool": top_counts(self.tool_calls, top),
            "table": tool_table(self.tool_calls, self.tools_declared, top),
            "codes": codes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Stats:
        stats = cls(**{k: v for k, v in data.items() if k not in ("codes", "profile")})
        stats.codes = {(c, a): CodeStats(**s) for c, a, s in data["codes"]}
        if "profile" in data:  # stats recorded before profiles have none
            stats.profile = Profile.from_dict(data["profile"])
        return stats


def top_counts(counts: Mapping[str, int], top: int) -> dict[str, int]:
    """The `top` largest counts, most first (ties by name), and the rest summed as "other"."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[:top])
    rest = sum(n for _, n in ranked[top:])
    if rest:
        out["other"] = rest
    return out


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a CSV cell as a formula (OWASP's CSV injection list)."""


def _csv_cell(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula, with a `'` put before it, as OWASP
    advises: a source file named `=HYPERLINK(...).parquet` must stay text in stats.csv. Numbers
    and stats.parquet are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def tool_table(calls: Mapping[str, int], declared: Mapping[str, int], top: int) -> dict[str, Any]:
    """Calls and rows declaring, for one list of tools cut once: `tools`, the `top` most called
    as `[name, calls, rows declaring it]` (ties: the most declared, then by name), and `other`,
    the rest summed (`declarations`: each tool's rows declaring it, added up)."""
    names = sorted({*calls, *declared}, key=lambda n: (-calls.get(n, 0), -declared.get(n, 0), n))
    rest = names[top:]
    return {
        "tools": [[n, calls.get(n, 0), declared.get(n, 0)] for n in names[:top]],
        "other": {
            "tools": len(rest),
            "calls": sum(calls.get(n, 0) for n in rest),
            "declarations": sum(declared.get(n, 0) for n in rest),
        },
    }


def _calls_of(message: Any) -> tuple[ToolCall, ...]:
    return message.tool_calls if isinstance(message, AssistantMessage) else ()


def _fields(entry: CodeStats) -> dict[str, Any]:
    return {
        "rows": entry.rows,
        "occurrences": entry.occurrences,
        "example_source": entry.example_source,
        "example_row": entry.example_row,
    }


def run_summary(
    stats: Stats,
    *,
    source: str,
    format: str,
    column: str,
    config: Mapping[str, Any],
    fingerprint: str,
    seconds: float,
    engine: str = "local",
    workers: int = 1,
    shape: Shape | None = None,
    output: tuple[str, str] | None = None,
    format_hint: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """summary.json: the counts, the stats table, what ran on what, and how fast. `shape`: a
    dataset type's (its name and parts are written; else the type is `conversation`);
    `output`: the output format and compression a clean run wrote (an audit writes none);
    `format_hint`: the format to pass when the one named does not read the rows
    (`options.format_hint`), the summary's `hint`."""
    import sys

    from transcript_clean.version import __version__

    datasets = sys.modules.get("datasets")  # loaded when the source was read through it
    hint = format_hint or prompt_set_hint(stats, column, shape)

    return {
        "source": source,
        "format": format,
        "column": column,
        "type": "conversation" if shape is None else shape.kind,
        **({} if shape is None else {"parts": _parts(shape)}),
        "output": None if output is None else {"format": output[0], "compression": output[1]},
        "config": dict(config),
        "fingerprint": fingerprint,
        "counts": stats.counts(),
        "rows_in": stats.rows_in,
        "rows_kept": stats.rows_kept,
        "rows_repaired": stats.rows_repaired,
        "rows_rejected": stats.rows_rejected,
        "accounting_ok": stats.rows_in == stats.rows_kept + stats.rows_rejected,
        "stats": stats.records(),
        "tools": stats.tools_summary(),
        "profile": stats.profile.report(),
        # only when there is one, so that other runs' summaries read as they always did
        **({"hint": hint} if hint is not None else {}),
        **extra,
        "engine": engine,
        "workers": workers,
        "seconds": round(seconds, 3),
        "rows_per_second": round(stats.rows_in / seconds, 1) if seconds > 0 else None,
        "versions": {
            "transcript_clean": __version__,
            "pyarrow": pa.__version__,
            "datasets": None if datasets is None else datasets.__version__,
            "python": sys.version.split()[0],
        },
    }


def prompt_set_hint(stats: Stats, column: str, shape: Shape | None) -> str | None:
    """What to pass when every row of one conversation column was rejected for having no
    assistant turn (issue 27, item 3): such a set is a prompt set, read as conversations."""
    if shape is not None or not stats.rows_in:
        return None
    entry = stats.codes.get((NO_ASSISTANT_TURN, "rejected"))
    if entry is None or entry.rows != stats.rows_in:
        return None
    return (
        "no row has an assistant turn: a prompt set (RL fine-tuning)? read it with --type prompt "
        f"--prompt-column {column}"
    )


def render_table(records: list[dict[str, Any]], *, markdown: bool = False) -> str:
    """The stats table as aligned text for a terminal, or as a Markdown table."""
    header = ["code", "action", "rows", "occurrences", "share", "example"]
    body = [
        [
            r["code"],
            r["action"],
            f"{r['rows']:,}",
            f"{r['occurrences']:,}",
            f"{100 * r['share']:.2f}%",
            f"{r['example_source']}#{r['example_row']}" if r["example_source"] is not None else "",
        ]
        for r in records
    ]
    if markdown:  # the example is the data's file name: shown as code, never as markup
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for *cells, example in body:
            lines.append("| " + " | ".join([*cells, md.code(example) if example else ""]) + " |")
        return "\n".join(lines)
    if not body:
        return "no violations found"
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    right = {2, 3, 4}

    def line(row: list[str]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, body)])


def render_accounting(stats: Stats) -> str:
    return (
        f"rows in {stats.rows_in:,} = kept {stats.rows_kept:,} "
        f"(repaired {stats.rows_repaired:,}) + rejected {stats.rows_rejected:,}"
    )


def _parts(shape: Shape) -> dict[str, Any]:
    """Where a dataset type's parts are: its prompt, candidates and label."""
    parts: dict[str, Any] = {"prompt": shape.prompt, "candidates": list(shape.candidates)}
    if shape.label is not None:
        parts["label"] = shape.label
    return parts
