"""The ShareGPT format: its codec (`codec.py`), what its turn values hold (`values.py`) and its
flattener into the columnar view (`flatten.py`)."""

from transcript_clean.formats.sharegpt.codec import DEFAULT_TAGS, ShareGPTFormat
from transcript_clean.formats.sharegpt.values import read_calls, split_list

__all__ = ["DEFAULT_TAGS", "ShareGPTFormat", "read_calls", "split_list"]
