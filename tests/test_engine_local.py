"""The local engine's block runner: its helper threads change nothing in the files it writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from synthetic import generate_rows

from transcript_clean.engine.local import Block, BlockJob, plan_blocks, run_block
from transcript_clean.errors import SourceError
from transcript_clean.formats import get_format
from transcript_clean.pipeline import clean_batch, reject_schema
from transcript_clean.policy import DEFAULT, STRICT, Config
from transcript_clean.sinks import ParquetShard, shard_name
from transcript_clean.sources import open_source
from transcript_clean.stats import Stats


def plain_block(job: BlockJob, index: int, folder: Path) -> Stats:
    """What `run_block` writes, by a plain loop on one thread."""
    block = plan_blocks(job.source, 10**9)[index]
    schema = job.source.schema
    stats = Stats()
    with (
        ParquetShard(folder / "data" / shard_name(index), schema) as data,
        ParquetShard(folder / "rejects" / shard_name(index), reject_schema(schema)) as rejects,
    ):
        row = block.start
        for batch in job.source.read(block.part, block.start, block.stop, job.batch_size):
            kept, rejected, batch_stats = clean_batch(
                batch, job.config, format=job.format, source=block.part.name, first_row=row
            )
            data.write(kept)
            rejects.write(rejected)
            stats.merge(batch_stats)
            row += batch.num_rows
    return stats


def one_block_job(tmp_path: Path, rows: int, seed: int) -> tuple[BlockJob, Block]:
    """A job over `rows` generated rows in 16-row batches, its folders made, and its one block."""
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([r for r, _ in generate_rows(rows, seed=seed)]), source)
    job = BlockJob(open_source(str(source)), get_format("openai"), DEFAULT, tmp_path / "w", 16)
    [block] = plan_blocks(job.source, 10**9)
    for folder in ("data", "rejects", "blocks"):
        (job.workdir / folder).mkdir(parents=True)
    return job, block


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
@pytest.mark.parametrize("batch_size", [64, 1000])
def test_run_block_writes_what_a_plain_loop_writes(
    tmp_path: Path, config: Config, batch_size: int
) -> None:
    source = tmp_path / "in.parquet"
    rows = [r for r, _ in generate_rows(1500, format="openai", seed=batch_size)]
    # Megabytes of text, so that a column chunk spans several pages: where pages end depends
    # on the chunks the writer is handed.
    pad = [f"{i:06d}" * 300 for i in range(len(rows))]
    table = pa.Table.from_pylist(rows).append_column("pad", pa.array(pad))
    pq.write_table(table, source, row_group_size=300)
    job = BlockJob(
        open_source(str(source)), get_format("openai"), config, tmp_path / "a", batch_size
    )
    [block] = plan_blocks(job.source, 10**9)
    for folder in ("data", "rejects", "blocks"):
        (job.workdir / folder).mkdir(parents=True)

    stats = run_block(job, block)
    expected = plain_block(job, 0, tmp_path / "b")

    assert stats == expected
    assert stats.rows_in == 1500 and stats.rows_rejected > 0 and stats.rows_clean > 0
    for folder in ("data", "rejects"):
        written = (tmp_path / "a" / folder / shard_name(0)).read_bytes()
        assert written == (tmp_path / "b" / folder / shard_name(0)).read_bytes()


def test_an_error_while_reading_ahead_is_raised_by_run_block(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    rows = [r for r, _ in generate_rows(50, format="openai", seed=1)]
    pq.write_table(pa.Table.from_pylist(rows), source)
    job = BlockJob(open_source(str(source)), get_format("openai"), DEFAULT, tmp_path / "a", 16)
    [block] = plan_blocks(job.source, 10**9)
    source.write_bytes(b"PAR1 no longer parquet")
    with pytest.raises(SourceError, match=r"in\.parquet"):
        run_block(job, block)
    assert not (tmp_path / "a" / "data" / shard_name(0)).exists()


def test_two_workers_share_the_blocks_with_this_process(tmp_path: Path) -> None:
    from transcript_clean.engine.local import run_blocks

    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([r for r, _ in generate_rows(600, seed=3)]), source)
    outputs = {}
    for workers in (1, 2):
        job = BlockJob(
            open_source(str(source)), get_format("openai"), DEFAULT, tmp_path / str(workers), 50
        )
        reported: list[int] = []
        blocks = plan_blocks(job.source, 100)
        order = [
            b.index for b, _ in run_blocks(job, blocks, workers=workers, progress=reported.append)
        ]
        assert order == list(range(6)) and sum(reported) == 600
        outputs[workers] = {p.name: p.read_bytes() for p in (job.workdir / "data").iterdir()}
        if workers == 2:
            # A block cleaned here reports batch by batch (50 rows); one from the pool, whole.
            assert 50 in reported and 100 in reported
    assert outputs[1] == outputs[2]


def test_workers_started_ahead_clean_blocks_and_stay_the_callers(tmp_path: Path) -> None:
    from transcript_clean.engine.local import run_blocks
    from transcript_clean.engine.workers import start_workers

    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([r for r, _ in generate_rows(600, seed=5)]), source)
    outputs = {}
    with start_workers(1) as pool:
        for name, given in (("own", None), ("given", pool)):
            job = BlockJob(
                open_source(str(source)), get_format("openai"), DEFAULT, tmp_path / name, 50
            )
            reported: list[int] = []
            blocks = plan_blocks(job.source, 100)
            list(run_blocks(job, blocks, workers=2, progress=reported.append, pool=given))
            assert 100 in reported  # a block was cleaned by a worker process
            outputs[name] = {p.name: p.read_bytes() for p in (job.workdir / "data").iterdir()}
        # run_blocks left the given pool running: it is the caller's to shut down.
        assert pool.submit(sum, [1, 2]).result() == 3
    assert outputs["own"] == outputs["given"] and len(outputs["own"]) == 6


def test_a_failed_last_write_leaves_the_block_not_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transcript_clean.engine.local as local

    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([r for r, _ in generate_rows(300, seed=4)]), source)
    job = BlockJob(open_source(str(source)), get_format("openai"), DEFAULT, tmp_path / "w", 50)
    blocks = plan_blocks(job.source, 100)
    write = local._write
    calls = 0

    def failing(*args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 6:  # the last batch of the third block: the loop never waits for it
            raise OSError("disk full")
        write(*args)

    monkeypatch.setattr(local, "_write", failing)
    finished = []
    with pytest.raises(OSError, match="disk full"):
        for block, _ in local.run_blocks(job, blocks):
            finished.append(block.index)
    assert finished == [0, 1]
    done = ["00000.json", "00001.json"]
    assert sorted(p.name for p in (job.workdir / "blocks").iterdir()) == done
    assert sorted(p.name for p in (job.workdir / "data").iterdir()) == [
        shard_name(0),
        shard_name(1),
    ]


def test_verdicts_are_worked_out_for_groups_of_batches() -> None:
    from transcript_clean.engine.local import _grouped

    table = pa.table({"x": pa.array(range(100), pa.int64())})
    batches = table.to_batches(max_chunksize=10)
    assert [len(g) for g in _grouped(iter(batches), 35, 10**9)] == [3, 3, 3, 1]
    # 10 int64 rows are 80 bytes: a byte limit of 200 fits two batches, and no limit splits one.
    assert [len(g) for g in _grouped(iter(batches), 10**9, 200)] == [2, 2, 2, 2, 2]
    assert [len(g) for g in _grouped(iter(batches), 5, 10)] == [1] * 10
    regrouped = [b for g in _grouped(iter(batches), 35, 200) for b in g]
    assert pa.Table.from_batches(regrouped).equals(table)


def test_a_verdict_group_is_read_in_one_chunk_and_cleaned_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path looks at a group of rows whole without a copy to put it together (each
    column in one chunk), while the rows are cleaned in batches of the size asked."""
    import transcript_clean.engine.local as local

    job, block = one_block_job(tmp_path, 300, seed=3)
    looked_at: list[tuple[int, int]] = []
    cleaned: list[int] = []
    verdicts, clean = local.batch_verdicts, local.clean_batch_parts

    def recording_verdicts(table: pa.Table, *args: Any, **kwargs: Any) -> Any:
        looked_at.append((table.num_rows, max(c.num_chunks for c in table.columns)))
        return verdicts(table, *args, **kwargs)

    def recording_clean(batch: pa.RecordBatch, *args: Any, **kwargs: Any) -> Any:
        cleaned.append(batch.num_rows)
        return clean(batch, *args, **kwargs)

    monkeypatch.setattr(local, "VERDICT_ROWS", 100)
    monkeypatch.setattr(local, "batch_verdicts", recording_verdicts)
    monkeypatch.setattr(local, "clean_batch_parts", recording_clean)
    stats = run_block(job, block)
    assert looked_at == [(100, 1)] * 3
    assert cleaned == [16, 16, 16, 16, 16, 16, 4] * 3
    assert stats.rows_in == 300


