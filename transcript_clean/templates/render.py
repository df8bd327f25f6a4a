"""A canonical transcript rendered as its trainer renders it: the messages and tools that
transformers' `apply_chat_template` takes, the rendered text, the spans the template marks as
generation and, with a tokenizer, the tokens and the trained ones (the assistant mask).

The steps are `apply_chat_template`'s own (transformers 5: keys whose value is None left out,
`render_jinja_template` with the tokenizer's special tokens, the text tokenized without special
tokens, a token trained when it overlaps a generation span), taken apart so that one render
gives both the text, which the drop check reads, and the tokens; a test holds them to
`apply_chat_template(tokenize=True, return_assistant_tokens_mask=True)`.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from transcript_clean.model import (
    JSON,
    AssistantMessage,
    Media,
    Message,
    Reasoning,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
)
from transcript_clean.templates.load import ChatTemplate

__all__ = [
    "ArgumentsAs",
    "Chat",
    "Rendering",
    "arguments_value",
    "chat_messages",
    "render",
    "render_chat",
    "template_tools",
    "trained_ranges",
]

ArgumentsAs = Literal["object", "string"]


@dataclass(slots=True)
class Chat:
    """A transcript as `apply_chat_template` takes it: `messages` (dicts), each one's index in
    the transcript (`origins`: a user message's tool results are one `tool` message each)."""

    messages: list[dict[str, Any]]
    origins: list[int]


@dataclass(slots=True)
class Rendering:
    """One render: its text and generation spans, or the template's error and the message of
    the transcript it raised at (None when it cannot be told)."""

    text: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None
    error_at: int | None = None
    tokens: int | None = None
    """The rendered conversation's tokens (None without a tokenizer)."""
    trained: int | None = None
    """Its tokens in the assistant mask (None without a tokenizer or a template that marks
    generation)."""
    offsets: list[tuple[int, int]] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)

    @property
    def trained_chars(self) -> int:
        return sum(end - start for start, end in self.spans)


def _texts(parts: Iterable[Any]) -> str:
    return "\n".join(p.text for p in parts if isinstance(p, Text))


def arguments_value(call: ToolCall, arguments_as: ArgumentsAs) -> JSON:
    """A call's arguments as the template takes them: the parsed object, or JSON text (the
    row's own text where it has one). Arguments that do not parse stay their text."""
    if call.arguments is None and call.raw_arguments is not None:
        return call.raw_arguments
    if arguments_as == "object":
        return call.arguments
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def _user_content(parts: Sequence[Any]) -> str | list[dict[str, Any]]:
    if not any(isinstance(p, Media) for p in parts):
        return _texts(parts)
    return [
        {"type": "text", "text": p.text} if isinstance(p, Text) else {"type": p.kind} for p in parts
    ]


def chat_messages(
    messages: Sequence[Message], template: ChatTemplate, arguments_as: ArgumentsAs
) -> Chat:
    """The transcript as chat messages: reasoning in the field the template reads, calls as
    OpenAI's `tool_calls` with arguments as `arguments_as`, each tool result a `tool` message.
    A key that would be None is left out, as `apply_chat_template` leaves it out."""
    out: list[dict[str, Any]] = []
    origins: list[int] = []
    reasoning_field = template.reasoning_field
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.content})
            origins.append(index)
        elif isinstance(message, UserMessage):
            pending: list[Any] = []
            for part in (*message.content, None):
                if isinstance(part, ToolResult) or part is None:
                    if pending:
                        out.append({"role": "user", "content": _user_content(pending)})
                        origins.append(index)
                        pending = []
                    if isinstance(part, ToolResult):
                        result: dict[str, Any] = {"role": "tool", "tool_call_id": part.call}
                        if part.name is not None:
                            result["name"] = part.name
                        result["content"] = _texts(part.content)
                        out.append(result)
                        origins.append(index)
                else:
                    pending.append(part)
        else:
            out.append(_assistant(message, reasoning_field, arguments_as))
            origins.append(index)
    return Chat(out, origins)


def _assistant(
    message: AssistantMessage, reasoning_field: str, arguments_as: ArgumentsAs
) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant"}
    text = _texts(message.content)
    calls = message.tool_calls
    if text or not calls:
        out["content"] = text
    reasoning = "\n".join(
        piece.text
        for part in message.content
        if isinstance(part, Reasoning)
        for piece in part.content
        if isinstance(piece, ReasoningText)
    )
    if reasoning:
        out[reasoning_field] = reasoning
    if calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_value(call, arguments_as)},
            }
            for call in calls
        ]
    return out


