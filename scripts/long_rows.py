"""Long OpenAI rows for `bench.py --long-rows`: agent traces of about 200 KB each.

Each row is a question, then 38 rounds of an assistant tool call (with a thought), its tool
result and the assistant's answer (so each answer and the next call are two assistant turns in
a row, which R4 merges): about 190 KB, the rows of issue 27's finding 2. Every row is its own
(its call ids), but its texts are drawn from a few dozen of each kind, as an agent's traces
repeat their prompts and tool outputs: Parquet dictionary-encodes them, and its footer then
says a row group of 500 rows holds 2 MB where it decodes to 95 MB (which is what a reader
sized from the footer alone got wrong). Words are drawn at random, so a text compresses as
prose does.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROUNDS = 38
TEXTS = 48
"""Distinct texts of each kind: they fit the 1 MB a Parquet dictionary page holds."""
TARGET_MB = 1500
"""Issue 27's target: peak RSS under this at every count (and flat: the bench prints the
largest peak over the smallest)."""
ROW_GROUP_ROWS = 500
"""The input's row groups: about 100 MB, as the Hub's Parquet files have them."""

_WORDS = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "was", "on", "be",
    "by", "this", "are", "from", "at", "or", "an", "which", "have", "file", "path", "line",
    "error", "result", "value", "function", "return", "call", "tool", "agent", "step", "data",
    "table", "row", "column", "query", "search", "read", "write", "test", "check", "build", "run",
    "output", "input", "config", "option", "list",
]  # fmt: skip


def _text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def long_row(rng: random.Random, index: int, texts: dict[int, list[str]]) -> dict[str, Any]:
    """One agent trace of about 190 KB, its texts drawn from `texts` (by size)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": rng.choice(texts[400])}]
    for round_ in range(ROUNDS):
        call = f"call_{index}_{round_}"
        arguments = {"path": f"src/module_{round_}.py", "query": rng.choice(texts[200])}
        messages.append(
            {
                "role": "assistant",
                "content": rng.choice(texts[700]),
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": rng.choice(texts[3000])})
        messages.append({"role": "assistant", "content": rng.choice(texts[900])})
    return {"id": index, "messages": messages}


def write_long_rows(path: Path, rows: int, seed: int = 0) -> None:
    """`rows` long rows into the Parquet file `path`, in row groups of `ROW_GROUP_ROWS`."""
    rng = random.Random(seed)
    texts = {size: [_text(rng, size) for _ in range(TEXTS)] for size in (200, 400, 700, 900, 3000)}
    path.parent.mkdir(parents=True, exist_ok=True)
    writer: pq.ParquetWriter | None = None
    try:
        for start in range(0, rows, ROW_GROUP_ROWS):
            group = [
                long_row(rng, i, texts) for i in range(start, min(start + ROW_GROUP_ROWS, rows))
            ]
            table = pa.Table.from_pylist(group)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
    finally:
        if writer is not None:
            writer.close()


def bench_long_rows(
    folder: Path,
    counts: list[int],
    seed: int,
    repeat: int,
    measure: Callable[[list[str]], dict[str, float]],
) -> None:
    """`bench.py --long-rows`: `clean` with default options over `counts` long rows each, its
    best time and largest peak RSS; then the largest output, loaded whole."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    program = str(Path(sys.executable).parent / "transcript-clean")
    results: dict[int, dict[str, float]] = {}
    for rows in counts:
        source = folder / f"long-{rows}.parquet"
        if not source.exists():
            print(f"generating {rows:,} long rows into {source} ...", file=sys.stderr)
            write_long_rows(source, rows, seed)
        out = folder / f"long-clean-{rows}"
        for round_ in range(1, repeat + 1):
            print(f"round {round_}/{repeat}: clean, {rows:,} long rows ...", file=sys.stderr)
            command = [program, "clean", str(source), str(out), "--overwrite", "--quiet"]
            measured = measure(command)
            best = results.setdefault(rows, dict(measured, input_mb=source.stat().st_size / 2**20))
            best["seconds"] = min(best["seconds"], measured["seconds"])
            best["peak_rss_mb"] = max(best["peak_rss_mb"], measured["peak_rss_mb"])

    print(f"\nclean, default options, long OpenAI rows (~195 KB, {ROUNDS} rounds of call, result,")
    print("answer), one process\n")
    print(f"{'rows':>8} {'input (zstd)':>13} {'seconds':>9} {'rows/s':>8} {'peak RSS':>10}")
    for rows, r in results.items():
        print(
            f"{rows:>8,} {r['input_mb']:>9.0f} MiB {r['seconds']:>9.1f} "
            f"{rows / r['seconds']:>8.0f} {r['peak_rss_mb']:>7.0f} MB"
        )

    peaks = [r["peak_rss_mb"] for r in results.values()]
    print(
        f"\ntarget (issue 27, finding 2): peak RSS under {TARGET_MB:,} MB at every count: "
        f"{'met' if max(peaks) < TARGET_MB else 'NOT met'}; largest peak / smallest: "
        f"{max(peaks) / min(peaks):.2f}"
    )

    largest = folder / f"long-clean-{max(counts)}" / "data"
    shards = sorted(largest.glob("*.parquet"))
    loaded = sum(pq.read_table(shard).num_rows for shard in shards)
    print(f"\npq.read_table: {loaded:,} rows from {len(shards)} shard(s) of {largest}")
    import datasets

    dataset = datasets.load_dataset(
        "parquet",
        data_files=[str(shard) for shard in shards],
        split="train",
        cache_dir=str(folder / "hf-cache"),
    )
    print(f"datasets.load_dataset: {dataset.num_rows:,} rows")
    (folder / "results-long-rows.json").write_text(json.dumps(results, indent=2))
