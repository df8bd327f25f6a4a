"""The OpenAI chat format: its codec (`codec.py`) and its Arrow side (`arrow.py`)."""

from transcript_clean.formats.openai.codec import OpenAIFormat

__all__ = ["OpenAIFormat"]
