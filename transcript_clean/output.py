"""The output folder of a run: the checks before it is made, the lock that keeps one run per
OUTPUT, the partial folder a run works in, the accounting from the files, and the final rename.

A run writes into `OUTPUT.partial/`, under an exclusive lock held from before anything is
changed until that folder is gone, and moves the finished layout into place at the end, so a
killed run never leaves an OUTPUT that looks complete. docs/robustness.md says what each moment
of a kill leaves behind, and what the next run does with it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from transcript_clean.errors import OutputError, option
from transcript_clean.finish import (
    SHARD_FOLDERS,
    attempts_seconds,
    check_accounting,
    count_shards,
    empty_folders,
    shard_layout,
    write_empty_shard,
    write_run_files,
)
from transcript_clean.sinks import OutputFormat, write_text_atomic
from transcript_clean.sources import Source
from transcript_clean.stats import Stats

__all__ = [
    "LOCK",
    "RUN_FILES",
    "blocks_done",
    "check_accounting",
    "check_files",
    "check_free",
    "check_output",
    "check_output_name",
    "earlier_seconds",
    "finalize",
    "finished_run",
    "output_lock",
    "partial_folder",
    "prepare",
    "remove_partial",
]


def partial_folder(out: Path) -> Path:
    """Where a run on OUTPUT writes until it is done: `OUTPUT.partial/`."""
    return out.with_name(out.name + ".partial")


def _aside(out: Path) -> Path:
    """Where the OUTPUT that `--overwrite` replaces waits until the new one is in place."""
    return out.with_name(out.name + ".old")


_FILE_SUFFIXES = (".parquet", ".pq", ".arrow", ".csv", ".tsv", ".jsonl", ".ndjson", ".json")


def check_output_name(output: str) -> None:
    """Refuse an OUTPUT named like a data file (`cleaned.jsonl`), unless it ends in `/` or is a
    folder already: OUTPUT is a folder of shards and stats, and a folder named as a file, made
    without a word, is a surprise for whatever reads it next. The shards' format is
    `--output-format`'s, never the name's."""
    bare = output.rstrip("/" + os.sep)
    if bare != output or not bare:
        return  # `cleaned.jsonl/`: a folder of that name, asked for
    name = bare.rsplit("/", 1)[-1].rsplit(os.sep, 1)[-1]
    if not name.removesuffix(".gz").removesuffix(".zst").endswith(_FILE_SUFFIXES):
        return
    if "://" not in output and Path(output).is_dir():
        return  # a folder an earlier run made: --overwrite and --resume go on as asked
    stem = name.split(".", 1)[0] or "cleaned"
    jsonl = ", with --output-format jsonl for JSON Lines shards" if ".json" in name else ""
    raise OutputError(
        f"OUTPUT {output} looks like a file name, but OUTPUT is a folder (data/, rejects/, the "
        f"stats, summary.json, README.md): name a folder such as {stem}/{jsonl}; end the name "
        "with / to make a folder of this name"
    )


def check_output(out: Path, src: Source) -> None:
    """Refuse, before anything is made, an OUTPUT this run must not write: one inside the
    source, or holding it (symbolic links followed), a file, a symbolic link, or a path without
    a folder's name of its own (`/`, `..`), beside which no partial folder can be made."""
    if out.name in ("", ".", ".."):
        raise OutputError(
            f"OUTPUT {out} has no name of its own (the root, or ..): a run replaces OUTPUT as a "
            "whole, from a folder beside it; give the path of a folder for the output"
        )
    for path in (out, partial_folder(out), _aside(out)):
        if path.is_symlink():
            raise OutputError(
                f"{path} is a symbolic link (to {path.readlink()}): give the real folder's path; "
                "a run replaces OUTPUT as a whole and will not do it through a link"
            )
    real = out.resolve()
    for root in src.local_roots():
        root = root.resolve()
        if real == root or real.is_relative_to(root):
            raise OutputError(f"OUTPUT {out} is inside the source {root}: choose another folder")
        if root.is_relative_to(real):
            raise OutputError(f"the source {root} is inside OUTPUT {out}: choose another folder")
    if out.exists() and not out.is_dir():
        raise OutputError(f"OUTPUT {out} exists and is a file")