def template_tools(declarations: Any) -> list[dict[str, Any]] | None:
    """A row's declared tools as templates take them (`tools=`): OpenAI's
    `{"type": "function", "function": {...}}`, from any provider's shape; None for none."""
    if isinstance(declarations, str):
        try:
            declarations = json.loads(declarations)
        except ValueError:
            return None
    if isinstance(declarations, Mapping):
        declarations = [declarations]
    if not isinstance(declarations, list) or not declarations:
        return None
    tools = []
    for entry in declarations:
        if not isinstance(entry, Mapping):
            continue
        if entry.get("type") == "function" and isinstance(entry.get("function"), Mapping):
            tools.append(dict(entry))
        elif isinstance(entry.get("name"), str):
            function = {k: v for k, v in entry.items() if k != "input_schema"}
            if "input_schema" in entry and "parameters" not in entry:
                function["parameters"] = entry["input_schema"]
            tools.append({"type": "function", "function": function})
    return tools or None


def render_chat(
    template: ChatTemplate, chat: Sequence[Mapping[str, Any]], tools: list[dict[str, Any]] | None
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered text and its generation spans; raises what the template raises."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, indices = render_jinja_template(
        conversations=[list(chat)],
        tools=tools,
        chat_template=template.source,
        return_assistant_tokens_mask=template.marks_generation,
        **template.special,
    )
    spans: list[tuple[int, int]] = indices[0] if indices else []
    return str(rendered[0]), spans


def template_words(err: BaseException) -> str:
    """The template's own words for its error, on one line."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def render(
    template: ChatTemplate,
    messages: Sequence[Message],
    declarations: Any,
    arguments_as: ArgumentsAs,
    *,
    keep_mask: bool = False,
) -> tuple[Rendering, Chat, list[dict[str, Any]] | None]:
    """`messages` rendered with `template`, with the row's declared tools; the chat it
    rendered and the tools, for the drop check. With `keep_mask`, the tokens' offsets and mask
    are kept (`explain`)."""
    chat = chat_messages(messages, template, arguments_as)
    tools = template_tools(declarations)
    try:
        text, spans = render_chat(template, chat.messages, tools)
    except Exception as err:  # whatever the template raises: its words are the reject's
        words = template_words(err)
        at = _raised_at(template, chat, tools, words)
        return Rendering(error=words, error_at=at), chat, tools
    rendering = Rendering(text, spans)
    if template.tokenizer is not None:
        _count(template, rendering, keep_mask)
    return rendering, chat, tools


def _raised_at(
    template: ChatTemplate, chat: Chat, tools: list[dict[str, Any]] | None, words: str
) -> int | None:
    """The transcript's message at which the template raises `words`: the end of the shortest
    prefix of the chat that raises them, as a trainer building it turn by turn would find it
    (a shorter one may raise otherwise: Llama 3.1 wants a user message after the system)."""
    for end in range(1, len(chat.messages) + 1):
        try:
            render_chat(template, chat.messages[:end], tools)
        except Exception as err:
            if template_words(err) == words:
                return chat.origins[end - 1]
    return None


def _count(template: ChatTemplate, rendering: Rendering, keep_mask: bool) -> None:
    """The tokens of the text and, where the template marks generation, the trained ones: a
    token is trained when it overlaps a generation span, by `apply_chat_template`'s rule
    (`trained_ranges`), found without a loop over the tokens (a row of an agent trace has
    thousands) or the list of their offsets, which alone cost as much as the rest of the check."""
    encoded = template.tokenizer(rendering.text, add_special_tokens=False)
    if not template.marks_generation:
        rendering.tokens = len(encoded["input_ids"])
        return
    encoding = encoded.encodings[0]
    rendering.tokens = len(encoding)
    ranges = trained_ranges(encoding, rendering.spans)
    rendering.trained = sum(end - start for start, end in ranges)
    if keep_mask:
        rendering.offsets = [(int(a), int(b)) for a, b in encoding.offsets]
        mask = [0] * len(encoding)
        for start, end in ranges:
            mask[start:end] = [1] * (end - start)
        rendering.mask = mask


def trained_ranges(encoding: Any, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The runs of tokens (from, to) of a tokenizers `Encoding` that `apply_chat_template`'s
    assistant mask sets for the generation `spans`. Its rule, a pass over the tokens: a token is
    trained when it ends after the start of the first span that ends after the token starts.
    Tokens' starts and ends go up with their index, as that pass assumes, so the tokens whose
    first such span is span k are a run (from the first starting at or after the end of span
    k-1 to the first starting at or after the end of span k), and the trained ones the end of
    that run (from the first token ending after the start of span k): two binary searches per
    span, over `token_to_chars`."""
    n = len(encoding)
    tokens = range(n)

    def start(i: int) -> int:
        return int(encoding.token_to_chars(i)[0])

    def end(i: int) -> int:
        return int(encoding.token_to_chars(i)[1])

    ranges = []
    low = 0
    for span_start, span_end in spans:
        if low == n:
            break
        high = bisect_left(tokens, span_end, low, n, key=start)
        first = bisect_right(tokens, span_start, low, high, key=end)
        if first < high:
            ranges.append((first, high))
        low = high
    return ranges
