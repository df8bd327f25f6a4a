"""The local engine: blocks of input rows cleaned in this process or a pool of processes.

The input is cut into blocks of `rows_per_shard` rows (a block never spans two files). Block k's
kept rows go to `data/part-k`, its rejects to `rejects/part-k`, its stats to `blocks/k.json`,
which is written last and marks the block done. Blocks are independent, so a pool of workers
gives the same files as one process, and a killed run resumes at the first block not done.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from threading import Event, Thread
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import pyarrow as pa

from transcript_clean.engine.queues import BytesQueue
from transcript_clean.fastpath import Verdicts
from transcript_clean.formats.base import Format, Row
from transcript_clean.pandas_free import keep_pandas_out
from transcript_clean.pipeline import (
    CleanedBatch,
    batch_verdicts,
    clean_batch_parts,
    reject_schema,
    settled_profile,
)
from transcript_clean.policy import Config
from transcript_clean.profile import Profile
from transcript_clean.rows import RowResult
from transcript_clean.sinks import (
    DEFAULT_ROW_GROUP_BYTES,
    OutputFormat,
    Shard,
    write_text_atomic,
)
from transcript_clean.sizes import cut_by_bytes
from transcript_clean.sources import DEFAULT_BATCH_BYTES, Part, Source
from transcript_clean.stats import Stats

if TYPE_CHECKING:  # a pool of processes is made only for `--workers` above 1 (`map_blocks`)
    from concurrent.futures import ProcessPoolExecutor

__all__ = [
    "Block",
    "BlockJob",
    "BlockTask",
    "map_blocks",
    "plan_blocks",
    "run_block",
    "run_blocks",
    "with_verdicts",
]

QUEUED_ROWS = 65_536
QUEUED_BYTES = 64 * 2**20
"""At most this many rows and bytes of a block's batches wait for the writer (beyond two
batches)."""
VERDICT_ROWS = 16_384
VERDICT_BYTES = 64 * 2**20
"""The fast path looks at batches in groups of up to this many rows and bytes."""


@dataclass(frozen=True, slots=True)
class Block:
    """Rows [start, stop) of one part of the source; `index` orders blocks across the input."""

    index: int
    part: Part
    start: int
    stop: int | None


R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class BlockTask(Protocol[R_co]):
    """Work on one block of `source`, in this process or another (so picklable): a cleaning
    run's `BlockJob`, an audit's measures. `progress` hears of rows as they are done."""

    @property
    def source(self) -> Source: ...

    def __call__(self, block: Block, progress: Callable[[int], None] | None = None) -> R_co: ...


@dataclass(frozen=True, slots=True)
class BlockJob:
    """Everything a worker needs to clean blocks: picklable. Called on a block, it cleans it
    (`run_block`)."""

    source: Source
    format: Format
    config: Config
    workdir: Path
    batch_size: int
    batch_bytes: int = DEFAULT_BATCH_BYTES
    row_group_bytes: int = DEFAULT_ROW_GROUP_BYTES
    output: OutputFormat = field(default_factory=OutputFormat)
    """How the shards are written: Parquet, or JSON Lines."""

    def __call__(self, block: Block, progress: Callable[[int], None] | None = None) -> Stats:
        return run_block(self, block, progress)


def plan_blocks(source: Source, rows_per_shard: int, limit: int | None = None) -> list[Block]:
    """The blocks of the input, in order, covering its first `limit` rows (all by default)."""
    blocks: list[Block] = []
    left = limit
    for part in source.parts():
        if left is not None and left <= 0:
            break
        rows = part.num_rows
        if rows is None:  # a stream: one block per rows_per_shard rows, found while reading
            blocks.append(Block(len(blocks), part, 0, left))
            break
        if left is not None:
            rows = min(rows, left)
            left -= rows
        for start in range(0, rows, rows_per_shard):
            blocks.append(Block(len(blocks), part, start, min(start + rows_per_shard, rows)))
        if rows == 0 and not blocks:
            blocks.append(Block(len(blocks), part, 0, 0))
    return blocks


def block_done(workdir: Path, index: int) -> bool:
    return (workdir / "blocks" / f"{index:05d}.json").exists()


def load_block_stats(workdir: Path, index: int) -> Stats:
    data = json.loads((workdir / "blocks" / f"{index:05d}.json").read_text(encoding="utf-8"))
    return Stats.from_dict(data)


def run_block(job: BlockJob, block: Block, progress: Callable[[int], None] | None = None) -> Stats:
    """Clean one block into its data and rejects shards; returns (and records) its stats."""
    with ThreadPoolExecutor(1, "transcript-clean-writer") as writer:
        return clean_block(job, block, writer, progress).result()


def clean_block(
    job: BlockJob,
    block: Block,
    writer: ThreadPoolExecutor,
    progress: Callable[[int], None] | None = None,
) -> Future[Stats]:
    """`run_block`, writing on `writer` (one thread): returns once every batch is cleaned, with
    a future done when the block's shards are closed and its stats recorded, so that the next
    block can start while this one's last row group is written.

    Reading and writing Parquet (decompressing, compressing) and most of the fast path's checks
    run in Arrow's C++ or NumPy without the GIL, so they go on helper threads while this one
    runs the per-row Python: the next batches are read, and checked on a thread of their own,
    and the last ones written, as the current one is cleaned. One writer thread, fed in order,
    keeps the files byte for byte what a plain loop would write. The queues hold a few batches
    (the writer's, up to a row group), so memory stays bounded by the batch and row group
    sizes, in rows and bytes, not the input's.
    """
    schema = job.source.schema
    stats = Stats()
    name = job.output.shard_name(block.index)
    data = job.output.open(job.workdir / "data" / name, schema, row_group_bytes=job.row_group_bytes)
    rejects = job.output.open(
        job.workdir / "rejects" / name,
        reject_schema(schema),
        rejects=True,
        row_group_bytes=job.row_group_bytes,
    )
    writes: deque[tuple[Future[None], int]] = deque()
    queued_bytes = 0
    # A shard writes a row group at a time, a pause every 16,384 rows, and the writer thread is
    # as busy as this one: batches may wait for it meanwhile, so that this thread goes on
    # cleaning. A queue of four row groups' worth beat one of one (docs/performance.md).
    queued_writes = max(2, QUEUED_ROWS // job.batch_size)
    try:
        exact = job.output.name == "jsonl"
        for cleaned, _, _ in cleaned_batches(block, job, exact_lines=exact, reencode=True):
            size = cleaned.table.nbytes
            writes.append((writer.submit(_write, data, cleaned, rejects), size))
            queued_bytes += size
            while len(writes) > queued_writes or (len(writes) > 2 and queued_bytes > QUEUED_BYTES):
                write, size = writes.popleft()
                write.result()
                queued_bytes -= size
            stats.merge(cleaned.stats)
            if progress is not None:
                progress(cleaned.table.num_rows)
    except BaseException:
        for write, _ in writes:  # the files go once nothing writes to them any more
            wait([write])
        data.abort()
        rejects.abort()
        raise
    marker = job.workdir / "blocks" / f"{block.index:05d}.json"
    return writer.submit(_finish, [write for write, _ in writes], data, rejects, marker, stats)


def _finish(
    writes: list[Future[None]],
    data: Shard,
    rejects: Shard,
    marker: Path,
    stats: Stats,
) -> Stats:
    """Close a block's shards and record its stats, which marks it done; after a failed write,
    drop the shards instead."""
    try:
        for write in writes:  # done already: the writer runs its tasks in order
            write.result()
        data.close()
        rejects.close()
    except BaseException:
        data.abort()
        rejects.abort()
        raise
    write_text_atomic(marker, json.dumps(stats.to_dict()))
    return stats


class Reading(Protocol):
    """What `cleaned_batches` reads a block with: a `BlockJob`, or an audit's block task."""

    @property
    def source(self) -> Source: ...
    @property
    def config(self) -> Config: ...
    @property
    def format(self) -> Format: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def batch_bytes(self) -> int: ...


def cleaned_batches(
    block: Block,
    how: Reading,
    on_row: Callable[[int, Row, RowResult], None] | None = None,
    *,
    exact_lines: bool = True,
    reencode: bool = False,
) -> Iterator[tuple[CleanedBatch, Verdicts | None, int]]:
    """A block's batches, read ahead with their verdicts worked out ahead (`with_verdicts`),
    each cleaned (`clean_batch_parts`): with its verdicts and the number of its first row. What
    `clean` and `audit` both do with a block. `exact_lines=False`: JSON Lines rows' lines are
    not written, so the fast path may repair them (`batch_verdicts`); `reencode=True`: it may
    all the same, the per-row path writing just their lines (what `clean` asks; an audit, whose
    samples are of the rows the per-row path reads, does not)."""
    # Read in batches of a verdict group each (every column in one chunk: looked at whole
    # without a copy), cut into batches of `batch_size` to clean.
    rows, nbytes = max(how.batch_size, VERDICT_ROWS), max(how.batch_bytes, VERDICT_BYTES)
    batches = how.source.read(block.part, block.start, block.stop, rows, nbytes)
    # Read within `batch_bytes` already (the default), a batch is cut by rows alone: the rows'
    # sizes are not worked out a second time.
    cut = (how.batch_size, None if nbytes == how.batch_bytes else how.batch_bytes)
    judged = with_verdicts(batches, how.config, how.format, exact_lines, reencode, cut)
    row = block.start
    for batch, verdicts in judged:
        cleaned = clean_batch_parts(
            batch,
            how.config,
            format=how.format,
            source=block.part.name,
            first_row=row,
            on_row=on_row,
            verdicts=verdicts,
        )
        yield cleaned, verdicts, row
        row += batch.num_rows


def with_verdicts(
    batches: Iterator[pa.RecordBatch],
    config: Config,
    format: Format,
    exact_lines: bool = True,
    reencode: bool = False,
    cut: tuple[int, int | None] | None = None,
) -> Iterator[tuple[pa.RecordBatch, Verdicts | None]]:
    """`batches`, each with what the fast path settles in it (`batch_verdicts`): the batches
    are read ahead on one thread, and their verdicts worked out on another.

    The fast path's cost is mostly per call, not per row (docs/performance.md), so it looks
    at a few batches at a time, up to `VERDICT_ROWS` rows and `VERDICT_BYTES` bytes. `cut`
    (rows, bytes): the batches are handed on in pieces of at most that many (`cut_by_bytes`;
    a batch read as large as a group is looked at whole, and cleaned in pieces as small as
    asked).
    """
    # Each thread is ahead by at most a group's bytes, however few rows hold them: on long
    # rows a batch is a group, and two ahead on each thread were most of a run's peak.
    read = _prefetched(batches, name="reader", nbytes=VERDICT_BYTES)
    verdicts = _with_verdicts(read, config, format, exact_lines, reencode, cut)
    return _prefetched(verdicts, name="verdicts", nbytes=VERDICT_BYTES)


def _with_verdicts(
    batches: Iterator[pa.RecordBatch],
    config: Config,
    format: Format,
    exact_lines: bool,
    reencode: bool,
    cut: tuple[int, int | None] | None,
) -> Iterator[tuple[pa.RecordBatch, Verdicts | None]]:
    for group in _grouped(batches, VERDICT_ROWS, VERDICT_BYTES):
        table = pa.Table.from_batches(group)
        verdicts = batch_verdicts(
            table, config, format=format, exact_lines=exact_lines, reencode=reencode
        )
        # The settled rows' profile is measured here, from the view that settled them.
        profile = None if verdicts is None else settled_profile(verdicts, config)
        pieces = group if cut is None else cut_by_bytes(group, *cut)
        start = 0
        for batch in pieces:
            stop = start + batch.num_rows
            part = None if verdicts is None else verdicts.slice(start, stop)
            if part is not None and profile is not None:
                part.profile = profile if start == 0 else Profile()  # the group's, once
            yield batch, part
            start = stop


def _grouped(
    batches: Iterator[pa.RecordBatch], rows: int, nbytes: int
) -> Iterator[list[pa.RecordBatch]]:
    """Consecutive batches in groups of at most `rows` rows and `nbytes` bytes (or one batch)."""
    group: list[pa.RecordBatch] = []
    group_rows = group_bytes = 0
    for batch in batches:
        size = batch.nbytes
        if group and (group_rows + batch.num_rows > rows or group_bytes + size > nbytes):
            yield group
            group, group_rows, group_bytes = [], 0, 0
        group.append(batch)
        group_rows += batch.num_rows
        group_bytes += size
    if group:
        yield group


def _write(data: Shard, cleaned: CleanedBatch, rejects: Shard) -> None:
    """Write a cleaned batch, gathering its kept rows here: a copy of the batch (of the
    columns the shard writes), made in Arrow without the GIL, off the thread that runs the
    per-row Python."""
    rows = cleaned.table if cleaned.written is None else cleaned.written
    data.write(cleaned.kept_rows(data.columns_for(rows)))
    rejects.write(cleaned.rejects)


_END = object()
T = TypeVar("T")


def _prefetched(
    items: Iterator[T], depth: int = 2, name: str = "reader", nbytes: int | None = None
) -> Iterator[T]:
    """`items`, made ahead by up to `depth` on a helper thread, and waiting items at most
    `nbytes` bytes of batches (`_batch_bytes`; one item however large); its errors are raised
    here. When the consumer stops early, `items` is closed on that thread (so a chain of these
    winds down from its end)."""
    bound = sys.maxsize if nbytes is None else nbytes
    queue: BytesQueue[object] = BytesQueue(depth, bound, _batch_bytes)
    stop = Event()

    def put(item: object) -> bool:
        """Hand `item` over unless the consumer has gone."""
        while not stop.is_set():
            if queue.put(item, timeout=0.1):
                return True
        return False

    def read() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_END)
        except BaseException as err:  # handed to the consumer, which raises it
            put(err)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = Thread(target=read, name=f"transcript-clean-{name}", daemon=True)
    thread.start()
    try:
        while True:
            item = queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield cast(T, item)
    finally:
        stop.set()
        thread.join()


