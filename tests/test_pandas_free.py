"""Pandas kept out of runs that never use it (`transcript_clean.pandas_free`): pyarrow behaves
as without pandas, the files come out the same, and only the cleaner's own processes over
sources read without `datasets` do it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from synthetic import generate_rows

from transcript_clean.cli.process import without_pandas
from transcript_clean.engine import local
from transcript_clean.run import clean
from transcript_clean.sources import open_source

# Run in a new interpreter: what it imported, and whether pandas can still be imported after.
_PROBE = """
import json, sys
import numpy as np, pyarrow as pa, pyarrow.compute as pc
from transcript_clean.pandas_free import keep_pandas_out
settled = keep_pandas_out()
# what pyarrow imported meanwhile may add finders of its own (dateutil brings six's)
finders = sum(type(finder).__name__ == "_Refusal" for finder in sys.meta_path)
pa.array([1, None, 3]); pa.array(["a"]); pa.scalar(7)
pa.Table.from_pylist([{"a": [{"b": "x"}]}]); pa.array(np.arange(3)).to_numpy()
pc.fill_null(pc.equal(pa.array(["a", None]), "a"), False).to_numpy(zero_copy_only=False)
pa.chunked_array([pa.array([1.5])]).to_numpy()
imported_by_arrow = "pandas" in sys.modules
import pandas
print(json.dumps([settled, imported_by_arrow, finders, hasattr(pandas, "DataFrame")]))
"""


def _fresh(code: str, *args: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_pyarrow_converts_without_pandas_and_pandas_stays_importable() -> None:
    settled, imported_by_arrow, finders, usable = _fresh(_PROBE)
    assert settled is True
    assert imported_by_arrow is False
    assert finders == 0  # the refusal is gone again
    assert usable is True


def test_nothing_is_done_once_pandas_is_in() -> None:
    code = (
        "import json, pandas\n"
        "from transcript_clean.pandas_free import keep_pandas_out\n"
        "import pyarrow as pa\n"
        "print(json.dumps([keep_pandas_out(), pa.array(pa.array([1]).to_pandas()).type.bit_width]))"
    )
    assert _fresh(code) == [False, 64]  # pandas objects still convert as pandas objects


# The program, in a new interpreter. Each of its processes prints, on the way out, whether it
# imported pandas: the program as `__main__`, and its workers, which are spawned without the
# main module (engine/workers.py), as `__mp_main__`, from a `sitecustomize` every new
# interpreter imports. (The resource tracker is a process of its own, and says nothing.)
_PROGRAM = """
import sys
from transcript_clean.cli import entry
sys.argv = ["transcript-clean", *sys.argv[1:]]
entry()
"""

_SITECUSTOMIZE = """
import atexit, json, multiprocessing, os, sys

def _said():
    if multiprocessing.parent_process() is not None:
        name = "__mp_main__"
    elif os.path.basename(getattr(sys.modules["__main__"], "__file__", "")) == "program.py":
        name = "__main__"
    else:
        return
    print(json.dumps([name, "pandas" in sys.modules]), flush=True)

