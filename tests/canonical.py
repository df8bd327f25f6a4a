"""A test-only format: SPEC section 1's JSON in a `messages` column, so that the row and batch
cleaners are tested apart from the real formats."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from transcript_clean.errors import ModelError
from transcript_clean.formats.base import Decoded, DecodeError, Format, Row
from transcript_clean.model import (
    Message,
    Text,
    ToolCall,
    ToolResult,
    dump_messages,
    parse_messages,
)


class Canonical(Format):
    """SPEC section 1's JSON in a `messages` column."""

    name: ClassVar[str] = "canonical"
    default_column: ClassVar[str] = "messages"

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        try:
            return Decoded(parse_messages(row[self.column]), dict(row))
        except ModelError as err:
            raise DecodeError("malformed_row", "messages", str(err)) from None

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        return {**decoded.row, self.column: dump_messages(messages)}


FMT = Canonical()


def row(*messages: Message, **extra: Any) -> Row:
    return {"messages": dump_messages(messages), **extra}


def call(id: str, args: object = None, raw: str | None = None) -> ToolCall:
    return ToolCall(id, "f", {} if args is None and raw is None else args, raw)


def res(id: str) -> ToolResult:
    return ToolResult(id, (Text("ok"),), name="f")