def _settled(
    queued: tuple[Block, Future[Stats] | None], done: dict[int, Stats]
) -> tuple[Block, Stats]:
    block, future = queued
    return block, done.pop(block.index) if future is None else future.result()


def _run_block_in_worker(task: BlockTask[R], block: Block) -> R:
    if not task.source.uses_pandas:  # a worker is the cleaner's own process
        keep_pandas_out()
    return task(block)


def run_blocks(
    job: BlockJob,
    blocks: list[Block],
    *,
    workers: int = 1,
    progress: Callable[[int], None] | None = None,
    pool: ProcessPoolExecutor | None = None,
) -> Iterator[tuple[Block, Stats]]:
    """Clean every block not done yet; yields each block's stats in input order.

    With `workers` > 1 this process cleans blocks from the front of the input while `workers`
    - 1 processes take them from the back: those of `pool` if given (see
    `engine.workers.start_workers`; its owner shuts it down), else a pool made here.
    """
    for folder in ("data", "rejects", "blocks"):
        (job.workdir / folder).mkdir(parents=True, exist_ok=True)
    todo = [b for b in blocks if not block_done(job.workdir, b.index)]
    done = {b.index: load_block_stats(job.workdir, b.index) for b in blocks if b not in todo}
    if progress is not None:
        progress(sum(s.rows_in for s in done.values()))

    if workers <= 1 or len(todo) <= 1:
        # One writer thread for every block: a block's last row group is written and its files
        # closed while the next block is read and cleaned.
        with ThreadPoolExecutor(1, "transcript-clean-writer") as writer:
            queued: deque[tuple[Block, Future[Stats] | None]] = deque()
            for block in blocks:
                started = None if block.index in done else clean_block(job, block, writer, progress)
                queued.append((block, started))
                while len(queued) > 1:
                    yield _settled(queued.popleft(), done)
            while queued:
                yield _settled(queued.popleft(), done)
        return

    yield from map_blocks(
        job, blocks, rows=_rows_in, workers=workers, progress=progress, pool=pool, done=done
    )


