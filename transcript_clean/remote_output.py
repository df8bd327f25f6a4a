"""OUTPUT on an object store (`s3://`, `gs://`, ...): the commit protocol of a store that has no
rename, as `output` is that of a local folder.

A run works under `OUTPUT/_temporary/`: `lock`, `run.json` (what run this is), and per block
`data/part-k.parquet`, `rejects/part-k.parquet` and then `blocks/k.json`, its stats, which marks
it done. Each block is cleaned into a local temporary folder by whoever runs it (this process, a
worker process, a Ray task on another machine) and uploaded from there: nothing local is shared.
At the end the run checks the shards' row counts, deletes the `_SUCCESS` of an OUTPUT it
replaces, then the rest of that OUTPUT, copies the shards to their final names, writes the files
a local run writes beside them (`finish.write_run_files`: the stats, `profile.json`, the card and
`summary.json`), and writes `OUTPUT/_SUCCESS` last: an OUTPUT without `_SUCCESS` is not
complete, whatever else it holds. `_temporary/` goes after it, its lock last.

The lock is `_temporary/lock`, made by a conditional create (`If-None-Match: *` on S3, a
generation precondition on GCS): of two runs, one makes it and the other is told who holds it.
A store's lock is not dropped by the kernel when its run dies, so its holder rewrites it every
`LOCK_REFRESH` seconds, and a lock is stale, and taken over, when its run is a process of this
machine that is gone, or when it has not been rewritten for `LOCK_STALE` seconds.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from transcript_clean.engine.local import Block, BlockJob, run_block
from transcript_clean.errors import OutputError, option
from transcript_clean.finish import (
    attempts_seconds,
    count_shards,
    empty_folders,
    shard_layout,
    write_empty_shard,
    write_run_files,
)
from transcript_clean.sinks import OutputFormat
from transcript_clean.sources import Source
from transcript_clean.stats import Stats
from transcript_clean.storage import Store

__all__ = [
    "LOCK",
    "SUCCESS",
    "TEMPORARY",
    "StoredBlockJob",
    "check_store_free",
    "check_store_output",
    "finished_store_run",
    "prepare_store",
    "publish",
    "remove_temporary",
    "store_blocks_done",
    "store_lock",
]

TEMPORARY = "_temporary"
LOCK = f"{TEMPORARY}/lock"
RUN = f"{TEMPORARY}/run.json"
FINISHED = f"{TEMPORARY}/final.json"
ATTEMPTS = f"{TEMPORARY}/attempts.json"
"""When each attempt at the run started, by the store's clock: see `earlier_store_seconds`."""
SUCCESS = "_SUCCESS"
"""Written last into a finished OUTPUT: without it, an OUTPUT is not complete."""

LOCK_REFRESH = 30.0
LOCK_STALE = 300.0


def record_name(index: int) -> str:
    """The block record that marks block `index` done."""
    return f"{TEMPORARY}/blocks/{index:05d}.json"


@dataclass(frozen=True, slots=True)
class StoredBlockJob:
    """A `BlockJob` whose shards go to a store: picklable, and run wherever a block is run.

    The block is cleaned into a local temporary folder of the machine running it, its shards
    uploaded to `_temporary/` and then its record, which marks it done; only its stats come
    back."""

    job: BlockJob
    store: Store

    @property
    def source(self) -> Source:
        return self.job.source

    def __call__(self, block: Block, progress: Callable[[int], None] | None = None) -> Stats:
        with tempfile.TemporaryDirectory(prefix="transcript-clean-block-") as folder:
            local = Path(folder)
            stats = run_block(replace(self.job, workdir=local), block, progress)
            name = self.job.output.shard_name(block.index)
            try:
                for kind in ("data", "rejects"):
                    self.store.put(local / kind / name, f"{TEMPORARY}/{kind}/{name}")
                self.store.write_text(record_name(block.index), json.dumps(stats.to_dict()))
            except OSError as err:
                raise OutputError(f"cannot write {self.store.url(TEMPORARY)}: {err}") from err
        return stats


def store_blocks_done(store: Store, blocks: list[Block]) -> dict[int, Stats]:
    """The stats of the blocks a killed run finished, by index."""
    done = set(store.files(f"{TEMPORARY}/blocks"))
    return {
        block.index: Stats.from_dict(json.loads(store.read_text(record_name(block.index))))
        for block in blocks
        if record_name(block.index) in done
    }


# ---------------------------------------------------------------------------------------------
# the checks before anything is made


def check_store_output(store: Store, src: Source) -> None:
    """Refuse an OUTPUT inside the source, or holding it."""
    source = src.name.rstrip("/") + "/"
    out = store.uri.rstrip("/") + "/"
    if source.startswith(out) or out.startswith(source):
        raise OutputError(f"OUTPUT {store.uri} and the source {src.name} overlap: choose another")


