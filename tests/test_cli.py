from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_run import clean_command, make_dataset, wait_for_blocks

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


def test_a_plain_clean_imports_no_module_it_does_not_use(tmp_path: Path) -> None:
    """The card is written without the Hub's code (and the `yaml` and `filelock` it brings),
    and a source with no declared tools needs no schema validator."""
    rows = [{"instruction": f"say {i}", "input": "", "output": f"{i}"} for i in range(5)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    code = (
        "import sys; from transcript_clean.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('huggingface_hub', 'yaml', 'filelock', 'jsonschema',"
        " 'fastjsonschema', 'jinja2', 'datasets', 'ray') if m in sys.modules))"
    )
    args = ["clean", str(tmp_path / "in.parquet"), str(tmp_path / "out"), "--quiet"]
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    assert (tmp_path / "out" / "README.md").read_text().startswith("---\nlicense: unknown\n")
    assert out.stdout.strip().endswith("[]")


def test_declared_simple_schemas_need_no_jsonschema(tmp_path: Path) -> None:
    """Tools whose schemas are simple (`tools.simple_schema`) are valid by their shape, and
    their calls' arguments told without the compiled validator: `jsonschema` is imported only
    for a schema of another shape, or for a failure's words."""
    schema = {"type": "object", "properties": {"x": {"type": "integer", "description": "n"}}}
    tools = json.dumps([{"type": "function", "function": {"name": "f", "parameters": schema}}])
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "r", "tool_call_id": "c"},
        {"role": "assistant", "content": "a"},
    ]
    code = (
        "import sys; from transcript_clean.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('jsonschema' in sys.modules)"
    )
    for nested, imported in ((False, "False"), (True, "True")):
        if nested:  # a schema of another shape is checked by jsonschema
            schema["properties"]["x"] = {"type": "array", "items": {"type": "integer"}}
            call["function"]["arguments"] = '{"x": [1]}'
            tools = json.dumps(
                [{"type": "function", "function": {"name": "f", "parameters": schema}}]
            )
        path = tmp_path / f"in-{nested}.parquet"
        pq.write_table(pa.Table.from_pylist([{"messages": messages, "tools": tools}] * 3), path)
        out_dir = tmp_path / f"out-{nested}"
        args = ["clean", str(path), str(out_dir), "--quiet", "--format", "openai"]
        out = subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == imported
        assert pq.read_table(out_dir / "data").num_rows == 3


@pytest.mark.parametrize(
    ("command", "module", "function"),
    [
        (["clean", "IN", "OUT", "--quiet"], "transcript_clean.run", "clean"),
        (["audit", "IN", "--quiet"], "transcript_clean.audit", "audit"),
        (["explain", "IN", "--row", "0"], "transcript_clean.explain", "explain_row"),
    ],
)
def test_the_collector_paused_for_the_imports_works_again_when_the_command_runs(
    tmp_path: Path, command: list[str], module: str, function: str
) -> None:
    """`entry` pauses the cyclic collector while the program is imported; each command turns
    it on again before it runs (a long run with it off could hold every cycle it makes)."""
    rows = [{"instruction": f"say {i}", "input": "", "output": f"{i}"} for i in range(5)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    code = (
        "import gc, importlib, sys\n"
        f"library = importlib.import_module({module!r})\n"
        f"called = getattr(library, {function!r})\n"
        "def watched(*args, **kwargs):\n"
        "    print('collector on:', gc.isenabled(), gc.get_freeze_count() > 0)\n"
        "    return called(*args, **kwargs)\n"
        f"setattr(library, {function!r}, watched)\n"
        "from transcript_clean.cli import entry\n"
        "sys.argv[0] = 'transcript-clean'\n"
        "entry()\n"
    )
    paths = {"IN": str(tmp_path / "in.parquet"), "OUT": str(tmp_path / "out")}
    args = [paths.get(arg, arg) for arg in command]
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "collector on: True True" in out.stdout


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
    """What `Progress.start` reads of a source and of a format."""

    name, column, note = "sample", "messages", None


@pytest.mark.parametrize("terminal", [True, False])
def test_progress_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    from transcript_clean.cli.progress import Progress

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
    from transcript_clean.cli.progress import Progress

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


@pytest.mark.parametrize("chosen", [None, "dirty_decay_ms:1000"])
def test_the_program_has_jemalloc_return_freed_pages_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch, chosen: str | None
) -> None:
    """Freed pages kept a second were over 100 MB of a long-rows peak (docs/performance.md)."""
    import gc
    import os

    from transcript_clean.cli import entry

    monkeypatch.setattr(gc, "freeze", lambda: None)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    if chosen is None:
        monkeypatch.delenv("JE_ARROW_MALLOC_CONF", raising=False)
    else:
        monkeypatch.setenv("JE_ARROW_MALLOC_CONF", chosen)
    monkeypatch.setattr(sys, "argv", ["transcript-clean", "--version"])
    with pytest.raises(SystemExit):
        entry()
    linux = "dirty_decay_ms:100,muzzy_decay_ms:100" if sys.platform == "linux" else None
    assert os.environ.get("JE_ARROW_MALLOC_CONF") == (chosen or linux)


