"""The canonical message model (SPEC section 1): rig's `Message`, as immutable Python values.

Every input format decodes to these types; validation and repair only ever see them.
`parse_messages` reads the JSON shape of SPEC section 1 and `dump_messages` writes it back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from transcript_clean.errors import ModelError

JSON: TypeAlias = Any
"""Any JSON value: what `json.loads` returns."""

# Messages and the parts a format maps one-to-one carry `origin`: the source object a decoder read
# them from, so that its encoder can write back the keys it does not use. It is not part of the
# value (equality ignores it, `dump_messages` omits it), and `dataclasses.replace` carries it over,
# so a repaired message keeps its source's extra keys.

MEDIA_KINDS = frozenset({"image", "audio", "video", "document"})


@dataclass(slots=True, frozen=True)
class Text:
    """A text part. Only an assistant's text carries `additional_params`."""

    text: str
    additional_params: Mapping[str, JSON] | None = None
    origin: Mapping[str, JSON] | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True, frozen=True)
class Media:
    """An image, audio, video or document part, kept as the source wrote it."""

    kind: str
    data: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class ToolCall:
    """A call the assistant made. `arguments` is None when `raw_arguments` does not parse."""

    id: str
    name: str
    arguments: JSON
    raw_arguments: str | None = None
    signature: str | None = None
    additional_params: Mapping[str, JSON] | None = None
    origin: Mapping[str, JSON] | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True, frozen=True)
class ReasoningText:
    """A piece of visible reasoning: its full text or a summary."""

    text: str
    kind: Literal["text", "summary"] = "text"


@dataclass(slots=True, frozen=True)
class Encrypted:
    """An opaque, provider-encrypted piece of reasoning."""

    data: str


ReasoningPiece: TypeAlias = ReasoningText | Encrypted


@dataclass(slots=True, frozen=True)
class Reasoning:
    """The assistant's reasoning before it answered."""

    content: tuple[ReasoningPiece, ...] = ()
    id: str | None = None
    signature: str | None = None


ToolResultPart: TypeAlias = Text | Media


@dataclass(slots=True, frozen=True)
class ToolResult:
    """The answer to the call `call`, given in a user message."""

    call: str
    content: tuple[ToolResultPart, ...]
    name: str | None = None
    status: Literal["success", "error"] = "success"
    origin: Mapping[str, JSON] | None = field(default=None, compare=False, repr=False)


UserPart: TypeAlias = Text | ToolResult | Media
AssistantPart: TypeAlias = Text | ToolCall | Reasoning | Media


@dataclass(slots=True, frozen=True)
class SystemMessage:
    content: str
    origin: Mapping[str, JSON] | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True, frozen=True)
class UserMessage:
    content: tuple[UserPart, ...]
    origin: Mapping[str, JSON] | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True, frozen=True)
class AssistantMessage:
    content: tuple[AssistantPart, ...]
    id: str | None = None
    origin: Mapping[str, JSON] | None = field(default=None, compare=False, repr=False)
    tool_calls: tuple[ToolCall, ...] = field(init=False, compare=False, repr=False)
    """The calls among `content`, in order: worked out once (the rules and codecs read them
    again and again, about 30 times a row on the per-row path), never set."""

    def __post_init__(self) -> None:
        calls = tuple([p for p in self.content if isinstance(p, ToolCall)])
        object.__setattr__(self, "tool_calls", calls)


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage


