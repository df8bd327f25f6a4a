"""The Ray engine: the local engine's blocks, cleaned by Ray Data tasks on a Ray cluster.

The input is planned into the same blocks as the local engine (`plan_blocks`). A Ray Dataset holds
one row per block still to clean, and `map_batches` runs `run_block` on each: the same cleaner,
writing the same shards into the run's work folder, which every node must reach (a local path for
a local Ray; a shared filesystem on a cluster: said before the run starts). With OUTPUT in a
bucket, `run.clean` runs `remote_output.StoredBlockJob`s through `map_blocks_on_ray` instead:
each task uploads its own shards, and nothing local is shared. The blocks' stats come back to
the driver pickled and are merged in block order, so the files, the stats and their examples are
the local engine's.

`map_blocks_on_ray` runs any `BlockTask` so: the audit's measures, for one.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from transcript_clean.engine.local import (
    Block,
    BlockJob,
    BlockTask,
    block_done,
    load_block_stats,
    plan_blocks,
)
from transcript_clean.errors import EngineError, TranscriptCleanError
from transcript_clean.formats.base import Format
from transcript_clean.policy import Config
from transcript_clean.sinks import OutputFormat
from transcript_clean.sources import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE, Source
from transcript_clean.stats import Stats

__all__ = ["map_blocks_on_ray", "run_ray"]

R = TypeVar("R")

INSTALL_HINT = "pip install 'transcript-clean[ray]'"


def run_ray(
    source: Source,
    format: Format,
    config: Config,
    work: Path,
    *,
    rows_per_shard: int,
    limit: int | None = None,
    address: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    num_cpus: int | None = None,
    progress: Callable[[int], None] | None = None,
    show_progress: bool = False,
    output: OutputFormat | None = None,
) -> tuple[Stats, list[str]]:
    """Clean `source` into `work/data/` and `work/rejects/` on Ray; returns the merged stats and
    the shard names in input order.

    Joins the cluster at `address` (or `RAY_ADDRESS`); without one, starts a local Ray with
    `num_cpus` CPUs (default: all) and stops it at the end. A Ray this process already started is
    used as it is. Blocks a killed run finished (`work/blocks/`) are not cleaned again.
    `show_progress` turns Ray Data's own progress bars on; `output` is how the shards are
    written (Parquet by default).
    """
    ray = _import_ray()  # before anything, so that a missing Ray is the first thing said
    work = work.absolute()  # workers may not share the driver's working directory
    output = output or OutputFormat()
    job = BlockJob(source, format, config, work, batch_size, batch_bytes, output=output)
    blocks = plan_blocks(source, rows_per_shard, limit)
    for folder in ("data", "rejects", "blocks"):
        (work / folder).mkdir(parents=True, exist_ok=True)
    todo = [block for block in blocks if not block_done(work, block.index)]
    done = {b.index: load_block_stats(work, b.index) for b in blocks if b not in todo}
    if progress is not None:
        progress(sum(stats.rows_in for stats in done.values()))

    if todo:
        _warn_if_cluster(ray, work, address)
        for index, stats in _mapped(ray, job, todo, address, num_cpus, show_progress):
            done[index] = stats
            if progress is not None:
                progress(stats.rows_in)
        _check_shards_visible(work, todo, output)

    merged = Stats()
    for block in blocks:
        merged.merge(done[block.index])
    return merged, [output.shard_name(block.index) for block in blocks]


log = logging.getLogger("transcript_clean")


def _warn_if_cluster(ray: Any, work: Path, address: str | None) -> None:
    """Say, before any block runs, that a local work folder must be shared storage when the
    Ray it runs on may be other machines: a cluster's address, or a Ray joined already that
    has other nodes. (An OUTPUT in a bucket needs nothing shared: `remote_output`.)"""
    target = address or os.environ.get("RAY_ADDRESS")
    if ray.is_initialized():
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        target = f"with {len(nodes)} nodes" if len(nodes) > 1 else None
    elif target == "local":
        target = None
    if target is not None:
        log.warning(
            "OUTPUT is a local path: every node of the Ray cluster (%s) must reach %s as this "
            "machine does (a shared filesystem), or the run fails once its blocks are done; "
            "without one, give an s3:// or gs:// OUTPUT (docs/ray.md)",
            target,
            work,
        )


def map_blocks_on_ray(
    task: BlockTask[R],
    blocks: list[Block],
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    show_progress: bool = False,
) -> Iterator[tuple[int, R]]:
    """`task` on each block as Ray tasks: each block's index and result, as they finish (in no
    particular order). Ray is started or joined as for `run_ray`, for as long as this runs."""
    return _mapped(_import_ray(), task, blocks, address, num_cpus, show_progress)


def _mapped(
    ray: Any,
    task: BlockTask[R],
    blocks: list[Block],
    address: str | None,
    num_cpus: int | None,
    show_progress: bool,
) -> Iterator[tuple[int, R]]:
    with _ray_session(ray, address, num_cpus), _quiet(ray, show_progress):
        yield from _map_on_ray(ray, task, blocks)


def _import_ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise EngineError(
            f"the Ray engine needs Ray, which is not installed: {INSTALL_HINT}"
        ) from exc
    return ray


@contextmanager
def _ray_session(ray: Any, address: str | None, num_cpus: int | None) -> Iterator[None]:
    """Ray, connected for the run: a Ray already running here is left running."""
    if ray.is_initialized():
        yield
        return
    # "local" starts a new Ray even when `ray start` left one running on this machine
    address = address or os.environ.get("RAY_ADDRESS") or "local"
    try:
        ray.init(
            address=address,
            num_cpus=num_cpus if address == "local" else None,  # a cluster has its own
            ignore_reinit_error=True,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = "a new local Ray" if address == "local" else f"the Ray cluster at {address}"
        raise EngineError(f"cannot start or join {where}: {exc}") from exc
    try:
        yield
    finally:
        ray.shutdown()


@contextmanager
def _quiet(ray: Any, show_progress: bool) -> Iterator[None]:
    """Ray Data without its progress bars and execution logs, unless asked for."""
    context = ray.data.DataContext.get_current()
    saved_bars = context.enable_progress_bars
    logger = logging.getLogger("ray.data")
    saved_level = logger.level
    context.enable_progress_bars = show_progress
    if not show_progress:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        context.enable_progress_bars = saved_bars
        logger.setLevel(saved_level)


def _map_on_ray(ray: Any, task: BlockTask[R], blocks: list[Block]) -> Iterator[tuple[int, R]]:
    """Each block's index and result, as Ray tasks finish them (in no particular order)."""
    dataset = ray.data.from_items(
        [{"index": block.index} for block in blocks],
        override_num_blocks=len(blocks),  # one Ray block per block, so tasks spread out
    )
    results = dataset.map_batches(
        _run_blocks,
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=1,  # the cleaner is single-threaded Python
        fn_kwargs={"task": task, "blocks": {block.index: block for block in blocks}},
    )
    for row in results.iter_rows():
        if row["error"] is not None:
            raise pickle.loads(row["error"])
        yield int(row["index"]), pickle.loads(row["result"])


