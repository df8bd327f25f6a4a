"""`clean --output-format jsonl` end to end: Parquet in and JSON Lines in, rejects, resume after
SIGKILL, `--workers`, compression, the accounting read back from the lines, and `datasets`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from jsonl_bench import without_nulls as no_nulls
from synthetic import generate_rows
from test_run import clean_command, make_dataset, wait_for_blocks

from transcript_clean.cli import main
from transcript_clean.errors import AccountingError, OutputError
from transcript_clean.output import check_files
from transcript_clean.pipeline import clean_batch
from transcript_clean.run import clean
from transcript_clean.sinks import OutputFormat
from transcript_clean.sources import open_source
from transcript_clean.sources.base import LINE_ERROR, RAW_LINE
from transcript_clean.stats import Stats

FOUR = {"_reject_codes", "_reject_message", "_source", "_source_row"}


def lines_of(folder: Path, compression: str = "none") -> list[bytes]:
    """Every line of the shards in `folder`, in shard order."""
    out: list[bytes] = []
    for path in sorted(p for p in folder.iterdir() if ".jsonl" in p.name):
        codec = None if compression == "none" else compression
        with pa.input_stream(str(path), compression=codec) as stream:
            out.extend(stream.read().splitlines())
    return out


def write_jsonl(path: Path, n: int, seed: int) -> tuple[list[bytes], list[frozenset[str]]]:
    """Generated OpenAI rows as JSON Lines, null keys left out and spaced as `json.dumps`
    does (not as this project writes JSON), with one line that is not JSON; their lines."""
    lines, planted = [], []
    for row, codes in generate_rows(n, format="openai", seed=seed):
        lines.append(json.dumps(no_nulls(row), ensure_ascii=False).encode())
        planted.append(codes)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return lines, planted


def test_parquet_in_jsonl_out(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 300, "openai", seed=5)
    reference = clean(source, tmp_path / "parquet", rows_per_shard=120)
    result = clean(source, tmp_path / "jsonl", rows_per_shard=120, output_format="jsonl")
    assert result.stats.records() == reference.stats.records()
    out = tmp_path / "jsonl"
    assert sorted(p.name for p in (out / "data").iterdir()) == [
        "part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"
    ]  # fmt: skip
    # every kept row is the Parquet output's row: its values, nulls written as null
    kept = pa.concat_tables(
        pq.read_table(p) for p in sorted((out.parent / "parquet" / "data").iterdir())
    )
    assert [orjson.loads(x) for x in lines_of(out / "data")] == kept.to_pylist()
    rejects = [orjson.loads(x) for x in lines_of(out / "rejects")]
    assert len(rejects) == result.stats.rows_rejected > 0
    parquet_rejects = pa.concat_tables(
        pq.read_table(p) for p in sorted((out.parent / "parquet" / "rejects").iterdir())
    )
    assert rejects == parquet_rejects.to_pylist()
    assert all(set(r) >= FOUR for r in rejects)
    assert "    path: data/*.jsonl\n" in (out / "README.md").read_text()


def test_jsonl_in_jsonl_out_keeps_unchanged_rows_as_they_came(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines, planted = write_jsonl(source, 400, seed=8)
    # strict: every planted row is rejected, every other row is kept unchanged
    result = clean(source, tmp_path / "out", config="strict", output_format="jsonl")
    assert result.stats.rows_repaired == 0
    clean_rows = [line for line, codes in zip(lines, planted, strict=True) if not codes]
    kept = lines_of(tmp_path / "out" / "data")
    assert [no_nulls(orjson.loads(x)) for x in kept] == [orjson.loads(x) for x in clean_rows]
    assert RAW_LINE in open_source(str(source)).schema.names
    assert kept == clean_rows  # the same bytes, line for line
    rejects = [orjson.loads(x) for x in lines_of(tmp_path / "out" / "rejects")]
    assert [r["_source_row"] for r in rejects] == [i for i, c in enumerate(planted) if c]
    for reject in rejects:
        row = {k: v for k, v in reject.items() if k not in FOUR}
        assert no_nulls(row) == orjson.loads(lines[reject["_source_row"]])
        assert reject["_source"] == str(source) and reject["_reject_codes"]


def test_the_cli_writes_jsonl_and_says_which_compressions_there_are(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 40, "openai")
    runner = CliRunner()
    bad = runner.invoke(
        main, ["clean", str(source), str(tmp_path / "a"), "--output-format", "jsonl",
               "--compression", "snappy"],
    )  # fmt: skip
    assert bad.exit_code == 2
    assert "--compression for jsonl output is one of none, gzip, zstd, not 'snappy'" in bad.output
    assert not (tmp_path / "a").exists()
    good = runner.invoke(
        main, ["clean", str(source), str(tmp_path / "a"), "--output-format", "jsonl", "-q"]
    )
    assert good.exit_code == 0, good.output
    assert (tmp_path / "a" / "data" / "part-00000.jsonl").exists()


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_jsonl_round_trips(tmp_path: Path, compression: str) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 250, "openai", seed=4)
    clean(source, tmp_path / "plain", rows_per_shard=100, output_format="jsonl")
    clean(
        source, tmp_path / "packed", rows_per_shard=100, output_format="jsonl",
        compression=compression,
    )  # fmt: skip
    suffix = OutputFormat("jsonl", compression).suffix
    names = sorted(p.name for p in (tmp_path / "packed" / "data").iterdir())
    assert names and all(name.endswith(suffix) for name in names)
    for folder in ("data", "rejects"):
        plain = lines_of(tmp_path / "plain" / folder)
        assert lines_of(tmp_path / "packed" / folder, compression) == plain
    card = (tmp_path / "packed" / "README.md").read_text()
    assert f"    path: data/*{suffix}\n" in card


def test_workers_and_runs_give_the_same_bytes(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, 600, seed=3)
    for name, workers in (("a", 1), ("b", 1), ("c", 2)):
        clean(
            source, tmp_path / name, rows_per_shard=150, workers=workers, output_format="jsonl",
            compression="zstd",
        )  # fmt: skip
    files = {
        name: {
            str(p.relative_to(tmp_path / name)): p.read_bytes()
            for p in sorted((tmp_path / name).rglob("*.jsonl.zst"))
        }
        for name in "abc"
    }
    assert files["a"] == files["b"] == files["c"]
    assert len(files["a"]) == 8  # 4 blocks, data and rejects


def test_resume_after_sigkill_gives_the_same_lines(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 3000, "openai", seed=2)
    reference = tmp_path / "reference"
    clean(source, reference, rows_per_shard=50, output_format="jsonl", compression="gzip")

    out = tmp_path / "out"
    jsonl = ("--output-format", "jsonl", "--compression", "gzip")
    process = subprocess.Popen(clean_command(source, out, "--quiet", *jsonl))
    wait_for_blocks(process, out, 3)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not out.exists()
    runner = CliRunner()
    # the same run as Parquet would mix two kinds of shards: refused, naming both
    other = runner.invoke(
        main, ["clean", str(source), str(out), "--rows-per-shard", "50", "--resume"]
    )
    assert other.exit_code == 2
    assert "holds jsonl shards (gzip), and this run writes parquet (zstd)" in other.output
    resumed = runner.invoke(
        main, ["clean", str(source), str(out), "--rows-per-shard", "50", "--resume", *jsonl]
    )
    assert resumed.exit_code == 0, resumed.output
    for folder in ("data", "rejects"):
        assert lines_of(out / folder, "gzip") == lines_of(reference / folder, "gzip")
        assert sorted(p.name for p in (out / folder).iterdir()) == sorted(
            p.name for p in (reference / folder).iterdir()
        )


def test_a_shard_missing_a_row_fails_the_accounting(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    make_dataset(source, 100, "openai")
    work = tmp_path / "work"
    written = OutputFormat("jsonl")
    result = clean(source, tmp_path / "out", rows_per_shard=100, output_format="jsonl")
    for folder in ("data", "rejects", "blocks"):
        (work / folder).mkdir(parents=True)
    name = written.shard_name(0)
    lines = (tmp_path / "out" / "data" / "part-00000.jsonl").read_bytes().splitlines(True)
    (work / "data" / name).write_bytes(b"".join(lines[:-1]))  # one row short
    (work / "rejects" / name).write_bytes((tmp_path / "out" / "rejects" / name).read_bytes())
    (work / "blocks" / "00000.json").write_text(json.dumps(result.stats.to_dict()))
    with pytest.raises(AccountingError, match=f"data/{name} holds {len(lines) - 1} rows"):
        check_files(work, [name], result.stats, written)
    assert not (work / "blocks" / "00000.json").exists()  # so --resume cleans it again
    assert isinstance(Stats.from_dict(result.stats.to_dict()), Stats)


def test_datasets_loads_the_jsonl_output(tmp_path: Path) -> None:
    import datasets

    source = tmp_path / "in.parquet"
    make_dataset(source, 120, "openai", seed=9)
    result = clean(source, tmp_path / "out", output_format="jsonl", compression="gzip")
    loaded = datasets.load_dataset(
        str(tmp_path / "out"), split="train", cache_dir=str(tmp_path / "c")
    )
    assert loaded.num_rows == result.stats.rows_kept > 0
    assert isinstance(loaded[0]["messages"][0], dict)


def test_an_empty_output_keeps_one_empty_shard(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    # an empty turn, whose drop leaves no assistant turn: rejected (a set with no assistant
    # message at all would read as prompts)
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]}
    source.write_text(json.dumps(row) + "\n")
    clean(source, tmp_path / "out", output_format="jsonl", compression="zstd")
    assert (tmp_path / "out" / "data" / "part-00000.jsonl.zst").exists()
    assert (
        OutputFormat("jsonl", "zstd").rows(tmp_path / "out" / "data" / "part-00000.jsonl.zst") == 0
    )
    assert len(lines_of(tmp_path / "out" / "rejects", "zstd")) == 1


def test_unknown_output_format_is_refused_before_anything(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="not 'csv'"):
        clean(tmp_path / "missing.parquet", tmp_path / "out", output_format="csv")


def test_cli_on_a_real_jsonl_file_gives_its_lines_back(tmp_path: Path, shared_data: Path) -> None:
    source = shared_data / "openai" / "msfoundry_zava_toolsft_valid.jsonl"
    lines = source.read_bytes().splitlines()
    out = tmp_path / "out"
    # every code that would change a row rejects it; calls pending at the end are kept
    config = tmp_path / "no_repairs.toml"
    codes = ("empty_assistant_turn", "invalid_tool_arguments", "orphan_tool_result",
             "consecutive_assistant", "unanswered_tool_call")  # fmt: skip
    config.write_text("[actions]\n" + "".join(f'{code} = "reject"\n' for code in codes))
    args = ["clean", str(source), str(out), "--config", str(config), "--output-format", "jsonl"]
    result = CliRunner().invoke(main, [*args, "-q"])
    assert result.exit_code == 0, result.output
    kept = lines_of(out / "data")
    rejects = [orjson.loads(x) for x in lines_of(out / "rejects")]
    assert len(kept) + len(rejects) == len(lines) and kept and rejects
    rejected = {r["_source_row"] for r in rejects}
    unchanged = [line for i, line in enumerate(lines) if i not in rejected]
    # no row was changed: the kept rows are the input's
    assert [no_nulls(orjson.loads(x)) for x in kept] == [orjson.loads(x) for x in unchanged]
    assert RAW_LINE in open_source(str(source)).schema.names
    assert kept == unchanged  # the same bytes, line for line


@pytest.mark.parametrize("output_format", ["parquet", "jsonl"])
def test_repaired_jsonl_rows_are_written_as_the_per_row_path_repairs_them(
    tmp_path: Path, output_format: str
) -> None:
    # Parquet output drops each row's line, so the fast path repairs JSON Lines rows there too;
    # JSON Lines output writes a repaired row as its line re-encoded, which the per-row path does.
    source = tmp_path / "in.jsonl"
    write_jsonl(source, 600, seed=11)
    read = open_source(str(source))
    table = pa.Table.from_batches(list(read.read(read.parts()[0])))
    slow = clean_batch(table, format="openai", fast=False)
    result = clean(source, tmp_path / "out", output_format=output_format)
    assert result.stats.rows_repaired > 0
    if output_format == "jsonl":
        repaired_lines = slow.kept.column(RAW_LINE).to_pylist()
        assert lines_of(tmp_path / "out" / "data") == [x.encode() for x in repaired_lines]
    else:
        data = pq.read_table(tmp_path / "out" / "data")
        assert data.to_pylist() == slow.kept.drop_columns([RAW_LINE, LINE_ERROR]).to_pylist()


def test_kept_rows_are_gathered_for_the_columns_a_shard_writes(tmp_path: Path) -> None:
    # A Parquet shard leaves a JSON Lines row's line out: it is not copied for it either.
    from transcript_clean.pipeline import clean_batch_parts

    source = tmp_path / "in.jsonl"
    write_jsonl(source, 600, seed=11)
    read = open_source(str(source))
    table = pa.Table.from_batches(list(read.read(read.parts()[0])))
    cleaned = clean_batch_parts(table, format="openai", fast=False)
    assert cleaned.replaced and not cleaned.kept.all()  # rows repaired, rows rejected
    every = cleaned.kept_rows()
    shard = OutputFormat().open(tmp_path / "part.parquet", table.schema)
    names = shard.schema.names
    assert RAW_LINE in every.column_names and RAW_LINE not in names
    assert cleaned.kept_rows(names).equals(every.select(names))
    assert cleaned.kept_rows([*every.column_names, "other"]).equals(every)
    shard.abort()


@pytest.mark.parametrize("output_format", ["jsonl", "parquet"])
def test_json_lines_rejects_cleaned_again_lose_nothing(tmp_path: Path, output_format: str) -> None:
    """The tool's own JSON Lines rejects hold `_raw_line` (a line that was not JSON): cleaned
    again, that key met the column the reader adds, and the run crashed. It is kept as
    `_prev_raw_line`, as an input's `_source` is kept as `_prev_source`."""
    source = tmp_path / "in.jsonl"
    chat = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    lone = {"messages": [{"role": "user", "content": "a"}]}
    source.write_text("not json\n" + json.dumps(chat) + "\n" + json.dumps(lone) + "\n")
    clean(str(source), str(tmp_path / "first"), output_format="jsonl")
    rejects = tmp_path / "first" / "rejects" / "part-00000.jsonl"
    args = ["clean", str(rejects), str(tmp_path / "again"), "--type", "conversation"]
    result = CliRunner().invoke(main, [*args, "--output-format", output_format])
    assert result.exit_code == 0, result.output
    assert "rows in 2 = kept 0 (repaired 0) + rejected 2  (checked)" in result.output
    if output_format == "jsonl":
        text = (tmp_path / "again" / "rejects" / "part-00000.jsonl").read_text()
        rows = [json.loads(line) for line in text.splitlines()]
    else:
        rows = pq.read_table(tmp_path / "again" / "rejects" / "part-00000.parquet").to_pylist()
    raw = [row for row in rows if row["_prev_source_row"] == 0]
    assert len(raw) == 1 and raw[0]["_prev_raw_line"] == "not json"
    assert raw[0]["_prev_reject_codes"] == ["malformed_row"]
    assert raw[0]["_reject_codes"] == ["malformed_row"]
    other = next(row for row in rows if row["_prev_source_row"] == 2)
    assert other["messages"] == lone["messages"] and other.get("_prev_raw_line") is None
