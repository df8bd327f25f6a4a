"""The program's logging: the library's records on stderr, `-v` and `--log-level`."""

from __future__ import annotations

import functools
import logging
from typing import Any

import click

from transcript_clean.cli.options import F, apply_options

LOG_LEVELS = ("debug", "info", "warning", "error")


class _Echo(logging.Handler):
    """Log records on stderr as `transcript-clean: info: ...`, through click: the stderr of the
    moment, as click's test runner swaps it."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"transcript-clean: {record.levelname.lower()}: {record.getMessage()}", err=True)


def set_log_level(level: str) -> None:
    """The one place the program's logging is set up: the `transcript_clean` logger's records
    of `level` and above go to stderr."""
    logger = logging.getLogger("transcript_clean")
    for handler in [h for h in logger.handlers if isinstance(h, _Echo)]:
        logger.removeHandler(handler)
    logger.addHandler(_Echo())
    logger.setLevel(level.upper())


def log_options(f: F) -> F:
    """`-v` / `--verbose` and `--log-level`, on every command: what the library logs (the
    source and format read, the blocks, each block done) goes to stderr."""

    @functools.wraps(f)
    def command(*args: Any, verbose: int, log_level: str | None, **kwargs: Any) -> Any:
        set_log_level(log_level or {0: "warning", 1: "info"}.get(verbose, "debug"))
        return f(*args, **kwargs)

    return apply_options(  # type: ignore[return-value]
        [
            click.option(
                "--verbose",
                "-v",
                count=True,
                help="Log what the run does on stderr: -v the source, format and blocks, -vv "
                "each block too (as --log-level info, debug).",
            ),
            click.option(
                "--log-level",
                type=click.Choice(LOG_LEVELS),
                default=None,
                help="What to log on stderr (default warning; wins over -v).",
            ),
        ],
        command,
    )
