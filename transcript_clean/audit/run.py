"""The audit run: the blocks a cleaning run would cut, measured on its engine, without data.

Each block runs the very `clean_batch` a cleaning run runs, over the same rows, and keeps its
stats and its first rows of each code. The engine (this process, `workers` processes, or Ray)
does the blocks; their stats and samples are merged in input order, so the audit reports
exactly the stats `clean` would, and the same samples, whatever ran it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.audit.baseline import (
    Baseline,
    BaselineError,
    Drift,
    compute_drift,
    drift_gate,
    load_baseline,
)
from transcript_clean.audit.history import Night, load_history
from transcript_clean.audit.measure import Gate, code_shares, error_rate, share_gates
from transcript_clean.audit.profile_drift import (
    DriftLimit,
    ProfileDrift,
    compute_profile_drift,
    profile_gates,
)
from transcript_clean.audit.samples import Sample, SampleCollector, merge_samples
from transcript_clean.errors import OutputError, option
from transcript_clean.formats.base import Format
from transcript_clean.options import (
    Engine,
    EngineOptions,
    SourceOptions,
    split_options,
)
from transcript_clean.policy import Config, for_format, load_config
from transcript_clean.rules import codes, unknown_code
from transcript_clean.run import DEFAULT_ROWS_PER_SHARD
from transcript_clean.sinks import write_table_atomic, write_text_atomic
from transcript_clean.sources import DEFAULT_BATCH_BYTES, Source
from transcript_clean.stats import Stats, run_summary
from transcript_clean.storage import StorageError, Store, is_remote, open_store

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from transcript_clean.engine.local import Block

__all__ = [
    "DEFAULT_SAMPLES",
    "STATS_FILES",
    "AuditBlocks",
    "AuditResult",
    "audit",
    "audit_rows_per_block",
    "write_stats",
]

DEFAULT_SAMPLES = 3
STATS_FILES = ("stats.parquet", "stats.csv", "summary.json")
"""What `--stats-out` writes: the stats files of a cleaning run's OUTPUT, same names and layout."""


@dataclass(slots=True)
class AuditResult:
    """Everything an audit found: the summary (a clean run's, plus the audit's measures), the
    stats, samples per code, the drift against a baseline and the gates."""

    summary: dict[str, Any]
    stats: Stats
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    baseline: Baseline | None = None
    drift: list[Drift] | None = None
    gates: list[Gate] = field(default_factory=list)
    profile_drift: list[ProfileDrift] | None = None
    """The profile's figures against the baseline's, when it has a profile."""
    history: list[Night] = field(default_factory=list)
    """Earlier runs' headline figures (`--history`), oldest first."""

    @property
    def error_rate(self) -> float:
        return error_rate(self.stats)

    @property
    def shares(self) -> dict[str, float]:
        return code_shares(self.stats)

    @property
    def failed(self) -> list[Gate]:
        return [gate for gate in self.gates if gate.exceeded]

    @property
    def passed(self) -> bool:
        return not self.failed


@dataclass(slots=True, frozen=True)
class BlockAudit:
    """One block's share of an audit: its stats and its first rows of each code."""

    stats: Stats
    samples: dict[str, list[Sample]]


@dataclass(frozen=True, slots=True)
class AuditBlocks:
    """The audit of one block, as the engine runs it (a `BlockTask`): picklable."""

    source: Source
    format: Format
    config: Config
    batch_size: int
    samples: int
    batch_bytes: int = DEFAULT_BATCH_BYTES

    def __call__(self, block: Block, progress: Callable[[int], None] | None = None) -> BlockAudit:
        from transcript_clean.engine.local import cleaned_batches

        stats = Stats()
        collector = SampleCollector(self.samples)
        collector.source = block.part.name
        on_row = collector if self.samples else None
        # The verdicts worked out ahead, as `clean` does: the same rows, `first_row`s and
        # verdicts as a cleaning run's block.
        for cleaned, verdicts, row in cleaned_batches(block, self, on_row):
            if self.samples and verdicts is not None:
                collector.settled(cleaned.table, verdicts, row)
            collector.batch += 1
            stats.merge(cleaned.stats)
            if progress is not None:
                progress(cleaned.table.num_rows)
        return BlockAudit(stats, collector.samples(self.format, self.config))