def test_a_chain_of_read_ahead_threads_winds_down_when_the_consumer_stops() -> None:
    import itertools
    import threading

    from transcript_clean.engine.local import _prefetched

    # The test keeps the inner iterator alive, so only closing it (not the garbage collector)
    # stops its thread.
    inner_items = _prefetched(itertools.count(), name="inner")
    chain = _prefetched(inner_items, name="outer")
    assert [next(chain) for _ in range(3)] == [0, 1, 2]
    chain.close()  # as when cleaning a block fails: the outer thread is joined here
    inner = [t for t in threading.enumerate() if t.name == "transcript-clean-inner"]
    for thread in inner:
        thread.join(timeout=2)
    assert not any(t.is_alive() for t in inner)
    assert not any(t.name == "transcript-clean-outer" for t in threading.enumerate())


@pytest.mark.parametrize(
    ("queued_rows", "queued_bytes", "most"),
    [(10**9, 1, 3), (64, 10**9, 5), (10**9, 10**9, None)],
)
def test_batches_waiting_for_the_writer_are_bounded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    queued_rows: int,
    queued_bytes: int,
    most: int | None,
) -> None:
    import time

    import transcript_clean.engine.local as local

    job, block = one_block_job(tmp_path, 640, seed=6)
    cleaned, written, ahead = [0], [0], []
    clean, write = local.clean_batch_parts, local._write

    def counting_clean(*args: Any, **kwargs: Any) -> Any:
        ahead.append(cleaned[0] - written[0])  # batches handed to the writer, not yet written
        cleaned[0] += 1
        return clean(*args, **kwargs)

    def slow_write(*args: Any) -> None:
        time.sleep(0.005)
        write(*args)
        written[0] += 1

    monkeypatch.setattr(local, "clean_batch_parts", counting_clean)
    monkeypatch.setattr(local, "_write", slow_write)
    monkeypatch.setattr(local, "QUEUED_ROWS", queued_rows)
    monkeypatch.setattr(local, "QUEUED_BYTES", queued_bytes)
    run_block(job, block)
    assert cleaned[0] == written[0] == 40
    # 16-row batches: 64 rows are four of them, beyond the two always allowed past the bytes.
    assert max(ahead) <= most if most is not None else max(ahead) > 5


