"""The `transcript-clean` command: thin click wrappers over the library.

This module is the program: the `main` group (the library's errors said in one place, Ctrl-C
as exit status 130) and `entry`, what the console script runs. The commands are in
`commands.py`, their options in `options.py` and `parse.py`, what a run shows in `progress.py`.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from typing import Any

import click

from transcript_clean.cli.commands import audit, clean, explain
from transcript_clean.cli.interrupt import (
    Interrupted,
    ctrl_c,
    exit_interrupted,
    interrupted,
    unreported_ctrl_c,
)
from transcript_clean.cli.process import pause_collector, resume_collector
from transcript_clean.errors import AccountingError, TranscriptCleanError, command_line
from transcript_clean.version import __version__

__all__ = ["Group", "InputError", "entry", "main"]


class InputError(click.ClickException):
    """Bad input, config or output folder: exit status 2, like a usage error."""

    exit_code = 2


class Group(click.Group):
    """Turns the library's errors into one-line messages, in one place, and Ctrl-C into exit
    status 130 wherever it comes (click's own answer is "Aborted!" and 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with command_line():  # the library's messages name the flags, not the arguments
                return super().invoke(ctx)
        except AccountingError as err:  # the run's fault, not the input's: exit 1
            raise click.ClickException(str(err)) from err
        except TranscriptCleanError as err:
            raise InputError(str(err)) from err
        except KeyboardInterrupt:
            interrupted()
        except Exception as err:  # a store's or the network's, where no call of ours caught it
            from transcript_clean.storage import failure

            said = failure(err)
            if said is None:
                raise
            raise InputError(said) from err


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="transcript-clean")
def main() -> None:
    """Clean chat and tool-calling conversation datasets.

    Reads Hugging Face or Parquet conversation datasets, drops empty assistant turns, validates
    every row as a canonical transcript, repairs what a live agent loop would have recorded, and
    writes cleaned Parquet shards, a rejects shard and an error-stats table.
    """


main.add_command(clean)
main.add_command(explain)
main.add_command(audit)


JEMALLOC_CONF = "dirty_decay_ms:100,muzzy_decay_ms:100"
"""Arrow's jemalloc returns freed pages to the system after 0.1 s (JE_ARROW_MALLOC_CONF)."""


def entry() -> None:
    """The `transcript-clean` program: `main` with Arrow's jemalloc pool, then a quick exit.

    Arrow's default pool in the Linux wheels is mimalloc. With the cleaner's threads
    allocating side by side it held on to more memory than jemalloc, and was no faster
    (docs/performance.md has the numbers). The pool is chosen by ARROW_DEFAULT_MEMORY_POOL,
    which pyarrow reads when it is imported, and the worker processes inherit; a value the user
    set stays. jemalloc hands freed pages back after 0.1 s (`JEMALLOC_CONF`, read by the same
    rule): kept a second, as by default, the pages of the batches just freed were over 100 MB
    of a long-rows run's peak; handed back at once, they cost short rows a third more time.

    The cleaner does no linear algebra, yet NumPy's OpenBLAS starts a thread per core when it
    is imported, which spins a while for work that never comes: on two cores, 0.03 s of every
    run's start (docs/performance.md). One thread (OPENBLAS_NUM_THREADS, read at import too)
    starts none; again a value the user set stays.

    The cyclic garbage collector is paused until the command has imported what it runs
    (`process.pause_collector`, `process.imported`): the imports make no garbage.

    Once a command is done, everything it wrote is closed and in place; what is left is the
    interpreter's teardown, whose last garbage collection walks every object pyarrow and NumPy
    (and pandas, where a run loads it) made: most of the teardown's time. Frozen, they are left
    to be freed with the process. Exit handlers still run, and standard output is still
    flushed; only objects in reference cycles go without their finalizers, and nothing the
    commands leave open is one."""
    if sys.platform == "linux":  # before pyarrow is imported: it reads this once
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
        os.environ.setdefault("JE_ARROW_MALLOC_CONF", JEMALLOC_CONF)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy is imported
    pause_collector()
    signal.signal(signal.SIGINT, ctrl_c)
    sys.unraisablehook = unreported_ctrl_c
    try:
        try:
            main()
        except KeyboardInterrupt:  # before or after a command, where `Group` does not see it
            interrupted()
    except Interrupted:
        exit_interrupted()
    finally:
        resume_collector()
        gc.freeze()
