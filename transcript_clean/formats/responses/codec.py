"""OpenAI Responses API items: a conversation as the list of items the Responses API takes as
`input` and gives back as `output` (and the OpenAI Agents SDK keeps as a run's items).

    {"instructions": "You are a weather bot.",
     "input": [
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "reasoning", "id": "rs_1",
         "summary": [{"type": "summary_text", "text": "Look it up."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
         "arguments": "{\\"city\\": \\"Paris\\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "It is 18 C in Paris."}]}],
     "tools": [{"type": "function", "name": "get_weather", "parameters": {...}}]}

Items: `message` (also without `type`: the API's "easy" input message `{role, content}`) of role
system / developer (a system message), user or assistant, its content a string or parts
(`input_text`, `output_text`, `refusal` are text; `input_image`, `input_file`, `input_audio` and
any other part are media, kept as they are); `function_call {call_id, name, arguments}` a call;
`function_call_output {call_id, output}` its result (`output` text, or a list of parts);
`reasoning {summary, content, encrypted_content}` reasoning. The assistant's items between two
user-side items (reasoning, calls, its messages) make one assistant message; a run of
`function_call_output` items makes one user message. Any other item (`web_search_call`,
`custom_tool_call`, `item_reference`, ...) is kept as it is, as a media part of the message it
stands in: on the user's side when its type ends in `_output`, else on the assistant's.
`instructions` (a column) is the system prompt; `tools` (a column) the declared tools, in the
Responses API's flat shape `{type: function, name, parameters}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.formats.base import (
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
    Encrypted,
    Media,
    Message,
    Reasoning,
    ReasoningPiece,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    ToolResultPart,
    UserMessage,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.conversations import Conversations

_SYSTEM_ROLES: Final = ("system", "developer")
_TEXT_PARTS: Final = ("input_text", "output_text", "text")
_RUN: Final = "items"
"""The key of a gathered message's `origin` under which the items it was read from are."""
ITEM_TYPES: Final = frozenset({"message", "function_call", "function_call_output", "reasoning"})
"""The item types that say a list is Responses items (what `auto` looks for)."""


class ResponsesFormat(Format):
    """A list of Responses API items (`input`); `instructions` and `tools` columns."""

    name = "responses"
    default_column = "input"
    joins_text = False
    words = "OpenAI Responses items: message / function_call / function_call_output / reasoning"
    side_columns = ("instructions",)

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        value = row[column]
        messages: list[Message] = []
        instructions = row.get("instructions")
        if instructions is not None:
            if not isinstance(instructions, str):
                raise malformed("instructions", "expected a string or null")
            if instructions:
                messages.append(SystemMessage(instructions, origin={"instructions": True}))
        if isinstance(value, str):  # `input` as one text: the user's message
            messages.append(UserMessage((Text(value),), origin={"input": value}))
            return Decoded(messages, dict(row), format=self.name)
        _Reader(messages).read(expect_list(value, column), column)
        return Decoded(messages, dict(row), format=self.name)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        """The items column flattened (`responses.flatten`), with the batch's `instructions`."""
        from transcript_clean.formats.responses.flatten import flatten_responses

        return flatten_responses(column, side or {}, schema)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        systems = [m for m in messages if isinstance(m, SystemMessage) and m.origin is not None]
        instructions = [m for m in systems if "instructions" in (m.origin or {})]
        if instructions:
            put(row, "instructions", join_texts(m.content for m in instructions))
        elif row.get("instructions"):  # "" and null say the same: no instructions
            row["instructions"] = None
        rest = [m for m in messages if not any(m is x for x in instructions)]
        was = row.get(self.column)
        if (
            isinstance(was, str)
            and len(rest) == 1
            and isinstance(rest[0], UserMessage)
            and rest[0].content == (Text(was),)
        ):
            return row
        items: list[Any] = []
        for message in rest:
            items.extend(_items_out(message))
        row[self.column] = items
        return row


# ---------------------------------------------------------------------------------------------
# decode


