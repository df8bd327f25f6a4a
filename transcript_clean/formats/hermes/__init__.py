"""Hermes / ChatML function calling: calls and results as tags inside ShareGPT-like turns."""

from transcript_clean.formats.hermes.codec import HermesFormat

__all__ = ["HermesFormat"]
