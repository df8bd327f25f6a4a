"""Long OpenAI rows for `bench.py --long-rows`: agent traces of about 200 KB each.

Each row is a question, then 38 rounds of an assistant tool call (with a thought), its tool
result, the assistant's answer and the user's next step: about 195 KB, the rows of issue 14's
finding 2. A few hundred distinct rows are made and repeated, so generating 20,000 takes
seconds; words are drawn at random, so the text compresses as prose does, not as a repeat.
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
DISTINCT = 200
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


def long_row(rng: random.Random, index: int) -> dict[str, Any]:
    """One agent trace of about 195 KB."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": _text(rng, 400)}]
    for round_ in range(ROUNDS):
        call = f"call_{index}_{round_}"
        arguments = {"path": f"src/module_{round_}.py", "query": _text(rng, 200)}
        messages.append(
            {
                "role": "assistant",
                "content": _text(rng, 700),
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": _text(rng, 3000)})
        messages.append({"role": "assistant", "content": _text(rng, 900)})
        messages.append({"role": "user", "content": _text(rng, 150)})
    return {"id": index, "messages": messages}


def write_long_rows(path: Path, rows: int, seed: int = 0) -> None:
    """`rows` long rows into the Parquet file `path`, in row groups of `ROW_GROUP_ROWS`."""
    rng = random.Random(seed)
    distinct = pa.Table.from_pylist([long_row(rng, i) for i in range(min(rows, DISTINCT))])
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, distinct.schema, compression="zstd") as writer:
        for start in range(0, rows, ROW_GROUP_ROWS):
            picks = [i % distinct.num_rows for i in range(start, min(start + ROW_GROUP_ROWS, rows))]
            writer.write_table(distinct.take(picks), row_group_size=ROW_GROUP_ROWS)


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
