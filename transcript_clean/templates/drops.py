"""What a render left out: each call (its name and arguments), tool result, reasoning part and
assistant text of the transcript looked for in the rendered text, in order (from the end).

A piece missing from the whole conversation's render is looked for again in the render of the
conversation cut just after the piece's message, as a trainer that builds a row turn by turn
(or a generation prompt) renders it. Found there, the template leaves it out of history only
(Qwen3 renders reasoning only after the last user query): a deliberate drop, `pruned`. Missing
there too, the template never renders it: `dropped`, content the model would not be trained on.
The rule is the template's own behaviour, not a list of models.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from transcript_clean.model import (
    AssistantMessage,
    Message,
    Reasoning,
    ReasoningText,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
)
from transcript_clean.templates.load import ChatTemplate
from transcript_clean.templates.render import ArgumentsAs, Chat, chat_messages, render_chat

__all__ = ["Drops", "Piece", "find_drops", "missing_pieces", "pieces"]


@dataclass(slots=True, frozen=True)
class Piece:
    """One thing the rendered text must hold: `what` it is, in words, at message `index`; it is
    found when each of `needles[1:]` is before the next piece and `needles[0]` before them (a
    call: each value of its arguments, and its name before them). Each needle is its
    alternatives (a text as is, or JSON-escaped)."""

    index: int
    what: str
    needles: tuple[tuple[str, ...], ...]


@dataclass(slots=True)
class Drops:
    dropped: list[Piece]
    """Missing even where the message is the conversation's last: never rendered."""
    pruned: list[Piece]
    """Rendered only while the message is the conversation's last (left out of history)."""


_PLAIN: Final = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]*")
"""A text JSON writes as it is, with `ensure_ascii` or without."""
_ESCAPED: Final = re.compile(r'["\\\x00-\x1f]')
"""The characters a JSON string escapes whatever `ensure_ascii` says."""


def _forms(text: str) -> tuple[str, ...]:
    """A text as a template may write it: as is, or inside a JSON string (`tojson`), with
    non-ASCII characters as they are or escaped, or twice inside one (a string's `tojson`).
    Most texts have no character JSON escapes: then each form is the text, or its ASCII one."""
    if _PLAIN.fullmatch(text):
        return (text,)
    if _ESCAPED.search(text) is None:
        return (text, json.dumps(text)[1:-1])
    once = json.dumps(text, ensure_ascii=False)[1:-1]
    forms = [text, once, json.dumps(text)[1:-1], json.dumps(once, ensure_ascii=False)[1:-1]]
    return tuple(dict.fromkeys(forms))


def _leaves(value: Any) -> Iterator[tuple[str, ...]]:
    """The needles of a call's arguments: every string, number and boolean in them."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, bool):
            yield ("true", "True") if item else ("false", "False")
        elif isinstance(item, int | float):
            yield tuple(dict.fromkeys((json.dumps(item), str(item))))
        elif isinstance(item, str) and item.strip():
            yield _forms(item.strip())


def _short(text: str, limit: int = 40) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pieces(messages: Sequence[Message]) -> list[Piece]:
    """What the rendered text must hold, in the transcript's order."""
    out: list[Piece] = []
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage):
            for part in message.content:
                if isinstance(part, ToolResult):
                    text = "\n".join(p.text for p in part.content if isinstance(p, Text)).strip()
                    if text:
                        what = f"the result of call {part.call!r}"
                        out.append(Piece(index, what, (_forms(text),)))
                elif isinstance(part, Text) and part.text.strip():
                    out.append(Piece(index, "a user text", (_forms(part.text.strip()),)))
        elif isinstance(message, AssistantMessage):
            for item in message.content:
                if isinstance(item, Reasoning):
                    for piece in item.content:
                        if isinstance(piece, ReasoningText) and piece.text.strip():
                            what = f"reasoning {_short(piece.text.strip())!r}"
                            out.append(Piece(index, what, (_forms(piece.text.strip()),)))
                elif isinstance(item, Text) and item.text.strip():
                    what = f"the assistant text {_short(item.text.strip())!r}"
                    out.append(Piece(index, what, (_forms(item.text.strip()),)))
                elif isinstance(item, ToolCall):
                    values = item.arguments if item.arguments is not None else item.raw_arguments
                    needles = ((item.name,), *_leaves(values))
                    what = f"the call {item.name}({_short(_args(item))})"
                    out.append(Piece(index, what, needles))
    return out


def _args(call: ToolCall) -> str:
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def _last(text: str, forms: tuple[str, ...], start: int, end: int) -> int | None:
    """Where the last of `forms` found within `text[start:end]` begins."""
    best = -1
    for form in forms:
        best = max(best, text.rfind(form, start, end))
    return best if best >= 0 else None


def missing_pieces(text: str, wanted: Sequence[Piece]) -> list[Piece]:
    """The pieces `text` does not hold. They are looked for from the end, each before the one
    after it: a text repeated in two turns is then the later turn's where both are rendered,
    and a turn the template prunes from history (the earlier one) is the one found missing."""
    missing = []
    end = len(text)
    for piece in reversed(wanted):
        # A call's values first, then its name before them: the name alone is also in the
        # tools' declarations and, with some templates, in its result's header.
        before = end
        for forms in piece.needles[1:]:
            at = _last(text, forms, 0, end)
            if at is None:
                break
            before = min(before, at)
        else:
            head = _last(text, piece.needles[0], 0, before)
            if head is not None:
                end = head
                continue
        missing.append(piece)
    missing.reverse()
    return missing


def find_drops(
    template: ChatTemplate,
    messages: Sequence[Message],
    text: str,
    chat: Chat,
    tools: list[dict[str, Any]] | None,
    arguments_as: ArgumentsAs,
) -> Drops:
    """The pieces the render `text` of `messages` (as `chat`) left out, told apart (module
    doc): each message with a missing piece is rendered once more, as the conversation's last."""
    wanted = pieces(messages)
    missing = missing_pieces(text, wanted)
    drops = Drops([], [])
    if not missing:
        return drops
    by_message: dict[int, list[Piece]] = {}
    for piece in missing:
        by_message.setdefault(piece.index, []).append(piece)
    for index, gone in by_message.items():
        cut = chat_messages(messages[: index + 1], template, arguments_as)
        try:
            alone, _ = render_chat(template, cut.messages, tools)
        except Exception:  # the cut conversation does not render: nothing shows it is kept
            drops.dropped.extend(gone)
            continue
        still = missing_pieces(alone, [p for p in wanted if p.index <= index])
        for piece in gone:
            (drops.dropped if piece in still else drops.pruned).append(piece)
    drops.dropped.sort(key=lambda p: p.index)
    drops.pruned.sort(key=lambda p: p.index)
    return drops