def is_json(value: object) -> bool:
    """Whether `value` can be written as strict JSON: no NaN or infinite number, and no string
    (key or value) with a lone surrogate. Iterative, so that any depth is fine."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return False
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if isinstance(key, str) and not _encodable(key):
                    return False
                stack.append(child)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def user(*parts: UserPart | str) -> UserMessage:
    """A user message; a plain string becomes a text part."""
    return UserMessage(tuple(Text(p) if isinstance(p, str) else p for p in parts))


def assistant(*parts: AssistantPart | str, id: str | None = None) -> AssistantMessage:
    """An assistant message; a plain string becomes a text part."""
    return AssistantMessage(tuple(Text(p) if isinstance(p, str) else p for p in parts), id=id)


def system(text: str) -> SystemMessage:
    return SystemMessage(text)


def message_texts(message: Message) -> Iterable[str]:
    """The texts a message holds: what its characters (and tokens) are counted over."""
    if isinstance(message, SystemMessage):
        yield message.content
        return
    for part in message.content:
        if isinstance(part, Text):
            yield part.text
        elif isinstance(part, ToolResult):
            yield from (p.text for p in part.content if isinstance(p, Text))
        elif isinstance(part, Reasoning):
            yield from (p.text for p in part.content if isinstance(p, ReasoningText))


# ---------------------------------------------------------------------------------------------
# parse: JSON -> model


class _Reader:
    """Reads one JSON object, naming the path of whatever is wrong with it."""

    __slots__ = ("obj", "path")

    def __init__(self, obj: object, path: str) -> None:
        if not isinstance(obj, Mapping):
            raise ModelError(f"{path}: expected an object, got {_kind(obj)}")
        self.obj: Mapping[str, Any] = obj
        self.path = path

    def get(self, key: str) -> Any:
        return self.obj.get(key)

    def text(self, key: str) -> str:
        value = self.obj.get(key)
        if key not in self.obj:
            raise ModelError(f'{self.path}: missing "{key}"')
        if not isinstance(value, str):
            raise ModelError(f"{self.path}.{key}: expected a string, got {_kind(value)}")
        return value

    def opt_str(self, key: str) -> str | None:
        value = self.obj.get(key)
        if value is not None and not isinstance(value, str):
            raise ModelError(f"{self.path}.{key}: expected a string or null, got {_kind(value)}")
        return value

    def opt_obj(self, key: str) -> Mapping[str, JSON] | None:
        value = self.obj.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise ModelError(f"{self.path}.{key}: expected an object or null, got {_kind(value)}")
        return value

    def items(self, key: str) -> list[Any]:
        value = self.obj.get(key)
        if key not in self.obj:
            raise ModelError(f'{self.path}: missing "{key}"')
        if not isinstance(value, list):
            raise ModelError(f"{self.path}.{key}: expected a list, got {_kind(value)}")
        return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _media(r: _Reader, kind: str) -> Media:
    return Media(kind, {k: v for k, v in r.obj.items() if k != "type"})


def _parse_text(r: _Reader, annotated: bool) -> Text:
    return Text(r.text("text"), r.opt_obj("additional_params") if annotated else None)


def _parse_tool_result_part(obj: object, path: str) -> ToolResultPart:
    r = _Reader(obj, path)
    kind = r.text("type")
    if kind == "text":
        return _parse_text(r, annotated=False)
    if kind == "image":
        return _media(r, kind)
    raise ModelError(f'{path}.type: expected "text" or "image", got "{kind}"')


def _parse_user_part(obj: object, path: str) -> UserPart:
    r = _Reader(obj, path)
    kind = r.text("type")
    if kind == "text":
        return _parse_text(r, annotated=False)
    if kind == "tool_result":
        status = r.obj.get("status", "success")
        if status not in ("success", "error"):
            raise ModelError(f'{path}.status: expected "success" or "error", got {status!r}')
        content = r.items("content")
        return ToolResult(
            call=r.text("call"),
            name=r.opt_str("name"),
            content=tuple(
                _parse_tool_result_part(p, f"{path}.content[{i}]") for i, p in enumerate(content)
            ),
            status=status,
        )
    if kind in MEDIA_KINDS:
        return _media(r, kind)
    raise ModelError(f'{path}.type: unknown user part type "{kind}"')


def _parse_reasoning_piece(obj: object, path: str) -> ReasoningPiece:
    r = _Reader(obj, path)
    kind = r.text("type")
    if kind in ("text", "summary"):
        return ReasoningText(r.text("text"), kind)  # type: ignore[arg-type]
    if kind == "encrypted":
        return Encrypted(r.text("data"))
    raise ModelError(f'{path}.type: expected "text", "summary" or "encrypted", got "{kind}"')


def _parse_assistant_part(obj: object, path: str) -> AssistantPart:
    r = _Reader(obj, path)
    kind = r.text("type")
    if kind == "text":
        return _parse_text(r, annotated=True)
    if kind == "tool_call":
        return ToolCall(
            id=r.text("id"),
            name=r.text("name"),
            arguments=r.get("arguments"),
            raw_arguments=r.opt_str("raw_arguments"),
            signature=r.opt_str("signature"),
            additional_params=r.opt_obj("additional_params"),
        )
    if kind == "reasoning":
        pieces = r.items("content")
        return Reasoning(
            content=tuple(
                _parse_reasoning_piece(p, f"{path}.content[{i}]") for i, p in enumerate(pieces)
            ),
            id=r.opt_str("id"),
            signature=r.opt_str("signature"),
        )
    if kind == "image":
        return _media(r, kind)
    raise ModelError(f'{path}.type: unknown assistant part type "{kind}"')


def parse_message(obj: object, path: str = "message") -> Message:
    """One message from its JSON (SPEC section 1); `path` names it in errors."""
    r = _Reader(obj, path)
    role = r.text("role")
    if role == "system":
        return SystemMessage(r.text("content"))
    if role == "user":
        parts = r.items("content")
        return UserMessage(
            tuple(_parse_user_part(p, f"{path}.content[{i}]") for i, p in enumerate(parts))
        )
    if role == "assistant":
        parts = r.items("content")
        return AssistantMessage(
            tuple(_parse_assistant_part(p, f"{path}.content[{i}]") for i, p in enumerate(parts)),
            id=r.opt_str("id"),
        )
    raise ModelError(f'{path}.role: expected "system", "user" or "assistant", got "{role}"')


def parse_messages(objs: Iterable[object]) -> list[Message]:
    """Messages from their JSON (SPEC section 1). Raises `ModelError` naming index and field."""
    if isinstance(objs, str | bytes | Mapping):
        raise ModelError(f"messages: expected a list, got {_kind(objs)}")
    return [parse_message(obj, f"messages[{i}]") for i, obj in enumerate(objs)]


# ---------------------------------------------------------------------------------------------
# dump: model -> JSON


def _dump_media(part: Media) -> dict[str, JSON]:
    return {"type": part.kind, **part.data}


def _dump_plain(part: Text | Media) -> dict[str, JSON]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    return _dump_media(part)


def _dump_user_part(part: UserPart) -> dict[str, JSON]:
    if isinstance(part, ToolResult):
        return {
            "type": "tool_result",
            "call": part.call,
            "name": part.name,
            "content": [_dump_plain(p) for p in part.content],
            "status": part.status,
        }
    return _dump_plain(part)


def _dump_reasoning_piece(piece: ReasoningPiece) -> dict[str, JSON]:
    if isinstance(piece, Encrypted):
        return {"type": "encrypted", "data": piece.data}
    return {"type": piece.kind, "text": piece.text}


def _dump_assistant_part(part: AssistantPart) -> dict[str, JSON]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text, "additional_params": part.additional_params}
    if isinstance(part, ToolCall):
        return {
            "type": "tool_call",
            "id": part.id,
            "name": part.name,
            "arguments": part.arguments,
            "raw_arguments": part.raw_arguments,
            "signature": part.signature,
            "additional_params": part.additional_params,
        }
    if isinstance(part, Reasoning):
        return {
            "type": "reasoning",
            "id": part.id,
            "signature": part.signature,
            "content": [_dump_reasoning_piece(p) for p in part.content],
        }
    return _dump_media(part)


def dump_message(message: Message) -> dict[str, JSON]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        return {"role": "user", "content": [_dump_user_part(p) for p in message.content]}
    return {
        "role": "assistant",
        "id": message.id,
        "content": [_dump_assistant_part(p) for p in message.content],
    }


def dump_messages(messages: Sequence[Message]) -> list[dict[str, JSON]]:
    """The JSON of SPEC section 1; `dump_messages(parse_messages(x)) == x` for canonical `x`."""
    return [dump_message(m) for m in messages]
