"""Worker processes for `--workers N`, started before the cleaner is imported.

A new worker spends its start importing pyarrow and the cleaner. Started first thing, it does
that while this process does the same, and is ready when the first block is: on a short run
that is most of the time a second worker can save (docs/performance.md). This module
imports nothing heavy itself, so starting workers costs this process next to nothing.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

__all__ = ["start_workers"]


def start_workers(count: int) -> ProcessPoolExecutor:
    """`count` worker processes, starting now; each imports the engine as soon as it is up.

    `spawn`: a forked child would inherit Arrow's thread pools mid-flight. The caller shuts the
    pool down (it is a context manager), after handing it to `run_blocks` as `pool`.
    """
    pool = ProcessPoolExecutor(max_workers=count, mp_context=get_context("spawn"))
    for _ in range(count):
        pool.submit(_import_engine)
    return pool


def _import_engine() -> None:
    import transcript_clean.engine.local  # noqa: F401
