"""What a long command shows: the source and format it read and a progress bar on stderr, and
the brief forms of its result (`--json`, `--quiet`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from transcript_clean.cli.interrupt import dropped_ctrl_c


class Progress:
    """What a long command shows on stderr: the source and format it read, and a tqdm bar (rows,
    rows/s) when stderr is a terminal. `start` and `update` are the library's callbacks."""

    def __init__(self, quiet: bool, bar: bool = True) -> None:
        self.quiet = quiet
        self.want_bar = bar
        self.bar: Any = None
        self.to: str | None = None
        """The format the kept rows are written in (`--to`), said after the one read."""
        self.arguments = False
        """Whether `--arguments-as` was given to a run that writes rows."""

    def start(self, src: Any, fmt: Any, total: int | None) -> None:
        dropped_ctrl_c()
        if not self.quiet:
            note = "" if src.note is None else f"; {src.note}"
            from transcript_clean.shapes import ShapedFormat

            if isinstance(fmt, ShapedFormat):
                click.echo(f"reading {src.name} as {fmt.describe()}{note}", err=True)
            else:
                words = getattr(fmt, "words", None)
                words = "" if words is None else f"; {words}"
                click.echo(
                    f"reading {src.name} as {fmt.name} (column {fmt.column!r}{words}{note})",
                    err=True,
                )
            if self.to is not None:
                click.echo(f"writing the kept rows as {self.to}, tools in 'tools'", err=True)
            from transcript_clean.formats import get_format

            written = get_format(self.to) if self.to is not None else fmt
            if self.arguments and written.with_arguments("object") is None:
                click.echo(
                    f"note: --arguments-as decides how the rows are rendered; {written.name} "
                    "rows keep their calls' arguments in their own form",
                    err=True,
                )
        if self.quiet or not self.want_bar or not sys.stderr.isatty():
            return  # no bar: tqdm is not even imported (it starts a monitor thread)
        from tqdm import tqdm

        self.bar = tqdm(
            total=total, unit=" rows", unit_scale=True, file=sys.stderr, dynamic_ncols=True
        )

    def update(self, rows: int) -> None:
        dropped_ctrl_c()
        if self.bar is not None:
            self.bar.update(rows)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def said_briefly(
    as_json: bool, quiet: bool, failed: list[str], document: Callable[[], Any]
) -> bool:
    """What `--json` and `--quiet` print of a run, for clean and audit alike: the document as
    JSON on stdout with the failed gates on stderr, or the failed gates alone. False when
    neither was asked for, and the run's words are still to be printed."""
    if as_json:
        import json

        click.echo(json.dumps(document(), indent=2))
        for line in failed:
            click.echo(line, err=True)
    elif quiet:
        for line in failed:
            click.echo(line)
    return as_json or quiet
