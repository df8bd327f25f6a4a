"""Hand-made rows for the audit tests, and how to write and audit them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner, Result
from synthetic import arrow_schema, generate_rows

from transcript_clean.cli import main


def u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


CLEAN = [u("hi"), a("yo")]
CONSECUTIVE = [u("hi"), a("one"), a("two")]
ORPHAN = [u("hi"), {"role": "tool", "tool_call_id": "x", "content": "r"}, a("yo")]
EMPTY = [u("hi"), a("  "), u("again"), a("yo")]
NO_ASSISTANT = [u("hi")]
SCRIPT = [u("<script>alert(1)</script>"), a("one"), a("two </pre> & more")]

# Ten rows, by hand: 5 clean; consecutive_assistant in rows 1 and 7 (20%), orphan_tool_result in
# row 3, empty_assistant_turn in row 4, no_assistant_turn in row 6 (10% each): 5 rows of 10 have
# a violation.
ROWS = [CLEAN, CONSECUTIVE, CLEAN, ORPHAN, EMPTY, CLEAN, NO_ASSISTANT, SCRIPT, CLEAN, CLEAN]
SHARES = {
    "empty_assistant_turn": 0.1,
    "orphan_tool_result": 0.1,
    "consecutive_assistant": 0.2,
    "no_assistant_turn": 0.1,
}
# Every message {role, content: str}: Arrow types the column, so the fast path runs on its rows.
TYPED = [CLEAN, CONSECUTIVE, CLEAN, EMPTY, NO_ASSISTANT, CLEAN, CLEAN, CONSECUTIVE, CLEAN]


def write_jsonl(path: Path, rows: list[list[dict[str, Any]]]) -> Path:
    path.write_text("".join(json.dumps({"messages": m}) + "\n" for m in rows), encoding="utf-8")
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["audit", *map(str, args)])


def write_summary(path: Path, rows_in: int, stats: list[tuple[str, str, int]]) -> Path:
    records = [
        {"code": c, "action": act, "rows": n, "occurrences": n, "share": n / rows_in}
        for c, act, n in stats
    ]
    path.write_text(json.dumps({"rows_in": rows_in, "stats": records}), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# generated nights, for the profile's drift and history

NIGHT_ROWS = 1200


def generated_rows(seed: int = 4) -> list[dict[str, Any]]:
    return [row for row, _ in generate_rows(NIGHT_ROWS, format="openai", seed=seed)]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    table = pa.Table.from_pylist(rows, schema=arrow_schema("openai"))
    pq.write_table(table, path, row_group_size=200)
    return path


def plant_reasoning_only(rows: list[dict[str, Any]], every: int) -> int:
    """Make the first text-only assistant turn of every `every`-th row reasoning only (as a
    generator with a truncated token budget would); returns how many."""
    planted = 0
    for row in rows[::every]:
        for message in row["messages"]:
            if (
                message["role"] == "assistant"
                and message.get("content")
                and not message.get("tool_calls")
            ):
                message["reasoning_content"] = message["content"]
                message["content"] = None
                planted += 1
                break
    return planted
