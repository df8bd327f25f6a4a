"""One transcript checked against a chat template: rendered once, and what the render left out;
and the form of calls' arguments a template takes (`--arguments-as auto`), found once per
template by rendering a probe conversation both ways."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, Literal

from transcript_clean.model import AssistantMessage, Message, Text, ToolCall, UserMessage
from transcript_clean.templates.drops import Drops, Piece, find_drops
from transcript_clean.templates.load import ChatTemplate
from transcript_clean.templates.render import ArgumentsAs, Rendering, arguments_value, render

__all__ = ["ArgumentsOption", "Checked", "arguments_form", "check_transcript"]

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
    (what transformers documents) unless `arguments_as` says otherwise; `auto` gives them in
    the form the template takes (`arguments_form`), the same for every row."""
    form = arguments_form(template, arguments_as)
    return _check(template, messages, declarations, form, keep_mask)


def arguments_form(template: ChatTemplate, arguments_as: ArgumentsOption | None) -> ArgumentsAs:
    """The form calls' arguments are given to `template` in, and written in: `object` or
    `string` as asked (None: objects); for `auto`, the first of objects and JSON text under
    which a probe conversation (a user text, then a call with a text and a number among its
    arguments) renders without error and without loss, else objects (a template that renders
    no call whole in either form, as Gemma 3's, loses the rows' calls whatever they are)."""
    if arguments_as == "string":
        return "string"
    if arguments_as != "auto":
        return "object"
    return _probed(template)


_PROBE_ARGUMENTS: Final = {"probe_text": "a probe value", "probe_number": 2}
_PROBE_TOOLS: Final = [
    {
        "type": "function",
        "function": {
            "name": "probe_tool",
            "description": "A tool to probe the template with.",
            "parameters": {
                "type": "object",
                "properties": {
                    "probe_text": {"type": "string"},
                    "probe_number": {"type": "integer"},
                },
            },
        },
    }
]


@cache
def _probed(template: ChatTemplate) -> ArgumentsAs:
    """`arguments_form`'s `auto`: worked out once per template and process, so that every
    row of a run, in any worker, gets the same form."""
    text = json.dumps(_PROBE_ARGUMENTS)
    call = ToolCall("call_probe", "probe_tool", dict(_PROBE_ARGUMENTS), text)
    probe: list[Message] = [
        UserMessage((Text("Probe the tool, please."),)),
        AssistantMessage((call,)),
    ]
    forms: tuple[ArgumentsAs, ...] = ("object", "string")
    for form in forms:
        if _check(template, probe, _PROBE_TOOLS, form, False).clean:
            return form
    return "object"


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