class _Reader:
    """Reads items into messages: consecutive assistant-side items join one assistant message,
    consecutive results one user message."""

    __slots__ = ("_calls", "_items", "_parts", "_role", "messages")

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self._role: str | None = None  # the side of the message being gathered
        self._parts: list[Any] = []
        self._items: list[Any] = []  # the items it is read from
        self._calls: dict[str, str] = {}  # the last assistant message's calls: id -> name

    def read(self, items: list[Any], column: str) -> None:
        for i, item in enumerate(items):
            path = f"{column}[{i}]"
            obj = expect_object(item, path)
            kind = obj.get("type")
            if kind is None or kind == "message":
                self._message(obj, path)
            elif kind == "function_call":
                call_id = required_str(obj, "call_id", path)
                name = required_str(obj, "name", path)
                arguments, raw = parse_arguments(obj.get("arguments"))
                self._add("assistant", obj, ToolCall(call_id, name, arguments, raw, origin=obj))
            elif kind == "function_call_output":
                call_id = required_str(obj, "call_id", path)
                if self._role != "results":
                    self._close()  # the calls it answers are known once their message is
                content = _output_parts(obj.get("output"), f"{path}.output")
                result = ToolResult(call_id, content, self._calls.get(call_id), origin=obj)
                self._add("results", obj, result)
            elif kind == "reasoning":
                self._add("assistant", obj, _reasoning(obj, path))
            elif not isinstance(kind, str):
                raise malformed(f"{path}.type", f"expected a string, got {type(kind).__name__}")
            else:
                side = "results" if kind.endswith("_output") else "assistant"
                self._add(side, obj, Media(kind, dict(obj)))
        self._close()

    def _message(self, obj: Mapping[str, Any], path: str) -> None:
        role = required_str(obj, "role", path)
        content = obj.get("content")
        if role in _SYSTEM_ROLES:
            self._close()
            self.messages.append(SystemMessage(_system_text(content, path), origin=obj))
        elif role == "user":
            self._close()
            parts = _content_parts(content, f"{path}.content")
            self.messages.append(UserMessage(tuple(parts), origin=obj))
        elif role == "assistant":
            for part in _content_parts(content, f"{path}.content"):
                self._add("assistant", obj, part)
            if not _holds_parts(content):  # an assistant message with no content at all
                self._add("assistant", obj, None)
        else:
            raise unknown_role(
                f"{path}.role",
                f'unknown role "{role}"; expected system, developer, user or assistant',
            )

    def _add(self, side: str, item: Mapping[str, Any], part: Any) -> None:
        if side != self._role:
            self._close()
            self._role = side
        if not self._items or self._items[-1] is not item:
            self._items.append(item)
        if part is not None:
            self._parts.append(part)

    def _close(self) -> None:
        if self._role == "assistant":
            message = AssistantMessage(tuple(self._parts), origin={_RUN: self._items})
            self.messages.append(message)
            self._calls = {c.id: c.name for c in message.tool_calls}
        elif self._role == "results":
            self.messages.append(UserMessage(tuple(self._parts), origin={_RUN: self._items}))
            self._calls = {}
        self._role, self._parts, self._items = None, [], []


def _holds_parts(content: object) -> bool:
    return isinstance(content, str) or (isinstance(content, list) and bool(content))


