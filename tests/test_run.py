"""End-to-end cleaning runs: the library's `clean` and the CLI's `clean` over generated and real
data, strict-mode accounting, resume after SIGKILL, determinism, and bad input."""

from __future__ import annotations

import json
import os
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
from synthetic import generate_rows

from transcript_clean.cli import main
from transcript_clean.errors import OutputError, SourceError
from transcript_clean.formats import get_format
from transcript_clean.options import EngineOptions, SourceOptions
from transcript_clean.run import clean
from transcript_clean.transcript import transcript_errors

FORMATS = ["openai", "sharegpt", "anthropic", "rig"]


def make_dataset(path: Path, n: int, fmt: str, seed: int = 0) -> list[frozenset[str]]:
    """A generated Parquet file (small row groups, so blocks cross them); each row's plants."""
    rows, planted = [], []
    for row, codes in generate_rows(n, format=fmt, seed=seed):
        rows.append(row)
        planted.append(codes)
    pq.write_table(pa.Table.from_pylist(rows), path, compression="zstd", row_group_size=97)
    return planted


def read_folder(folder: Path) -> pa.Table:
    files = sorted(folder.glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*.parquet"))
        if p.name != "stats.parquet"
    }


def clean_command(source: Path, out: Path, *extra: str) -> list[str]:
    """`transcript-clean clean SOURCE OUT` in 50-row blocks, as its own process."""
    return [
        sys.executable, "-m", "transcript_clean", "clean", str(source), str(out),
        "--rows-per-shard", "50", *extra,
    ]  # fmt: skip


def wait_for_blocks(process: subprocess.Popen[Any], out: Path, count: int) -> None:
    """Until the run on `out` in `process` has done `count` blocks; it must still be running."""
    blocks = out.with_name(out.name + ".partial") / "blocks"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if blocks.exists() and len(list(blocks.iterdir())) >= count:
            break
        time.sleep(0.005)
    assert process.poll() is None, "the run finished before it could be stopped"


def assert_kept_rows_valid(out: Path, fmt: str) -> None:
    codec = get_format(fmt)
    kept = read_folder(out / "data")
    for row in kept.to_pylist():
        if isinstance(row[codec.column], str):  # a conversation kept as JSON text
            row[codec.column] = json.loads(row[codec.column])
        errors = transcript_errors(codec.decode(row).messages)
        # the default config keeps calls pending at the very end (trailing_tool_call)
        assert {e.code for e in errors} <= {"unanswered_tool_call"}, row


@pytest.mark.parametrize("fmt", FORMATS)
def test_strict_rejects_exactly_the_planted_codes(tmp_path: Path, fmt: str) -> None:
    source = tmp_path / "in.parquet"
    planted = make_dataset(source, 600, fmt, seed=3)
    assert any(planted), "the generator planted nothing"
    command = [
        "clean",
        str(source),
        str(tmp_path / "out"),
        "--config",
        "strict",
        "--rows-per-shard",
        "250",
    ]
    cli = CliRunner().invoke(main, command)
    assert cli.exit_code == 0, cli.output
    assert f"reading {source} as {fmt}" in cli.output
    assert "rows in 600 = kept" in cli.output and "(checked)" in cli.output

    rejects = read_folder(tmp_path / "out" / "rejects")
    by_row = dict(
        zip(
            rejects.column("_source_row").to_pylist(),
            rejects.column("_reject_codes").to_pylist(),
            strict=True,
        )
    )
    assert by_row == {i: sorted(codes) for i, codes in enumerate(planted) if codes}
    kept = read_folder(tmp_path / "out" / "data")
    assert kept.num_rows + rejects.num_rows == 600
    original = pq.read_table(source)
    clean_rows = [i for i, codes in enumerate(planted) if not codes]
    # unchanged rows are written value for value, in input order
    assert kept.to_pylist() == original.take(pa.array(clean_rows)).to_pylist()


