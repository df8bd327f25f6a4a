"""The `transcript-clean` program's first step: Ctrl-C is handled before anything is imported.

Importing the command line (click, the cleaner's options and commands) takes a tenth of a second,
more on a busy machine; a Ctrl-C that landed in it showed Python's traceback of whichever import
it hit. Until `cli.entry` puts the run's own handler in place, a Ctrl-C ends the program at once,
as one stopped before it started: "interrupted" on stderr, status 130. Nothing has been opened
or written by then, so there is nothing to close.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

__all__ = ["entry"]


def _stopped_at_the_start(signum: int, frame: FrameType | None) -> None:
    sys.stderr.write("\ninterrupted\n")
    sys.stderr.flush()
    os._exit(130)


def entry() -> None:
    """`transcript-clean`: `cli.entry`, with Ctrl-C handled while it is imported."""
    signal.signal(signal.SIGINT, _stopped_at_the_start)
    from transcript_clean.cli import entry as run

    run()