# Clear errors where a traceback was ---------------------------------------------------------------


def _one_line_error(result: Any, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    for word in words:
        assert word in result.output


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("list.toml", b'[actions]\norphan_tool_result = ["reject"]\n', "must be a string"),
        ("number.toml", b"[repair]\ninterrupted_call = 3\n", "repair.interrupted_call = 3"),
        ("latin1.toml", b'[actions]\n# caf\xe9\norphan_tool_result = "reject"\n', "not UTF-8"),
        ("folder.toml", None, "is a folder"),
    ],
)
def test_a_bad_config_file_is_a_one_line_error(
    tmp_path: Path, name: str, content: bytes | None, words: str
) -> None:
    config = tmp_path / name
    if content is None:
        config.mkdir()
    else:
        config.write_bytes(content)
    result = CliRunner().invoke(main, ["clean", "missing.parquet", "out", "--config", str(config)])
    _one_line_error(result, words, name)


def test_an_unreadable_config_file_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root reads a file whatever its mode bits: the read itself is made to fail."""
    config = tmp_path / "secret.toml"
    config.write_text("")
    opened = Path.open

    def denied(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == config:
            raise PermissionError(13, "Permission denied", str(self))
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", denied)
    result = CliRunner().invoke(main, ["clean", "missing.parquet", "out", "--config", str(config)])
    _one_line_error(result, "secret.toml", "Permission denied")


def test_audit_report_where_it_cannot_be_written_fails_before_the_audit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transcript_clean.audit as audit

    def not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the audit ran although its report cannot be written")

    monkeypatch.setattr(audit, "audit", not_run)
    (tmp_path / "afile").write_text("not a folder")
    for report in (tmp_path / "afile" / "r.md", Path("/proc/transcript-clean-test/r.html")):
        result = CliRunner().invoke(main, ["audit", "in.parquet", "--report", str(report)])
        _one_line_error(result, "cannot write report", str(report.parent))


def test_a_report_that_fails_while_written_is_a_one_line_error(tmp_path: Path) -> None:
    from transcript_clean.errors import OutputError
    from transcript_clean.sinks import write_text_atomic

    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(OutputError, match="cannot write"):
        write_text_atomic(tmp_path / "afile" / "r.md", "text")


def _interrupt(command: list[str], after: float) -> subprocess.Popen[str]:
    """Start `command` in a session of its own and, after `after` seconds, send its group
    SIGINT, as a terminal's Ctrl-C does."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    time.sleep(after)
    os.killpg(process.pid, signal.SIGINT)
    return process


@pytest.fixture(scope="module")
def long_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rows enough that a run is still going when Ctrl-C comes, in 50-row blocks (4,000 rows
    raced it)."""
    source = tmp_path_factory.mktemp("long") / "in.parquet"
    make_dataset(source, 20_000, "openai", seed=2)
    return source


@pytest.mark.parametrize("after", [0.3, 0.5])
def test_ctrl_c_at_the_start_exits_130_without_a_traceback(
    tmp_path: Path, long_source: Path, after: float
) -> None:
    """From the moment the program runs (before, Python is still starting: about 0.15 s here)
    until the run's own handler is in place, importing pyarrow and the cleaner."""
    process = _interrupt(clean_command(long_source, tmp_path / "o"), after)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "Aborted!" not in stderr and "Traceback" not in stderr


