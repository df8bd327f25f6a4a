"""Hermes / ChatML function calling: calls and results as tags inside ShareGPT-like turns. Its
codec (`codec.py`), what its turn values hold (`values.py`) and its flattener into the columnar
view (`flatten.py`)."""

from transcript_clean.formats.hermes.codec import HermesFormat

__all__ = ["HermesFormat"]
