"""What every format module provides: a decoder to the canonical model and an encoder back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from transcript_clean.errors import TranscriptCleanError
from transcript_clean.model import Message

Row = dict[str, Any]
"""One dataset row as Python values: column name -> value (what `pyarrow` `to_pylist` gives)."""

MALFORMED_ROW = "malformed_row"
UNKNOWN_ROLE = "unknown_role"


class DecodeError(TranscriptCleanError):
    """A row its format cannot read. Not a crash: the cleaner rejects the row with `code`.

    `path` names the field (`messages[3].tool_calls[0].function`); `str(err)` is
    `path: what is wrong`, e.g. `messages[3].tool_calls[0].function: missing "name"`.
    """

    def __init__(self, code: str, path: str, problem: str) -> None:
        self.code = code
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


@dataclass(slots=True)
class Decoded:
    """A decoded row: its canonical messages and what the encoder needs to write it back."""

    messages: list[Message]
    row: Row
    minted: frozenset[str] = field(default_factory=frozenset)
    """Call ids the decoder made up from positions; the encoder never writes them back."""


class Format:
    """A conversation format. Subclasses set `name` and `default_column` and implement the rest.

    `decode` never raises anything but `DecodeError`; `encode(decode(row))` rebuilds `row`,
    value for value, keys it does not use included (they travel in the parts' `origin`).
    """

    name: ClassVar[str]
    default_column: ClassVar[str]
    joins_text: ClassVar[bool] = True
    """Whether an assistant message's content is one string, so merged texts join with a blank
    line (SPEC R4)."""

    def __init__(self, column: str | None = None) -> None:
        self.column = column or self.default_column

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        raise NotImplementedError

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        """The row with its conversation (and any column the format reads, such as `system`)
        rewritten from `messages`; every other column unchanged."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(column={self.column!r})"
