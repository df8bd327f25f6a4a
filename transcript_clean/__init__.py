"""transcript_clean: clean chat and tool-calling conversation datasets.

>>> from transcript_clean import clean
>>> clean("raw/*.parquet", "clean/", config="strict")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from transcript_clean.errors import (
    AccountingError,
    ConfigError,
    FormatError,
    ModelError,
    OutputError,
    SourceError,
    TranscriptCleanError,
)
from transcript_clean.model import dump_messages, parse_messages
from transcript_clean.transcript import TranscriptError, transcript_errors, validate_canonical

if TYPE_CHECKING:
    from transcript_clean.pipeline import clean_batch
    from transcript_clean.policy import Config, load_config
    from transcript_clean.rows import clean_row
    from transcript_clean.run import RunResult, clean
    from transcript_clean.version import __version__


__all__ = [
    "AccountingError",
    "Config",
    "ConfigError",
    "FormatError",
    "ModelError",
    "OutputError",
    "RunResult",
    "SourceError",
    "TranscriptCleanError",
    "TranscriptError",
    "__version__",
    "clean",
    "clean_batch",
    "clean_row",
    "dump_messages",
    "load_config",
    "parse_messages",
    "transcript_errors",
    "validate_canonical",
]

# pyarrow loads with these, so they are imported on first use: `transcript-clean --help` stays
# instant.
_LAZY = {
    "__version__": "transcript_clean.version",
    "clean": "transcript_clean.run",
    "RunResult": "transcript_clean.run",
    "clean_batch": "transcript_clean.pipeline",
    "clean_row": "transcript_clean.rows",
    "Config": "transcript_clean.policy",
    "load_config": "transcript_clean.policy",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'transcript_clean' has no attribute {name!r}")
