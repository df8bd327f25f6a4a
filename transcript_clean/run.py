"""`clean`: a whole cleaning run, from a source to OUTPUT/ (SPEC section 7).

The run writes into `OUTPUT.partial/` and moves the finished layout into place at the end, so a
killed run never leaves an OUTPUT that looks complete; `resume=True` finishes what it left.
The folder itself, its lock and its checks are `transcript_clean.output`'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transcript_clean.errors import AccountingError, OutputError
from transcript_clean.formats.base import Format
from transcript_clean.options import (
    Engine,
    EngineOptions,
    SourceOptions,
    format_hint,
    split_options,
)
from transcript_clean.output import (
    blocks_done,
    check_free,
    check_output,
    check_output_name,
    earlier_seconds,
    finalize,
    finished_run,
    output_lock,
    partial_folder,
    prepare,
    remove_partial,
)
from transcript_clean.policy import Config, for_format, load_config
from transcript_clean.sinks import OutputFormat
from transcript_clean.sources import DEFAULT_MAX_ROW_BYTES, Source
from transcript_clean.stats import Stats, run_summary
from transcript_clean.storage import StorageError, Store, is_remote, local_path, open_store

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from transcript_clean.engine.local import Block, BlockJob

__all__ = ["DEFAULT_ROWS_PER_SHARD", "RunResult", "clean"]

DEFAULT_ROWS_PER_SHARD = 100_000

log = logging.getLogger("transcript_clean")


@dataclass(slots=True, repr=False)
class RunResult:
    """What a run wrote and counted; its repr is one line of counts (the stats hold the
    profile's arrays, which are not for reading)."""

    output: Path | str
    """The OUTPUT folder, or its URI on an object store."""
    stats: Stats
    summary: dict[str, Any]
    already_complete: bool = False
    """True when `resume` found this run done already (killed while it tidied up)."""

    def __repr__(self) -> str:
        s = self.stats
        done = ", already_complete=True" if self.already_complete else ""
        return (
            f"RunResult(output={os.fspath(self.output)!r}, rows_in={s.rows_in}, "
            f"kept={s.rows_kept}, repaired={s.rows_repaired}, rejected={s.rows_rejected}{done})"
        )


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
    output_format: str = "parquet",
    compression: str | None = None,
    to: str | None = None,
    chat_template: str | os.PathLike[str] | None = None,
    arguments_as: str | None = None,
    **options: Any,
) -> RunResult:
    """Clean `source` into `output`: data/, rejects/, stats.parquet, stats.csv, summary.json and
    README.md. Returns the stats; raises `TranscriptCleanError` subclasses for bad input.

        >>> clean("raw/*.parquet", "clean/", config="default", workers=2)  # doctest: +SKIP

    `source` is what `SourceOptions.spec` takes, or a `SourceOptions`; `engine` an
    `EngineOptions`, or the engine's name. `options` are those objects' fields by name, for
    convenience: format, column, split, subset, revision, streaming, batch_size, limit; workers,
    ray_address.

    `output` is a folder; one named like a data file (`cleaned.jsonl`) is refused unless it is
    given as `cleaned.jsonl/` or is a folder already (`OutputError`).

    `chat_template`: a `.jinja` file, a tokenizer folder or a Hub model id; every row kept is
    rendered with it, as its trainer renders it (`docs/templates.md`), with calls' arguments
    as `arguments_as` says (`object`, `string` or `auto`). Needs the `templates` extra.

    `output_format`: `parquet` or `jsonl` (JSON Lines), compressed with `compression` (default:
    zstd for Parquet, none for JSON Lines; see `sinks.OutputFormat`).

    `pool`: for `workers` > 1 on the local engine, the other workers' processes, started ahead
    (`engine.workers.start_workers(workers - 1)`, shut down by the caller); by default they are
    started when the blocks are.

    `to`: write the kept rows in this conversation format (`openai`, `sharegpt`, `anthropic`,
    `rig`), their declared tools in its `tools` column (`convert.py`); every row then takes
    the per-row path.
    """
    read, run = split_options(source, engine, options)
    written = OutputFormat(output_format, compression)
    check_output_name(os.fspath(output))
    started, started_at = time.perf_counter(), time.time()
    if rows_per_shard < 1:
        raise ValueError("rows_per_shard must be at least 1")
    cfg = config if isinstance(config, Config) else load_config(config)
    cfg = replace(cfg, max_row_bytes=read.max_row_bytes)
    if chat_template is not None or arguments_as is not None:
        from transcript_clean.policy import with_template

        cfg = with_template(cfg, os.fspath(chat_template) if chat_template else None, arguments_as)
    src, fmt = read.resolve()
    cfg = for_format(cfg, fmt)  # what `auto` does for these rows, recorded in the summary
    cleaner = fmt
    if to is not None:
        from transcript_clean.convert import converting

        cleaner = converting(fmt, to)
        cfg = replace(cfg, to=to)
    from transcript_clean.pipeline import written_schema

    anew = written_schema(cleaner, cfg, src.schema)
    arguments = _arguments_written(cleaner, cfg, to)
    if anew is not None:
        written = replace(written, written=anew)
    hint = None if read.format == "auto" else format_hint(src, fmt)
    store = _output_store(output, src, read, overwrite=overwrite, resume=resume)
    out = local_path(os.fspath(output)).absolute()
    if store is None:
        check_output(out, src)
        if not resume:
            check_free(out, overwrite)
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
        "output": [written.name, written.codec],
        **({"to": to} if to is not None else {}),
        # only when given, so that a run started without it resumes as before
        **({"tools_column": fmt.tools_column} if fmt.tools_column else {}),
        # a limit other than the default rejects other rows
        **(
            {"max_row_bytes": read.max_row_bytes}
            if read.max_row_bytes != DEFAULT_MAX_ROW_BYTES
            else {}
        ),
    }

    def summarize(stats: Stats, earlier: float) -> dict[str, Any]:
        summary = run_summary(
            stats,
            source=src.name,
            format=fmt.name,
            column=fmt.column,
            config=cfg.to_dict(),
            fingerprint=fingerprint,
            seconds=earlier + time.perf_counter() - started,
            engine=run.engine,
            workers=run.workers,
            shape=getattr(fmt, "shape", None),
            output=(written.name, written.codec),
            format_hint=hint,
        )
        if to is not None:
            summary["to"] = to
        if arguments is not None:
            summary["arguments_written"] = arguments
        return summary

    if store is not None:
        from transcript_clean.engine.local import BlockJob, plan_blocks

        job = BlockJob(src, cleaner, cfg, Path(), read.batch_size, read.batch_bytes, output=written)
        plan = plan_blocks(src, rows_per_shard, limit)
        return _clean_store(
            store, job, plan, identity, run, summarize, resume, overwrite, progress, pool
        )
    work = partial_folder(out)
    with output_lock(work):
        finished = finished_run(work, out, identity) if resume else None
        if finished is not None:  # a run killed after OUTPUT was in place: only tidy up
            remove_partial(work, out)
            return RunResult(out, *finished, already_complete=True)
        try:
            prepare(work, identity, resume=resume, overwrite=overwrite)
            check_free(out, overwrite)  # again: another run may have finished meanwhile
            before = earlier_seconds(work, started_at)
            if before:
                log.info("resuming: the earlier attempts worked %.2f s", before)
            if run.engine == "ray":
                from transcript_clean.engine.ray import run_ray

                stats, shards = run_ray(
                    src,
                    cleaner,
                    cfg,
                    work,
                    rows_per_shard=rows_per_shard,
                    limit=limit,
                    address=run.ray_address,
                    batch_size=batch_size,
                    batch_bytes=read.batch_bytes,
                    progress=progress,
                    output=written,
                )
            else:
                stats, shards = _run_local(
                    src, cleaner, cfg, work, rows_per_shard, limit, run.workers, read, progress,
                    pool, written,
                )  # fmt: skip
            stats.check()
            summary = summarize(stats, before)
            finalize(work, out, src, shards, stats, summary, overwrite, written)
        except AccountingError:
            raise  # the partial folder stays, for --resume to clean the blocks it let go
        except BaseException:
            # A run that failed before finishing any block (an engine that could not start, a
            # bad first batch) leaves nothing worth resuming; one that got further keeps them.
            if not blocks_done(work):
                # best effort: workers that are still being stopped may write into it
                with contextlib.suppress(OutputError):
                    remove_partial(work, out)
            raise
        remove_partial(work, out)
    return RunResult(out, stats, summary)


