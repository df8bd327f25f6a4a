"""Gemini / Vertex AI `contents` of `parts`."""

from transcript_clean.formats.gemini.codec import GeminiFormat

__all__ = ["GeminiFormat"]
