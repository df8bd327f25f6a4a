"""The exceptions the library raises. The CLI turns each into a one-line error in one place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

MALFORMED_ROW: Final = "malformed_row"
UNKNOWN_ROLE: Final = "unknown_role"
"""The codes of a row a format's decoder cannot read (`formats.base.DecodeError`). They live
below both the formats and the rules, so that a decoder names them without importing the rules
that own their actions and words (`rules/malformed_row.py`, `rules/unknown_role.py`)."""

_COMMAND_LINE: ContextVar[bool] = ContextVar("transcript_clean_command_line", default=False)
"""True while the CLI runs a command: messages then name its flags, not keyword arguments."""


@contextmanager
def command_line() -> Iterator[None]:
    """Within it, `option` spells options as the command line's flags (the CLI's commands)."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def option(name: str, value: object = True, *, flag: str | None = None) -> str:
    """The option `name` (a keyword argument's name) set to `value`, as the caller gives it:
    `--output-format jsonl` (`--resume` for a flag) on the command line, `output_format='jsonl'`
    (`resume=True`) from Python. `flag` is the command line's name where it is not `name`'s
    (`--type` for `dataset_type`)."""
    if not _COMMAND_LINE.get():
        return f"{name}={value!r}"
    flag = option_name(name, flag=flag)
    return flag if value is True else f"{flag} {value}"


def option_name(name: str, *, flag: str | None = None) -> str:
    """The option `name` (a keyword argument's name) without a value, as the caller names it:
    `--prompt-column` on the command line (or `flag`), `prompt_column` from Python."""
    if not _COMMAND_LINE.get():
        return name
    return flag or "--" + name.replace("_", "-")


class TranscriptCleanError(Exception):
    """Base of every error this package raises on purpose."""


class ModelError(TranscriptCleanError, ValueError):
    """JSON that is not the canonical message model; the message names the index and field."""


class ConfigError(TranscriptCleanError):
    """A config file with an unknown key or a bad value; the message names the key."""


class SourceError(TranscriptCleanError):
    """Input that cannot be read: a missing or corrupt file, a missing column."""


class OutputError(TranscriptCleanError):
    """An output folder that cannot be written as asked (exists, lies inside the source, is a
    symbolic link, is read-only, or another run is writing it)."""


class AccountingError(TranscriptCleanError):
    """Rows in != rows kept + rows rejected, in the counts or in the files written: a row was
    lost or written twice. Not the input's fault, so the CLI exits 1, not 2."""


class FormatError(TranscriptCleanError):
    """A dataset whose format cannot be detected or is not the one asked for."""


class EngineError(TranscriptCleanError):
    """An engine that cannot run: Ray not installed, a cluster that cannot be reached."""