def folder_files(folder: Path) -> dict[str, bytes]:
    return {
        f"{path.parent.name}/{path.name}": path.read_bytes()
        for sub in ("data", "rejects")
        for path in sorted((folder / sub).iterdir())
    }


@pytest.mark.parametrize(
    ("batch_size", "batch_bytes", "workers"),
    [(1, 10**9, 1), (7, 20_000, 1), (4096, 3_000, 2), (50, 1, 2)],
)
def test_files_do_not_depend_on_batch_sizes_bytes_or_workers(
    tmp_path: Path, batch_size: int, batch_bytes: int, workers: int
) -> None:
    from transcript_clean.engine.local import run_blocks

    source = tmp_path / "in.parquet"
    rows = pa.Table.from_pylist([r for r, _ in generate_rows(600, seed=8)])
    pq.write_table(rows, source, row_group_size=100)

    def run(folder: str, batch_size: int, batch_bytes: int, workers: int) -> dict[str, bytes]:
        job = BlockJob(
            open_source(str(source)),
            get_format("openai"),
            DEFAULT,
            tmp_path / folder,
            batch_size,
            batch_bytes,
            row_group_bytes=30_000,  # row groups cut by bytes, at rows that vary in size
        )
        list(run_blocks(job, plan_blocks(job.source, 250), workers=workers))
        return folder_files(job.workdir)

    reference = run("reference", 4096, 64 * 2**20, 1)
    assert run("run", batch_size, batch_bytes, workers) == reference
    groups = pq.ParquetFile(tmp_path / "reference" / "data" / shard_name(0)).metadata
    assert groups.num_row_groups > 3
