"""`clean`: a whole cleaning run, from a source to OUTPUT/ (SPEC section 7).

The run writes into `OUTPUT.partial/` and moves the finished layout into place at the end, so a
killed run never leaves an OUTPUT that looks complete; `resume=True` finishes what it left.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transcript_clean.errors import OutputError
from transcript_clean.formats.base import Format
from transcript_clean.options import Engine, EngineOptions, SourceOptions, split_options
from transcript_clean.policy import Config, load_config
from transcript_clean.sinks import ParquetShard, shard_name, write_table_atomic, write_text_atomic
from transcript_clean.sources import Source
from transcript_clean.stats import Stats, dataset_card, run_summary

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["DEFAULT_ROWS_PER_SHARD", "RunResult", "clean"]

DEFAULT_ROWS_PER_SHARD = 100_000


@dataclass(slots=True)
class RunResult:
    """What a run wrote and counted."""

    output: Path
    stats: Stats
    summary: dict[str, Any]


def clean(
    source: str | os.PathLike[str] | Source | SourceOptions,
    output: str | os.PathLike[str],
    *,
    config: Config | str | os.PathLike[str] | None = None,
    rows_per_shard: int = DEFAULT_ROWS_PER_SHARD,
    overwrite: bool = False,
    resume: bool = False,
    engine: EngineOptions | Engine = "local",
    progress: Callable[[int], None] | None = None,
    on_start: Callable[[Source, Format, int | None], None] | None = None,
    pool: ProcessPoolExecutor | None = None,
    **options: Any,
) -> RunResult:
    """Clean `source` into `output`: data/, rejects/, stats.parquet, stats.csv, summary.json and
    README.md. Returns the stats; raises `TranscriptCleanError` subclasses for bad input.

        >>> clean("raw/*.parquet", "clean/", config="default", workers=2)  # doctest: +SKIP

    `source` is what `SourceOptions.spec` takes, or a `SourceOptions`; `engine` an
    `EngineOptions`, or the engine's name. `options` are those objects' fields by name, for
    convenience: format, column, split, subset, revision, streaming, batch_size, limit; workers,
    ray_address.

    `pool`: for `workers` > 1 on the local engine, the other workers' processes, started ahead
    (`engine.workers.start_workers(workers - 1)`, shut down by the caller); by default they are
    started when the blocks are.
    """
    read, run = split_options(source, engine, options)
    started = time.perf_counter()
    if rows_per_shard < 1:
        raise ValueError("rows_per_shard must be at least 1")
    cfg = config if isinstance(config, Config) else load_config(config)
    src, fmt = read.resolve()
    out = Path(output).absolute()
    _check_output(out, src, overwrite)
    if on_start is not None:
        on_start(src, fmt, read.rows_total(src))
    limit, batch_size = read.limit, read.batch_size

    fingerprint = src.fingerprint()
    identity = {
        "source": src.name,
        "fingerprint": fingerprint,
        "format": fmt.name,
        "column": fmt.column,
        "config": cfg.to_dict(),
        "rows_per_shard": rows_per_shard,
        "limit": limit,
        "batch_size": batch_size,
        "engine": run.engine,
    }
    with _workdir(out, identity, resume=resume, overwrite=overwrite) as work:
        if run.engine == "ray":
            from transcript_clean.engine.ray import run_ray

            stats, shards = run_ray(
                src,
                fmt,
                cfg,
                work,
                rows_per_shard=rows_per_shard,
                limit=limit,
                address=run.ray_address,
                batch_size=batch_size,
                batch_bytes=read.batch_bytes,
                progress=progress,
            )
        else:
            stats, shards = _run_local(
                src, fmt, cfg, work, rows_per_shard, limit, run.workers, read, progress, pool
            )
        stats.check()
        seconds = time.perf_counter() - started
        summary = run_summary(
            stats,
            source=src.name,
            format=fmt.name,
            column=fmt.column,
            config=cfg.to_dict(),
            fingerprint=fingerprint,
            seconds=seconds,
            engine=run.engine,
            workers=run.workers,
        )
        _finalize(work, out, src, shards, stats, summary, overwrite)
    return RunResult(out, stats, summary)


def _run_local(
    src: Source,
    fmt: Format,
    cfg: Config,
    work: Path,
    rows_per_shard: int,
    limit: int | None,
    workers: int,
    read: SourceOptions,
    progress: Callable[[int], None] | None,
    pool: ProcessPoolExecutor | None,
) -> tuple[Stats, list[str]]:
    from transcript_clean.engine.local import BlockJob, plan_blocks, run_blocks

    job = BlockJob(src, fmt, cfg, work, read.batch_size, read.batch_bytes)
    stats = Stats()
    names = []
    blocks = plan_blocks(src, rows_per_shard, limit)
    cleaned = run_blocks(job, blocks, workers=workers, progress=progress, pool=pool)
    for block, block_stats in cleaned:
        stats.merge(block_stats)
        names.append(shard_name(block.index))
    return stats, names


# ---------------------------------------------------------------------------------------------
# the output folder


def _check_output(out: Path, src: Source, overwrite: bool) -> None:
    for root in src.local_roots():
        root = root.absolute()
        if out == root or out.is_relative_to(root):
            raise OutputError(f"OUTPUT {out} is inside the source {root}: choose another folder")
        if root.is_relative_to(out):
            raise OutputError(f"the source {root} is inside OUTPUT {out}: choose another folder")
    if out.exists() and not out.is_dir():
        raise OutputError(f"OUTPUT {out} exists and is a file")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise OutputError(f"OUTPUT {out} exists and is not empty: pass --overwrite to replace it")


@contextmanager
def _workdir(
    out: Path, identity: dict[str, Any], *, resume: bool, overwrite: bool
) -> Iterator[Path]:
    """`OUTPUT.partial/`: new, or the one a killed run left when resuming the same run."""
    work = out.with_name(out.name + ".partial")
    marker = work / "run.json"
    if work.exists():
        if resume:
            previous = json.loads(marker.read_text(encoding="utf-8")) if marker.exists() else None
            if previous != identity:
                raise OutputError(
                    f"{work} was left by a different run (other input, config or options): "
                    "run again without --resume and with --overwrite to start over"
                )
        elif overwrite:
            shutil.rmtree(work)
        else:
            raise OutputError(
                f"{work} was left by a run that did not finish: pass --resume to finish it, "
                "or --overwrite to start over"
            )
    work.mkdir(parents=True, exist_ok=True)
    if not marker.exists():
        write_text_atomic(marker, json.dumps(identity, indent=2, sort_keys=True))
    try:
        yield work
    except BaseException:
        # A run that failed before finishing any block (an engine that could not start, a bad
        # first batch) leaves nothing worth resuming; one that got further keeps its blocks.
        blocks = work / "blocks"
        if not (blocks.exists() and any(blocks.iterdir())):
            shutil.rmtree(work, ignore_errors=True)
        raise
    if work.exists():
        shutil.rmtree(work)


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _finalize(
    work: Path,
    out: Path,
    src: Source,
    shards: list[str],
    stats: Stats,
    summary: dict[str, Any],
    overwrite: bool,
) -> None:
    """Lay out OUTPUT in `work/final` (hard links to the block shards, empty shards left out and
    the rest numbered from 0) and move it into place."""
    from transcript_clean.pipeline import reject_schema

    final = work / "final"
    if final.exists():
        shutil.rmtree(final)
    for folder, schema in (("data", src.schema), ("rejects", reject_schema(src.schema))):
        (final / folder).mkdir(parents=True)
        written = 0
        for name in shards:
            shard = work / folder / name
            if _parquet_rows(shard) == 0:
                continue
            _link(shard, final / folder / shard_name(written))
            written += 1
        if written == 0:  # one empty shard keeps the schema findable
            with ParquetShard(final / folder / shard_name(0), schema):
                pass
    write_table_atomic(final / "stats.parquet", stats.table())
    write_text_atomic(final / "stats.csv", stats.csv())
    write_text_atomic(final / "summary.json", json.dumps(summary, indent=2) + "\n")
    write_text_atomic(final / "README.md", dataset_card(summary, stats.records()))

    if out.exists():
        if not overwrite and any(out.iterdir()):
            raise OutputError(f"OUTPUT {out} appeared while the run went on: not replacing it")
        aside = out.with_name(out.name + ".old")
        if aside.exists():
            shutil.rmtree(aside)
        out.rename(aside)
        final.rename(out)
        shutil.rmtree(aside)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        final.rename(out)


def _parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)
