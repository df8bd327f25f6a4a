"""Long rows (issue 14, finding 2): batches and row groups cut by bytes, so that memory stays
bounded and the files written load whole, whatever the rows' size."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from synthetic import generate_rows

from transcript_clean.cli import main
from transcript_clean.run import clean

LONG = 56 * 2**20
ROWS = 40
"""40 rows of 56 MiB are more than 2 GiB: more than the nested strings of one row group may hold
for `pq.read_table` to load it. Yet each is less than a batch's 64 MiB, so memory stays small."""


def write_long_rows(path: Path, count: int) -> None:
    """`count` OpenAI rows, each an answer of `LONG` bytes, one row group each (so the input
    loads), written one at a time to keep the test's own memory small; not compressed, to keep
    it quick."""
    schema = pa.schema(
        [("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))]
    )
    answer = "x" * LONG
    with pq.ParquetWriter(path, schema, compression="none") as writer:
        for i in range(count):
            messages = [{"role": "user", "content": f"question {i}"}]
            messages.append({"role": "assistant", "content": answer})
            writer.write_table(pa.table({"messages": [messages]}, schema=schema))


@pytest.mark.big
def test_outputs_of_long_rows_load_whole(tmp_path: Path) -> None:
    source = tmp_path / "long.parquet"
    write_long_rows(source, ROWS)
    out = tmp_path / "out"
    clean(source, out)
    shard = out / "data" / "part-00000.parquet"
    metadata = pq.ParquetFile(shard).metadata
    # two rows of 56 MiB fit in a row group of 128 MiB, not three
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [2] * 20
    table = pq.read_table(shard)  # failed: "Nested data conversions not implemented ..."
    assert table.num_rows == ROWS
    messages = pc.list_flatten(table.column("messages")).chunks
    longest = max(pc.max(pc.binary_length(chunk.field("content"))).as_py() for chunk in messages)
    assert longest == LONG


def test_batch_bytes_is_an_option_of_clean_and_audit(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([r for r, _ in generate_rows(300, seed=5)]), source)
    runner = CliRunner()
    for name, size in (("a", "64MiB"), ("b", "2KiB"), ("c", "1")):
        result = runner.invoke(
            main, ["clean", str(source), str(tmp_path / name), "--batch-bytes", size]
        )
        assert result.exit_code == 0, result.output
    files = [
        {p.relative_to(tmp_path / name).as_posix(): p.read_bytes()
         for p in sorted((tmp_path / name).glob("*/*.parquet"))}
        for name in "abc"
    ]  # fmt: skip
    assert files[0] == files[1] == files[2] and files[0]
    audit = runner.invoke(main, ["audit", str(source), "--batch-bytes", "10kb"])
    assert audit.exit_code == 0, audit.output
    bad = runner.invoke(main, ["clean", str(source), str(tmp_path / "d"), "--batch-bytes", "0"])
    assert bad.exit_code == 2
    assert "'0' is not a size such as 64MiB" in bad.output
