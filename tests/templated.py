"""What the chat-template tests share: rows as the cleaner writes them, for rendering."""

from __future__ import annotations

from typing import Any

from transcript_clean.formats import get_format
from transcript_clean.model import Message
from transcript_clean.rows import clean_row


def transcripts(rows: list[dict[str, Any]]) -> list[tuple[list[Message], Any]]:
    """Each OpenAI row's transcript as the cleaner would write it (default config), and its
    tools; every row must be kept."""
    fmt = get_format("openai")
    out = []
    for row in rows:
        result = clean_row(row, fmt)
        assert result.status != "rejected" and result.messages is not None
        out.append((result.messages, row.get("tools")))
    return out
