"""The worker processes of `--workers N`: started from a plain script, they run the cleaner
alone, never the script again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from synthetic import generate_rows

ROOT = Path(__file__).resolve().parent.parent

README_SCRIPT = """\
from transcript_clean import clean

result = clean("raw/*.parquet", "clean/", config="strict", workers=2)
print(result)
"""


def test_the_readme_example_runs_as_written_in_a_script(tmp_path: Path) -> None:
    # The README's example, in a file with no `if __name__ == "__main__":` guard: a spawned
    # worker that re-ran the script would call `clean` again and meet the run's own lock.
    (tmp_path / "raw").mkdir()
    table = pa.Table.from_pylist([row for row, _ in generate_rows(120, seed=7)])
    for k in range(3):  # three files, three blocks: the worker gets one
        pq.write_table(table.slice(40 * k, 40), tmp_path / f"raw/{k}.parquet")
    (tmp_path / "script.py").write_text(README_SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.count("RunResult(") == 1  # printed once: the workers did not run it
    assert len(done.stdout.splitlines()) == 1
    assert "rows_in=120" in done.stdout
    assert not (tmp_path / "clean.partial").exists()
    assert len(list((tmp_path / "clean" / "data").glob("*.parquet"))) == 3
