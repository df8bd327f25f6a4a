"""The process a run works in, set up before it starts: the other workers' processes started
first, and pandas kept out where nothing needs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from transcript_clean.options import EngineOptions, SourceOptions


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
