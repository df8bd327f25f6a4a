"""The registry of conversation formats: each format's name and class, and `get_format`."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.errors import FormatError
from transcript_clean.format_names import FORMAT_NAMES

if TYPE_CHECKING:
    from transcript_clean.formats.base import Format

_CLASSES: Final = {
    "openai": ("openai.codec", "OpenAIFormat"),
    "sharegpt": ("sharegpt.codec", "ShareGPTFormat"),
    "anthropic": ("anthropic.codec", "AnthropicFormat"),
    "rig": ("rig.codec", "RigFormat"),
    "hermes": ("hermes.codec", "HermesFormat"),
    "gemini": ("gemini.codec", "GeminiFormat"),
    "bedrock": ("bedrock.codec", "BedrockFormat"),
    "claude-code": ("claude_code.codec", "ClaudeCodeFormat"),
    "llamafactory": ("llamafactory.codec", "LlamaFactoryFormat"),
    "hh": ("text.codec", "HHFormat"),
    "guanaco": ("text.codec", "GuanacoFormat"),
    "alpaca": ("text.codec", "AlpacaFormat"),
    "dolly": ("text.codec", "DollyFormat"),
    "query-response": ("text.codec", "QueryResponseFormat"),
    "pairs": ("text.codec", "PairsFormat"),
    "completion": ("text.codec", "CompletionFormat"),
    "responses": ("responses.codec", "ResponsesFormat"),
    "openhands": ("openhands.codec", "OpenHandsFormat"),
}
"""Where each format's class is: its module under `formats` and its name. A run imports only
the codecs it reads or writes, not all eighteen (docs/performance.md, "Start-up")."""
if tuple(_CLASSES) != FORMAT_NAMES:  # a format added in one list and not the other
    raise ImportError(f"formats {tuple(_CLASSES)} are not format_names.FORMAT_NAMES")


def format_class(name: str) -> type[Format] | None:
    """The class of the format called `name` (its codec imported now), or None if there is no
    such format."""
    where = _CLASSES.get(name)
    if where is None:
        return None
    module, attribute = where
    cls: type[Format] = getattr(
        importlib.import_module(f"transcript_clean.formats.{module}"), attribute
    )
    if cls.name != name:
        raise ImportError(f"format {name!r} is the class {cls.__name__}, named {cls.name!r}")
    return cls


def __getattr__(attribute: str) -> Any:
    if attribute == "FORMATS":  # every codec imported: what a caller of FORMATS asks for
        return {name: format_class(name) for name in FORMAT_NAMES}
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


def get_format(name: str, column: str | None = None, **options: Any) -> Format:
    """The format called `name`, reading its conversations from `column` (its usual column when
    None); `options` are the format's own (sharegpt: `tags`)."""
    cls = format_class(name)
    if cls is None:
        known = ", ".join(FORMAT_NAMES)
        raise FormatError(f"unknown format {name!r}; the formats are {known} and auto")
    try:
        return cls(column, **options)
    except TypeError as err:
        raise FormatError(f"format {name!r} does not take options {sorted(options)}") from err