def audit(
    source: str | os.PathLike[str] | Source | SourceOptions,
    *,
    config: Config | str | os.PathLike[str] | None = None,
    samples: int = DEFAULT_SAMPLES,
    baseline: str | os.PathLike[str] | Baseline | None = None,
    max_error_rate: float | None = None,
    max_share: Mapping[str, float] | None = None,
    max_drift: float | None = None,
    max_profile_drift: Sequence[DriftLimit] = (),
    history: str | os.PathLike[str] | None = None,
    stats_out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    engine: EngineOptions | Engine = "local",
    rows_per_block: int | None = None,
    progress: Callable[[int], None] | None = None,
    on_start: Callable[[Source, Format, int | None], None] | None = None,
    pool: ProcessPoolExecutor | None = None,
    chat_template: str | os.PathLike[str] | None = None,
    arguments_as: str | None = None,
    **options: Any,
) -> AuditResult:
    """Audit `source`: the stats `clean` would report for it, without writing data.

    `max_error_rate`, `max_share` (code -> limit) and `max_drift` (needs `baseline`) are gates,
    fractions of the rows in; `max_profile_drift` gates the profile's figures against the
    baseline's (`audit.profile_drift`); `result.failed` lists the ones exceeded. `history` is
    a folder of earlier summary.json files (or an OUTPUT) whose headline figures the HTML
    report draws across nights. `stats_out` gets
    stats.parquet, stats.csv and summary.json. Everything that can fail before the run (config,
    baseline, outputs) fails first.

    `source`, `engine` and `options` are as for `clean` (format, column, split, subset, revision,
    streaming, batch_size, limit; workers, ray_address); so is `pool`. The blocks are a cleaning
    run's (`rows_per_block`, by default `clean`'s rows per shard, or with a chat template a few
    per worker: `audit_rows_per_block`); a smaller one spreads a small input over more
    workers. The stats and samples are the same for any engine, workers
    and blocks. `chat_template` and `arguments_as` are as for `clean`.

        >>> audit("raw/", config="strict", max_error_rate=0.05).passed  # doctest: +SKIP
    """
    from transcript_clean.engine.local import plan_blocks

    started = time.perf_counter()
    read, run = split_options(source, engine, options)
    unknown = sorted(set(max_share or {}) - set(codes()))
    if unknown:
        raise ValueError(unknown_code(unknown[0]))
    if (max_drift is not None or max_profile_drift) and baseline is None:
        raise ValueError("max_drift needs a baseline")
    if samples < 0:
        raise ValueError("samples must be at least 0")
    cfg = config if isinstance(config, Config) else load_config(config)
    cfg = replace(cfg, max_row_bytes=read.max_row_bytes)
    if chat_template is not None or arguments_as is not None:
        from transcript_clean.policy import with_template

        cfg = with_template(cfg, os.fspath(chat_template) if chat_template else None, arguments_as)
    base = (
        baseline
        if baseline is None or isinstance(baseline, Baseline)
        else load_baseline(baseline, read.storage_options)
    )
    if max_profile_drift and base is not None and base.profile is None:
        raise BaselineError(
            f"baseline {base.path}: it has no profile (written before profiles were), so the "
            "profile's figures cannot be compared"
        )
    nights = load_history(history) if history is not None else []
    src = read.open()
    with contextlib.ExitStack() as held:  # the stats folder's lock
        still_locked: Callable[[], None] = _kernel_lock
        if stats_out is not None:
            if is_remote(os.fspath(stats_out)):
                from transcript_clean.remote_output import store_lock

                # the lock a clean into it takes, `_temporary/lock`, held to the stats' last file
                store = _check_stats_store(os.fspath(stats_out), read.storage_options, overwrite)
                still_locked = held.enter_context(store_lock(store))
                _check_stats_store(store.uri, read.storage_options, overwrite)  # still free
            else:
                _check_stats_out(Path(stats_out), src, overwrite)
                held.enter_context(_stats_lock(Path(stats_out)))
                _check_stats_out(Path(stats_out), src, overwrite)  # under the lock: still free
        fmt = read.format_of(src)
        cfg = for_format(cfg, fmt)  # what `auto` does for these rows, recorded in the summary
        if on_start is not None:
            on_start(src, fmt, read.rows_total(src))

        size = audit_rows_per_block(rows_per_block, cfg, run, read.rows_total(src))
        blocks = plan_blocks(src, size, read.limit)
        task = AuditBlocks(src, fmt, cfg, read.batch_size, samples, read.batch_bytes)
        stats = Stats()
        audited = list(_run(task, blocks, run, progress, pool))
        for block in audited:
            stats.merge(block.stats)
        stats.check()

        drift = compute_drift(base.shares, code_shares(stats)) if base is not None else None
        gates = share_gates(stats, max_error_rate, max_share or {})
        if max_drift is not None and drift is not None:
            gates.append(drift_gate(drift, max_drift))
        summary = _summary(src, fmt, cfg, stats, read.limit, time.perf_counter() - started)
        moved = None
        if base is not None and base.profile is not None:
            moved = compute_profile_drift(base.profile, summary["profile"])
            gates += profile_gates(moved, max_profile_drift)
        picked = merge_samples((block.samples for block in audited), samples)
        result = AuditResult(summary, stats, picked, base, drift, gates, moved, nights)
        if stats_out is not None:
            # Under the lock nothing else has written there since the check: `overwrite` as given.
            stored = read.storage_options
            still_locked()
            write_stats(result, stats_out, overwrite=overwrite, storage_options=stored)
        return result


