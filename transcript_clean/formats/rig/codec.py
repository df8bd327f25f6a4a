"""Histories as rig serializes its `Message` (SPEC section 6): the canonical shape of SPEC
section 1, except that parts are tagged `toolcall` / `toolresult` and a call nests
`function: {name, arguments}`.

    {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "id": null, "content": [
            {"type": "toolcall", "id": "call_1",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
             "signature": null, "additional_params": null}]},
        {"role": "user", "content": [
            {"type": "toolresult", "call": "call_1", "name": "get_weather",
             "content": [{"type": "text", "text": "18 C"}]}]},
        {"role": "assistant", "id": null, "content": [
            {"type": "text", "text": "It is 18 C in Paris."}]}]}

A result may carry `"status": "error"`. Every call and result carries its id.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from transcript_clean.errors import UNKNOWN_ROLE
from transcript_clean.formats.base import (
    Decoded,
    DecodeError,
    Format,
    Row,
    expect_list,
    expect_object,
    kind_of,
    malformed,
    optional_str,
    parse_arguments,
    put,
    required_str,
    without_origins,
)
from transcript_clean.model import (
    MEDIA_KINDS,
    AssistantMessage,
    AssistantPart,
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
    UserPart,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.conversations import Conversations


class RigFormat(Format):
    """`messages` as rig serializes its history."""

    name = "rig"
    default_column = "messages"
    joins_text = False
    merged_field = "content"

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        messages: list[Message] = []
        for i, item in enumerate(expect_list(row[column], column)):
            path = f"{column}[{i}]"
            obj = expect_object(item, path)
            role = required_str(obj, "role", path)
            if role == "system":
                messages.append(SystemMessage(required_str(obj, "content", path), origin=obj))
            elif role == "user":
                parts = tuple(_user_part(p, pp) for p, pp in _items(obj, path))
                messages.append(UserMessage(parts, origin=obj))
            elif role == "assistant":
                content = tuple(_assistant_part(p, pp) for p, pp in _items(obj, path))
                message_id = optional_str(obj, "id", path)
                messages.append(AssistantMessage(content, message_id, origin=obj))
            else:
                raise DecodeError(
                    UNKNOWN_ROLE,
                    f"{path}.role",
                    f'unknown role "{role}"; expected system, user or assistant',
                )
        return Decoded(messages, dict(row), format=self.name)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.rig.flatten import flatten_rig

        return flatten_rig(column)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        row[self.column] = [_message_out(m) for m in messages]
        return row


# ---------------------------------------------------------------------------------------------
# decode


def _items(obj: Mapping[str, Any], path: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Each part of a message's `content` list, with its path."""
    content = obj.get("content")
    if content is None:
        raise malformed(path, 'missing "content"')
    for k, item in enumerate(expect_list(content, f"{path}.content")):
        part_path = f"{path}.content[{k}]"
        yield expect_object(item, part_path), part_path


