"""A dataset type's shape: which columns hold its prompt and candidates (`Shape`), the types
TRL and the providers document (`KINDS`), and `make_shape`, which checks a shape against a
dataset's columns. `ShapedFormat` (the package's) reads rows of a shape in a conversation format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from transcript_clean.errors import FormatError, option_name
from transcript_clean.policy import Config
from transcript_clean.rules import NO_ASSISTANT_TURN, TRAILING_TOOL_CALL

__all__ = ["KINDS", "PROMPT_CODES", "Kind", "Shape", "make_shape", "prompt_config"]


@dataclass(frozen=True, slots=True)
class Kind:
    """A dataset type: how it is named and its usual columns."""

    name: str
    words: str
    """How the "reading X as ..." line names it."""
    prompt: str | None
    candidates: tuple[str, ...]
    label: str | None = None


KINDS: Final[Mapping[str, Kind]] = {
    k.name: k
    for k in (
        Kind("prompt", "prompt-only rows", "prompt", ()),
        Kind("prompt-completion", "prompt-completion rows", "prompt", ("completion",)),
        Kind("preference", "preference rows", "prompt", ("chosen", "rejected")),
        Kind(
            "implicit-preference", "implicit-prompt preference rows", None, ("chosen", "rejected")
        ),
        Kind("unpaired", "unpaired preference (KTO) rows", "prompt", ("completion",), "label"),
        Kind(
            "openai-preference",
            "preference rows",
            "input.messages",
            ("preferred_output", "non_preferred_output"),
        ),
        Kind("ranking", "ranking rows", "conversations", ("chosen", "rejected")),
    )
}
"""The dataset types `--type` takes (besides `conversation`, one conversation column)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """Where a row's parts are: the prompt (a column, or a path into a struct column such as
    `input.messages`; None when the candidates are whole conversations), the candidates (each
    a list of messages, or one message object), and the label column, which passes through."""

    kind: str
    prompt: str | None
    candidates: tuple[str, ...]
    label: str | None = None
    texts: bool = False
    """The parts are plain strings (TRL's standard rows, hh-rlhf's transcripts), read as
    messages (`shapes.clean.part_messages`); else a string where a part belongs is malformed."""

    @property
    def paths(self) -> tuple[str, ...]:
        """The prompt's path, if any, then the candidates'."""
        return ((self.prompt,) if self.prompt else ()) + self.candidates

    @property
    def first_conversation(self) -> tuple[str, ...]:
        """The paths of the parts a row is read as one conversation from
        (`ShapedFormat.decode`): the prompt, if any, then the first candidate, if any."""
        return self.paths[: 2 if self.prompt else 1]

    @property
    def columns(self) -> tuple[str, ...]:
        """The top-level columns the prompt and candidates live in, in order, once each."""
        return tuple(dict.fromkeys(p.split(".", 1)[0] for p in self.paths))

    def describe(self) -> str:
        """`preference rows: prompt `prompt`, candidates `chosen`, `rejected``."""
        parts = []
        if self.prompt is not None:
            parts.append(f"prompt `{self.prompt}`")
        if self.candidates:
            one = "completion" if self.prompt is not None else "conversation"
            noun = "candidates" if len(self.candidates) > 1 else one
            parts.append(f"{noun} " + ", ".join(f"`{c}`" for c in self.candidates))
        if self.label is not None:
            parts.append(f"label `{self.label}`")
        return f"{KINDS[self.kind].words}: " + ", ".join(parts)


def make_shape(
    kind: str,
    columns: Sequence[str],
    *,
    prompt: str | None = None,
    candidates: Sequence[str] | None = None,
    label: str | None = None,
) -> Shape:
    """The shape of type `kind` over a dataset with these columns: the kind's usual columns
    unless named. A kind whose usual prompt column is absent reads whole conversations where
    it may (unpaired, implicit-prompt preference)."""
    spec = KINDS.get(kind)
    if spec is None:
        raise FormatError(
            f"unknown dataset type {kind!r}; the types are conversation, " + ", ".join(KINDS)
        )
    if (
        prompt is None
        and spec.prompt is not None
        and (kind != "unpaired" or spec.prompt in columns)
    ):
        prompt = spec.prompt
    if not candidates and kind == "unpaired" and prompt is None:  # KTO rows of one conversation
        candidates = [c for c in ("messages", "conversations") if c in columns][:1]
    shape = Shape(
        kind,
        prompt or None,
        tuple(candidates) if candidates else spec.candidates,
        label if label is not None else (spec.label if spec.label in columns else None),
    )
    missing = [c for c in shape.columns if c not in columns]
    if missing:
        raise FormatError(
            f"{KINDS[kind].words} need the column(s) {', '.join(missing)}; the columns are "
            f"{', '.join(columns) or '-'} (name them with "
            f"{option_name('prompt_column')} and {option_name('candidates')})"
        )
    if shape.prompt is None and not shape.candidates:
        raise FormatError(f"{KINDS[kind].words} need a prompt column or candidates")
    return shape


PROMPT_CODES: Final = (NO_ASSISTANT_TURN, TRAILING_TOOL_CALL)
"""What a prompt has by design: no assistant turn, calls pending at its end (the candidates
answer them). Kept and forgotten in a prompt alone, on both paths."""


def prompt_config(config: Config) -> Config:
    """`config` for a prompt alone: what a prompt is allowed by design is kept, uncounted. It
    is not rendered with a chat template: it is rendered with each candidate after it."""
    return replace(
        config,
        actions={**config.actions, **dict.fromkeys(PROMPT_CODES, "keep")},
        chat_template=None,
    )