RENDERED_BLOCKS_PER_LANE: Final = 3
"""With a chat template, the blocks an audit's rows are cut into per worker process (Ray: per
CPU of this machine)."""
MIN_RENDERED_BLOCK: Final = 100
"""Nor fewer rows in a block than this, whose own cost (its sample rows cleaned again, its
stats) is then small beside its rows'."""


def audit_rows_per_block(
    given: int | None, cfg: Config, run: EngineOptions, rows: int | None
) -> int:
    """The rows of an audit's blocks: `given`, else a cleaning run's rows per shard. With a chat
    template a row costs a hundred times more (its render and tokens: tens of milliseconds for
    an agent trace), and a block of 100,000 rows runs for an hour on one CPU, the other workers
    idle: then the `rows` are cut into `RENDERED_BLOCKS_PER_LANE` blocks per worker process or
    CPU, that each renders a share and none waits long for the last. The stats and samples are
    the same for any blocks."""
    if given is not None:
        return given
    lanes = (os.cpu_count() or 1) if run.engine == "ray" else run.workers
    if cfg.chat_template is None or rows is None or lanes <= 1:
        return DEFAULT_ROWS_PER_SHARD
    share = -(-rows // (lanes * RENDERED_BLOCKS_PER_LANE))
    return min(DEFAULT_ROWS_PER_SHARD, max(MIN_RENDERED_BLOCK, share))


def _kernel_lock() -> None:
    """The check of a local folder's lock: a `flock`, which no other run takes while this one
    lives."""


@contextlib.contextmanager
def _stats_lock(folder: Path) -> Iterator[None]:
    """The lock a `clean` into `folder` takes (`output.output_lock`), held from the check of the
    stats folder to its last file: a clean of that folder and this audit never both write it.
    The partial folder it makes is removed after, unless a run's leftovers are in it."""
    from transcript_clean.output import LOCK, output_lock, partial_folder

    if folder.absolute().name in ("", ".."):  # `/`: no folder can be made beside it
        raise OutputError(
            f"{option('stats_out', str(folder))} has no name of its own: give a folder's path"
        )
    work = partial_folder(folder.absolute())
    with output_lock(work):
        try:
            yield
        finally:
            if [path.name for path in work.iterdir()] == [LOCK]:
                with contextlib.suppress(OSError):  # only tidying: a later run takes it as new
                    (work / LOCK).unlink()
                    work.rmdir()


def _run(
    task: AuditBlocks,
    blocks: list[Block],
    run: EngineOptions,
    progress: Callable[[int], None] | None,
    pool: ProcessPoolExecutor | None,
) -> Iterator[BlockAudit]:
    """Each block's audit, in input order, on the engine `run` names."""
    if run.engine == "ray":
        from transcript_clean.engine.ray import map_blocks_on_ray

        done: dict[int, BlockAudit] = {}
        for index, audited in map_blocks_on_ray(task, blocks, address=run.ray_address):
            done[index] = audited
            if progress is not None:
                progress(audited.stats.rows_in)
        yield from (done[block.index] for block in blocks)
        return
    from transcript_clean.engine.local import map_blocks

    mapped = map_blocks(
        task,
        blocks,
        rows=lambda audited: audited.stats.rows_in,
        workers=run.workers,
        progress=progress,
        pool=pool,
    )
    yield from (audited for _, audited in mapped)


def _summary(
    src: Source, fmt: Format, cfg: Config, stats: Stats, limit: int | None, seconds: float
) -> dict[str, Any]:
    """A clean run's summary.json keys, plus the audit's own measures."""
    return run_summary(
        stats,
        source=src.name,
        format=fmt.name,
        column=fmt.column,
        config=cfg.to_dict(),
        fingerprint=src.fingerprint(),
        seconds=seconds,
        shape=getattr(fmt, "shape", None),
        command="audit",
        limit=limit,
        rows_with_violations=stats.rows_with_violations,
        error_rate=error_rate(stats),
        code_shares=code_shares(stats),
        audited_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


# ---------------------------------------------------------------------------------------------
# the stats files


def _check_stats_out(folder: Path, src: Source, overwrite: bool) -> None:
    """Refuse a folder inside the source (its stats.parquet would be read as data next time), a
    file, or a folder whose stats files `overwrite` does not allow replacing. Other files in the
    folder are left alone."""
    out = folder.resolve()  # `..` and links resolved on both sides: where it really lands
    for root in src.local_roots():
        root = root.resolve()
        if out == root or out.is_relative_to(root):
            raise OutputError(
                f"{option('stats_out', str(folder))} is inside the source {root}: choose another"
            )
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{option('stats_out', str(folder))} exists and is a file")
    present = [name for name in STATS_FILES if (folder / name).exists()]
    if present and not overwrite:
        raise OutputError(
            f"{option('stats_out', str(folder))} already holds {', '.join(present)}: pass "
            f"{option('overwrite')} to replace them"
        )


def _check_stats_store(uri: str, options: Mapping[str, Any], overwrite: bool) -> Store:
    """`_check_stats_out` for a folder on an object store (`s3://...`)."""
    try:
        store = open_store(uri, options)
        present = [name for name in STATS_FILES if store.exists(name)]
    except (StorageError, OSError) as err:
        raise OutputError(f"{option('stats_out', uri)}: {err}") from None
    if present and not overwrite:
        raise OutputError(
            f"{option('stats_out', uri)} already holds {', '.join(present)}: pass "
            f"{option('overwrite')} to replace them"
        )
    return store


def write_stats(
    result: AuditResult,
    folder: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """stats.parquet, stats.csv and summary.json, as a cleaning run writes them; into a local
    folder, or one on an object store (each file written whole, summary.json last)."""
    if is_remote(os.fspath(folder)):
        store = _check_stats_store(os.fspath(folder), storage_options or {}, overwrite)
        with tempfile.TemporaryDirectory(prefix="transcript-clean-stats-") as local:
            write_stats(result, local)
            try:
                if store.exists("summary.json"):  # gone first, as below
                    store.delete(["summary.json"])
                for name in STATS_FILES:  # summary.json, the one a baseline reads first, last
                    store.put(Path(local) / name, name)
            except OSError as err:
                raise OutputError(
                    f"cannot write {option('stats_out', str(folder))}: {err}"
                ) from None
        return
    out = Path(folder)
    present = [name for name in STATS_FILES if (out / name).exists()]
    if present and not overwrite:
        raise OutputError(f"{out} already holds {', '.join(present)}: pass {option('overwrite')}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot create {out}: {err}") from err
    # The old summary.json goes first, the new one comes last: a run killed between them leaves
    # no summary.json beside another night's stats, for a baseline to read as tonight's.
    (out / "summary.json").unlink(missing_ok=True)
    write_table_atomic(out / "stats.parquet", result.stats.table())
    write_text_atomic(out / "stats.csv", result.stats.csv())
    write_text_atomic(out / "summary.json", json.dumps(result.summary, indent=2) + "\n")
