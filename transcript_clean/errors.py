"""The exceptions the library raises. The CLI turns each into a one-line error in one place."""

from __future__ import annotations


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
