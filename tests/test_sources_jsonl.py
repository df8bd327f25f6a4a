"""JSON Lines read as a stream (`transcript_clean.sources.jsonl`), and cleaned: issue 15."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from jsonl_bench import without_nulls
from sources_helpers import rows
from synthetic import default_rates, generate_rows

from transcript_clean.cli import main
from transcript_clean.errors import SourceError
from transcript_clean.pipeline import batch_verdicts, clean_batch
from transcript_clean.sources import LINE_ERROR, RAW_LINE, jsonl, jsontypes, open_source
from transcript_clean.sources.jsontypes import JSON, has_json

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
MSFOUNDRY = DATA / "openai" / "msfoundry_zava_toolsft_valid.jsonl"


def _chat(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": i,
        "messages": [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ],
        **extra,
    }


def _write_lines(path: Path, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    elif path.name.endswith(".zst"):
        with pa.CompressedOutputStream(str(path), "zstd") as out:
            out.write(data)
        return path
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.jsonl.gz", "rows.ndjson.zst"])
def test_row_ranges_read_across_small_blocks(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks of 256 bytes: a range starts in one block and ends in another, and a compressed
    # file is decompressed from its start and skipped.
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 256)
    lines = [json.dumps(_chat(i)) for i in range(40)]
    lines.insert(7, "")  # blank lines are no rows
    path = _write_lines(tmp_path / name, lines)
    source = open_source(str(path))
    [part] = source.parts()
    assert part.num_rows == 40
    assert len(part.key.checkpoints) > 5
    assert [r["id"] for r in rows(source)] == list(range(40))
    assert [r["id"] for r in rows(source, part, start=13, stop=31, batch_size=4)] == list(
        range(13, 31)
    )
    assert [r[RAW_LINE] for r in rows(source, part, start=39)] == [lines[-1]]


def test_blocks_the_open_pass_read_are_not_parsed_again_and_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small blocks; the types grow as the file goes on (a float where ints were, a new message
    # key, a new column): the blocks read in a narrower type than the last are parsed again.
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 256)
    lines = [json.dumps(_chat(i, score=i)) for i in range(30)]
    lines += [json.dumps(_chat(i, score=i + 0.5)) for i in range(30, 60)]
    lines += [json.dumps(_chat(i, score=1, tags=["a"])) for i in range(60, 90)]
    lines += [json.dumps(_chat(i, score=2)) for i in range(90, 120)]
    path = _write_lines(tmp_path / "rows.jsonl", lines)
    source = open_source(str(path))
    [part] = source.parts()
    assert source.schema.field("score").type == pa.float64()
    assert source.schema.field("tags").type == jsontypes.list_of(pa.string())
    kept = part.key.parsed.tables
    # the blocks after the last that widened the types, but for the two read meanwhile
    assert 0 < len(kept) < len(part.key.checkpoints) - 2
    assert min(kept) >= sum(len(line) + 1 for line in lines[:60])  # after the last widening
    once = rows(source, batch_size=7)
    assert not kept  # each table is taken once
    again = rows(source, batch_size=7)
    assert once == again
    assert [r["score"] for r in once] == [float(json.loads(line)["score"]) for line in lines]
    assert [r[RAW_LINE] for r in once] == lines
    # a row range inside a kept block
    fresh = open_source(str(path))
    assert rows(fresh, start=100, stop=105) == once[100:105]


@pytest.mark.parametrize("blank", [False, True])
def test_each_rows_line_is_kept_as_in_the_file(tmp_path: Path, blank: bool) -> None:
    # Without its newline, nor the file's byte-order mark; a CR before the newline is the
    # line's. Blank lines are no rows.
    lines = [json.dumps(_chat(i)) + ("\r" if i % 3 == 0 else "") for i in range(9)]
    body = "\n".join(f"{line}\n" if blank and i % 4 == 1 else line for i, line in enumerate(lines))
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode() + b"\n")
    assert [r[RAW_LINE] for r in rows(open_source(str(path)))] == lines


def test_the_first_blocks_read_to_infer_the_types_are_kept_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first blocks (one per index thread) are read with their types inferred: where no
    # later block changes those types, their tables are kept for the read like the others,
    # in the file's schema, so that no block of the file is parsed twice.
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 256)
    lines = [json.dumps(_chat(i, score=i, tags=["a"])) for i in range(40)]
    path = _write_lines(tmp_path / "rows.jsonl", lines)
    source = open_source(str(path))
    [part] = source.parts()
    kept = part.key.parsed
    assert set(kept.tables) == {at for at, _ in part.key.checkpoints}
    assert all(str(t.schema) == str(part.key.schema) for t in kept.tables.values())
    parsed: list[int] = []
    real = jsonl._parse
    monkeypatch.setattr(jsonl, "_parse", lambda *a: parsed.append(1) or real(*a))
    read = rows(source, batch_size=7)
    assert parsed == [] and [r[RAW_LINE] for r in read] == lines
    monkeypatch.setattr(jsonl, "SPILLED_BYTES", 0)  # nothing kept: every block parsed again
    assert read == rows(open_source(str(path)), batch_size=7) and parsed


def test_kept_tables_stay_within_their_budgets_and_are_not_pickled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc
    import pickle

    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 256)
    path = _write_lines(tmp_path / "rows.jsonl", [json.dumps(_chat(i)) for i in range(200)])
    source = open_source(str(path))
    [part] = source.parts()
    assert part.key.parsed.tables and not part.key.parsed.files
    copy = pickle.loads(pickle.dumps(part))
    assert not copy.key.parsed.tables and not copy.key.parsed.files
    assert copy.key == part.key
    assert rows(source, copy) == rows(source)  # parsed, in another process

    # Past PARSED_BYTES in memory, tables go to files, up to SPILLED_BYTES.
    monkeypatch.setattr(jsonl, "PARSED_BYTES", 2000)
    monkeypatch.setattr(jsonl, "SPILLED_BYTES", 6000)
    small = open_source(str(path))
    [part] = small.parts()
    parsed = part.key.parsed
    assert 0 < sum(t.nbytes for t in parsed.tables.values()) <= 2000
    assert parsed.files and parsed.folder is not None
    assert sorted(parsed.folder.iterdir()) == sorted(parsed.files.values())
    assert len(parsed.tables) + len(parsed.files) < len(part.key.checkpoints) - 2
    folder = parsed.folder
    next(iter(parsed.files.values())).unlink()  # a file gone (a cleaned /tmp): parsed again
    assert rows(small) == rows(open_source(str(path)))
    assert not parsed.tables and not parsed.files and not list(folder.iterdir())
    del small, part, parsed
    gc.collect()
    assert not folder.exists()  # the folder goes with its index


def test_a_line_that_is_not_a_row_is_a_reject_and_nothing_is_lost(tmp_path: Path) -> None:
    lines = [
        json.dumps(_chat(0)),
        "{not json",
        json.dumps(_chat(2)),
        '"text"',
        json.dumps(_chat(4)),
    ]
    path = _write_lines(tmp_path / "rows.jsonl", lines)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["clean", str(path), str(out)])
    assert result.exit_code == 0, result.output
    data = pq.read_table(out / "data")
    assert data.column("id").to_pylist() == [0, 2, 4]
    assert RAW_LINE not in data.column_names and LINE_ERROR not in data.column_names
    rejects = pq.read_table(out / "rejects").to_pylist()
    assert [r["_source_row"] for r in rejects] == [1, 3]
    assert [r[RAW_LINE] for r in rejects] == ["{not json", '"text"']
    assert [r["_reject_codes"] for r in rejects] == [["malformed_row"]] * 2
    assert rejects[0]["_reject_message"].startswith("line 1: not JSON: ")
    assert rejects[1]["_reject_message"] == "line 3: not a JSON object but a string"
    assert LINE_ERROR not in pq.read_schema(next((out / "rejects").iterdir())).names


def test_text_that_is_not_utf8_stops_the_run_naming_file_byte_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    good = json.dumps(_chat(0)).encode()
    path.write_bytes(good + b"\n" + b'{"id": 1, "note": "caf\xe9"}\n')
    with pytest.raises(
        SourceError, match=rf"rows\.jsonl: not UTF-8 at byte {len(good) + 23} \(line 2\)"
    ):
        open_source(str(path))
    result = CliRunner().invoke(main, ["clean", str(path), str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "not UTF-8 at byte" in result.output


def test_text_that_is_not_utf8_far_in_is_placed_across_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Blocks are looked at side by side (`INDEX_THREADS`): the byte and line still count
    # every block before, and the first bad block in the file is the one named, even with a
    # bad one after it.
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 256)
    good = [json.dumps(_chat(i)) for i in range(60)]
    bad = '{"id": 1, "note": "caf\xe9"}'
    lines = [*good[:30], bad, *good[30:], bad]
    data = ("\n".join(lines) + "\n").encode("latin-1")
    path = tmp_path / "rows.jsonl"
    path.write_bytes(data)
    at = data.index(b"\xe9")
    with pytest.raises(SourceError, match=rf"rows\.jsonl: not UTF-8 at byte {at} \(line 31\)"):
        open_source(str(path))


def test_not_utf8_before_a_cut_compressed_stream_is_what_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 4096)
    lines = [json.dumps(_chat(i)) for i in range(3000)]
    lines[5] = '{"id": 5, "note": "caf\xe9"}'
    data = ("\n".join(lines) + "\n").encode("latin-1")
    path = tmp_path / "rows.jsonl.gz"
    packed = gzip.compress(data)
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(SourceError, match=r"rows\.jsonl\.gz: not UTF-8 at byte \d+ \(line 6\)"):
        open_source(str(path))


def test_struct_fields_come_in_the_order_they_first_appear_every_time(tmp_path: Path) -> None:
    # Arrow's reader, inferring on several threads, unified its chunks' fields in an order that
    # changed from run to run (on these 4 MB, about one run in two): the schema, and so the
    # output's, must not.
    rows_in = [row for row, _ in generate_rows(4000, format="openai", seed=0)]
    lines = [json.dumps(without_nulls(row)) for row in rows_in]
    path = _write_lines(tmp_path / "rows.jsonl", lines)
    keys: dict[str, None] = {}
    for line in lines:
        for message in json.loads(line)["messages"]:
            keys.update(dict.fromkeys(message))
    for _ in range(6):
        message = open_source(str(path)).schema.field("messages").type.value_type
        assert [f.name for f in message] == list(keys)


@pytest.mark.parametrize("name", ["rows.jsonl.gz", "rows.jsonl.zst"])
def test_a_truncated_compressed_file_stops_the_run(tmp_path: Path, name: str) -> None:
    path = _write_lines(tmp_path / name, [json.dumps(_chat(i)) for i in range(2000)])
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(
        SourceError, match=rf"{name}: cannot read after byte \d+ of its decompressed"
    ):
        open_source(str(path))
    result = CliRunner().invoke(main, ["clean", str(path), str(tmp_path / "out")])
    assert result.exit_code == 2


def test_varying_message_keys_give_typed_structs_and_json_only_where_types_differ(
    tmp_path: Path,
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    first = _chat(0)
    first["messages"][1:] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": "it is 42"},
    ]
    parts = [{"type": "text", "text": "hello"}]
    second = _chat(1, tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    second["messages"][0]["content"] = parts
    path = _write_lines(tmp_path / "rows.jsonl", [json.dumps(first), json.dumps(second)])
    schema = open_source(str(path)).schema
    message = schema.field("messages").type.value_type
    assert message.names == ["role", "content", "tool_calls", "tool_call_id"]
    assert message.field("content").type == JSON  # a string here, a list of parts there
    assert pa.types.is_list(message.field("tool_calls").type)
    function = schema.field("tools").type.value_type.field("function").type
    assert function.field("name").type == pa.string()
    assert function.field("parameters").type == JSON  # a tool's JSON schema
    assert schema.names[-2:] == [RAW_LINE, LINE_ERROR]


def test_clean_jsonl_rows_are_settled_by_the_fast_path(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "rows.jsonl", [json.dumps(_chat(i)) for i in range(50)])
    source = open_source(str(path))
    [batch] = source.read(source.parts()[0])
    verdicts = batch_verdicts(batch, format="openai")
    assert verdicts is not None and verdicts.clean.all()


def _clean(source: Path, out: Path, *args: str) -> None:
    result = CliRunner().invoke(main, ["clean", str(source), str(out), *args])
    assert result.exit_code == 0, result.output


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_generated_file_round_trips_through_datasets_and_a_second_clean(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    import datasets

    lines = [json.dumps(row) for row, _ in generate_rows(300, "openai", seed=4)]
    path = _write_lines(tmp_path / "gen.jsonl", lines)
    _clean(path, tmp_path / "once")
    loaded = datasets.load_dataset(
        "parquet",
        data_files=str(tmp_path / "once" / "data" / "*.parquet"),
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    first = loaded[0]["messages"]
    assert isinstance(first, list) and isinstance(first[0], dict) and "role" in first[0]
    # Cleaning the output again changes nothing: the same files.
    _clean(tmp_path / "once" / "data", tmp_path / "twice")
    assert _files(tmp_path / "twice" / "data") == _files(tmp_path / "once" / "data")


def test_msfoundry_output_loads_as_python_values_and_cleans_to_the_same_files(
    tmp_path: Path,
) -> None:
    if not MSFOUNDRY.is_file():
        pytest.skip(f"{MSFOUNDRY} is absent")
    pytest.importorskip("datasets")
    import datasets

    _clean(MSFOUNDRY, tmp_path / "once")
    schema = pq.read_schema(next((tmp_path / "once" / "data").iterdir()))
    assert pa.types.is_list(schema.field("messages").type)
    assert pa.types.is_struct(schema.field("messages").type.value_type)
    loaded = datasets.load_dataset(
        "parquet",
        data_files=str(tmp_path / "once" / "data" / "*.parquet"),
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    row = loaded[0]
    assert isinstance(row["messages"][0], dict)
    parameters = row["tools"][0]["function"]["parameters"]
    assert isinstance(parameters, dict) and parameters["type"] == "object"  # json_, decoded
    _clean(tmp_path / "once" / "data", tmp_path / "twice")
    assert _files(tmp_path / "twice" / "data") == _files(tmp_path / "once" / "data")


def test_repaired_rows_keep_the_files_keys_and_get_their_line_re_encoded(tmp_path: Path) -> None:
    # An empty assistant turn is dropped: the row is repaired, and its line written anew.
    row = _chat(0)
    row["messages"].insert(1, {"role": "assistant", "content": ""})
    path = _write_lines(tmp_path / "rows.jsonl", [json.dumps(row), json.dumps(_chat(1))])
    source = open_source(str(path))
    [batch] = source.read(source.parts()[0])
    from transcript_clean.pipeline import clean_batch

    kept, rejects, _ = clean_batch(batch, format="openai")
    assert rejects.num_rows == 0
    raw = kept.column(RAW_LINE).to_pylist()
    assert json.loads(raw[0])["messages"] == [
        {"role": "user", "content": "question 0"},
        {"role": "assistant", "content": "answer 0"},
    ]
    assert raw[1] == json.dumps(_chat(1))  # unchanged: the file's line, byte for byte


@pytest.mark.parametrize("workers", ["1", "2"])
def test_workers_and_blocks_give_the_same_files(
    tmp_path: Path, workers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 4096)
    lines = [json.dumps(row) for row, _ in generate_rows(400, "openai", seed=9)]
    path = _write_lines(tmp_path / "gen.jsonl", lines)
    _clean(path, tmp_path / "one", "--workers", "1")
    _clean(path, tmp_path / "many", "--workers", workers, "--rows-per-shard", "64")
    one = pq.read_table(tmp_path / "one" / "data")
    many = pq.read_table(tmp_path / "many" / "data")
    assert many.equals(one)
    assert pq.read_table(tmp_path / "many" / "rejects").equals(
        pq.read_table(tmp_path / "one" / "rejects")
    )


def test_a_json_file_over_the_limit_says_to_convert_to_jsonl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transcript_clean.sources import json as json_source

    monkeypatch.setattr(json_source, "WHOLE_FILE_LIMIT", 100)
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([_chat(i) for i in range(10)]), encoding="utf-8")
    with pytest.raises(SourceError, match="convert it to JSON Lines"):
        open_source(str(path))


def test_explain_reads_a_json_lines_row_as_clean_does(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "rows.jsonl", [json.dumps(_chat(0)), "{not json"])
    result = CliRunner().invoke(main, ["explain", str(path), "--row", "1"])
    assert result.exit_code == 0, result.output
    assert "malformed_row" in result.output and "line 1: not JSON: " in result.output
    result = CliRunner().invoke(main, ["explain", str(path), "--row", "0"])
    assert result.exit_code == 0, result.output
    assert "Outcome: kept" in result.output


def test_blocks_typed_by_arrow_and_line_by_line_unify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Arrow's reader takes "2024-01-01 10:00:00" for a timestamp; a block with a bad line is
    # typed line by line, where it is text. The column is text, as the file says.
    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 64)
    lines = [json.dumps({"t": "2024-01-01 10:00:00", "n": i}) for i in range(6)]
    lines += ["{bad", json.dumps({"t": "soon", "n": 1.5})]
    source = open_source(str(_write_lines(tmp_path / "rows.jsonl", lines)))
    assert source.schema.field("t").type == pa.string()
    assert source.schema.field("n").type == pa.float64()
    read = rows(source)
    assert [r["t"] for r in read] == ["2024-01-01 10:00:00"] * 6 + [None, "soon"]


def test_a_value_arrow_types_hundreds_deep_is_json_where_parquet_stops(tmp_path: Path) -> None:
    deep = "[" * 500 + "1" + "]" * 500  # Arrow's reader types it; Parquet readers could not
    lines = [json.dumps(_chat(1))[:-1] + ', "v": ' + deep + ', "n": 1}']
    source = open_source(str(_write_lines(tmp_path / "rows.jsonl", lines)))
    assert source.schema.field("n").type == pa.int64()
    assert has_json(source.schema.field("v").type)
    [row] = rows(source)
    assert row["n"] == 1 and row[LINE_ERROR] is None
    out = tmp_path / "out"
    _clean(_write_lines(tmp_path / "rows.jsonl", lines), out)
    assert pq.read_table(out / "data").column("n").to_pylist() == [1]  # reads back


def test_the_fast_path_repairs_jsonl_rows_only_where_their_lines_are_not_written(
    tmp_path: Path,
) -> None:
    rates = {code: 3 * rate for code, rate in default_rates("openai").items()}
    lines = [json.dumps(row) for row, _ in generate_rows(600, "openai", seed=11, rates=rates)]
    source = open_source(str(_write_lines(tmp_path / "rows.jsonl", lines)))
    table = pa.Table.from_batches(list(source.read(source.parts()[0])))
    exact = batch_verdicts(table, format="openai")
    loose = batch_verdicts(table, format="openai", exact_lines=False)
    assert exact is not None and loose is not None
    assert not exact.repaired.any() and loose.repaired.sum() > 10
    fast = clean_batch(table, format="openai", source="s", verdicts=loose)
    slow = clean_batch(table, format="openai", source="s", fast=False)
    # the same rows but for the lines, which only the per-row path re-encodes
    written = [name for name in table.schema.names if name != RAW_LINE]
    assert fast.kept.select(written).to_pylist() == slow.kept.select(written).to_pylist()
    assert fast.rejects.to_pylist() == slow.rejects.to_pylist()
    assert fast.stats == slow.stats


def _declaring(i: int) -> dict[str, Any]:
    # a tool's JSON schema is typed json_; rows share tool lists, one row has none
    tool = {"type": "function", "function": {"name": f"f{i % 3}", "parameters": {"n": i % 3}}}
    return _chat(i, tools=[tool]) if i % 7 else _chat(i)


def _line_by_line(lines: list[str], schema: pa.Schema) -> pa.Table:
    return jsontypes.to_table([json.loads(line) for line in lines], schema)


@pytest.mark.parametrize("path", ["generated", "msfoundry"])
def test_json_columns_are_filled_in_beside_arrows_reader(
    tmp_path: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "generated":
        lines = [json.dumps(_declaring(i)) for i in range(60)]
        source_path = _write_lines(tmp_path / "rows.jsonl", lines)
    else:
        source_path = MSFOUNDRY
        lines = [x for x in MSFOUNDRY.read_text().splitlines() if x.strip()]
    source = open_source(str(source_path))
    data = pa.schema([f for f in source.schema if f.name not in (RAW_LINE, LINE_ERROR)])
    assert any(has_json(f.type) for f in data)

    def not_line_by_line(*args: object) -> None:
        raise AssertionError("parsed line by line")

    monkeypatch.setattr(jsonl, "_line_values", not_line_by_line)
    table = pa.Table.from_batches(list(source.read(source.parts()[0]))).select(data.names)
    assert table.schema == data
    assert table.to_pylist() == _line_by_line(lines, data).to_pylist()


def test_a_json_value_that_does_not_fit_sends_its_block_line_by_line(tmp_path: Path) -> None:
    lines = [json.dumps(_declaring(i)) for i in range(20)]
    path = _write_lines(tmp_path / "rows.jsonl", lines)
    source = open_source(str(path))
    data = pa.schema([f for f in source.schema if f.name not in (RAW_LINE, LINE_ERROR)])
    # a lone surrogate: orjson refuses it, the line-by-line path keeps the row's bytes
    bad = _declaring(3)
    bad["tools"][0]["function"]["parameters"] = {"n": "\ud800"}
    lines[3] = json.dumps(bad)
    _write_lines(path, lines)
    again = open_source(str(path))
    table = pa.Table.from_batches(list(again.read(again.parts()[0])))
    errors = table.column(LINE_ERROR).to_pylist()
    assert errors == [None] * 20
    after = table.select(data.names).slice(4)
    assert after.to_pylist() == _line_by_line(lines[4:], data).to_pylist()
    assert table.column("id").to_pylist() == list(range(20))


@pytest.mark.parametrize("mapped", [True, False])
@pytest.mark.parametrize(
    "data",
    [
        b'{"a": 1}\n{"b": 2}\n' * 40,  # short lines, many to a block
        b'{"a": "' + b"x" * 700 + b'"}\n{"b": 2}\n' * 3,  # lines longer than a block
        b'{"a": 1}\n{"b": 2}\n\n   \n{"c": "no newline at the end"}',
        b'\xef\xbb\xbf{"a": 1}\r\n{"b": 2}\r\n',  # a byte-order mark, CRLF
    ],
)
def test_blocks_are_the_files_lines_mapped_or_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, mapped: bool
) -> None:
    # An uncompressed file's blocks are views of its mapped pages, else the bytes read: from
    # any offset on, whole lines at their offsets, of about the block size, the file's bytes
    # in all (and a newline after a last line without).
    path = tmp_path / "rows.jsonl"
    path.write_bytes(data)
    if not mapped:
        monkeypatch.setattr(jsonl, "_mapped_blocks", lambda *args: None)
    whole = data if data.endswith(b"\n") else data + b"\n"
    longest = max(len(line) for line in whole.split(b"\n")) + 1
    for size in (64, 256, 2**20):
        for offset in (0, data.find(b"\n") + 1):
            blocks = list(jsonl._blocks(path, None, offset, size))
            kinds = {type(b) for _, b in blocks[:-1]}
            assert kinds <= {memoryview if mapped else bytes}
            assert b"".join(bytes(b) for _, b in blocks) == whole[offset:]
            at = offset
            for start, block in blocks:
                assert start == at and bytes(block).endswith(b"\n")
                assert len(block) < 2 * max(size, longest) + size
                at += len(block)


def test_a_file_that_cannot_be_mapped_is_read(tmp_path: Path) -> None:
    # A pipe (a named one here) has no pages to map: its bytes are read instead (it is not
    # even opened, which would wait for a writer).
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    assert jsonl._mapped_blocks(fifo, 0, 64) is None


def _long_line(size: int) -> str:
    """A JSON object line of `size` bytes."""
    head = '{"id": 1, "messages": "'
    return head + "x" * (size - len(head) - 2) + '"}'


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.jsonl.gz"])
@pytest.mark.parametrize("size", [2 * 2**20, 20 * 2**20])  # within a block, longer than one
def test_a_line_over_max_row_bytes_is_a_reject_saying_so(
    tmp_path: Path, name: str, size: int
) -> None:
    # Issue 27, finding 19: a 1 MB .jsonl.gz held a line of a GiB, read whole (6.5 GB RSS).
    lines = [json.dumps(_chat(0)), _long_line(size), json.dumps(_chat(2)), _long_line(size)]
    path = _write_lines(tmp_path / name, lines)
    out = tmp_path / "out"
    args = ["clean", str(path), str(out), "--max-row-bytes", "1MiB", "--format", "openai"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert pq.read_table(out / "data").column("id").to_pylist() == [0, 2]
    rejects = pq.read_table(out / "rejects").to_pylist()
    assert [r["_source_row"] for r in rejects] == [1, 3]
    assert [r["_reject_codes"] for r in rejects] == [["malformed_row"]] * 2
    assert rejects[0]["_reject_message"] == (
        f"line 1: {size:,} bytes, over --max-row-bytes (1,048,576): not read"
    )
    assert all(len(r[RAW_LINE]) < 100 for r in rejects)  # none of the line is kept
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rows_in"], summary["rows_rejected"]) == (4, 2)


_UNDER_A_CAP = """
import json, resource, sys
from transcript_clean.sources import open_source

def read_all(path):
    source = open_source(path, max_row_bytes=2**20)
    return [r for p in source.parts() for b in source.read(p) for r in b.to_pylist()]

read_all(sys.argv[1])  # the threads and arenas a read makes, made before the cap
size = int(open("/proc/self/status").read().split("VmPeak:")[1].split()[0]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + 120 * 2**20, resource.RLIM_INFINITY))
rows = read_all(sys.argv[2])
print(json.dumps([r["_line_error"] for r in rows]))
"""


@pytest.mark.parametrize("name", ["big.jsonl", "big.jsonl.gz"])
def test_a_line_over_max_row_bytes_is_never_held_whole(tmp_path: Path, name: str) -> None:
    small = _write_lines(tmp_path / ("small" + name[3:]), [json.dumps(_chat(0))])
    big = _write_lines(tmp_path / name, [json.dumps(_chat(0)), _long_line(300 * 2**20)])
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system"}
    command = [sys.executable, "-c", _UNDER_A_CAP, str(small), str(big)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    errors = json.loads(done.stdout)
    assert errors[0] is None
    assert errors[1] == f"line 1: {300 * 2**20:,} bytes, over --max-row-bytes (1,048,576): not read"