@pytest.mark.parametrize("fmt", FORMATS)
def test_default_config_repairs_and_every_kept_row_is_valid(tmp_path: Path, fmt: str) -> None:
    source = tmp_path / "in.parquet"
    planted = make_dataset(source, 600, fmt, seed=5)
    result = clean(source, tmp_path / "out", rows_per_shard=200)
    stats = result.stats
    assert stats.rows_in == stats.rows_kept + stats.rows_rejected == 600
    assert stats.rows_repaired > 0
    assert_kept_rows_valid(tmp_path / "out", fmt)
    rejected_codes = set().union(
        *read_folder(tmp_path / "out" / "rejects").column("_reject_codes").to_pylist()
    )
    assert rejected_codes <= {
        "malformed_row",
        "unknown_role",
        "no_assistant_turn",
        "consecutive_assistant",
        "unanswered_tool_call",
        "invalid_tool_arguments",  # its result is a real one: R2 never writes over it
        "orphan_tool_result",  # a later turn may use it: R3 drops it only where none can
    }
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["rows_in"] == 600 and summary["accounting_ok"] is True
    assert summary["format"] == fmt
    assert (
        sum(1 for codes in planted if "empty_assistant_turn" in codes)
        <= summary["counts"]["empty_turns_dropped"]
    )


def test_output_layout(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 300, "openai")
    clean(source, tmp_path / "out", rows_per_shard=100)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "data",
        "profile.json",
        "rejects",
        "stats.csv",
        "stats.parquet",
        "summary.json",
    ]
    assert sorted(p.name for p in (out / "data").iterdir()) == [
        f"part-0000{i}.parquet" for i in range(3)
    ]
    assert not (tmp_path / "out.partial").exists()
    rejects = pq.read_schema(next((out / "rejects").iterdir()))
    assert rejects.names[-4:] == ["_reject_codes", "_reject_message", "_source", "_source_row"]
    assert pq.read_schema(out / "data" / "part-00000.parquet").names == pq.read_schema(source).names
    stats = pq.read_table(out / "stats.parquet")
    assert stats.column_names == [
        "code",
        "action",
        "rows",
        "occurrences",
        "share",
        "example_source",
        "example_row",
    ]
    csv_lines = (out / "stats.csv").read_text().splitlines()
    assert csv_lines[0] == "code,action,rows,occurrences,share,example_source,example_row"
    assert len(csv_lines) == stats.num_rows + 1
    card = (out / "README.md").read_text()
    assert "| code | action |" in card
    assert "| in | 300 |" in card


def test_two_runs_give_identical_files_for_any_worker_count(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 900, "openai", seed=11)
    clean(source, tmp_path / "a", rows_per_shard=200)
    clean(source, tmp_path / "b", rows_per_shard=200)
    clean(source, tmp_path / "c", rows_per_shard=200, workers=2)
    a = folder_bytes(tmp_path / "a")
    assert a == folder_bytes(tmp_path / "b") == folder_bytes(tmp_path / "c")
    assert len(a) >= 6


