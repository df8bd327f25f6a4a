"""LLaMA-Factory v1 `messages` of `{type, value}` content items."""

from transcript_clean.formats.llamafactory.codec import LlamaFactoryFormat

__all__ = ["LlamaFactoryFormat"]
