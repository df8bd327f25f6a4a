"""One transcript checked against a chat template: rendered once (twice with `--arguments-as
auto` when the first way fails), and what the render left out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from transcript_clean.model import Message
from transcript_clean.templates.drops import Drops, Piece, find_drops
from transcript_clean.templates.load import ChatTemplate
from transcript_clean.templates.render import ArgumentsAs, Rendering, arguments_value, render

__all__ = ["ArgumentsOption", "Checked", "check_transcript"]

ArgumentsOption = Literal["object", "string", "auto"]


@dataclass(slots=True)
class Checked:
    """A transcript's render with a template, what it left out, and how its calls' arguments
    were given (`auto` picks per row)."""

    template: ChatTemplate
    rendering: Rendering
    drops: Drops
    arguments_as: ArgumentsAs

    @property
    def clean(self) -> bool:
        return self.rendering.error is None and not self.drops.dropped


def check_transcript(
    template: ChatTemplate,
    messages: Sequence[Message],
    declarations: Any,
    arguments_as: ArgumentsOption | None = None,
    *,
    keep_mask: bool = False,
) -> Checked:
    """Render `messages` with `template` and find what it left out. Arguments go as objects
    (what transformers documents) unless `arguments_as` says otherwise; `auto` gives them as
    objects and, when that raises or loses a piece, as JSON text, keeping the first way that
    renders whole (else the objects' render)."""
    first: ArgumentsAs = "string" if arguments_as == "string" else "object"
    checked = _check(template, messages, declarations, first, keep_mask)
    if arguments_as != "auto" or checked.clean or not _has_calls(messages):
        return checked
    other = _check(template, messages, declarations, "string", keep_mask)
    return other if other.clean else checked


def _has_calls(messages: Sequence[Message]) -> bool:
    return any(getattr(m, "tool_calls", ()) for m in messages)


def _check(
    template: ChatTemplate,
    messages: Sequence[Message],
    declarations: Any,
    arguments_as: ArgumentsAs,
    keep_mask: bool,
) -> Checked:
    rendering, chat, tools = render(
        template, messages, declarations, arguments_as, keep_mask=keep_mask
    )
    if rendering.error is not None:
        return Checked(template, rendering, Drops([], []), arguments_as)
    drops = find_drops(template, messages, rendering.text, chat, tools, arguments_as)
    if arguments_as == "string":
        drops.dropped.extend(double_encoded(messages, rendering.text))
    return Checked(template, rendering, drops, arguments_as)


def double_encoded(messages: Sequence[Message], text: str) -> list[Piece]:
    """The calls whose arguments, given as JSON text, the template wrote as a JSON string
    (`tojson` on a string: Qwen2.5 does it silently): the model would learn to quote them."""
    out = []
    for index, message in enumerate(messages):
        for call in getattr(message, "tool_calls", ()):
            if not isinstance(call.arguments, dict) or not call.arguments:
                continue
            given = arguments_value(call, "string")
            if json.dumps(given, ensure_ascii=False) in text or json.dumps(given) in text:
                what = f"the call {call.name}'s arguments as an object (written as a JSON string)"
                out.append(Piece(index, what, ()))
    return out