def check_store_free(store: Store, overwrite: bool) -> None:
    """Refuse an OUTPUT that holds objects, but with `overwrite` one that holds only what a run
    writes (`output.RUN_FILES`, `_SUCCESS`, `_temporary/`), complete or not: `--overwrite`
    deletes OUTPUT whole, so a prefix that never held an output is never emptied."""
    from transcript_clean.output import RUN_FILES

    found = [name for name in store.files() if not name.startswith(f"{TEMPORARY}/")]
    if not found:
        return
    if overwrite:
        foreign = sorted(
            name for name in found if name.split("/", 1)[0] not in RUN_FILES | {SUCCESS}
        )
        if foreign:
            more = f" and {len(foreign) - 3} more" if foreign[3:] else ""
            raise OutputError(
                f"OUTPUT {store.uri} does not look like the OUTPUT of an earlier run (it holds "
                f"{', '.join(foreign[:3])}{more}): {option('overwrite')} replaces only that; "
                "choose another place"
            )
        return
    if SUCCESS in found:
        raise OutputError(
            f"OUTPUT {store.uri} exists and is not empty: pass {option('overwrite')} to replace it"
        )
    raise OutputError(
        f"OUTPUT {store.uri} holds objects but no {SUCCESS}, so it is not a complete run "
        f"(one killed as it wrote it, or something else): pass {option('overwrite')} to "
        "replace it"
    )


# ---------------------------------------------------------------------------------------------
# the lock


@contextmanager
def store_lock(store: Store) -> Iterator[Callable[[], None]]:
    """Hold the lock of OUTPUT `store` until the block ends; yields a check that raises
    `OutputError` if another run has taken it over meanwhile (this one stalled past
    `LOCK_STALE`)."""
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
    me["run"] = uuid.uuid4().hex
    data = json.dumps(me).encode()
    try:
        if not store.create(LOCK, data):
            holder = _lock_holder(store)
            if holder is not None and not _stale(store, holder):
                raise OutputError(
                    f"another run is writing OUTPUT {store.uri} ({_describe(holder)}): wait for "
                    f"it to end, or stop it first; a run can then finish it with "
                    f"{option('resume')}"
                )
            store.delete([LOCK])  # its run is gone: taken over
            if not store.create(LOCK, data):
                raise OutputError(
                    f"another run took the lock of OUTPUT {store.uri} just now: stop it first"
                )
    except OSError as err:
        raise OutputError(f"cannot write OUTPUT {store.uri}: {err}") from err
    stop = threading.Event()
    lost: list[str] = []

    def refresh() -> None:
        while not stop.wait(LOCK_REFRESH):
            try:
                holder = _lock_holder(store)
                if holder is None or holder.get("run") != me["run"]:
                    lost.append(_describe(holder) if holder else "nobody")
                    return
                store.write_bytes(LOCK, data)
            except OSError:  # the store unreachable a moment: the next time will do
                continue

    def check() -> None:
        if lost:
            raise OutputError(
                f"this run stalled and lost the lock of OUTPUT {store.uri} (now {lost[0]}): "
                "not writing OUTPUT"
            )

    thread = threading.Thread(target=refresh, name="transcript-clean-lock", daemon=True)
    thread.start()
    try:
        yield check
    finally:
        stop.set()
        thread.join()
        # Unlike a flock, nobody drops it for us: let go of it unless it is gone already (the
        # run removed it with `_temporary/`) or taken over.
        with suppress(OSError):  # the next run finds it stale: this process is gone by then
            holder = _lock_holder(store)
            if holder is not None and holder.get("run") == me["run"]:
                store.delete([LOCK])


def _lock_holder(store: Store) -> dict[str, Any] | None:
    """Who holds the lock, as it says; None when there is no lock, or it says nothing (its run
    had only just made it, or died making it)."""
    try:
        holder = json.loads(store.read_text(LOCK))
    except (FileNotFoundError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def _describe(holder: dict[str, Any]) -> str:
    return f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}"


def _stale(store: Store, holder: dict[str, Any]) -> bool:
    """A lock whose run is a process of this machine that is gone, or that its run has not
    rewritten for `LOCK_STALE` seconds. A pid no process can have (0 and below name process
    groups to `kill`, one past `pid_t` overflows it) is judged by the time alone."""
    pid = holder.get("pid")
    if holder.get("host") == socket.gethostname() and isinstance(pid, int) and 0 < pid < 2**31:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # alive, someone else's
    modified = store.modified(LOCK)
    return modified is not None and time.time() - modified > LOCK_STALE


# ---------------------------------------------------------------------------------------------
# the run's temporary prefix


def prepare_store(store: Store, identity: dict[str, Any], *, resume: bool, overwrite: bool) -> None:
    """Make `_temporary/` ready for this run, as `output.prepare` does the partial folder."""
    left = [name for name in store.files(TEMPORARY) if name != LOCK]
    if left and not store.files(f"{TEMPORARY}/blocks"):
        store.delete(left)  # made by a run killed before it had done anything
        left = []
    if left:
        if resume:
            previous = json.loads(store.read_text(RUN)) if RUN in left else None
            if previous != identity:
                raise OutputError(
                    f"{store.url(TEMPORARY)} was left by a different run (other input, config "
                    f"or options): run again without {option('resume')} and with "
                    f"{option('overwrite')} to start over"
                )
        elif overwrite:
            store.delete(left)
            left = []
        else:
            raise OutputError(
                f"{store.url(TEMPORARY)} was left by a run that did not finish: pass "
                f"{option('resume')} to finish it, or {option('overwrite')} to start over"
            )
    if RUN not in left:
        store.write_text(RUN, json.dumps(identity, indent=2, sort_keys=True))


