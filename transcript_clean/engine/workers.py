"""Worker processes for `--workers N`, started before the cleaner is imported.

A new worker spends its start importing pyarrow and the cleaner. Started first thing, it does
that while this process does the same, and is ready when the first block is: on a short run
that is most of the time a second worker can save (docs/performance.md). This module
imports nothing heavy itself, so starting workers costs this process next to nothing; the
caller names the module the workers import ahead (`preload`), so that this one, below the
engine, never imports it.

Ctrl-C is this process's to handle: a terminal sends it to every process of the group, and a
worker that took it would print its own KeyboardInterrupt traceback (mid-block, while waiting
for one, or while still starting). So the workers start with SIGINT blocked, and when
this process stops by an exception, Ctrl-C included, it ends them instead of waiting for their
blocks; a block a worker did not finish is not marked done, and `--resume` cleans it again.

A spawned process runs the main module again before it does anything else (as `__mp_main__`),
for the objects pickled from it. The workers run nothing of it: they take the cleaner's own
functions and values. So they start without it, and a plain script that calls `clean(...,
workers=2)`, no `if __name__ == "__main__":` guard, runs as written instead of having each
worker call `clean` again.

A process killed outright (SIGKILL) ends nothing. A worker waits for its next block on a pipe
whose writing end it holds itself, so it would wait for good, and multiprocessing's resource
tracker with it (it ends when the last process holding its pipe does). So each worker watches
the pipe its parent keeps open for it (multiprocessing's parent sentinel): when it reads end
of file, the parent is gone, and the worker ends at once.
"""

from __future__ import annotations

import importlib
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context, popen_spawn_posix, resource_tracker, spawn
from multiprocessing.context import SpawnContext, SpawnProcess
from threading import Thread
from types import FunctionType, SimpleNamespace, TracebackType
from typing import Any

__all__ = ["Workers", "start_workers"]


class Workers(ProcessPoolExecutor):
    """A process pool that, left by an exception, ends its processes at once."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        if exc_type is not None:
            self.stop()
        return super().__exit__(exc_type, exc, traceback)

    def stop(self) -> None:
        """Cancel what has not started and end the processes, whatever they are doing."""
        processes = list((self._processes or {}).values())  # shutdown forgets them
        self.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()


def start_workers(count: int, preload: str | None = None) -> Workers:
    """`count` worker processes, starting now; each imports the module `preload` (what it will
    run: `transcript_clean.engine.local`) as soon as it is up.

    Spawned, without the main module (`_context`). The caller shuts the pool down (it is a
    context manager), after handing it to `run_blocks` as `pool`.
    """
    # A spawned process keeps the signal mask of the thread that started it, through exec and
    # for good: started from a thread that blocks SIGINT, the workers never see it, while this
    # thread goes on taking Ctrl-C as before. Multiprocessing's resource tracker, started with
    # the first process, unblocks SIGINT in the thread that starts it: so it starts here, first.
    resource_tracker.ensure_running()
    pool = Workers(max_workers=count, mp_context=_context(), initializer=_watch_parent)

    def start() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # this thread's only
        for _ in range(count):  # each submit starts a process, from the submitting thread
            pool.submit(_preload, preload)

    starter = Thread(target=start, name="transcript-clean-start-workers")
    starter.start()
    try:
        starter.join()
    except BaseException:
        starter.join()
        pool.stop()
        raise
    return pool


_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")
"""What tells a spawned process to run the main module again (`multiprocessing.spawn`)."""

_SPAWN_LAUNCH: Any = vars(popen_spawn_posix.Popen)["_launch"]


def _preparation_data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = spawn.get_preparation_data(name)
    for key in _MAIN_KEYS:
        data.pop(key, None)
    return data


def _launch_without_main() -> Any:
    """The spawn start's own `_launch`, reading `spawn` from a namespace whose preparation data
    leave the main module out: the standard library's code, not a copy, and nothing changed
    for any other process this program starts."""
    launch = _SPAWN_LAUNCH
    names = {**vars(spawn), "get_preparation_data": _preparation_data}
    scope = {**launch.__globals__, "spawn": SimpleNamespace(**names)}
    return FunctionType(launch.__code__, scope, launch.__name__, launch.__defaults__)


class _Popen(popen_spawn_posix.Popen):
    _launch = _launch_without_main()


class _Process(SpawnProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> _Popen:
        return _Popen(process_obj)


class _Context(SpawnContext):
    Process = _Process


def _context() -> SpawnContext:
    """Spawn (a forked child would inherit Arrow's thread pools mid-flight), without the main
    module; the plain spawn start where this Python's `_launch` is not the one expected."""
    if "spawn" not in _SPAWN_LAUNCH.__code__.co_names:
        return get_context("spawn")
    return _Context()


def _watch_parent() -> None:
    """In a worker, as it starts: end it as soon as the process that started it is gone."""
    from multiprocessing import parent_process

    parent = parent_process()
    if parent is not None and parent.sentinel is not None:
        watcher = Thread(
            target=_end_with, args=(parent.sentinel,), name="transcript-clean-parent", daemon=True
        )
        watcher.start()


def _end_with(sentinel: int) -> None:
    """Wait for end of file on `sentinel`, the read end of a pipe only the parent writes to,
    which the kernel closes when the parent ends, however it ends; then end this process."""
    from multiprocessing.connection import wait

    wait([sentinel])
    os._exit(1)  # nothing to tidy: an unfinished block is simply not done


def _preload(name: str | None) -> None:
    """A worker's first task: import `name`, ahead of the blocks that need it."""
    if name is not None:
        importlib.import_module(name)
