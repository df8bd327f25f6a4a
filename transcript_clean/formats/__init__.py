"""The conversation formats: a decoder from each to the canonical model and an encoder back.

>>> fmt = get_format("sharegpt")
>>> decoded = fmt.decode({"conversations": [{"from": "human", "value": "Hi"}]})
>>> fmt.encode(decoded, decoded.messages)
{'conversations': [{'from': 'human', 'value': 'Hi'}]}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from transcript_clean.format_names import FORMAT_NAMES
from transcript_clean.formats.base import Decoded, DecodeError, Format, Row
from transcript_clean.formats.registry import get_format
from transcript_clean.lazy import lazy_names

if TYPE_CHECKING:
    from transcript_clean.formats.anthropic import AnthropicFormat
    from transcript_clean.formats.detect import detect_conversation_format
    from transcript_clean.formats.openai import OpenAIFormat
    from transcript_clean.formats.registry import FORMATS
    from transcript_clean.formats.rig import RigFormat
    from transcript_clean.formats.sharegpt import ShareGPTFormat

# Imported when first asked for: a run imports only the codecs it reads or writes.
_LAZY: Final = {
    "AnthropicFormat": "anthropic",
    "OpenAIFormat": "openai",
    "RigFormat": "rig",
    "ShareGPTFormat": "sharegpt",
    "detect_conversation_format": "detect",
    "FORMATS": "registry",
}

__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "AnthropicFormat",
    "DecodeError",
    "Decoded",
    "Format",
    "OpenAIFormat",
    "RigFormat",
    "Row",
    "ShareGPTFormat",
    "detect_conversation_format",
    "get_format",
]
