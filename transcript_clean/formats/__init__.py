"""The conversation formats: a decoder from each to the canonical model and an encoder back.

>>> fmt = get_format("sharegpt")
>>> decoded = fmt.decode({"conversations": [{"from": "human", "value": "Hi"}]})
>>> fmt.encode(decoded, decoded.messages)
{'conversations': [{'from': 'human', 'value': 'Hi'}]}
"""

from __future__ import annotations

from typing import Any, Final

from transcript_clean.errors import FormatError
from transcript_clean.formats.anthropic import AnthropicFormat
from transcript_clean.formats.base import Decoded, DecodeError, Format, Row
from transcript_clean.formats.detect import detect_format
from transcript_clean.formats.openai import OpenAIFormat
from transcript_clean.formats.rig import RigFormat
from transcript_clean.formats.sharegpt import ShareGPTFormat

FORMATS: Final[dict[str, type[Format]]] = {
    "openai": OpenAIFormat,
    "sharegpt": ShareGPTFormat,
    "anthropic": AnthropicFormat,
    "rig": RigFormat,
}

FORMAT_NAMES: Final = tuple(FORMATS)
"""The names `--format` takes, besides "auto"."""


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
    "detect_format",
    "get_format",
]