RUN_FILES = frozenset(
    ("data", "rejects", "stats.parquet", "stats.csv", "summary.json", "profile.json", "README.md")
)
"""What a run's OUTPUT holds (an `audit --stats-out` folder holds three of them)."""


def check_free(out: Path, overwrite: bool) -> None:
    """Refuse an OUTPUT that holds anything, but with `overwrite` an earlier run's OUTPUT: one
    with its `summary.json` and nothing a run does not write. `--overwrite` replaces OUTPUT as
    a whole, so a folder that never held an output (a typo, a home folder) is never emptied."""
    if not out.is_dir():
        return
    names = sorted(path.name for path in out.iterdir())
    if not names:
        return
    if not overwrite:
        raise OutputError(
            f"OUTPUT {out} exists and is not empty: pass {option('overwrite')} to replace it"
        )
    foreign = [name for name in names if name not in RUN_FILES]
    if foreign or "summary.json" not in names:
        held = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if foreign[3:] else "")
        why = f"it holds {held}" if foreign else "it has no summary.json"
        raise OutputError(
            f"OUTPUT {out} does not look like the OUTPUT of an earlier run ({why}): "
            f"{option('overwrite')} replaces only that; choose another folder, or empty this one "
            "yourself"
        )


# ---------------------------------------------------------------------------------------------
# the lock: one run per OUTPUT

LOCK = "lock"
"""The lock file in the partial folder; it holds who has the lock, as JSON."""


@contextmanager
def output_lock(work: Path) -> Iterator[None]:
    """Hold the lock of `work` (the partial folder, made if need be) until the block ends.

    An exclusive `flock` on `work/lock`, which the kernel drops when its process ends, however
    it ends: a lock file left by a killed run is simply taken. Another run holding it is an
    `OutputError` naming it (pid, host, start time). Local file systems only: over NFS, `flock`
    may lock nothing.
    """
    out = work.with_name(work.name.removesuffix(".partial"))
    while True:
        fd = _open_lock(work, out)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise OutputError(
                f"another run is writing OUTPUT {out} ({holder}): wait for it to end, or stop it "
                f"first; a run can then finish it with {option('resume')}"
            ) from None
        # A run that just finished removes its lock file, and this may have been that file:
        # only the file that is at the path now counts.
        try:
            current = os.stat(work / LOCK)
        except FileNotFoundError:
            current = None
        mine = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)
    try:
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        yield
    finally:
        os.close(fd)  # lets go of the lock