_RESULT_SCHEMA = pa.schema(
    [
        pa.field("index", pa.int64()),
        pa.field("result", pa.binary()),
        pa.field("error", pa.binary()),
    ]
)


def _run_blocks(batch: pa.Table, task: BlockTask[Any], blocks: dict[int, Block]) -> pa.Table:
    """On a Ray worker: run `task` on the blocks `batch` names. Results travel back pickled;
    an error of ours too, so the driver raises it as it is instead of inside Ray's task error."""
    results: list[dict[str, Any]] = []
    for index in batch.column("index").to_pylist():
        try:
            result = task(blocks[index])
        except TranscriptCleanError as exc:
            results.append({"index": index, "result": None, "error": _pickled_error(exc)})
        else:
            results.append({"index": index, "result": pickle.dumps(result), "error": None})
    return pa.Table.from_pylist(results, schema=_RESULT_SCHEMA)


def _pickled_error(exc: TranscriptCleanError) -> bytes:
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)  # an exception with its own __init__ may not come back
    except Exception:
        data = pickle.dumps(EngineError(f"{type(exc).__name__}: {exc}"))
    return data


def _check_shards_visible(
    work: Path, blocks: list[Block], output: OutputFormat | None = None
) -> None:
    """Workers on other machines write to their own disks unless `work` is shared storage."""
    for block in blocks:
        name = (output or OutputFormat()).shard_name(block.index)
        for folder in ("data", "rejects"):
            if not (work / folder / name).exists():
                raise EngineError(
                    f"Ray workers wrote {folder}/{name} where this machine "
                    f"cannot see it: with a Ray cluster, OUTPUT must be on storage every node "
                    f"shares (its folder {work.parent} is not)"
                )
