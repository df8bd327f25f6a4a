"""The registry of conversation formats: each format's name and class, and `get_format`."""

from __future__ import annotations

from typing import Any, Final

from transcript_clean.errors import FormatError
from transcript_clean.format_names import FORMAT_NAMES
from transcript_clean.formats.anthropic import AnthropicFormat
from transcript_clean.formats.base import Format
from transcript_clean.formats.bedrock import BedrockFormat
from transcript_clean.formats.claude_code import ClaudeCodeFormat
from transcript_clean.formats.gemini import GeminiFormat
from transcript_clean.formats.hermes import HermesFormat
from transcript_clean.formats.llamafactory import LlamaFactoryFormat
from transcript_clean.formats.openai import OpenAIFormat
from transcript_clean.formats.openhands import OpenHandsFormat
from transcript_clean.formats.responses import ResponsesFormat
from transcript_clean.formats.rig import RigFormat
from transcript_clean.formats.sharegpt import ShareGPTFormat
from transcript_clean.formats.text import (
    AlpacaFormat,
    CompletionFormat,
    DollyFormat,
    GuanacoFormat,
    HHFormat,
    PairsFormat,
    QueryResponseFormat,
)

_CLASSES: Final = (
    OpenAIFormat,
    ShareGPTFormat,
    AnthropicFormat,
    RigFormat,
    HermesFormat,
    GeminiFormat,
    BedrockFormat,
    ClaudeCodeFormat,
    LlamaFactoryFormat,
    HHFormat,
    GuanacoFormat,
    AlpacaFormat,
    DollyFormat,
    QueryResponseFormat,
    PairsFormat,
    CompletionFormat,
    ResponsesFormat,
    OpenHandsFormat,
)

FORMATS: Final[dict[str, type[Format]]] = {cls.name: cls for cls in _CLASSES}
"""Each format's class by its name, in `FORMAT_NAMES`' order (detection tries them in it)."""
if tuple(FORMATS) != FORMAT_NAMES:  # a format added in one list and not the other
    raise ImportError(f"formats {tuple(FORMATS)} are not format_names.FORMAT_NAMES")


def get_format(name: str, column: str | None = None, **options: Any) -> Format:
    """The format called `name`, reading its conversations from `column` (its usual column when
    None); `options` are the format's own (sharegpt: `tags`)."""
    cls = FORMATS.get(name)
    if cls is None:
        known = ", ".join(FORMAT_NAMES)
        raise FormatError(f"unknown format {name!r}; the formats are {known} and auto")
    try:
        return cls(column, **options)
    except TypeError as err:
        raise FormatError(f"format {name!r} does not take options {sorted(options)}") from err