def test_options_objects_and_keywords_make_the_same_run(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 300, "sharegpt", seed=3)
    by_keyword = clean(source, tmp_path / "a", format="sharegpt", limit=250, batch_size=64)
    read = SourceOptions(source, format="sharegpt", limit=250, batch_size=64)
    by_object = clean(read, tmp_path / "b", engine=EngineOptions(workers=2), rows_per_shard=100)
    assert by_object.stats.records() == by_keyword.stats.records()
    assert by_object.summary["workers"] == 2 and by_object.stats.rows_in == 250
    assert read_folder(tmp_path / "b" / "data").equals(read_folder(tmp_path / "a" / "data"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        clean(source, tmp_path / "c", batchsize=64)


def test_resume_after_sigkill_gives_the_same_files(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 4000, "openai", seed=2)
    reference = tmp_path / "reference"
    clean(source, reference, rows_per_shard=50)

    out = tmp_path / "out"
    process = subprocess.Popen(clean_command(source, out, "--quiet"))
    blocks = out.with_name("out.partial") / "blocks"
    wait_for_blocks(process, out, 3)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    done = len(list(blocks.iterdir()))
    assert 3 <= done < 80
    assert not out.exists(), "a killed run must not leave an OUTPUT that looks complete"

    runner = CliRunner()
    again = runner.invoke(main, ["clean", str(source), str(out), "--rows-per-shard", "50"])
    assert again.exit_code == 2
    assert "--resume" in again.output

    resumed = runner.invoke(
        main, ["clean", str(source), str(out), "--rows-per-shard", "50", "--resume"]
    )
    assert resumed.exit_code == 0, resumed.output
    assert folder_bytes(out) == folder_bytes(reference)
    assert json.loads((out / "summary.json").read_text())["rows_in"] == 4000


def test_resume_refuses_a_different_run(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 50, "openai")
    (tmp_path / "out.partial").mkdir()
    (tmp_path / "out.partial" / "run.json").write_text("{}")
    with pytest.raises(OutputError, match="different run"):
        clean(source, tmp_path / "out", resume=True)


def test_what_to_pass_is_said_as_the_caller_gives_it(tmp_path: Path) -> None:
    # From Python the keyword arguments, from the command line the flags.
    source = tmp_path / "in.parquet"
    make_dataset(source, 20, "openai")
    out = tmp_path / "out"

    def left_unfinished() -> None:
        (tmp_path / "out.partial").mkdir(exist_ok=True)
        (tmp_path / "out.partial" / "run.json").write_text("{}")

    left_unfinished()
    with pytest.raises(OutputError) as left:
        clean(source, out)
    assert "pass resume=True to finish it, or overwrite=True to start over" in str(left.value)
    assert "--" not in str(left.value).replace(str(tmp_path), "")
    left_unfinished()
    result = CliRunner().invoke(main, ["clean", str(source), str(out), "-q"])
    assert result.exit_code == 2
    assert "pass --resume to finish it, or --overwrite to start over" in result.output
    left_unfinished()
    with pytest.raises(OutputError, match="without resume=True and with overwrite=True"):
        clean(source, out, resume=True)  # still Python's words after a command ran
    clean(source, out, overwrite=True)
    with pytest.raises(OutputError, match="pass overwrite=True to replace it"):
        clean(source, out)
    result = CliRunner().invoke(main, ["clean", str(source), str(out), "-q"])
    assert result.exit_code == 2 and "pass --overwrite to replace it" in result.output


def test_output_safety(tmp_path: Path) -> None:
    folder = tmp_path / "raw"
    folder.mkdir()
    make_dataset(folder / "in.parquet", 20, "openai")
    with pytest.raises(OutputError, match="inside the source"):
        clean(folder, folder / "clean")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    with pytest.raises(OutputError, match="overwrite=True"):
        clean(folder, tmp_path / "taken")
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"
    with pytest.raises(OutputError, match="does not look like the OUTPUT of an earlier run"):
        clean(folder, tmp_path / "taken", overwrite=True)  # it never held one
    assert (tmp_path / "taken" / "keep.txt").read_text() == "mine"
    clean(folder, tmp_path / "done")
    clean(folder, tmp_path / "done", overwrite=True)  # an earlier run's: replaced
    assert (tmp_path / "done" / "summary.json").exists()


def test_missing_column_lists_the_columns(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": ["a"], "id": [1]}), source)
    with pytest.raises(SourceError, match=r"no column 'messages'.*text, id"):
        clean(source, tmp_path / "out", format="openai")


def test_corrupt_parquet_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    make_dataset(tmp_path / "raw" / "a.parquet", 10, "openai")
    (tmp_path / "raw" / "b.parquet").write_bytes(b"PAR1 this is not parquet")
    result = CliRunner().invoke(main, ["clean", str(tmp_path / "raw"), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "b.parquet" in result.output


def test_rows_of_the_wrong_type_are_rejected_and_the_run_goes_on(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {
            "messages": json.dumps(
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
            )
        },
        {"messages": json.dumps({"role": "user"})},
        {
            "messages": json.dumps(
                [{"role": "user", "content": 7}, {"role": "assistant", "content": "yo"}]
            )
        },
        {"messages": "not json at all"},
        {"messages": None},
    ]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), source)
    result = clean(source, tmp_path / "out", format="openai")
    assert (result.stats.rows_kept, result.stats.rows_rejected) == (1, 4)
    rejects = read_folder(tmp_path / "out" / "rejects")
    assert rejects.column("_source_row").to_pylist() == [1, 2, 3, 4]
    assert all(codes == ["malformed_row"] for codes in rejects.column("_reject_codes").to_pylist())


def test_cleaned_output_loads_with_datasets_and_the_input_features(tmp_path: Path) -> None:
    import datasets

    source = tmp_path / "in.parquet"
    rows = [row for row, _ in generate_rows(200, format="openai", seed=1)]
    datasets.Dataset.from_list(rows).to_parquet(str(source))
    features = datasets.load_dataset("parquet", data_files=str(source), split="train").features
    clean(source, tmp_path / "out")
    cleaned = datasets.load_dataset(
        "parquet", data_files=str(tmp_path / "out" / "data" / "*.parquet"), split="train"
    )
    assert cleaned.features == features
    assert 0 < cleaned.num_rows <= 200


@pytest.mark.parametrize(
    "name",
    [
        "sharegpt/glaive_toolcall_en_demo.json",
        "sharegpt/fastchat_dummy_conversation.json",
        "sharegpt/axolotl_conversation_missingturns.json",
        "openai/toy_chat_fine_tuning.jsonl",
        "openai/functionary_test_case.json",
    ],
)
def test_shared_data_end_to_end(tmp_path: Path, shared_data: Path, name: str) -> None:
    result = CliRunner().invoke(main, ["clean", str(shared_data / name), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "(checked)" in result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["rows_in"] == summary["rows_kept"] + summary["rows_rejected"] > 0
    assert_kept_rows_valid(tmp_path / "out", summary["format"])


def test_axolotl_empty_turn_is_dropped(tmp_path: Path, shared_data: Path) -> None:
    result = clean(
        shared_data / "sharegpt/axolotl_conversation_missingturns.json", tmp_path / "out"
    )
    assert result.stats.empty_turns_dropped == 1
    assert result.stats.rows_repaired == 1


def test_glaive_is_clean_but_for_one_schema_break(tmp_path: Path, shared_data: Path) -> None:
    result = clean(shared_data / "sharegpt/glaive_toolcall_en_demo.json", tmp_path / "out")
    assert (result.stats.rows_in, result.stats.rows_kept, result.stats.rows_repaired) == (
        300,
        299,
        0,
    )
    # row 259 declares calories_per_item a number and sends a list of them
    assert result.stats.codes[("tool_arguments_schema", "rejected")].example_row == 259


def test_explain_shows_violations_and_repairs(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    planted = make_dataset(source, 300, "openai", seed=4)
    row = next(i for i, codes in enumerate(planted) if codes == {"consecutive_assistant"})
    result = CliRunner().invoke(main, ["explain", str(source), "--row", str(row)])
    assert result.exit_code == 0, result.output
    assert "Canonical transcript:" in result.output
    assert "consecutive_assistant" in result.output
    assert "Repair consecutive_assistant" in result.output and "  - [" in result.output
    assert "Outcome: kept, repaired" in result.output
    missing = CliRunner().invoke(main, ["explain", str(source), "--row", "300"])
    assert missing.exit_code == 2 and "no row 300" in missing.output


def test_cli_clean_prints_the_table_and_accounting(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 200, "openai", seed=9)
    result = CliRunner().invoke(
        main, ["clean", str(source), str(tmp_path / "out"), "--limit", "150"]
    )
    assert result.exit_code == 0, result.output
    assert "code" in result.output and "share" in result.output
    assert "rows in 150 = kept" in result.output
    taken = CliRunner().invoke(main, ["clean", str(source), str(tmp_path / "out")])
    assert taken.exit_code == 2 and "--overwrite" in taken.output


def test_clean_batch_inside_datasets_map() -> None:
    """The per-batch cleaner as a step of someone else's `datasets` pipeline."""
    import datasets

    from transcript_clean import clean_batch, load_config

    rows, planted = zip(*generate_rows(300, format="openai", seed=8), strict=True)
    config = load_config("strict")
    ds = datasets.Dataset.from_list(list(rows)).with_format("arrow")
    cleaned = ds.map(
        lambda t: clean_batch(t, config, format="openai").kept, batched=True, batch_size=64
    )
    assert cleaned.num_rows == sum(1 for codes in planted if not codes)
    assert cleaned.features == ds.features


def test_a_run_that_fails_before_any_block_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transcript_clean.engine.local as local

    source = tmp_path / "in.parquet"
    make_dataset(source, 20, "openai")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(local, "clean_block", broken)
    with pytest.raises(OSError, match="disk on fire"):
        clean(source, tmp_path / "out")
    assert not (tmp_path / "out.partial").exists()
    assert not (tmp_path / "out").exists()


def test_ctrl_c_says_how_to_resume(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    # Long enough that the run is still going when the signal comes (4,000 rows raced it).
    make_dataset(source, 20_000, "openai", seed=2)
    out = tmp_path / "out"
    process = subprocess.Popen(
        clean_command(source, out), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    wait_for_blocks(process, out, 2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "with --resume to finish it" in stderr
    assert not out.exists()
    resumed = CliRunner().invoke(
        main, ["clean", str(source), str(out), "--rows-per-shard", "50", "--resume"]
    )
    assert resumed.exit_code == 0, resumed.output


def test_a_resumed_run_times_every_block_not_the_pause(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 400, "openai")
    out = tmp_path / "out"
    seen = [0]

    def slow_then_killed(rows: int) -> None:
        if rows and not seen[0]:
            time.sleep(1.5)  # in the first block: time worked before the kill
        seen[0] += rows
        if seen[0] >= 150:
            raise KeyboardInterrupt  # after two blocks of 50 rows are done

    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        clean(source, out, rows_per_shard=50, batch_size=10, progress=slow_then_killed)
    first = time.perf_counter() - started
    assert (tmp_path / "out.partial" / "blocks").is_dir() and not out.exists()
    time.sleep(3.0)  # between the runs: no work, not timed
    started = time.perf_counter()
    result = clean(source, out, rows_per_shard=50, batch_size=10, resume=True)
    resumed = time.perf_counter() - started
    seconds = result.summary["seconds"]
    # the first part is counted (its 1.5 s at least, less what the resumed call spends outside
    # its own timing), the pause is not (else 3 s more), however fast the machine
    assert 0.5 <= seconds - resumed <= first + 0.25, (seconds, resumed, first)
    assert result.summary["rows_per_second"] == pytest.approx(400 / seconds, abs=0.2)


@pytest.mark.parametrize("output_format", ["parquet", "jsonl"])
def test_recleaning_its_own_rejects_keeps_their_verdict_under_prev(
    tmp_path: Path, output_format: str
) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 60, "openai", seed=3)
    first = clean(source, tmp_path / "first", config="strict")
    assert first.stats.rows_rejected > 0
    old = read_folder(tmp_path / "first" / "rejects")
    result = CliRunner().invoke(
        main,
        [
            "clean", str(tmp_path / "first" / "rejects"), str(tmp_path / "again"),
            "--config", "strict", "--output-format", output_format,
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    if output_format == "parquet":
        again = pq.read_table(tmp_path / "again" / "rejects")  # opens: no column twice
        rows = again.to_pylist()
    else:
        files = sorted((tmp_path / "again" / "rejects").glob("*.jsonl"))
        rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert len(rows) == old.num_rows  # strict rejects them all again
    assert [row["_prev_source_row"] for row in rows] == old.column("_source_row").to_pylist()
    assert [row["_prev_reject_codes"] for row in rows] == old.column("_reject_codes").to_pylist()
    assert all(row["_source"].startswith(str(tmp_path / "first" / "rejects")) for row in rows)
    assert [row["_source_row"] for row in rows] == list(range(len(rows)))
