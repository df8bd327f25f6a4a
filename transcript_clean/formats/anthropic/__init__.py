"""The Anthropic Messages format: its codec (`codec.py`) and its flattener into the columnar view
(`flatten.py`)."""

from transcript_clean.formats.anthropic.codec import AnthropicFormat

__all__ = ["AnthropicFormat"]
