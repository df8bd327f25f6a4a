"""The Anthropic Messages format (SPEC section 6): `messages` of user / assistant turns whose
content is a string or a list of blocks, and the system prompt in its own `system` column.

    {"system": "You are a weather bot.",
     "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should look it up.", "signature": "..."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]},
        {"role": "assistant", "content": "It is 18 C in Paris."}]}

Blocks: text; tool_use `{id, name, input}` is a call; tool_result `{tool_use_id, content,
is_error}` its result (an error when `is_error`); thinking `{thinking, signature}` and
redacted_thinking `{data}` are reasoning; image, document and any other block are kept as media.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from transcript_clean.errors import UNKNOWN_ROLE
from transcript_clean.formats.anthropic.blocks import result_out as _result_out
from transcript_clean.formats.anthropic.blocks import text_out as _text_out
from transcript_clean.formats.base import (
    MISSING,
    Decoded,
    DecodeError,
    Format,
    Row,
    expect_list,
    expect_object,
    join_texts,
    kind_of,
    malformed,
    optional_str,
    parse_arguments,
    put,
    required_str,
    without_origins,
)
from transcript_clean.model import (
    AssistantMessage,
    AssistantPart,
    Encrypted,
    Media,
    Message,
    Reasoning,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    ToolResultPart,
    UserMessage,
    UserPart,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.arrays import Counts, Mask
    from transcript_clean.columnar.conversations import Conversations
    from transcript_clean.columnar.edits import Edits

_REASONING_BLOCKS = ("thinking", "redacted_thinking")


class AnthropicFormat(Format):
    """`messages` of user / assistant with string or block content; a `system` column."""

    name = "anthropic"
    default_column = "messages"
    side_columns = ("system",)
    joins_text = False
    merged_field = "content"
    writes_results = True

    def result_holders(
        self, column: pa.Array, conversations: Conversations, messages: Counts
    ) -> Mask | None:
        from transcript_clean.formats.anthropic.results import item_holders

        return item_holders(column, conversations, messages)

    def write(self, column: pa.Array, edits: Edits) -> pa.Array | None:
        """Messages dropped and merged as every format whose messages are items writes them
        (`Format.write`), and R5's error results among the blocks of the user messages that
        answer their calls (`anthropic.results.write_error_results`)."""
        if not edits.inserting:
            return super().write(column, edits)
        written = super().write(column, replace(edits, inserts=None))
        if written is None:
            return None
        from transcript_clean.formats.anthropic.results import write_error_results

        return write_error_results(column, written, edits)

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        items = expect_list(row[column], column)
        messages: list[Message] = []
        system = row.get("system")
        if system is not None:
            text = _system_text(system)
            if text:
                messages.append(SystemMessage(text, origin={"system": system}))

        answers: tuple[ToolCall, ...] = ()  # the calls of the last assistant turn
        for i, item in enumerate(items):
            path = f"{column}[{i}]"
            obj = expect_object(item, path)
            role = required_str(obj, "role", path)
            if role not in ("user", "assistant"):
                raise DecodeError(
                    UNKNOWN_ROLE,
                    f"{path}.role",
                    f'unknown role "{role}"; expected user or assistant (the system prompt '
                    'goes in the "system" column)',
                )
            content = obj.get("content")
            if content is None:
                raise malformed(path, 'missing "content"')
            if role == "user":
                names = {c.id: c.name for c in answers}
                messages.append(UserMessage(_user_parts(content, f"{path}.content", names), obj))
                answers = ()
            else:
                message = AssistantMessage(_assistant_parts(content, f"{path}.content"), origin=obj)
                messages.append(message)
                answers = message.tool_calls
        return Decoded(messages, dict(row), format=self.name)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.anthropic.flatten import flatten_anthropic

        return flatten_anthropic(column, schema, side or {})

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        systems = [m for m in messages if isinstance(m, SystemMessage)]
        if systems:
            # The format has one system prompt: every system message goes there.
            text = join_texts(m.content for m in systems)
            origin = systems[0].origin
            was = origin.get("system", MISSING) if origin is not None else MISSING
            row["system"] = was if was is not MISSING and _same_system(was, text) else text
        row[self.column] = [_message_out(m) for m in messages if not isinstance(m, SystemMessage)]
        return row


# ---------------------------------------------------------------------------------------------
# decode


def _system_text(system: object) -> str:
    if isinstance(system, str):
        return system
    texts = []
    for k, block in enumerate(expect_list(system, "system")):
        path = f"system[{k}]"
        if expect_object(block, path).get("type") != "text":
            raise malformed(path, "the system prompt holds only text blocks")
        texts.append(required_str(block, "text", path))
    return join_texts(texts)


def _same_system(was: object, text: str) -> bool:
    try:
        return _system_text(was) == text
    except DecodeError:
        return False


def _blocks(content: object, path: str) -> Iterator[tuple[Mapping[str, Any], str, str]]:
    """Each block of a list content, its type and its path."""
    for k, item in enumerate(expect_list(content, path)):
        block_path = f"{path}[{k}]"
        block = expect_object(item, block_path)
        yield block, required_str(block, "type", block_path), block_path


def _media(block: Mapping[str, Any], type_: str) -> Media:
    return Media(type_, {key: value for key, value in block.items() if key != "type"})


def _result_parts(content: object, path: str) -> tuple[ToolResultPart, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),)
    parts: list[ToolResultPart] = []
    for block, type_, block_path in _blocks(content, path):
        if type_ == "text":
            parts.append(Text(required_str(block, "text", block_path), origin=block))
        else:
            parts.append(_media(block, type_))
    return tuple(parts)


def _user_parts(content: object, path: str, names: Mapping[str, str]) -> tuple[UserPart, ...]:
    if isinstance(content, str):
        return (Text(content),)
    parts: list[UserPart] = []
    for block, type_, block_path in _blocks(content, path):
        if type_ == "text":
            parts.append(Text(required_str(block, "text", block_path), origin=block))
        elif type_ == "tool_result":
            call_id = required_str(block, "tool_use_id", block_path)
            is_error = block.get("is_error")
            if is_error is not None and not isinstance(is_error, bool):
                raise malformed(
                    f"{block_path}.is_error", f"expected a boolean, got {kind_of(is_error)}"
                )
            parts.append(
                ToolResult(
                    call_id,
                    _result_parts(block.get("content"), f"{block_path}.content"),
                    names.get(call_id),
                    "error" if is_error else "success",
                    origin=block,
                )
            )
        else:
            parts.append(_media(block, type_))
    return tuple(parts)


def _assistant_parts(content: object, path: str) -> tuple[AssistantPart, ...]:
    if isinstance(content, str):
        return (Text(content),)
    parts: list[AssistantPart] = []
    for block, type_, block_path in _blocks(content, path):
        if type_ == "text":
            parts.append(Text(required_str(block, "text", block_path), origin=block))
        elif type_ == "tool_use":
            call_id = required_str(block, "id", block_path)
            name = required_str(block, "name", block_path)
            arguments, raw = parse_arguments(block.get("input"))
            parts.append(ToolCall(call_id, name, arguments, raw, origin=block))
        elif type_ == "thinking":
            thinking = ReasoningText(required_str(block, "thinking", block_path))
            signature = optional_str(block, "signature", block_path)
            parts.append(Reasoning((thinking,), signature=signature))
        elif type_ == "redacted_thinking":
            parts.append(Reasoning((Encrypted(required_str(block, "data", block_path)),)))
        else:
            parts.append(_media(block, type_))
    return tuple(parts)


# ---------------------------------------------------------------------------------------------
# encode


def _message_out(message: UserMessage | AssistantMessage) -> Row:
    role = "user" if isinstance(message, UserMessage) else "assistant"
    parts: Sequence[UserPart | AssistantPart] = message.content
    if message.origin is None:
        out: Row = {"role": role}
        was: Any = MISSING
    else:
        out = dict(message.origin)
        was = out.get("content")
    if all(isinstance(p, Text) for p in parts) and (
        isinstance(was, str) or (was is MISSING and len(parts) == 1)
    ):
        out["content"] = join_texts(p.text for p in parts if isinstance(p, Text))
    else:
        out["content"] = list(_blocks_out(parts, was))
    return out


def _blocks_out(parts: Sequence[UserPart | AssistantPart], was: Any) -> Iterator[Row]:
    # A reasoning part has no origin of its own: the k-th is written over the k-th reasoning
    # block of the source, so that the keys it does not use come back too.
    templates = [
        b
        for b in (was if isinstance(was, list) else ())
        if isinstance(b, Mapping) and b.get("type") in _REASONING_BLOCKS
    ]
    for part in parts:
        if isinstance(part, Text):
            yield _text_out(part)
        elif isinstance(part, ToolCall):
            out = dict(part.origin) if part.origin is not None else {"type": "tool_use"}
            put(out, "id", part.id)
            put(out, "name", part.name)
            put(out, "input", _input_out(part))
            yield out
        elif isinstance(part, ToolResult):
            yield _result_out(part)
        elif isinstance(part, Reasoning):
            yield _reasoning_out(part, templates.pop(0) if templates else None)
        else:
            yield {"type": part.kind, **part.data}


def _input_out(call: ToolCall) -> Any:
    if call.raw_arguments is None:
        return call.arguments
    if call.origin is None and isinstance(call.arguments, dict):
        return call.arguments  # a fresh call: Anthropic's input is an object
    return call.raw_arguments


def _reasoning_out(part: Reasoning, template: Mapping[str, Any] | None) -> Row:
    encrypted = [p.data for p in part.content if isinstance(p, Encrypted)]
    type_ = "redacted_thinking" if encrypted else "thinking"
    out = dict(template) if template is not None and template.get("type") == type_ else {}
    out["type"] = type_
    if encrypted:
        put(out, "data", "".join(encrypted))
    else:
        texts = (p.text for p in part.content if isinstance(p, ReasoningText))
        put(out, "thinking", join_texts(texts))
        put(out, "signature", part.signature)
    return out
