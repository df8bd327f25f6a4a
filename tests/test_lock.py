"""One writer per OUTPUT: the lock in `OUTPUT.partial/`, what a second run is told, and the
accounting a run does from the files it wrote before it moves them into place."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_run import clean_command, folder_bytes, make_dataset, read_folder, wait_for_blocks

from transcript_clean import sinks
from transcript_clean.cli import main
from transcript_clean.errors import AccountingError, OutputError
from transcript_clean.output import output_lock
from transcript_clean.run import clean


def test_a_second_run_on_the_same_output_stops_at_once(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    # Long enough that the first run is still going while two others start and give up.
    make_dataset(source, 20_000, "openai", seed=2)
    out = tmp_path / "out"
    first = subprocess.Popen(
        clean_command(source, out, "--quiet"), stderr=subprocess.PIPE, text=True
    )
    wait_for_blocks(first, out, 1)

    for flag in ("--resume", "--overwrite"):
        started = time.monotonic()
        second = subprocess.run(
            clean_command(source, out, "--quiet", flag), capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 2, second.stderr
        assert f"pid {first.pid}" in second.stderr and "started" in second.stderr
        assert "Traceback" not in second.stderr
        assert time.monotonic() - started < 15
    assert first.poll() is None, "the first run ended before the others were refused"

    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    kept, rejects = read_folder(out / "data"), read_folder(out / "rejects")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows_in"] == kept.num_rows + rejects.num_rows == 20_000
    assert (summary["rows_kept"], summary["rows_rejected"]) == (kept.num_rows, rejects.num_rows)
    assert not (tmp_path / "out.partial").exists()


def test_the_lock_names_the_run_that_holds_it(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 20, "openai")
    work = tmp_path / "out.partial"
    with output_lock(work):
        with pytest.raises(OutputError, match=rf"pid {os.getpid()} on .*, started 20"):
            clean(source, tmp_path / "out", overwrite=True)
        assert work.is_dir()
    clean(source, tmp_path / "out")  # free again once its holder lets go
    assert not work.exists()


def test_a_stale_lock_of_a_dead_run_is_taken_over(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 20, "openai")
    work = tmp_path / "out.partial"
    work.mkdir()
    (work / "lock").write_text(json.dumps({"pid": 999_999_999, "host": "gone", "started": "x"}))
    result = clean(source, tmp_path / "out", resume=True)
    assert result.stats.rows_in == 20
    assert not work.exists()


# Accounting from the files ---------------------------------------------------------------------


def test_rows_missing_from_the_files_fail_the_run_and_resume_redoes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 300, "openai", seed=4)
    clean(source, tmp_path / "reference", rows_per_shard=100)
    write = sinks.ParquetShard.write

    def lossy(self: sinks.ParquetShard, data: pa.RecordBatch | pa.Table) -> None:
        """A writer that drops the first kept row of block 1: a bug the counts cannot see."""
        if self.path.parent.name == "data" and self.path.name == "part-00001.parquet":
            data = data.slice(1) if self.rows == 0 else data
        write(self, data)

    monkeypatch.setattr(sinks.ParquetShard, "write", lossy)
    out = tmp_path / "out"
    args = ["clean", str(source), str(out), "--rows-per-shard", "100"]
    failed = CliRunner().invoke(main, args)
    assert failed.exit_code == 1, failed.output
    assert "data/part-00001.parquet holds" in failed.output and "--resume" in failed.output
    assert "Traceback" not in failed.output
    assert not out.exists() and (tmp_path / "out.partial").is_dir()

    monkeypatch.undo()
    resumed = CliRunner().invoke(main, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert folder_bytes(out) == folder_bytes(tmp_path / "reference")


def test_the_accounting_error_is_a_library_error(tmp_path: Path) -> None:
    from transcript_clean.errors import TranscriptCleanError

    assert issubclass(AccountingError, TranscriptCleanError)
    source = tmp_path / "in.parquet"
    make_dataset(source, 30, "openai")
    result = clean(source, tmp_path / "out")
    counted = sum(pq.read_metadata(p).num_rows for p in (tmp_path / "out").glob("*/part-*.parquet"))
    assert counted == result.stats.rows_in == 30