def _rows_in(stats: Stats) -> int:
    return stats.rows_in


def map_blocks(
    task: BlockTask[R],
    blocks: list[Block],
    *,
    rows: Callable[[R], int],
    workers: int = 1,
    progress: Callable[[int], None] | None = None,
    pool: ProcessPoolExecutor | None = None,
    done: dict[int, R] | None = None,
) -> Iterator[tuple[Block, R]]:
    """`task` on every block not in `done` (index -> result); yields each block's result in
    input order. `rows` tells how many rows a result stands for, for `progress` when a block
    done elsewhere comes back.

    With `workers` > 1 this process runs blocks from the front of the input while `workers`
    - 1 processes take them from the back: those of `pool` if given (see
    `engine.workers.start_workers`; its owner shuts it down), else a pool made here.
    """
    done = dict(done or {})
    left = deque(b for b in blocks if b.index not in done)
    if workers <= 1 or len(left) <= 1:
        for block in blocks:
            yield block, done.pop(block.index) if block.index in done else task(block, progress)
        return

    # This process is one of the workers: it runs blocks from the front of the input while
    # the pool's processes take them from the back, so `--workers 2` starts one process, not
    # two, and nobody waits for a process to start.
    running: dict[Future[R], Block] = {}

    def finish(futures: Iterable[Future[R]]) -> None:
        for future in futures:
            block = running.pop(future)
            done[block.index] = future.result()
            if progress is not None:
                progress(rows(done[block.index]))

    if pool is None:
        from transcript_clean.engine.workers import start_workers
    with nullcontext(pool) if pool is not None else start_workers(workers - 1, __name__) as pool:
        for block in blocks:
            while block.index not in done:
                finish([future for future in running if future.done()])
                while left and len(running) < workers - 1:
                    last = left.pop()
                    running[pool.submit(_run_block_in_worker, task, last)] = last
                if block.index in done:
                    break
                if left:
                    first = left.popleft()
                    done[first.index] = task(first, progress)
                else:
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    finish(finished)
            yield block, done.pop(block.index)


def _batch_bytes(item: object) -> int:
    """The bytes of a batch, or of a (batch, verdicts) pair's batch; 0 for anything else."""
    batch = item[0] if isinstance(item, tuple) and item else item
    return batch.nbytes if isinstance(batch, pa.RecordBatch | pa.Table) else 0
