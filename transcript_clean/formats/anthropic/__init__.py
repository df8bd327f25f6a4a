"""The Anthropic Messages format: its codec (`codec.py`) and its Arrow side (`arrow.py`)."""

from transcript_clean.formats.anthropic.codec import AnthropicFormat

__all__ = ["AnthropicFormat"]