def _opt_object(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise malformed(f"{path}.{key}", f"expected an object or null, got {kind_of(value)}")
    return value


def _media(part: Mapping[str, Any], kind: str) -> Media:
    return Media(kind, {key: value for key, value in part.items() if key != "type"})


def _user_part(part: Mapping[str, Any], path: str) -> UserPart:
    kind = required_str(part, "type", path)
    if kind == "text":
        return Text(required_str(part, "text", path), origin=part)
    if kind == "toolresult":
        status = part.get("status")
        if status not in (None, "success", "error"):
            raise malformed(f"{path}.status", f'expected "success" or "error", got {status!r}')
        return ToolResult(
            required_str(part, "call", path),
            tuple(_result_part(p, pp) for p, pp in _items(part, path)),
            optional_str(part, "name", path),
            "error" if status == "error" else "success",
            origin=part,
        )
    if kind in MEDIA_KINDS:
        return _media(part, kind)
    raise malformed(f"{path}.type", f'unknown user part type "{kind}"')


def _result_part(part: Mapping[str, Any], path: str) -> ToolResultPart:
    kind = required_str(part, "type", path)
    if kind == "text":
        return Text(required_str(part, "text", path), origin=part)
    if kind == "image":
        return _media(part, kind)
    raise malformed(f"{path}.type", f'expected "text" or "image", got "{kind}"')


def _assistant_part(part: Mapping[str, Any], path: str) -> AssistantPart:
    kind = required_str(part, "type", path)
    if kind == "text":
        text = required_str(part, "text", path)
        return Text(text, _opt_object(part, "additional_params", path), origin=part)
    if kind == "toolcall":
        function = part.get("function")
        if function is None:
            raise malformed(path, 'missing "function"')
        function = expect_object(function, f"{path}.function")
        arguments, raw = parse_arguments(function.get("arguments"))
        return ToolCall(
            required_str(part, "id", path),
            required_str(function, "name", f"{path}.function"),
            arguments,
            raw,
            optional_str(part, "signature", path),
            _opt_object(part, "additional_params", path),
            origin=part,
        )
    if kind == "reasoning":
        pieces = part.get("content")
        if pieces is None:
            raise malformed(path, 'missing "content"')
        return Reasoning(
            tuple(
                _piece(p, f"{path}.content[{k}]")
                for k, p in enumerate(expect_list(pieces, f"{path}.content"))
            ),
            optional_str(part, "id", path),
            optional_str(part, "signature", path),
        )
    if kind == "image":
        return _media(part, kind)
    raise malformed(f"{path}.type", f'unknown assistant part type "{kind}"')


def _piece(item: object, path: str) -> ReasoningPiece:
    piece = expect_object(item, path)
    kind = required_str(piece, "type", path)
    if kind in ("text", "summary"):
        text = required_str(piece, "text", path)
        return ReasoningText(text, "text" if kind == "text" else "summary")
    if kind == "encrypted":
        return Encrypted(required_str(piece, "data", path))
    raise malformed(f"{path}.type", f'expected "text", "summary" or "encrypted", got "{kind}"')


# ---------------------------------------------------------------------------------------------
# encode


def _message_out(message: Message) -> Row:
    origin = message.origin
    out: Row
    if isinstance(message, SystemMessage):
        out = dict(origin) if origin is not None else {"role": "system"}
        put(out, "content", message.content)
        return out
    if isinstance(message, UserMessage):
        out = dict(origin) if origin is not None else {"role": "user"}
        out["content"] = [_user_part_out(p) for p in message.content]
        return out
    if origin is None:
        out = {"role": "assistant", "id": message.id}
    else:
        out = dict(origin)
        put(out, "id", message.id)
    # A reasoning part has no origin of its own: the k-th is written over the k-th reasoning
    # part of the source, so that the keys it does not use come back too.
    was = origin.get("content") if origin is not None else None
    templates = [
        p
        for p in (was if isinstance(was, list) else ())
        if isinstance(p, Mapping) and p.get("type") == "reasoning"
    ]
    out["content"] = [
        _reasoning_out(p, templates.pop(0) if templates else None)
        if isinstance(p, Reasoning)
        else _assistant_part_out(p)
        for p in message.content
    ]
    return out


def _text_out(part: Text, annotated: bool) -> Row:
    if part.origin is None:
        out: Row = {"type": "text", "text": part.text}
        if annotated and part.additional_params is not None:
            out["additional_params"] = part.additional_params
        return out
    out = dict(part.origin)
    put(out, "text", part.text)
    if annotated:
        put(out, "additional_params", part.additional_params)
    return out


def _media_out(part: Media) -> Row:
    return {"type": part.kind, **part.data}


def _user_part_out(part: UserPart) -> Row:
    if isinstance(part, Text):
        return _text_out(part, annotated=False)
    if isinstance(part, Media):
        return _media_out(part)
    content = [_text_out(p, False) if isinstance(p, Text) else _media_out(p) for p in part.content]
    if part.origin is None:
        out: Row = {"type": "toolresult", "call": part.call, "name": part.name, "content": content}
        if part.status == "error":
            out["status"] = "error"
        return out
    out = dict(part.origin)
    put(out, "call", part.call)
    put(out, "name", part.name)
    out["content"] = content
    if part.status == "error":
        put(out, "status", "error")
    elif out.get("status") is not None:
        out["status"] = "success"
    return out


def _assistant_part_out(part: AssistantPart) -> Row:
    if isinstance(part, Text):
        return _text_out(part, annotated=True)
    if isinstance(part, Media):
        return _media_out(part)
    if not isinstance(part, ToolCall):
        raise TypeError(f"{type(part).__name__} is not written here")
    if part.raw_arguments is None or (part.origin is None and isinstance(part.arguments, dict)):
        arguments = part.arguments
    else:
        arguments = part.raw_arguments
    if part.origin is None:
        return {
            "type": "toolcall",
            "id": part.id,
            "function": {"name": part.name, "arguments": arguments},
            "signature": part.signature,
            "additional_params": part.additional_params,
        }
    out = dict(part.origin)
    function = dict(out.get("function") or {})
    put(function, "name", part.name)
    put(function, "arguments", arguments)
    put(out, "id", part.id)
    out["function"] = function
    put(out, "signature", part.signature)
    put(out, "additional_params", part.additional_params)
    return out


def _reasoning_out(part: Reasoning, template: Mapping[str, Any] | None) -> Row:
    if template is None:
        out: Row = {"type": "reasoning", "id": part.id, "signature": part.signature}
        pieces: list[Any] = []
    else:
        out = dict(template)
        put(out, "id", part.id)
        put(out, "signature", part.signature)
        was = out.get("content")
        pieces = was if isinstance(was, list) else []
    content = []
    for k, piece in enumerate(part.content):
        kind = "encrypted" if isinstance(piece, Encrypted) else piece.kind
        was_piece = pieces[k] if k < len(pieces) else None
        if isinstance(was_piece, Mapping) and was_piece.get("type") == kind:
            piece_out = dict(was_piece)
        else:
            piece_out = {"type": kind}
        if isinstance(piece, Encrypted):
            put(piece_out, "data", piece.data)
        else:
            put(piece_out, "text", piece.text)
        content.append(piece_out)
    out["content"] = content
    return out
