"""How Anthropic's encoder writes a text and a tool result as content blocks: what the codec and
the Arrow writers of error results (`formats/anthropic/results.py`) share."""

from __future__ import annotations

from typing import Any

from transcript_clean.formats.base import MISSING, Row, join_texts, put
from transcript_clean.model import Text, ToolResult

__all__ = ["result_out", "text_out"]


def text_out(part: Text) -> Row:
    out = dict(part.origin) if part.origin is not None else {"type": "text"}
    put(out, "text", part.text)
    return out


def result_out(result: ToolResult) -> Row:
    parts = result.content
    if result.origin is None:
        out: Row = {"type": "tool_result", "tool_use_id": result.call}
        was: Any = MISSING
    else:
        out = dict(result.origin)
        put(out, "tool_use_id", result.call)
        was = out.get("content")
    # A string stays a string and blocks stay blocks; a fresh result's texts are one string.
    if isinstance(was, list) or not all(isinstance(p, Text) for p in parts):
        out["content"] = [
            text_out(p) if isinstance(p, Text) else {"type": p.kind, **p.data} for p in parts
        ]
    elif parts or was not in (None, MISSING):
        put(out, "content", join_texts(p.text for p in parts if isinstance(p, Text)))
    if result.status == "error":
        put(out, "is_error", True)
    elif out.get("is_error"):
        out["is_error"] = False
    return out