def _arguments_written(cleaner: Format, cfg: Config, to: str | None) -> str | None:
    """The form the kept rows' calls' arguments are written in (`--arguments-as`, `auto`
    worked out), where the rows are written in a format that takes one; None otherwise."""
    from transcript_clean.formats import get_format
    from transcript_clean.rules._template import written_arguments

    form = written_arguments(cfg)
    if form is None:
        return None
    written = get_format(to) if to is not None else cleaner
    return form if written.with_arguments(form) is not None else None


def _output_store(
    output: str | os.PathLike[str],
    src: Source,
    read: SourceOptions,
    *,
    overwrite: bool,
    resume: bool,
) -> Store | None:
    """The store of an OUTPUT URI (`s3://`, `gs://`, ...), checked as a local OUTPUT is; None for
    a local path (`file://` included)."""
    if not is_remote(os.fspath(output)):
        return None
    from transcript_clean.remote_output import check_store_free, check_store_output

    try:
        store = open_store(os.fspath(output), read.storage_options)
    except StorageError as err:
        raise OutputError(str(err)) from None
    check_store_output(store, src)
    if not resume:
        check_store_free(store, overwrite)
    return store


def _clean_store(
    store: Store,
    job: BlockJob,
    blocks: list[Block],
    identity: dict[str, Any],
    run: EngineOptions,
    summarize: Callable[[Stats, float], dict[str, Any]],
    resume: bool,
    overwrite: bool,
    progress: Callable[[int], None] | None,
    pool: ProcessPoolExecutor | None,
) -> RunResult:
    """`clean` into OUTPUT on an object store, by `remote_output`'s commit protocol: each block
    cleaned where it runs and uploaded to `_temporary/`, `_SUCCESS` written last."""
    from transcript_clean import remote_output as remote
    from transcript_clean.engine.local import map_blocks

    with remote.store_lock(store) as still_locked:
        finished = remote.finished_store_run(store, identity) if resume else None
        if finished is not None:  # a run killed after _SUCCESS: only tidy up
            remote.remove_temporary(store)
            return RunResult(store.uri, *finished, already_complete=True)
        # Checked before `_temporary/` is made ready: a refused run writes nothing there.
        if not (resume and store.exists(remote.FINISHED)):  # not our own half-published OUTPUT
            remote.check_store_free(store, overwrite)
        remote.prepare_store(store, identity, resume=resume, overwrite=overwrite)
        before = remote.earlier_store_seconds(store)
        if before:
            log.info("resuming: the earlier attempts worked %.2f s", before)
        task = remote.StoredBlockJob(job, store)
        done = remote.store_blocks_done(store, blocks)
        if progress is not None:
            progress(sum(stats.rows_in for stats in done.values()))
        todo = [block for block in blocks if block.index not in done]
        if run.engine == "ray":
            from transcript_clean.engine.ray import map_blocks_on_ray

            for index, block_stats in map_blocks_on_ray(task, todo, address=run.ray_address):
                done[index] = block_stats
                if progress is not None:
                    progress(block_stats.rows_in)
        else:
            cleaned = map_blocks(
                task,
                blocks,
                rows=lambda stats: stats.rows_in,
                workers=run.workers,
                progress=progress,
                pool=pool,
                done=done,
            )
            done.update((block.index, block_stats) for block, block_stats in cleaned)
        stats = Stats()
        for block in blocks:
            stats.merge(done[block.index])
        stats.check()
        summary = summarize(stats, before)
        shards = [job.output.shard_name(block.index) for block in blocks]
        remote.publish(store, job.source, shards, stats, summary, still_locked, job.output)
        remote.remove_temporary(store)
    return RunResult(store.uri, stats, summary)


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
    written: OutputFormat,
) -> tuple[Stats, list[str]]:
    from transcript_clean.engine.local import BlockJob, plan_blocks, run_blocks

    job = BlockJob(src, fmt, cfg, work, read.batch_size, read.batch_bytes, output=written)
    stats = Stats()
    names = []
    blocks = plan_blocks(src, rows_per_shard, limit)
    log.info(
        "%d block(s) of at most %d rows, on %d worker(s)", len(blocks), rows_per_shard, workers
    )
    cleaned = run_blocks(job, blocks, workers=workers, progress=progress, pool=pool)
    for block, block_stats in cleaned:
        stats.merge(block_stats)
        names.append(written.shard_name(block.index))
        log.debug(
            "block %d: %d rows in, %d kept, %d rejected",
            block.index, block_stats.rows_in, block_stats.rows_kept, block_stats.rows_rejected,
        )  # fmt: skip
    return stats, names