atexit.register(_said)
"""


def _program(tmp_path: Path, *args: str) -> dict[str, list[bool]]:
    """Per process name, whether each process of that name imported pandas."""
    script = tmp_path / "program.py"
    script.write_text(_PROGRAM, encoding="utf-8")
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(probe), os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    imported: dict[str, list[bool]] = {}
    for line in out.stdout.splitlines():
        if line.startswith('["'):
            name, flag = json.loads(line)
            imported.setdefault(name, []).append(flag)
    return imported


def _files(folder: Path) -> dict[str, bytes]:
    files = [folder / "stats.csv", *(folder / "data").iterdir(), *(folder / "rejects").iterdir()]
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(files)}


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "anthropic", "rig"])
def test_a_run_over_parquet_never_imports_pandas_and_writes_the_same_files(
    tmp_path: Path, fmt: str
) -> None:
    source = tmp_path / "in.parquet"
    rows = [row for row, _ in generate_rows(600, format=fmt, seed=5)]
    pq.write_table(pa.Table.from_pylist(rows), source, row_group_size=150)

    run = _program(tmp_path, "clean", str(source), str(tmp_path / "cli"), "--quiet")
    assert run == {"__main__": [False]}
    assert (
        json.loads((tmp_path / "cli" / "summary.json").read_text())["versions"]["datasets"] is None
    )
    import pandas  # noqa: F401  (this process: pyarrow with pandas)

    clean(source, tmp_path / "library")
    assert _files(tmp_path / "cli") == _files(tmp_path / "library")


def test_a_run_over_json_lines_never_imports_pandas(tmp_path: Path) -> None:
    # Opening a JSON Lines file converts rows already (its open pass): pandas is kept out
    # before that, not once the run starts.
    source = _saved(tmp_path, "jsonl", rows=300)
    for args in (["clean", str(source), str(tmp_path / "out"), "--quiet"], ["audit", str(source)]):
        assert _program(tmp_path, *args, "--quiet") == {"__main__": [False]}


def test_workers_and_the_audit_leave_pandas_out_too(tmp_path: Path) -> None:
    source = _saved(tmp_path, "parquet", rows=600)
    out = tmp_path / "out"
    args = ["clean", str(source), str(out), "--quiet", "--workers", "2", "--rows-per-shard", "100"]
    assert _program(tmp_path, *args) == {"__main__": [False], "__mp_main__": [False]}
    assert json.loads((out / "summary.json").read_text())["workers"] == 2
    assert _program(tmp_path, "audit", str(source), "--quiet") == {"__main__": [False]}


class _Recorder:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return True


@pytest.mark.parametrize(
    ("kind", "engine", "expected"),
    [
        ("parquet", "local", 1),
        ("jsonl", "local", 1),
        ("glob", "local", 1),
        ("folder", "local", 1),
        ("datasets", "local", 0),
        ("parquet", "ray", 0),
    ],
)
def test_only_a_local_run_over_files_leaves_pandas_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, engine: str, expected: int
) -> None:
    import transcript_clean.pandas_free as pandas_free
    from transcript_clean.options import EngineOptions, SourceOptions

    recorder = _Recorder()
    monkeypatch.setattr(pandas_free, "keep_pandas_out", recorder)
    spec = str(_saved(tmp_path, kind))
    without_pandas(SourceOptions(spec), EngineOptions(engine))
    assert recorder.calls == expected
    # Told before the source is opened, as its own flag says once it is.
    assert open_source(spec).uses_pandas is (kind == "datasets")


@pytest.mark.parametrize("kind", ["parquet", "datasets"])
def test_a_worker_leaves_pandas_out_only_for_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    recorder = _Recorder()
    monkeypatch.setattr(local, "keep_pandas_out", recorder)
    ran: list[object] = []
    monkeypatch.setattr(local, "run_block", lambda job, block, progress: ran.append(block))
    source = open_source(str(_saved(tmp_path, kind)))
    job = local.BlockJob(source, None, None, tmp_path, 10)  # type: ignore[arg-type]
    local._run_block_in_worker(job, "block")  # type: ignore[arg-type]
    assert ran == ["block"]
    assert recorder.calls == (kind == "parquet")


def _saved(tmp_path: Path, kind: str, rows: int = 5) -> Path:
    """`rows` generated OpenAI rows: a Parquet file, a JSON Lines file, a glob or a folder of
    Parquet files, or a folder saved by `datasets`."""
    table = pa.Table.from_pylist([row for row, _ in generate_rows(rows, seed=1)])
    if kind in ("parquet", "glob", "folder"):
        path = tmp_path / "in.parquet"
        pq.write_table(table, path, row_group_size=100)
        return {"parquet": path, "glob": tmp_path / "*.parquet", "folder": tmp_path}[kind]
    if kind == "jsonl":
        path = tmp_path / "in.jsonl"
        lines = [json.dumps(row, default=str) for row in table.to_pylist()]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path
    from datasets import Dataset

    path = tmp_path / "saved"
    Dataset(table).save_to_disk(str(path))
    return path
