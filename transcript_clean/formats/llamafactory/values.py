"""What LLaMA-Factory v1's items hold, read as its decoder reads them: the media item types,
and a `tool_call` item's value. The codec and the flattener both read items with these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from transcript_clean.formats.base import malformed, parse_arguments, required_str
from transcript_clean.jsontext import loads

__all__ = ["MEDIA_KINDS", "read_call"]

MEDIA_KINDS: Final[Mapping[str, str]] = {
    "image_url": "image",
    "video_url": "video",
    "audio_url": "audio",
}
"""LLaMA-Factory's media item types, and the canonical kinds they read as."""


def read_call(value: str, path: str) -> tuple[str, Any, str | None]:
    """A `tool_call` item's value: its name, arguments and raw arguments (a string kept as it
    is, as `parse_arguments` keeps it)."""
    try:
        data = loads(value)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, Mapping):
        raise malformed(path, "expected the JSON text of one {name, arguments} object")
    name = required_str(data, "name", f"{path}.value")
    arguments, raw = parse_arguments(data.get("arguments"))
    return name, arguments, raw
