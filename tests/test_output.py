"""The output folder: where a run may write, what it refuses, and what each window of a run's
end leaves behind for the next one (`OUTPUT.partial/`, `OUTPUT.old/`)."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_run import folder_bytes, make_dataset

from transcript_clean.cli import main
from transcript_clean.errors import OutputError
from transcript_clean.run import clean


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "in.parquet"
    make_dataset(path, 60, "openai", seed=1)
    return path


def run_cli(*args: str) -> Any:
    result = CliRunner().invoke(main, ["clean", *args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


# Where a run may write -------------------------------------------------------------------------


def test_output_below_a_file_is_a_clear_error(tmp_path: Path, source: Path) -> None:
    (tmp_path / "afile").write_text("not a folder")
    result = run_cli(str(source), str(tmp_path / "afile" / "out"))
    assert result.exit_code == 2
    assert "cannot write OUTPUT" in result.output and "afile" in result.output


def test_output_in_a_read_only_place_is_a_clear_error(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests run as root, whom permission bits do not stop: the file system says no instead."""
    locked = tmp_path / "readonly"
    locked.mkdir()
    mkdir = Path.mkdir

    def read_only(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.is_relative_to(locked):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    result = run_cli(str(source), str(locked / "out"))
    assert result.exit_code == 2
    assert "Read-only file system" in result.output and "cannot write OUTPUT" in result.output


@pytest.mark.parametrize("flags", [[], ["--overwrite"], ["--resume"]])
def test_output_that_is_a_symlink_is_refused_and_nothing_is_left(
    tmp_path: Path, source: Path, flags: list[str]
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "keep.txt").write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(real)
    result = run_cli(str(source), str(link), *flags)
    assert result.exit_code == 2
    assert "symbolic link" in result.output and str(real) in result.output
    assert (real / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet", "link", "real"]
    (real / "keep.txt").unlink()  # the folder itself takes a run (a file of mine: see below)
    assert run_cli(str(source), str(real), "--overwrite").exit_code == 0


def test_a_symlink_does_not_hide_that_output_is_inside_the_source(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    make_dataset(raw / "in.parquet", 20, "openai")
    (tmp_path / "lnk").symlink_to(raw)
    with pytest.raises(OutputError, match="inside the source"):
        clean(raw, tmp_path / "lnk" / "out")
    (tmp_path / "out").symlink_to(raw / "deeper", target_is_directory=True)
    with pytest.raises(OutputError):
        clean(raw, tmp_path / "out")
    assert sorted(p.name for p in raw.iterdir()) == ["in.parquet"]


# The final windows ------------------------------------------------------------------------------


@pytest.mark.parametrize("leftover", ["nothing", "a stale lock"])
def test_resume_after_a_kill_before_the_partial_folder_holds_anything(
    tmp_path: Path, source: Path, leftover: str
) -> None:
    work = tmp_path / "out.partial"
    work.mkdir()
    if leftover == "a stale lock":
        (work / "lock").write_text("")
    result = run_cli(str(source), str(tmp_path / "out"), "--resume")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["rows_in"] == 60
    assert not work.exists()


def killed_after_the_final_rename(
    monkeypatch: pytest.MonkeyPatch, work: Path, *args: Any, **kwargs: Any
) -> None:
    """Run `clean` and stop it as a kill would right after OUTPUT is in place: at the first
    removal of anything in the partial folder once OUTPUT exists."""
    rmtree = shutil.rmtree
    out = work.with_name(work.name.removesuffix(".partial"))

    def killed(path: Any, *a: Any, **kw: Any) -> None:
        target = Path(path)
        if (out / "summary.json").exists() and (target == work or work in target.parents):
            raise KeyboardInterrupt
        rmtree(path, *a, **kw)

    monkeypatch.setattr(shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        clean(*args, **kwargs)
    monkeypatch.setattr(shutil, "rmtree", rmtree)


@pytest.mark.parametrize("overwrite", [False, True])
def test_resume_after_a_kill_after_the_final_rename_says_done_and_tidies(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch, overwrite: bool
) -> None:
    out, work = tmp_path / "out", tmp_path / "out.partial"
    if overwrite:
        clean(source, out, limit=10)
    killed_after_the_final_rename(monkeypatch, work, source, out, overwrite=overwrite)
    assert work.exists() and (out / "summary.json").exists()
    before = folder_bytes(out)

    flags = ["--overwrite"] if overwrite else []
    result = run_cli(str(source), str(out), "--resume", *flags)
    assert result.exit_code == 0, result.output
    assert "already complete" in result.output
    assert not work.exists() and not (tmp_path / "out.old").exists()
    assert folder_bytes(out) == before
    assert json.loads((out / "summary.json").read_text())["rows_in"] == 60


def test_a_partial_folder_of_another_run_beside_a_finished_output_is_not_taken_for_it(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, work = tmp_path / "out", tmp_path / "out.partial"
    killed_after_the_final_rename(monkeypatch, work, source, out)
    # the same partial folder, but asked for a different run: not complete, not this one
    result = run_cli(str(source), str(out), "--resume", "--limit", "7")
    assert result.exit_code == 2 and "different run" in result.output
    assert work.exists()


def test_resume_after_a_kill_between_setting_aside_and_the_rename(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, aside = tmp_path / "out", tmp_path / "out.old"
    clean(source, out, limit=10)
    rename = Path.rename

    def killed(self: Path, target: Any) -> Path:
        if self.name == "final":  # the old OUTPUT is aside, the new one not yet in place
            raise KeyboardInterrupt
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", killed)
    with pytest.raises(KeyboardInterrupt):
        clean(source, out, overwrite=True)
    monkeypatch.undo()
    assert aside.is_dir() and not out.exists()

    result = run_cli(str(source), str(out), "--resume", "--overwrite")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["rows_in"] == 60
    assert not aside.exists() and not (tmp_path / "out.partial").exists()


def test_a_link_planted_as_the_lock_file_is_refused_and_its_target_untouched(
    tmp_path: Path, source: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    work = tmp_path / "out.partial"
    work.mkdir()
    (work / "lock").symlink_to(victim)
    result = run_cli(str(source), str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "lock" in result.output and "symbolic link" in result.output
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "out").exists()


def test_overwrite_replaces_only_an_earlier_runs_output(tmp_path: Path, source: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    refused = run_cli(str(source), str(mine), "--overwrite")
    assert refused.exit_code == 2
    assert f"OUTPUT {mine} does not look like the OUTPUT of an earlier run" in refused.output
    assert "thesis.tex" in refused.output
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert not (tmp_path / "mine.partial").exists()

    out = tmp_path / "out"
    assert run_cli(str(source), str(out)).exit_code == 0
    assert run_cli(str(source), str(out), "--overwrite").exit_code == 0
    (out / "notes.txt").write_text("mine too")  # a file no run writes: not replaced either
    again = run_cli(str(source), str(out), "--overwrite")
    assert again.exit_code == 2 and "notes.txt" in again.output
    assert (out / "notes.txt").exists()


def test_output_the_root_folder_is_a_clear_error(source: Path) -> None:
    result = run_cli(str(source), "/")
    assert result.exit_code == 2
    assert "OUTPUT / " in result.output