def test_a_ctrl_c_python_dropped_stops_the_run_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python reports a KeyboardInterrupt raised in one of importlib's callbacks and goes on;
    the handler remembers the Ctrl-C, and the run stops at its start, or after a batch."""
    import threading

    from transcript_clean.cli import interrupt, progress

    monkeypatch.setattr(interrupt, "CTRL_C", threading.Event())
    source = tmp_path / "in.parquet"
    make_dataset(source, 50, "openai")
    with pytest.raises(KeyboardInterrupt):
        interrupt.ctrl_c(signal.SIGINT, None)  # as a dropped one: raised, and only reported
    result = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "out")])
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(KeyboardInterrupt):
        progress.Progress(quiet=True).update(10)


def test_a_ctrl_c_python_dropped_is_not_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Raised in a weakref's callback (as importlib's, while a module is imported), Python
    reports a Ctrl-C with a traceback and goes on: the run's hook says nothing of it, once the
    handler has remembered it, and reports anything else as Python does."""
    import threading
    import weakref

    from transcript_clean.cli import interrupt

    monkeypatch.setattr(interrupt, "CTRL_C", threading.Event())
    monkeypatch.setattr(sys, "unraisablehook", interrupt.unreported_ctrl_c)

    class Held:
        pass

    def dropped(raised: type[BaseException]) -> str:
        def callback(_: object) -> None:
            if raised is KeyboardInterrupt:
                interrupt.ctrl_c(signal.SIGINT, None)
            raise raised

        held = Held()
        reference = weakref.ref(held, callback)
        del held  # the callback runs, and Python reports what it raised
        assert reference() is None
        return capsys.readouterr().err

    assert "ValueError" in dropped(ValueError)
    assert dropped(KeyboardInterrupt) == ""
    assert interrupt.CTRL_C.is_set()


