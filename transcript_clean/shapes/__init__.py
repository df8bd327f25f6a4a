"""Dataset types: the shapes of a training set's rows beyond one conversation column.

TRL and the providers document several: a prompt alone (`prompt`), a prompt and its completion,
a prompt and two candidates (preference: `chosen` / `rejected`), whole conversations sharing a
prefix (implicit-prompt preference), a completion with a `label` (unpaired preference, KTO),
OpenAI's preference rows (`input.messages` + `preferred_output` + `non_preferred_output`) and
LLaMA-Factory's ranking rows in ShareGPT (`conversations` + `chosen` + `rejected`).

A `ShapedFormat` reads such rows in a conversation format (`inner`): each candidate is checked as
prompt + candidate, the prompt once as a prompt-only conversation (`shapes.clean`), and the fast
path settles rows clean for every candidate in Arrow (`shapes.arrow`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from transcript_clean.formats.base import Decoded, Format, Row
from transcript_clean.shapes.shape import KINDS, Kind, Shape, make_shape

if TYPE_CHECKING:
    from transcript_clean.model import Message
    from transcript_clean.policy import Config
    from transcript_clean.rows import RowResult

__all__ = ["KINDS", "Kind", "Shape", "ShapedFormat", "make_shape"]


class ShapedFormat(Format):
    """Rows of a dataset type, each conversation part in the format `inner`.

    `column` is the first column the shape reads (where the fast path and the message counts
    start); `name` is the inner format's, so summaries and run identities name the format.
    """

    name = "shaped"
    default_column = "prompt"
    plain_text = True  # the parts' JSON text is read part by part (`shapes.clean.get_path`)

    def __init__(self, inner: Format, shape: Shape) -> None:
        super().__init__(shape.columns[0])
        self.inner = inner
        self.shape = shape
        self.agent_trace = inner.agent_trace
        self.why: str | None = None
        """Why `auto` read the rows as this type, where that is not their column names (a
        prompt set: `shapes.detect.prompt_set`); the "reading X as ..." line says it."""
        # The summary and the run's identity name the conversation format the parts are in.
        self.name = inner.name  # type: ignore[misc]

    def describe(self) -> str:
        why = "" if self.why is None else f" ({self.why})"
        # Parts held as texts are read as OpenAI messages: the format is the texts', not one of
        # message objects.
        inner = "" if self.shape.texts else f"{self.inner.name} "
        return f"{inner}{self.shape.describe()}{why}"

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        """The first candidate's conversation (prompt + candidate; a prompt-only row's prompt),
        for readers of one."""
        from transcript_clean.shapes.clean import conversation_row

        candidate = 0 if self.shape.candidates else None
        return self.inner.decode(conversation_row(row, self, candidate, strict=True))

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        raise NotImplementedError("shaped rows are written part by part (shapes.clean)")

    def clean(self, row: Row, config: Config, *, trace: bool = False) -> RowResult:
        from transcript_clean.shapes.clean import clean_shaped_row

        return clean_shaped_row(row, self, config, trace=trace)

    def __repr__(self) -> str:
        return f"ShapedFormat({self.inner!r}, {self.shape!r})"
