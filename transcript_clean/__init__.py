"""transcript_clean: clean chat and tool-calling conversation datasets."""

from __future__ import annotations

from transcript_clean.errors import (
    ConfigError,
    FormatError,
    ModelError,
    OutputError,
    SourceError,
    TranscriptCleanError,
)
from transcript_clean.model import dump_messages, parse_messages
from transcript_clean.transcript import TranscriptError, transcript_errors, validate_canonical

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "FormatError",
    "ModelError",
    "OutputError",
    "SourceError",
    "TranscriptCleanError",
    "TranscriptError",
    "__version__",
    "dump_messages",
    "parse_messages",
    "transcript_errors",
    "validate_canonical",
]
