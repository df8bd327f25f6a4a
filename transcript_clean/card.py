"""The dataset card: the README.md of a cleaned dataset (SPEC section 7).

Its YAML header names the shards in data/ as the train split, for the Hugging Face Hub and
`datasets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from transcript_clean.stats import render_table


def dataset_card(
    summary: Mapping[str, Any], records: list[dict[str, Any]], data_files: str = "data/*.parquet"
) -> str:
    """The README.md of a cleaned dataset: what was cleaned, how, and the stats table.
    `data_files` is the shards' glob, which tells `datasets` how to read them."""
    counts = summary["counts"]
    return f"""---
configs:
- config_name: default
  data_files:
  - split: train
    path: {data_files}
---

# Cleaned conversations

Cleaned by [transcript-clean](https://pypi.org/project/transcript-clean/)
{summary["versions"]["transcript_clean"]} from `{summary["source"]}` (format
`{summary["format"]}`, config `{summary["config"]["name"]}`).

Every row was decoded to the canonical transcript model; empty assistant turns were dropped;
each row was validated (consecutive assistant messages, unanswered tool calls, orphan tool results,
tool arguments that are not a JSON object) and repaired or rejected as the config says. Every kept
row passes validation. Rejected rows are in `rejects/`, as they came in, with their codes.

| | rows |
|---|---:|
| in | {counts["rows_in"]:,} |
| kept | {counts["rows_kept"]:,} |
| of which repaired | {counts["rows_repaired"]:,} |
| rejected | {counts["rows_rejected"]:,} |

Messages in: {counts["messages_in"]:,}; messages out: {counts["messages_out"]:,}; empty assistant
turns dropped: {counts["empty_turns_dropped"]:,}.

## Error stats

{render_table(records, markdown=True) if records else "No violations were found."}
{tools_section(summary.get("tools"))}{profile_section(summary.get("profile"))}
Input fingerprint: `{summary["fingerprint"]}`.
"""


def tools_section(tools: Mapping[str, Any] | None) -> str:
    """The card's tools section: the tools rows declare, the calls per tool, and the
    declared-tools codes; nothing when no row declares its tools."""
    if not tools or not tools["rows_declaring_tools"]:
        return ""
    calls = tools["calls_per_tool"]
    lines = [
        "",
        "## Declared tools",
        "",
        f"{tools['rows_declaring_tools']:,} rows declare their tools, "
        f"{tools['distinct_tools']:,} distinct tools. Calls per tool (the most called first):",
        "",
        "| tool | calls | rows declaring it |",
        "|---|---:|---:|",
    ]
    names = list(dict.fromkeys([*calls, *tools["tools_declared"]]))
    for name in names:
        declared = tools["tools_declared"].get(name, 0)
        lines.append(f"| `{name}` | {calls.get(name, 0):,} | {declared:,} |")
    lines += ["", "Rows with each declared-tools code:", ""]
    lines += [f"- `{code}`: {rows:,}" for code, rows in tools["codes"].items()]
    return "\n".join(lines) + "\n"


def profile_section(profile: Mapping[str, Any] | None) -> str:
    """The card's profile: what the rows are, as they came in (`transcript_clean.profile`)."""
    if not profile:
        return ""
    lines = [
        "",
        "## Profile",
        "",
        f"Of {profile['rows']:,} rows in, {profile['rows_measured']:,} were read; "
        f"{100 * profile['system_share']:.2f}% have a system message. Quantiles are exact below "
        f"{profile['exact_below']} and within {100 * profile['relative_error']:g}% above.",
        "",
        "| distribution | count | mean | p5 | p50 | p95 | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for where, section in (("row", "per_row"), ("assistant turn", "per_assistant_turn")):
        for name, d in profile[section].items():
            lines.append(
                f"| {name} per {where} | {d['count']:,} | {d['mean']:,.1f} | {d['p5']:,} | "
                f"{d['p50']:,} | {d['p95']:,} | {d['max']:,} |"
            )
    lines += ["", "| assistant turns | turns | share |", "|---|---:|---:|"]
    for name, n in profile["turns"].items():
        lines.append(f"| {name} | {n:,} | {100 * profile['turn_shares'][name]:.2f}% |")
    if profile["calls_per_tool"]:
        calls = ", ".join(f"`{name}` {n:,}" for name, n in profile["calls_per_tool"].items())
        lines += ["", f"Calls per tool: {calls}."]
    return "\n".join(lines) + "\n"
