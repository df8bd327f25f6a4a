"""What Hermes' turn values hold, read as its decoder reads them: the tags a turn's `from` may
hold, a gpt turn's reasoning, text and calls, a tool turn's results and the system prompt's
`<tools>` block. The codec and the flattener both read values with these."""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final

from transcript_clean.formats.base import IdMinter, kind_of, malformed, parse_arguments
from transcript_clean.jsontext import dumps, loads
from transcript_clean.model import AssistantPart, Reasoning, ReasoningText, Text, ToolCall
from transcript_clean.tools import Declared, read_declarations

__all__ = [
    "TAGS",
    "assistant_parts",
    "assistant_tags",
    "literal",
    "prompt_tools",
    "read_responses",
    "read_tools_block",
    "response",
]

TAGS: Final[Mapping[str, str]] = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "tool": "tool",
}
"""What each turn tag stands for: Hermes' own (system / human / gpt / tool) and the role names
some of its derivatives write."""

ASSISTANT_TAGS = re.compile(r"<(tool_call|think)>(.*?)</\1>", re.DOTALL)
"""A gpt turn's tags and their bodies (`assistant_tags`)."""
_RESPONSE = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)
_TOOLS = re.compile(r"<tools>(.*?)</tools>", re.DOTALL)


# `ast.literal_eval` compiles the text, and an invalid escape in a string of it (`'\\<'`) warns
# (SyntaxWarning from Python 3.12, shown by default), as `-W error` makes it a SyntaxError: the
# same row would read otherwise. The text is data, not the user's code: the warnings of what is
# compiled from a string (`<unknown>`) about its escapes are not shown, nor raised.
for _category in (DeprecationWarning, SyntaxWarning):
    warnings.filterwarnings("ignore", "invalid escape sequence", _category, "<unknown>")


def literal(text: str) -> Any:
    """A JSON value written as JSON, or as the Python literal Hermes data often holds
    (`{'name': 'f', 'arguments': {'on': True}}`); raises ValueError when it is neither."""
    try:
        return loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError) as err:
        raise ValueError("neither JSON nor a Python literal") from err
    if not _plain(value):
        raise ValueError("not a JSON value")
    return value


def _plain(value: object) -> bool:
    """Whether a literal holds only what JSON can: objects with string keys, lists, strings,
    numbers, booleans and None (no tuple, set, bytes or complex number)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif not (item is None or isinstance(item, str | int | float)):
            return False
    return True


def assistant_tags(value: str) -> tuple[list[tuple[str, str]], str]:
    """A gpt turn's `<think>` and `<tool_call>` tags in order, each `(tag, body)` with its body
    stripped, and the text outside them, stripped: what `assistant_parts` and the flattener's
    fast read each make parts of."""
    tags: list[tuple[str, str]] = []
    outside: list[str] = []
    end = 0
    for match in ASSISTANT_TAGS.finditer(value):
        outside.append(value[end : match.start()])
        end = match.end()
        tags.append((match.group(1), match.group(2).strip()))
    outside.append(value[end:])
    return tags, "".join(outside).strip()


def assistant_parts(value: str, path: str, i: int, mint: IdMinter) -> tuple[AssistantPart, ...]:
    """The parts of a gpt turn's value (turn `i`, at `path`): its `<think>` blocks, the text
    outside the tags (stripped) and its `<tool_call>`s, ids minted by `mint`; raises
    `DecodeError`. The decoder and the flattener both read a tagged turn with this."""
    reasoning: list[AssistantPart] = []
    calls: list[AssistantPart] = []
    tags, text = assistant_tags(value)
    for tag, body in tags:
        if tag == "think":
            reasoning.append(Reasoning((ReasoningText(body),)))
            continue
        k = len(calls)
        try:
            obj = literal(body)
        except ValueError:
            raise malformed(path, f"<tool_call> {k}: not a JSON object") from None
        if not isinstance(obj, Mapping):
            raise malformed(path, f"<tool_call> {k}: expected an object, got {kind_of(obj)}")
        name = obj.get("name")
        if not isinstance(name, str):
            raise malformed(path, f'<tool_call> {k}: missing "name"')
        arguments, raw = parse_arguments(obj.get("arguments"))
        calls.append(ToolCall(mint(f"call_{i}_{k}"), name, arguments, raw))
    if "<tool_call>" in text:
        raise malformed(path, "a <tool_call> with no </tool_call>")
    # A turn of calls alone has no text; a turn with nothing at all is an empty text (R1's).
    texts: list[AssistantPart] = [Text(text)] if text or not (calls or reasoning) else []
    return (*reasoning, *texts, *calls)


def read_responses(value: str) -> list[tuple[str | None, str]]:
    """The results of a tool turn: `(name, text)` per `<tool_response>` (the whole value when
    it has none). A body `{"name", "content"}` is a result of that name whose text is its
    content (a string as it is, anything else as JSON); any other body is the text itself."""
    bodies = _RESPONSE.findall(value) or [value]
    out: list[tuple[str | None, str]] = []
    for body in bodies:
        body = body.strip()
        try:
            obj = literal(body) if body[:1] == "{" else None
        except ValueError:
            obj = None
        out.append(response(body, obj))
    return out


def response(body: str, obj: object) -> tuple[str | None, str]:
    """The result a `<tool_response>` body (stripped) holds, given the value read from it (None
    where it is none): `(name, content)` for a `{"name", "content"}` object, else `(None, body)`
    (`read_responses`; the flattener's column read too)."""
    if isinstance(obj, Mapping) and isinstance(obj.get("name"), str) and "content" in obj:
        content = obj["content"]
        return obj["name"], content if isinstance(content, str) else dumps(content)
    return None, body


def prompt_tools(value: str) -> str | None:
    """The body of a system prompt's first `<tools>` block that holds something, else None."""
    # The prompt's prose names the tags too ("within <tools></tools> XML tags").
    return next((b for b in _TOOLS.findall(value) if b.strip()), None)


@lru_cache(maxsize=1024)
def read_tools_block(body: str) -> tuple[Declared | None, Any]:
    """The declarations of a system prompt's `<tools>` block (a JSON or Python literal list, or
    one object per line as Qwen's chat template writes them), and the value they were read
    from (None where the block is neither)."""
    where = "the system prompt's <tools>"
    body = body.strip()
    try:
        value = literal(body)
        return read_declarations(value, where), value
    except ValueError:
        pass
    try:
        value = [literal(line) for line in body.splitlines() if line.strip()]
        return read_declarations(value, where), value
    except ValueError:
        return Declared({}, (f"{where}: not JSON",)), None
