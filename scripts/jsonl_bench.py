"""JSON Lines for `bench.py --source jsonl`: issue 15's targets, measured side by side.

The input is generated OpenAI rows (`synthetic.generate_rows`) written as JSON Lines the way
real fine-tuning files are: `json.dumps` spacing, null keys left out, so messages carry
different keys (`tool_call_id` on tool messages only, `tool_calls` on some assistant ones). For
each row count, in rounds, each step in its own process:

  floor             pyarrow.json.read_json + pq.write_table(compression="zstd")
  datasets filter   load_dataset("json") + filter(plain validator) + to_parquet
  clean -w 1        transcript-clean clean FILE OUT --workers 1 (Parquet out)
  clean jsonl       transcript-clean clean FILE OUT --output-format jsonl

Printed as a Markdown table: best wall time, its ratio to the floor and the largest peak RSS
(the process tree's, sampled from /proc), then how much peak RSS grew from the smallest count
to the largest (the targets: flat within 15%).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Measure = Callable[[list[str]], dict[str, float]]

TARGETS = (
    "targets (issue 15, at 400,000 rows): clean --workers 1 <= 1.5x floor and >= 5x faster than "
    "datasets; clean jsonl <= 1.5x floor; peak RSS < 1 GB and within 15% from 100,000 rows"
)


def without_nulls(value: Any) -> Any:
    """`value` with null-valued keys left out, as JSON Lines files write rows."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def ensure_jsonl(path: Path, rows: int, seed: int) -> None:
    """`rows` generated OpenAI rows as JSON Lines at `path`, unless they are there already."""
    from synthetic import generate_rows

    marker = path.with_suffix(".json")
    wanted = {"rows": rows, "format": "openai", "seed": seed, "nulls": "left out"}
    if path.exists() and marker.exists() and json.loads(marker.read_text()) == wanted:
        return
    print(f"generating {rows:,} OpenAI rows into {path} ...", file=sys.stderr)
    temp = path.with_name(path.name + ".tmp")
    with temp.open("w", encoding="utf-8") as handle:
        for row, _ in generate_rows(rows, format="openai", seed=seed):
            handle.write(json.dumps(without_nulls(row), ensure_ascii=False) + "\n")
    temp.replace(path)
    marker.write_text(json.dumps(wanted))


def commands(
    bench: str, source: Path, folder: Path, skip: tuple[str, ...]
) -> list[tuple[str, list[str]]]:
    """Each step's name and command, for `source`."""
    program = str(Path(sys.executable).parent / "transcript-clean")
    runs: list[tuple[str, list[str]]] = []
    if "floor" not in skip:
        runs.append(
            (
                "floor",
                [
                    sys.executable,
                    bench,
                    "step",
                    "floor",
                    str(source),
                    str(folder / "floor.parquet"),
                ],
            )
        )
    if "datasets" not in skip:
        out = str(folder / "datasets.parquet")
        runs.append(
            ("datasets filter", [sys.executable, bench, "step", "datasets", str(source), out])
        )
    if "clean" not in skip:
        clean = [program, "clean", str(source)]
        quiet = ["--overwrite", "--quiet", "--format", "openai"]
        runs.append(
            ("clean --workers 1", [*clean, str(folder / "clean-w1"), *quiet, "--workers", "1"])
        )
        runs.append(
            (
                "clean --output-format jsonl",
                [*clean, str(folder / "clean-jsonl"), *quiet, "--output-format", "jsonl"],
            )
        )
    return runs


def bench_jsonl(
    bench: str,
    folder: Path,
    counts: list[int],
    seed: int,
    repeat: int,
    skip: tuple[str, ...],
    measure: Measure,
) -> dict[int, dict[str, dict[str, float]]]:
    """Measure every step at each of `counts` rows; print the Markdown table; the results."""
    folder.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict[str, dict[str, float]]] = {}
    sizes: dict[int, float] = {}
    for rows in counts:
        source = folder / f"openai-{rows}.jsonl"
        ensure_jsonl(source, rows, seed)
        sizes[rows] = source.stat().st_size / 2**20
        runs = commands(bench, source, folder, skip)
        found = results.setdefault(rows, {})
        for round_ in range(1, repeat + 1):
            for name, command in runs:
                print(f"{rows:,} rows, round {round_}/{repeat}: {name} ...", file=sys.stderr)
                measured = measure(command)
                best = found.setdefault(name, dict(measured))
                best["seconds"] = min(best["seconds"], measured["seconds"])
                best["peak_rss_mb"] = max(best["peak_rss_mb"], measured["peak_rss_mb"])
    print(markdown(results, sizes))
    return results


def markdown(results: dict[int, dict[str, dict[str, float]]], sizes: dict[int, float]) -> str:
    """The results as the README shows them, ratios to the floor and RSS growth included."""
    lines = [
        "| rows (JSON Lines) | step | seconds | x floor | x datasets | peak RSS |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for rows, steps in results.items():
        floor = steps.get("floor", {}).get("seconds")
        datasets = steps.get("datasets filter", {}).get("seconds")
        label = f"{rows:,} ({sizes[rows]:,.0f} MiB)"
        for name, r in steps.items():
            ratio = f"{r['seconds'] / floor:.2f}" if floor else "-"
            faster = (
                f"{datasets / r['seconds']:.1f}x faster"
                if datasets and name.startswith("clean")
                else ""
            )
            lines.append(
                f"| {label} | {name} | {r['seconds']:.2f} | {ratio} | {faster} | "
                f"{r['peak_rss_mb']:,.0f} MB |"
            )
            label = ""
    if len(results) > 1:
        low, high = min(results), max(results)
        lines.append("")
        for name in results[high]:
            if name in results[low]:
                growth = results[high][name]["peak_rss_mb"] / results[low][name]["peak_rss_mb"] - 1
                lines.append(f"- {name}: peak RSS {growth:+.0%} from {low:,} to {high:,} rows")
    lines.extend(["", TARGETS])
    return "\n".join(lines)
