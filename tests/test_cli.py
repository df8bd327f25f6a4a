from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from transcript_clean import __version__
from transcript_clean.cli import main


def test_version_and_help() -> None:
    runner = CliRunner()
    assert (
        runner.invoke(main, ["--version"]).output.strip()
        == f"transcript-clean, version {__version__}"
    )
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("clean", "audit", "explain"):
        assert command in result.output


@pytest.mark.parametrize("command", ["clean", "audit", "explain"])
def test_every_command_explains_itself_with_an_example(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output
    assert "transcript-clean " + command in result.output


def test_help_does_not_load_pyarrow_or_datasets() -> None:
    code = (
        "import sys; from transcript_clean.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pyarrow', 'datasets', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("[]")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["clean", "missing.parquet", "out"], "no such file or folder: missing.parquet"),
        (["clean", "missing.parquet", "out", "--config", "lenient"], "no config named 'lenient'"),
        (["explain", "missing.parquet", "--row", "0"], "missing.parquet"),
        (["clean", "x", "y", "--workers", "0"], "--workers"),
    ],
)
def test_bad_input_is_a_one_line_error_with_exit_status_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], words: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert words in result.output
    assert "Traceback" not in result.output


def test_option_defaults_are_the_library_defaults() -> None:
    """The CLI spells its defaults out (so --help stays free of heavy imports): they must not
    drift from the library's."""
    from transcript_clean.run import DEFAULT_ROWS_PER_SHARD
    from transcript_clean.sources import DEFAULT_BATCH_SIZE

    def default(command: str, name: str) -> object:
        return next(p.default for p in main.commands[command].params if p.name == name)

    assert default("clean", "batch_size") == DEFAULT_BATCH_SIZE
    assert default("audit", "batch_size") == DEFAULT_BATCH_SIZE
    assert default("clean", "rows_per_shard") == DEFAULT_ROWS_PER_SHARD


SHARED = ("format", "column", "config", "split", "subset", "revision", "streaming")
RUN = ("limit", "batch_size", "workers", "engine", "ray_address")


def test_clean_and_audit_share_their_source_and_run_options() -> None:
    """Declared once: the same flags, defaults and help for every command that takes them."""

    def options(command: str) -> dict[str | None, tuple[object, ...]]:
        return {
            p.name: (tuple(p.opts), p.default, getattr(p, "help", None))
            for p in main.commands[command].params
        }

    clean, audit, explain = options("clean"), options("audit"), options("explain")
    for name in SHARED + RUN:
        assert clean[name] == audit[name], name
    for name in SHARED:
        assert explain[name] == clean[name], name
    assert not set(RUN) & set(explain)
    assert audit["workers"][0] == ("--workers",) and audit["engine"][1] == "local"


class _Terminal:
    """A stand-in stderr that says it is a terminal, keeping what is written to it."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


class _Named:
    name, column = "sample", "messages"


@pytest.mark.parametrize("terminal", [True, False])
def test_progress_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    from transcript_clean.cli import Progress

    stderr = _Terminal()
    if not terminal:
        stderr.isatty = lambda: False  # type: ignore[method-assign]
    monkeypatch.setattr(sys, "stderr", stderr)
    with Progress(quiet=False) as progress:
        progress.start(_Named(), _Named(), 10)
        progress.update(4)
        assert (progress.bar is not None) == terminal
        if terminal:
            assert progress.bar.n == 4
    assert "reading sample" in stderr.text
    assert (" 40%" in stderr.text) == terminal


def test_quiet_progress_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from transcript_clean.cli import Progress

    stderr = _Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    with Progress(quiet=True) as progress:
        progress.start(_Named(), _Named(), 10)
        progress.update(4)
        assert progress.bar is None
    assert stderr.text == ""


@pytest.mark.parametrize(("argv", "status"), [(["--version"], 0), (["clean", "x", "y", "-w"], 2)])
def test_the_program_freezes_objects_on_the_way_out(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], status: int
) -> None:
    import gc

    from transcript_clean.cli import entry

    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))  # not this test process
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)  # restored afterwards
    monkeypatch.setattr(sys, "argv", ["transcript-clean", *argv])
    with pytest.raises(SystemExit) as exited:
        entry()
    assert exited.value.code == status
    assert frozen == [True]


@pytest.mark.parametrize("chosen", [None, "system"])
def test_the_program_asks_arrow_for_jemalloc_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, chosen: str | None
) -> None:
    import gc
    import os

    from transcript_clean.cli import entry

    monkeypatch.setattr(gc, "freeze", lambda: None)
    if chosen is None:
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    else:
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", chosen)
    monkeypatch.setattr(sys, "argv", ["transcript-clean", "--version"])
    with pytest.raises(SystemExit):
        entry()
    expected = chosen or ("jemalloc" if sys.platform == "linux" else None)
    assert os.environ.get("ARROW_DEFAULT_MEMORY_POOL") == expected