@pytest.mark.parametrize("blocks_done", [0, 2])
def test_ctrl_c_with_two_workers_leaves_no_worker_traceback(
    tmp_path: Path, long_source: Path, blocks_done: int
) -> None:
    out = tmp_path / "out"
    process = subprocess.Popen(
        clean_command(long_source, out, "--workers", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    wait_for_blocks(process, out, blocks_done)  # 0: workers starting, or waiting for a block
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    if blocks_done:  # else nothing was done, and nothing is left to resume
        assert "with --resume to finish it" in stderr
    resumed = CliRunner().invoke(
        main, ["clean", str(long_source), str(out), "--rows-per-shard", "50", "--resume"]
    )
    assert resumed.exit_code == 0, resumed.output


# A name that is neither a local path nor reachable on the Hub ------------------------------------


def test_a_mistyped_local_name_says_both_and_gives_up_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sources_helpers import go_offline

    go_offline(monkeypatch, tmp_path)
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    result = CliRunner().invoke(main, ["clean", "nonexistent_dir", "out"])
    assert time.monotonic() - started < 5
    _one_line_error(
        result, "no such file or folder: nonexistent_dir", "on the Hub", "gave up after"
    )


def test_an_unreachable_hub_is_asked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Online, but the Hub does not answer: one short question, not `load_dataset`'s retries."""
    import huggingface_hub
    import huggingface_hub.constants  # a lazy submodule: imported here whatever ran before

    import transcript_clean.sources as sources
    import transcript_clean.sources.hf as hf_source
    from transcript_clean.errors import SourceError

    asked: list[float | None] = []

    def unreachable(self: object, repo_id: str, **kwargs: Any) -> None:
        asked.append(kwargs.get("timeout"))
        raise OSError("Name or service not known")

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("load_dataset was tried although the Hub is unreachable")

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", unreachable)
    monkeypatch.setattr(hf_source, "load_hub", never)
    monkeypatch.chdir(tmp_path)
    message = r"nonexistent_dir; as a dataset on the Hub: not reachable.*Name or service"
    with pytest.raises(SourceError, match=message):
        sources.open_source("nonexistent_dir")
    assert len(asked) == 1 and asked[0] is not None and asked[0] <= 10


def test_ctrl_c_before_the_run_starts_is_exit_130_not_aborted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, without timing: Ctrl-C while the command sets up (click said "Aborted!")."""
    from transcript_clean.cli import commands

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "command_options", interrupted)
    result = CliRunner().invoke(main, ["clean", "in.parquet", str(tmp_path / "out")])
    assert result.exit_code == 130
    assert "interrupted" in result.output and "Aborted!" not in result.output


def test_an_output_named_like_a_file_is_refused_unless_it_ends_in_a_slash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    row = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"}]}'
    Path("x.jsonl").write_text(row + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["clean", "x.jsonl", "cleaned.jsonl", "-q"])
    assert result.exit_code == 2, result.output
    assert "OUTPUT cleaned.jsonl looks like a file name" in result.output
    assert "--output-format jsonl" in result.output
    assert not Path("cleaned.jsonl").exists() and not Path("cleaned.jsonl.partial").exists()
    result = CliRunner().invoke(main, ["clean", "x.jsonl", "cleaned.jsonl/", "-q"])
    assert result.exit_code == 0, result.output
    assert (Path("cleaned.jsonl") / "summary.json").is_file()


def _mixed_rows(path: Path) -> Path:
    """Three JSON Lines rows: one clean, one with an empty assistant turn (repaired), one with
    no assistant turn (rejected)."""
    user = {"role": "user", "content": "hi"}
    empty, answer = {"role": "assistant", "content": ""}, {"role": "assistant", "content": "a"}
    rows = [
        {"messages": [user, answer]},
        {"messages": [user, empty, user, answer]},
        {"messages": [user]},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_clean_json_prints_the_summary_on_stdout(tmp_path: Path) -> None:
    source = _mixed_rows(tmp_path / "in.jsonl")
    result = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # stdout holds the JSON and nothing else
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert {key: document[key] for key in summary} == summary
    assert (document["rows_in"], document["rows_kept"], document["rows_rejected"]) == (3, 2, 1)
    assert document["output_path"] == str(tmp_path / "out")
    assert (document["gates"], document["passed"]) == ([], True)
    assert "reading" in result.stderr


def test_clean_gates_fail_the_run_after_the_output_is_written(tmp_path: Path) -> None:
    source = _mixed_rows(tmp_path / "in.jsonl")
    out = tmp_path / "out"
    args = [
        "clean", str(source), str(out), "--max-error-rate", "70%", "--max", "no_assistant_turn=0.2",
    ]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "FAIL  gate max no_assistant_turn: 33.33% > 20.00%" in result.stdout
    assert "gate max-error-rate" not in result.stderr  # 2 of 3 rows: 66.67% <= 70%, it holds
    assert "clean failed: 1 gate(s) exceeded; the output is written" in result.stderr
    assert (out / "summary.json").is_file() and (out / "data").is_dir()
    passing = CliRunner().invoke(
        main, ["clean", str(source), str(tmp_path / "ok"), "--max", "no_assistant_turn=0.5", "-q"]
    )
    assert passing.exit_code == 0, passing.output
    typo = CliRunner().invoke(
        main, ["clean", str(source), str(tmp_path / "typo"), "--max", "no_asistant_turn=0.5"]
    )
    assert typo.exit_code == 2
    assert "did you mean 'no_assistant_turn'" in typo.output
    assert not (tmp_path / "typo").exists()  # refused before the run


@pytest.mark.parametrize("command", ["clean", "audit", "explain"])
def test_every_command_takes_a_log_level(tmp_path: Path, command: str) -> None:
    source = _mixed_rows(tmp_path / "in.jsonl")
    args = {
        "clean": ["clean", str(source), str(tmp_path / "out"), "-q"],
        "audit": ["audit", str(source), "-q"],
        "explain": ["explain", str(source), "--row", "0"],
    }[command]
    quiet = CliRunner().invoke(main, args)
    assert quiet.exit_code == 0, quiet.output
    assert "transcript-clean: info:" not in quiet.stderr
    if command == "clean":
        args[2] = str(tmp_path / "out2")
    loud = CliRunner().invoke(main, [*args, "-v"])
    assert loud.exit_code == 0, loud.output
    assert f"transcript-clean: info: {source}: 3 rows" in loud.stderr
    if command == "clean":
        args[2] = str(tmp_path / "out3")
    debug = CliRunner().invoke(main, [*args, "--log-level", "debug"])
    assert debug.exit_code == 0, debug.output
    assert "transcript-clean: debug:" in debug.stderr


# ---------------------------------------------------------------------------------------------
# fields typed `pa.json_()` (issue 27, findings 1 and 8)

CHAT = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
WEATHER = {
    "messages": [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ],
}


def write_lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def every_command(source: Path | str, out: Path, rows: int) -> None:
    """`clean` to Parquet and to JSON Lines, `audit` and `explain` of each row, with `--format
    auto` and `openai`, all run to the end: no traceback, every row accounted for."""
    for fmt in ("auto", "openai"):
        for kind in ("parquet", "jsonl"):
            output = out / f"{fmt}-{kind}"
            args = ["clean", str(source), str(output), "--format", fmt, "--output-format", kind]
            result = CliRunner().invoke(main, args)
            assert result.exit_code == 0, result.output
            assert f"rows in {rows} = kept {rows} (repaired 0) + rejected 0" in result.output
        result = CliRunner().invoke(main, ["audit", str(source), "--format", fmt])
        assert result.exit_code == 0, result.output
        assert f"rows in {rows} = kept {rows}" in result.output
    for row in range(rows):
        result = CliRunner().invoke(main, ["explain", str(source), "--row", str(row)])
        assert result.exit_code == 0, result.output
        assert "Outcome: kept unchanged" in result.output


@pytest.mark.parametrize(
    ("before", "values"),
    [
        (0, [{"a": {"b": 1}}, {"a": [1]}]),  # as the issue has it
        (20, [[{"a": {"b": 1}}], [{"a": [1]}]]),
    ],
    ids=["struct", "list-after-the-sample"],
)
def test_an_extra_column_whose_values_differ_in_type_runs(
    tmp_path: Path, before: int, values: list[Any]
) -> None:
    """Finding 1: a metadata column (BFCL's `initial_config`) whose values differ in type is
    typed `pa.json_()` where they differ; the run, its detection and `explain` read it, also
    where the first rows lack it, so that what detection samples holds a list of such structs
    null in every row."""
    rows = [{"messages": CHAT} for _ in range(before)]
    rows += [{"messages": CHAT, "initial_config": value} for value in values]
    every_command(write_lines(tmp_path / "in.jsonl", rows), tmp_path, len(rows))


def test_a_glob_of_json_lines_files_whose_fields_differ_runs(tmp_path: Path) -> None:
    """Finding 8: a plain chat file and a file whose row declares tools (their schemas stored
    as `pa.json_()`): the first file's rows, read in the schema of both, hold no tools."""
    folder = tmp_path / "g"
    folder.mkdir()
    write_lines(folder / "a.jsonl", [{"messages": CHAT}])
    write_lines(folder / "b.jsonl", [WEATHER])
    every_command(f"{folder}/*.jsonl", tmp_path, 2)


def test_a_format_named_that_most_rows_do_not_read_as_gets_a_hint(tmp_path: Path) -> None:
    """`--format anthropic` on an OpenAI file rejected 4 of 5 rows as `unknown_role` and said
    nothing more: the run (not refused: the format was asked for) names the one that reads."""
    source = tmp_path / "openai.jsonl"
    source.write_text("\n".join([json.dumps(WEATHER)] * 4 + [json.dumps({"messages": CHAT})]))
    result = CliRunner().invoke(
        main, ["clean", str(source), str(tmp_path / "out"), "--format", "anthropic"]
    )
    assert result.exit_code == 0, result.output
    said = "rows do not read as anthropic; they read as openai (column 'messages')"
    hint = next(line for line in result.output.splitlines() if line.startswith("hint: "))
    assert re.fullmatch(rf"hint: 4 of the first [45] {re.escape(said)}: pass --format openai", hint)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert f"hint: {summary['hint']}" == hint and summary["rows_rejected"] == 4
    again = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "again")])
    assert again.exit_code == 0 and "hint:" not in again.output  # auto: nothing to say
