"""Amazon Bedrock Converse: `messages` of content blocks, each an object of one key, as the
Converse API takes them and Bedrock's fine-tuning files (`bedrock-conversation-2024`) hold them.

    {"schemaVersion": "bedrock-conversation-2024",
     "system": [{"text": "You are a weather bot."}],
     "messages": [
        {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [
            {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Paris"}}}]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "t1", "content": [{"text": "18 C"}],
                            "status": "success"}}]},
        {"role": "assistant", "content": [{"text": "It is 18 C in Paris."}]}],
     "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather",
                                            "inputSchema": {"json": {...}}}}]}}

Blocks: `text`; `toolUse {toolUseId, name, input}` a call; `toolResult {toolUseId, content,
status}` its result (an error when `status` is "error"; a `{json}` item reads as its JSON text);
`reasoningContent` (`reasoningText {text, signature}` or `redactedContent`) reasoning; any other
block (`image`, `document`, `cachePoint`, ...) is kept as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from transcript_clean.formats.base import (
    MISSING,
    Decoded,
    DecodeError,
    Format,
    Row,
    expect_list,
    expect_object,
    join_texts,
    malformed,
    optional_str,
    parse_arguments,
    put,
    required_str,
    unknown_role,
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
from transcript_clean.tools import Declared, read_declarations

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.conversations import Conversations


class BedrockFormat(Format):
    """`messages` of user / assistant content blocks; `system` and `toolConfig` columns."""

    name = "bedrock"
    default_column = "messages"
    side_columns = ("system",)
    joins_text = False
    merged_field = "content"
    tools_columns = ("toolConfig",)
    words = "Bedrock Converse: blocks text / toolUse / toolResult / reasoningContent"

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
        names: dict[str, str] = {}  # the calls of the last assistant turn, by id
        for i, item in enumerate(items):
            path = f"{column}[{i}]"
            obj = expect_object(item, path)
            role = required_str(obj, "role", path)
            blocks = list(_blocks(obj.get("content"), f"{path}.content"))
            if role == "assistant":
                message = AssistantMessage(_assistant_parts(blocks), origin=obj)
                messages.append(message)
                names = {c.id: c.name for c in message.tool_calls}
            elif role == "user":
                messages.append(UserMessage(_user_parts(blocks, names), origin=obj))
                names = {}
            else:
                raise unknown_role(
                    f"{path}.role", f'unknown role "{role}"; expected user or assistant'
                )
        return Decoded(messages, dict(row), format=self.name)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        """The `messages` and `system` columns flattened (`bedrock.flatten`); None where the
        batch has a `toolConfig` not an object."""
        from transcript_clean.formats.bedrock.flatten import flatten_bedrock, reads_schema

        if not reads_schema(schema, self.tools_column):
            return None
        return flatten_bedrock(column, schema, side or {})

    def declared_tools(self, row: Mapping[str, Any]) -> Declared | None:
        """`toolConfig.tools[].toolSpec`, each `{name, description, inputSchema: {json}}`."""
        if self.tools_column is not None:
            return super().declared_tools(row)
        config = row.get("toolConfig")
        if config is None:
            return None
        specs = _specs(config)
        if specs is None:
            return Declared({}, ("toolConfig: expected an object with a list of tools",))
        return read_declarations(specs, "toolConfig.tools") if specs else None

    def declaration_entries(self, row: Mapping[str, Any]) -> list[Any] | None:
        """The tool specs as `--to` writes them: `{name, description, parameters}`, the JSON
        Schema of `inputSchema.json` as `parameters`."""
        config = row.get("toolConfig")
        if self.tools_column is not None or config is None:
            return None
        return _specs(config)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        systems = [m for m in messages if isinstance(m, SystemMessage)]
        if systems:
            text = join_texts(m.content for m in systems)
            origin = systems[0].origin
            was = origin.get("system", MISSING) if origin is not None else MISSING
            try:
                same = was is not MISSING and _system_text(was) == text
            except DecodeError:
                same = False
            row["system"] = was if same else [{"text": text}]
        row[self.column] = [_message_out(m) for m in messages if not isinstance(m, SystemMessage)]
        return row


def _specs(config: Any) -> list[Any] | None:
    """`toolConfig.tools` with each `toolSpec` as `{name, description, parameters}`; a
    `cachePoint` entry (where prompt caching starts: no tool) left out; any other entry as it
    is, so that it is named as no tool; None when the config holds no list of tools."""
    if not isinstance(config, Mapping) or not isinstance(config.get("tools", []), list):
        return None
    specs: list[Any] = []
    for entry in config.get("tools") or []:
        if isinstance(entry, Mapping) and entry.keys() == {"cachePoint"}:
            continue
        spec = entry.get("toolSpec") if isinstance(entry, Mapping) else None
        if not isinstance(spec, Mapping):
            specs.append(entry)
            continue
        out = {k: v for k, v in spec.items() if k != "inputSchema"}
        schema = spec.get("inputSchema")
        if isinstance(schema, Mapping) and schema.get("json") is not None:
            out["parameters"] = schema["json"]
        specs.append(out)
    return specs


# ---------------------------------------------------------------------------------------------
# decode


def _system_text(system: object) -> str:
    if isinstance(system, str):
        return system
    texts = []
    for k, block in enumerate(expect_list(system, "system")):
        path = f"system[{k}]"
        obj = expect_object(block, path)
        if "text" in obj:
            texts.append(required_str(obj, "text", path))
    return join_texts(texts)


def _blocks(content: object, path: str) -> Iterator[tuple[Mapping[str, Any], str, Any, str]]:
    """Each block: the object, its key, its value and its path."""
    for k, item in enumerate(expect_list(content, path)):
        block_path = f"{path}[{k}]"
        block = expect_object(item, block_path)
        keys = [key for key, value in block.items() if value is not None]
        if not keys:
            raise malformed(block_path, "an empty content block")
        key = keys[0]
        yield block, key, block[key], f"{block_path}.{key}"


def _media(block: Mapping[str, Any], key: str) -> Media:
    return Media(key, dict(block))


def _result_parts(content: object, path: str) -> tuple[ToolResultPart, ...]:
    if content is None:
        return ()
    parts: list[ToolResultPart] = []
    for block, key, value, block_path in _blocks(content, path):
        if key == "text":
            if not isinstance(value, str):
                raise malformed(block_path, "expected a string")
            parts.append(Text(value, origin=block))
        elif key == "json":
            parts.append(Text(json.dumps(value, ensure_ascii=False), origin=block))
        else:
            parts.append(_media(block, key))
    return tuple(parts)


def _user_parts(
    blocks: list[tuple[Mapping[str, Any], str, Any, str]], names: Mapping[str, str]
) -> tuple[UserPart, ...]:
    parts: list[UserPart] = []
    for block, key, value, path in blocks:
        if key == "text":
            parts.append(Text(required_str(block, "text", path.rsplit(".", 1)[0]), origin=block))
        elif key == "toolResult":
            result = expect_object(value, path)
            call_id = required_str(result, "toolUseId", path)
            status = optional_str(result, "status", path)
            if status not in (None, "success", "error"):
                raise malformed(f"{path}.status", f'expected "success" or "error", got "{status}"')
            content = _result_parts(result.get("content"), f"{path}.content")
            state: Literal["success", "error"] = "error" if status == "error" else "success"
            parts.append(ToolResult(call_id, content, names.get(call_id), state, origin=block))
        else:
            parts.append(_media(block, key))
    return tuple(parts)


def _assistant_parts(
    blocks: list[tuple[Mapping[str, Any], str, Any, str]],
) -> tuple[AssistantPart, ...]:
    parts: list[AssistantPart] = []
    for block, key, value, path in blocks:
        if key == "text":
            parts.append(Text(required_str(block, "text", path.rsplit(".", 1)[0]), origin=block))
        elif key == "toolUse":
            use = expect_object(value, path)
            call_id = required_str(use, "toolUseId", path)
            name = required_str(use, "name", path)
            arguments, raw = parse_arguments(use.get("input"))
            parts.append(ToolCall(call_id, name, arguments, raw, origin=block))
        elif key == "reasoningContent":
            content = expect_object(value, path)
            if content.get("redactedContent") is not None:
                data = content["redactedContent"]
                if not isinstance(data, str):
                    raise malformed(f"{path}.redactedContent", "expected a string")
                parts.append(Reasoning((Encrypted(data),)))
                continue
            text = expect_object(content.get("reasoningText"), f"{path}.reasoningText")
            reasoning = ReasoningText(required_str(text, "text", f"{path}.reasoningText"))
            signature = optional_str(text, "signature", f"{path}.reasoningText")
            parts.append(Reasoning((reasoning,), signature=signature))
        else:
            parts.append(_media(block, key))
    return tuple(parts)


# ---------------------------------------------------------------------------------------------
# encode


def _message_out(message: UserMessage | AssistantMessage) -> Row:
    role = "user" if isinstance(message, UserMessage) else "assistant"
    out: Row = {"role": role} if message.origin is None else dict(message.origin)
    was = out.get("content")
    templates = [
        b
        for b in (was if isinstance(was, list) else ())
        if isinstance(b, Mapping) and b.get("reasoningContent") is not None
    ]
    parts: Sequence[UserPart | AssistantPart] = message.content
    if any(isinstance(p, ToolResult) and p.origin is None for p in parts):
        # A result added by a repair goes first, as Converse wants results before any text.
        results = [p for p in parts if isinstance(p, ToolResult)]
        parts = [*results, *(p for p in parts if not isinstance(p, ToolResult))]
    blocks: list[Row] = []
    for part in parts:
        if isinstance(part, Text):
            blocks.append(_text_out(part))
        elif isinstance(part, ToolCall):
            block = dict(part.origin) if part.origin is not None else {}
            use = dict(block.get("toolUse") or {})
            put(use, "toolUseId", part.id)
            put(use, "name", part.name)
            arguments = part.arguments
            if part.raw_arguments is not None and (part.origin is not None or arguments is None):
                arguments = part.raw_arguments
            put(use, "input", arguments)
            block["toolUse"] = use
            blocks.append(block)
        elif isinstance(part, ToolResult):
            blocks.append(_result_out(part))
        elif isinstance(part, Reasoning):
            blocks.append(_reasoning_out(part, templates.pop(0) if templates else None))
        else:
            blocks.append(dict(part.data))
    out["content"] = blocks
    return out


def _text_out(part: Text) -> Row:
    out = dict(part.origin) if part.origin is not None else {}
    if out.get("json") is not None:
        try:
            same = json.dumps(out["json"], ensure_ascii=False) == part.text
        except (TypeError, ValueError):
            same = False
        if same:
            return out
        out = {}
    put(out, "text", part.text)
    return out


def _result_out(result: ToolResult) -> Row:
    block = dict(result.origin) if result.origin is not None else {}
    inner = dict(block.get("toolResult") or {})
    put(inner, "toolUseId", result.call)
    was = inner.get("content")
    if result.content or was is not None:
        inner["content"] = [
            _text_out(p) if isinstance(p, Text) else dict(p.data) for p in result.content
        ]
    if result.status == "error":
        put(inner, "status", "error")
    elif inner.get("status") is not None:
        put(inner, "status", "success")
    block["toolResult"] = inner
    return block


def _reasoning_out(part: Reasoning, template: Mapping[str, Any] | None) -> Row:
    out = dict(template) if template is not None else {}
    encrypted = [p.data for p in part.content if isinstance(p, Encrypted)]
    inner = dict(out.get("reasoningContent") or {})
    if encrypted:
        inner.pop("reasoningText", None)
        put(inner, "redactedContent", "".join(encrypted))
    else:
        inner.pop("redactedContent", None)
        text = dict(inner.get("reasoningText") or {})
        put(text, "text", join_texts(p.text for p in part.content if isinstance(p, ReasoningText)))
        put(text, "signature", part.signature)
        inner["reasoningText"] = text
    out["reasoningContent"] = inner
    return out