def earlier_store_seconds(store: Store) -> float:
    """`output.earlier_seconds` on the store: the seconds the run's earlier attempts worked,
    each from its start to the last block record it wrote. Records this attempt's start. Both
    are the store's clock (the times it gives its objects), so a machine whose clock is off
    does not skew them; a store gives them to the second, and so is the result."""
    try:
        starts = [float(s) for s in json.loads(store.read_text(ATTEMPTS))["started"]]
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        starts = []  # a first attempt, or one that was killed before it wrote the record
    store.write_text(ATTEMPTS, json.dumps({"started": starts}))  # its time is now, the store's
    now = store.modified(ATTEMPTS)
    store.write_text(ATTEMPTS, json.dumps({"started": [*starts, now or time.time()]}))
    if not starts:
        return 0.0
    ends = [store.modified(name) for name in store.files(f"{TEMPORARY}/blocks")]
    return attempts_seconds([*starts, now or time.time()], [e for e in ends if e is not None])


def finished_store_run(
    store: Store, identity: dict[str, Any]
) -> tuple[Stats, dict[str, Any]] | None:
    """The stats and summary of this very run if it wrote `_SUCCESS` and was killed before it
    removed `_temporary/`; None otherwise."""
    try:
        if not store.exists(SUCCESS):
            return None
        finished = json.loads(store.read_text(FINISHED))
        summary = json.loads(store.read_text("summary.json"))
        previous = json.loads(store.read_text(RUN)) if store.exists(RUN) else identity
    except (OSError, ValueError):
        return None
    if previous != identity:
        return None
    return Stats.from_dict(finished["stats"]), summary


def check_store_files(
    store: Store, shards: list[str], stats: Stats, output: OutputFormat
) -> dict[tuple[str, str], int]:
    """`finish.count_shards` on the store: the rows in each shard, read back
    (`OutputFormat.rows`), against its block's record; a block whose shards disagree loses its
    record, for `--resume` to clean it again. A store that fails on the way is
    `storage.Unreachable`, not a wrong count. Returns the rows of each (folder, shard)."""

    def index(name: str) -> int:
        return int(name.removeprefix("part-").removesuffix(output.suffix))

    def record(name: str) -> Stats:
        return Stats.from_dict(json.loads(store.read_text(record_name(index(name)))))

    return count_shards(
        shards,
        record,
        lambda folder, name: store.read_with(f"{TEMPORARY}/{folder}/{name}", output.rows),
        lambda name: store.delete([record_name(index(name))]),
        stats,
        store.url(TEMPORARY),
    )


def publish(
    store: Store,
    src: Source,
    shards: list[str],
    stats: Stats,
    summary: dict[str, Any],
    still_locked: Callable[[], None],
    output: OutputFormat,
) -> None:
    """`output.finalize` on an object store: check the shards' rows (`check_store_files`), then
    lay out OUTPUT from `_temporary/`: the shards that hold rows, numbered from 0,
    `finish.RUN_FILES` (summary.json last of them), and `_SUCCESS` last. What OUTPUT held
    before goes first, its `_SUCCESS` before anything else, so that no moment leaves an old or
    half-made OUTPUT looking complete."""
    rows = check_store_files(store, shards, stats, output)
    try:
        store.write_text(FINISHED, json.dumps({"stats": stats.to_dict()}))
        still_locked()
        if store.exists(SUCCESS):
            store.delete([SUCCESS])
        store.delete([name for name in store.files() if not name.startswith(f"{TEMPORARY}/")])
        layout = shard_layout(shards, rows, output)
        for folder, name, final_name in layout:
            store.copy(f"{TEMPORARY}/{folder}/{name}", f"{folder}/{final_name}")
        with tempfile.TemporaryDirectory(prefix="transcript-clean-final-") as made:
            local = Path(made)
            for folder in empty_folders(layout):
                empty = write_empty_shard(local, folder, src.schema, output)
                store.put(empty, f"{folder}/{empty.name}")
            for path in write_run_files(local, src.schema, stats, summary, output):
                store.put(path, path.name)
        still_locked()
        store.write_bytes(SUCCESS, b"")
    except OSError as err:
        raise OutputError(f"cannot write OUTPUT {store.uri}: {err}") from err


def remove_temporary(store: Store) -> None:
    """Remove `_temporary/`: the run's record after its blocks, the lock last."""
    try:
        names = store.files(TEMPORARY)
        store.delete([name for name in names if name not in (LOCK, RUN, FINISHED)])
        store.delete([name for name in (RUN, FINISHED) if name in names])
        store.delete([LOCK])
    except OSError as err:
        raise OutputError(f"cannot remove {store.url(TEMPORARY)}: {err}") from err
