#!/usr/bin/env python3
"""What reading JSON Lines costs the cleaner, against the floor, in one run (issue 15).

For each JSONL file given, each step in its own process (peak RSS of the process tree):
  floor        pyarrow.json.read_json of the file + pq.write_table(compression="zstd")
  open         opening it as a source: the one pass that counts rows, notes block offsets
               and infers the schema (`sources.jsonl.index_lines`)
  read         the pass, then every batch read (the rows parsed, typed, with their lines)
  clean -w 1   transcript-clean clean FILE OUT --workers 1

Each step runs --repeat times in rounds; the best time and largest peak RSS are printed, with
the ratio to the floor. The machine is shared: read the ratios, not the seconds.

    .venv/bin/python scripts/make_synthetic.py /tmp/s100k.jsonl --rows 100000 --seed 5
    .venv/bin/python scripts/make_synthetic.py /tmp/s400k.jsonl --rows 400000 --seed 5
    .venv/bin/python scripts/jsonl_input_bench.py /tmp/s100k.jsonl /tmp/s400k.jsonl
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import PYTHON, measure

FLOOR = """
import sys, pyarrow.json as pj, pyarrow.parquet as pq
pq.write_table(pj.read_json(sys.argv[1]), sys.argv[2], compression="zstd")
"""
OPEN = """
import sys
from transcript_clean.sources import open_source
open_source(sys.argv[1])
"""
READ = """
import sys
from transcript_clean.sources import open_source
source = open_source(sys.argv[1])
for part in source.parts():
    for batch in source.read(part):
        pass
"""


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--repeat", default=2, show_default=True, help="Rounds; the best time is kept.")
def main(files: tuple[str, ...], repeat: int) -> None:
    """Time the floor, the source's pass and reading, and a clean, on each JSONL FILE."""
    work = Path(tempfile.mkdtemp(prefix="jsonl-bench-"))
    cleaner = str(Path(PYTHON).parent / "transcript-clean")
    try:
        for file in files:
            out = work / "out"
            steps = {
                "floor": [PYTHON, "-c", FLOOR, file, str(work / "floor.parquet")],
                "open": [PYTHON, "-c", OPEN, file],
                "read": [PYTHON, "-c", READ, file],
                "clean -w 1": [cleaner, "clean", file, str(out), "--overwrite", "--quiet"],
            }
            best: dict[str, dict[str, float]] = {}
            for round_ in range(1, repeat + 1):
                for name, command in steps.items():
                    click.echo(f"{Path(file).name} round {round_}/{repeat}: {name} ...", err=True)
                    got = measure(command)
                    mine = best.setdefault(name, got)
                    mine["seconds"] = min(mine["seconds"], got["seconds"])
                    mine["peak_rss_mb"] = max(mine["peak_rss_mb"], got["peak_rss_mb"])
            floor = best["floor"]["seconds"]
            size = Path(file).stat().st_size / 2**20
            click.echo(f"\n{file} ({size:.0f} MiB)\n{'step':<12} {'seconds':>8} {'x floor':>8} "
                       f"{'peak RSS':>10}")  # fmt: skip
            for name, r in best.items():
                click.echo(
                    f"{name:<12} {r['seconds']:>8.2f} {r['seconds'] / floor:>8.2f} "
                    f"{r['peak_rss_mb']:>7.0f} MB"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
