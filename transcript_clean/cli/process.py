"""The process a run works in, set up before it starts: the other workers' processes started
first, the cyclic collector paused while the program is imported, and pandas kept out where
nothing needs it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from transcript_clean.options import EngineOptions, SourceOptions


_importing = False


def pause_collector() -> None:
    """Pause the cyclic garbage collector while the program is imported (`cli.entry`): the
    imports make tens of thousands of objects (modules, classes, the dataclasses' methods) and
    no garbage, which its collections would walk again and again, about 15 ms of a short run
    (docs/performance.md)."""
    global _importing
    if gc.isenabled():
        gc.disable()
        _importing = True


def imported() -> None:
    """The command's modules are imported: what they made is frozen out of the collector's
    walks for good, and the collector works again. Does nothing unless `pause_collector`
    paused it, as when a command is invoked in a process of the caller's own."""
    if _importing:
        gc.freeze()
        resume_collector()


def resume_collector() -> None:
    """The collector `pause_collector` paused works again (a command that stopped before its
    imports were done)."""
    global _importing
    if _importing:
        _importing = False
        gc.enable()


@contextmanager
def workers(engine: EngineOptions) -> Iterator[ProcessPoolExecutor | None]:
    """The other workers' processes for `--workers N` on the local engine, started first thing:
    they import the cleaner while this process does."""
    if engine.workers <= 1 or engine.engine != "local":
        yield None
        return
    from transcript_clean.engine.workers import start_workers

    with start_workers(engine.workers - 1, "transcript_clean.engine.local") as pool:
        yield pool


def without_pandas(read: SourceOptions, engine: EngineOptions) -> None:
    """For a source read in this process without `datasets`, pandas kept out of the process
    (see `transcript_clean.pandas_free`): before the source is opened, as opening a JSON file
    converts rows already (its open pass)."""
    from transcript_clean.sources import reads_itself

    if engine.engine != "ray" and isinstance(read.spec, str) and reads_itself(read.spec):
        from transcript_clean.pandas_free import keep_pandas_out

        keep_pandas_out()
