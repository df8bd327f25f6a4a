"""Ctrl-C: exit status 130 and one line on stderr, wherever it lands, and how to resume a run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from threading import Event
from types import FrameType
from typing import NoReturn

import click


class Interrupted(SystemExit):
    """Ctrl-C, handled and said: exit status 130."""


def interrupted(message: str = "interrupted") -> NoReturn:
    """Say so on stderr and exit 130, as a program stopped by Ctrl-C does."""
    click.echo(f"\n{message}", err=True)
    raise Interrupted(130)


CTRL_C = Event()
"""Set once the program has had a Ctrl-C (`ctrl_c`)."""


def ctrl_c(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C: KeyboardInterrupt, as Python's own handler raises it, and remembered. Python
    drops one raised where exceptions are only reported (a callback of importlib's, as a module
    is imported: "Exception ignored in ... KeyboardInterrupt"), and the run would go on to the
    end; `Progress` raises it again, as the run starts and after each batch."""
    CTRL_C.set()
    raise KeyboardInterrupt


def dropped_ctrl_c() -> None:
    """Raise again a Ctrl-C that Python dropped (`ctrl_c`)."""
    if CTRL_C.is_set():
        raise KeyboardInterrupt


def unreported_ctrl_c(unraisable: sys.UnraisableHookArgs) -> None:
    """`sys.unraisablehook`: say nothing of a Ctrl-C that Python dropped (it writes "Exception
    ignored in ..." and a traceback on stderr), since `ctrl_c` remembered it and the run stops
    with one line all the same; anything else is reported as Python reports it."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and CTRL_C.is_set():
        return
    sys.__unraisablehook__(unraisable)


def exit_interrupted() -> NoReturn:
    """End the process with status 130 once Ctrl-C has been handled.

    A Ctrl-C that lands while an extension module runs Python code of its own as it is
    imported leaves the interpreter marked as stopped by it, and the interpreter then ends
    the process with SIGINT on the way out whatever status was asked: about one Ctrl-C in ten
    in the first half second of an uncompiled run. So the exit handlers run here, the output
    is flushed, and the process ends at once."""
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


@contextmanager
def resumable(output: str) -> Iterator[None]:
    """Ctrl-C during a run: say how to finish it, and exit 130 as an interrupted program does."""
    try:
        yield
    except KeyboardInterrupt:
        from transcript_clean.storage import is_remote

        if is_remote(output):
            interrupted(
                f"interrupted: {output.rstrip('/')}/_temporary/ keeps the finished shards; run "
                "the same command with --resume to finish it"
            )
        partial = Path(output).absolute()
        partial = partial.with_name(partial.name + ".partial")
        if partial.exists():
            interrupted(
                f"interrupted: {partial} keeps the finished shards; run the same command "
                "with --resume to finish it"
            )
        interrupted()