def _open_lock(work: Path, out: Path) -> int:
    """The lock file, opened (made if need be) and never through a link: a symbolic link
    planted at its path would have the run write into the link's target, and a hard link
    (or anything but a plain file) is refused for the same reason."""
    if work.is_symlink():
        raise OutputError(
            f"{work} is a symbolic link (to {work.readlink()}): a run works only in a folder of "
            "its own; remove the link"
        )
    try:
        work.mkdir(parents=True, exist_ok=True)
        fd = os.open(work / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OutputError(
                f"the lock file {work / LOCK} is a symbolic link: a run writes its lock only "
                "into a file of its own; remove the link"
            ) from None
        reason = err.strerror or err
        raise OutputError(f"cannot write OUTPUT {out}: {reason} ({work})") from None
    made = os.fstat(fd)
    if not stat.S_ISREG(made.st_mode) or made.st_nlink > 1:
        os.close(fd)
        raise OutputError(
            f"the lock file {work / LOCK} is not a plain file of its own (a hard link, or a "
            "device): a run writes its lock only into a file of its own; remove it"
        )
    return fd


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says: "pid 1234 on host, started 2026-..."."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0))
        return f"pid {holder['pid']} on {holder['host']}, started {holder['started']}"
    except (OSError, ValueError, KeyError, TypeError):  # it has just taken it, and not yet said
        return "a run that is just starting"


# ---------------------------------------------------------------------------------------------
# the partial folder: made, resumed, finished and removed under the lock


def prepare(work: Path, identity: dict[str, Any], *, resume: bool, overwrite: bool) -> None:
    """Make `work` ready for this run: as it is when resuming the same run, emptied with
    `overwrite`. A folder without the run's record and no block done (a run killed as it made
    it) holds nothing to resume: it is emptied."""
    marker = work / "run.json"
    if not marker.exists() and not blocks_done(work):
        _empty(work)  # made by a run killed, or failing, before it had done anything
    if any(path.name != LOCK for path in work.iterdir()):
        if resume:
            previous = json.loads(marker.read_text(encoding="utf-8")) if marker.exists() else None
            _check_same_output(work, previous, identity)
            if previous != identity:
                raise OutputError(
                    f"{work} was left by a different run (other input, config or options): "
                    f"run again without {option('resume')} and with {option('overwrite')} to "
                    "start over"
                )
        elif overwrite:
            _empty(work)
        else:
            raise OutputError(
                f"{work} was left by a run that did not finish: pass {option('resume')} to "
                f"finish it, or {option('overwrite')} to start over"
            )
    if not marker.exists():
        write_text_atomic(marker, json.dumps(identity, indent=2, sort_keys=True))


def _check_same_output(
    work: Path, previous: dict[str, Any] | None, identity: dict[str, Any]
) -> None:
    """Refuse, naming both, to resume a run in another output format or compression: its
    shards would be mixed with this one's."""
    if previous is None or "output" not in identity:
        return
    before, now = previous.get("output", ["parquet", "zstd"]), identity["output"]
    if before != now:
        raise OutputError(
            f"{work} holds {before[0]} shards ({before[1]}), and this run writes {now[0]} "
            f"({now[1]}): resume with {option('output_format', before[0])} and "
            f"{option('compression', before[1])}, or run with {option('overwrite')} to start over"
        )


ATTEMPTS = "attempts.json"
"""In the partial folder: when each attempt at the run started (wall clock), so that a resumed
run's summary times the earlier attempts' work too."""


def earlier_seconds(work: Path, started: float) -> float:
    """The seconds the run's earlier attempts in `work` worked: each from its start to the last
    block it finished (a block's record is written as it finishes; what a killed attempt did
    after that is done again), so the time between a kill and `--resume` is not counted. Records
    this attempt, started at `started` (`time.time()`). 0 for a run's first attempt."""
    path = work / ATTEMPTS
    try:
        starts = [float(s) for s in json.loads(path.read_text(encoding="utf-8"))["started"]]
    except (OSError, ValueError, KeyError, TypeError):
        starts = []  # a first attempt, or one that was killed before it wrote the record
    write_text_atomic(path, json.dumps({"started": [*starts, started]}))
    blocks = work / "blocks"
    finished = [p.stat().st_mtime for p in blocks.iterdir()] if blocks.is_dir() else []
    return attempts_seconds([*starts, started], finished)


def blocks_done(work: Path) -> bool:
    blocks = work / "blocks"
    return blocks.is_dir() and any(blocks.iterdir())


def _empty(work: Path, keep: tuple[str, ...] = (LOCK,)) -> None:
    """Remove everything in `work` but `keep`: the lock, which this run holds, by default."""
    for path in work.iterdir():
        if path.name in keep:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def remove_partial(work: Path, out: Path) -> None:
    """Remove `work` and what `--overwrite` set aside. The records go last, the lock file, still
    held, after them: a run killed on the way leaves what tells the next one OUTPUT is done."""
    try:
        if _aside(out).exists() and out.exists():  # only once the new OUTPUT is in its place
            shutil.rmtree(_aside(out))
        _empty(work, keep=(LOCK, "run.json", FINISHED))
        for name in ("run.json", FINISHED, LOCK):
            (work / name).unlink(missing_ok=True)
        work.rmdir()
    except OSError as err:
        raise OutputError(f"cannot remove {work}: {err.strerror or err}") from None


FINISHED = "final.json"
"""Written into the partial folder just before `final/` becomes OUTPUT: which folder that is
(a rename keeps its inode), and the run's stats."""


def finished_run(
    work: Path, out: Path, identity: dict[str, Any]
) -> tuple[Stats, dict[str, Any]] | None:
    """The stats and summary of this very run if it already put OUTPUT in place and was killed
    before it removed the partial folder; None otherwise."""
    try:
        finished = json.loads((work / FINISHED).read_text(encoding="utf-8"))
        now = os.stat(out)
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        marker = work / "run.json"  # removed first when it tidies up
        previous = json.loads(marker.read_text(encoding="utf-8")) if marker.exists() else identity
    except (OSError, ValueError):
        return None
    if previous != identity or finished["folder"] != [now.st_dev, now.st_ino]:
        return None
    return Stats.from_dict(finished["stats"]), summary


def check_files(
    work: Path, shards: list[str], stats: Stats, output: OutputFormat | None = None
) -> dict[tuple[str, str], int]:
    """`finish.count_shards` on the partial folder: the rows in the shards written, read back as
    a reader reads them (`OutputFormat.rows`), against the rows counted; a block whose shards
    disagree, or cannot be read, loses its marker, for `--resume` to clean it again. Returns
    the rows of each (folder, shard)."""
    fmt = output or OutputFormat()

    def marker(name: str) -> Path:
        return work / "blocks" / f"{name.removeprefix('part-').split('.')[0]}.json"

    def record(name: str) -> Stats:
        return Stats.from_dict(json.loads(marker(name).read_text(encoding="utf-8")))

    return count_shards(
        shards,
        record,
        lambda folder, name: fmt.rows(work / folder / name),
        lambda name: marker(name).unlink(missing_ok=True),
        stats,
        str(work),
    )


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def finalize(
    work: Path,
    out: Path,
    src: Source,
    shards: list[str],
    stats: Stats,
    summary: dict[str, Any],
    overwrite: bool,
    output: OutputFormat | None = None,
) -> None:
    """Check the shards' rows (`check_files`), lay out OUTPUT in `work/final` (hard links to the
    block shards that hold rows, numbered from 0, and `finish.RUN_FILES`) and move it into
    place. `remote_output.publish` does the same on an object store."""
    output = output or OutputFormat()
    rows = check_files(work, shards, stats, output)
    final = work / "final"
    try:
        if final.exists():
            shutil.rmtree(final)
        for folder in SHARD_FOLDERS:
            (final / folder).mkdir(parents=True)
        layout = shard_layout(shards, rows, output)
        for folder, name, final_name in layout:
            _link(work / folder / name, final / folder / final_name)
        for folder in empty_folders(layout):
            write_empty_shard(final, folder, src.schema, output)
        write_run_files(final, src.schema, stats, summary, output)
        made = os.stat(final)
        finished = {"folder": [made.st_dev, made.st_ino], "stats": stats.to_dict()}
        write_text_atomic(work / FINISHED, json.dumps(finished))

        aside = _aside(out)
        if out.exists():
            if not overwrite and any(out.iterdir()):
                raise OutputError(f"OUTPUT {out} appeared while the run went on: not replacing it")
            check_free(out, overwrite)  # what appeared meanwhile must be a run's, too
            if aside.exists():
                shutil.rmtree(aside)
            out.rename(aside)
            final.rename(out)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            final.rename(out)
    except OSError as err:
        raise OutputError(f"cannot write OUTPUT {out}: {err.strerror or err}") from None
