"""The ShareGPT format: its codec (`codec.py`) and its Arrow side for the fast path (`arrow.py`)."""

from transcript_clean.formats.sharegpt.codec import (
    DEFAULT_TAGS,
    ShareGPTFormat,
    read_calls,
    split_list,
)

__all__ = ["DEFAULT_TAGS", "ShareGPTFormat", "read_calls", "split_list"]