def _system_text(content: object, path: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for part in _content_parts(content, f"{path}.content"):
        if not isinstance(part, Text):
            raise malformed(f"{path}.content", f"a system message holds only text, not {part.kind}")
        texts.append(part.text)
    return join_texts(texts)


def _content_parts(content: object, path: str) -> list[Text | Media]:
    """A message's content: a string (one text) or a list of parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [Text(content)]
    parts: list[Text | Media] = []
    for k, item in enumerate(expect_list(content, path)):
        part_path = f"{path}[{k}]"
        part = expect_object(item, part_path)
        kind = required_str(part, "type", part_path)
        if kind in _TEXT_PARTS:
            parts.append(Text(required_str(part, "text", part_path), origin=part))
        elif kind == "refusal":
            parts.append(Text(required_str(part, "refusal", part_path), origin=part))
        else:
            parts.append(Media(kind, dict(part)))
    return parts


def _output_parts(output: object, path: str) -> tuple[ToolResultPart, ...]:
    if output is None:
        return ()
    if isinstance(output, str):
        return (Text(output),)
    return tuple(_content_parts(output, path))


def _reasoning(obj: Mapping[str, Any], path: str) -> Reasoning:
    pieces: list[ReasoningPiece] = []
    for key, kind in (("content", "text"), ("summary", "summary")):
        value = obj.get(key)
        for k, item in enumerate(expect_list(value, f"{path}.{key}") if value is not None else []):
            part = expect_object(item, f"{path}.{key}[{k}]")
            text = required_str(part, "text", f"{path}.{key}[{k}]")
            pieces.append(ReasoningText(text, "summary" if kind == "summary" else "text"))
    encrypted = optional_str(obj, "encrypted_content", path)
    if encrypted is not None:
        pieces.append(Encrypted(encrypted))
    return Reasoning(tuple(pieces), optional_str(obj, "id", path))


# ---------------------------------------------------------------------------------------------
# encode


def _items_out(message: Message) -> list[Any]:
    origin = message.origin
    if isinstance(message, SystemMessage):
        out: Row = dict(origin) if origin is not None else {"type": "message", "role": "system"}
        try:
            same = _system_text(out.get("content"), "message") == message.content
        except DecodeError:
            same = False
        if not same:  # a string where it was one; else parts, as every fresh item has them
            was = out.get("content")
            text = [{"type": "input_text", "text": message.content}]
            out["content"] = message.content if isinstance(was, str) else text
        return [out]
    items = list(origin.get(_RUN, ())) if origin is not None and _RUN in origin else []
    if isinstance(message, UserMessage) and origin is not None and _RUN not in origin:
        items = [origin]
    return _parts_out(message, items)


def _parts_out(message: UserMessage | AssistantMessage, templates: list[Any]) -> list[Any]:
    """The message's parts as items: each call, result, reasoning and kept item its own, each
    run of texts and media one message item (the one it was read from, where there is one).
    A message item that held no part is written back where it stood among the others."""
    assistant = isinstance(message, AssistantMessage)
    role = "assistant" if assistant else "user"
    said = [t for t in templates if t.get("type") in (None, "message")]
    messages = [t for t in said if _holds_parts(t.get("content"))]
    empty = [t for t in said if not _holds_parts(t.get("content"))]
    reasonings = [t for t in templates if t.get("type") == "reasoning"]
    firsts = {id(m["content"][0]) for m in messages if _nonempty_list(m.get("content"))}
    place = {id(t): k for k, t in enumerate(templates)}
    kept = _item_kinds(templates)
    out: list[tuple[float, Any]] = []  # each item with its template's place

    def add(item: Any, template: Any) -> None:
        at = place.get(id(template)) if template is not None else None
        out.append(((out[-1][0] if out else -1.0) if at is None else float(at), item))

    def flush(run: list[Text | Media]) -> None:
        if run:
            template = messages.pop(0) if messages else None
            add(_message_out(role, run, template), template)
            run.clear()

    run: list[Text | Media] = []
    for part in message.content:
        if isinstance(part, Text):
            if run and part.origin is not None and id(part.origin) in firsts:
                flush(run)  # the first text of another message item
            run.append(part)
        elif isinstance(part, Media) and part.kind not in kept:
            run.append(part)
        else:
            flush(run)
            if isinstance(part, ToolCall):
                add(_call_out(part), part.origin)
            elif isinstance(part, ToolResult):
                add(_result_out(part), part.origin)
            elif isinstance(part, Reasoning):
                template = reasonings.pop(0) if reasonings else None
                add(_reasoning_out(part, template), template)
            elif isinstance(part, Media):
                add(dict(part.data), next((t for t in templates if t == part.data), None))
    flush(run)
    for template in empty:  # before the first item that stood after it
        at = place[id(template)]
        k = next((k for k, (key, _) in enumerate(out) if key > at), len(out))
        out.insert(k, (float(at), dict(template)))
    return [item for _, item in out]


def _nonempty_list(value: object) -> bool:
    return isinstance(value, list) and bool(value)


def _item_kinds(templates: list[Any]) -> set[str]:
    """The types of the kept items (web_search_call, ...) among a message's source items."""
    return {
        t["type"] for t in templates if isinstance(t.get("type"), str) and t["type"] != "message"
    }


def _message_out(role: str, parts: list[Text | Media], template: Any) -> Row:
    out: Row = dict(template) if template is not None else {"type": "message", "role": role}
    was = out.get("content")
    if isinstance(was, str) and all(isinstance(p, Text) for p in parts):
        out["content"] = join_texts(p.text for p in parts if isinstance(p, Text))
        return out
    text_type = "output_text" if role == "assistant" else "input_text"
    content: list[Any] = []
    for part in parts:
        if isinstance(part, Media):
            content.append(dict(part.data))
            continue
        block = dict(part.origin) if part.origin is not None else {"type": text_type}
        put(block, "refusal" if block.get("type") == "refusal" else "text", part.text)
        content.append(block)
    out["content"] = content
    return out


def _call_out(call: ToolCall) -> Row:
    out: Row = dict(call.origin) if call.origin is not None else {"type": "function_call"}
    put(out, "call_id", call.id)
    put(out, "name", call.name)
    if call.raw_arguments is not None:
        put(out, "arguments", call.raw_arguments)
    elif call.origin is None or parse_arguments(out.get("arguments")) != (call.arguments, None):
        out["arguments"] = json.dumps(call.arguments, ensure_ascii=False)
    return out


def _result_out(result: ToolResult) -> Row:
    out: Row = dict(result.origin) if result.origin is not None else {}
    out.setdefault("type", "function_call_output")
    put(out, "call_id", result.call)
    try:
        same = _output_parts(out.get("output"), "output") == result.content
    except DecodeError:
        same = False
    if not same:
        if all(isinstance(p, Text) for p in result.content):
            out["output"] = join_texts(p.text for p in result.content if isinstance(p, Text))
        else:
            out["output"] = [
                dict(p.data) if isinstance(p, Media) else {"type": "input_text", "text": p.text}
                for p in result.content
            ]
    return out


def _reasoning_out(part: Reasoning, template: Any) -> Row:
    if template is not None:
        try:
            if _reasoning(template, "reasoning") == part:
                return dict(template)
        except DecodeError:
            pass
    out: Row = dict(template) if template is not None else {"type": "reasoning"}
    summary = [p.text for p in part.content if isinstance(p, ReasoningText) and p.kind == "summary"]
    texts = [p.text for p in part.content if isinstance(p, ReasoningText) and p.kind == "text"]
    encrypted = [p.data for p in part.content if isinstance(p, Encrypted)]
    out["summary"] = [{"type": "summary_text", "text": t} for t in summary]
    if texts or out.get("content") is not None:
        out["content"] = [{"type": "reasoning_text", "text": t} for t in texts]
    if encrypted or out.get("encrypted_content") is not None:
        out["encrypted_content"] = "".join(encrypted) or None
    if part.id is not None:
        put(out, "id", part.id)
    return out
