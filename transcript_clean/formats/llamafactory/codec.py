"""LLaMA-Factory's v1 data format: `messages` whose `content` is a list of `{type, value}`
items, each message with its `loss_weight`, as LLaMA-Factory v1 trains on them.

    {"messages": [
        {"role": "system", "content": [{"type": "text", "value": "You are a weather bot."}],
         "loss_weight": 0.0},
        {"role": "user", "content": [{"type": "text", "value": "Weather in Paris?"}],
         "loss_weight": 0.0},
        {"role": "assistant", "content": [
            {"type": "reasoning", "value": "I should look it up."},
            {"type": "tool_call", "value": "{\\"name\\": \\"get_weather\\", \\"arguments\\": {}}"}],
         "loss_weight": 1.0},
        {"role": "tool", "content": [{"type": "text", "value": "18 C"}], "loss_weight": 0.0},
        {"role": "assistant", "content": [{"type": "text", "value": "18 C."}], "loss_weight": 1.0}],
     "tools": "[{\\"type\\": \\"function\\", \\"function\\": {...}}]"}

What LLaMA-Factory's own v1 code reads (`core/rendering/format.py`, `_to_hf_messages`): items
`text`, `reasoning` (the assistant's reasoning), `tool_call` (its value the JSON text of one
`{name, arguments}` object), and `image_url` / `video_url` / `audio_url` (media); tool results
are `role: tool` messages, with no ids; the declared tools a `tools` column of JSON text. The
k-th tool message of a run answers the k-th call of the assistant turn before it; one tool
message whose text is a JSON list of one item per call answers them all (as LLaMA-Factory's
`reason_tool_use_demo` files write parallel results, and as ShareGPT's observations do).
`loss_weight` is not part of the canonical model: it stays on its message, written back with
it; a message written fresh gets LLaMA-Factory's converters' weight (1.0 for the assistant, 0.0
for others) where the row's messages carry weights.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.formats.base import (
    Decoded,
    DecodeError,
    Format,
    IdMinter,
    Row,
    expect_list,
    expect_object,
    join_texts,
    malformed,
    required_str,
    unknown_role,
    without_origins,
)
from transcript_clean.formats.llamafactory.values import MEDIA_KINDS, read_call
from transcript_clean.formats.sharegpt.values import split_list
from transcript_clean.model import (
    AssistantMessage,
    AssistantPart,
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

if TYPE_CHECKING:
    import pyarrow as pa

    from transcript_clean.columnar.conversations import Conversations

_MEDIA_TYPES: Final = {kind: type_ for type_, kind in MEDIA_KINDS.items()}
WEIGHT: Final = "loss_weight"


class LlamaFactoryFormat(Format):
    """`messages` of system / user / assistant / tool, `content` a list of `{type, value}`;
    a `tools` column of JSON text."""

    name = "llamafactory"
    default_column = "messages"
    joins_text = False
    merged_field = "content"
    words = (
        "LLaMA-Factory v1 messages: content items {type, value} of text / reasoning / "
        "tool_call, tool results by position, loss_weight kept"
    )

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        column = self.column
        if column not in row:
            raise malformed(column, "no such column in the row")
        items = expect_list(row[column], column)
        mint = IdMinter(tuple)  # the format holds no ids a minted one could collide with
        messages: list[Message] = []
        run: list[tuple[Mapping[str, Any], str]] = []  # tool messages of one run, their paths
        answers: tuple[ToolCall, ...] = ()  # the calls of the turn before, which a run answers
        start = 0  # the index of the run's first tool message

        for i, item in enumerate(items):
            path = f"{column}[{i}]"
            obj = expect_object(item, path)
            role = required_str(obj, "role", path)
            if role == "tool":
                if not run:
                    start = i
                run.append((obj, path))
                continue
            if run:
                messages.append(UserMessage(_results(run, start, answers, mint)))
                run, answers = [], ()
            content = expect_list(obj.get("content"), f"{path}.content")
            if role == "system":
                messages.append(SystemMessage(_system_text(content, path), origin=obj))
            elif role == "user":
                parts = tuple(_user_part(c, f"{path}.content[{k}]") for k, c in enumerate(content))
                messages.append(UserMessage(parts, origin=obj))
                answers = ()
            elif role == "assistant":
                message = AssistantMessage(_assistant_parts(content, path, i, mint), origin=obj)
                messages.append(message)
                answers = message.tool_calls
            else:
                raise unknown_role(
                    f"{path}.role",
                    f'unknown role "{role}"; expected system, user, assistant or tool',
                )
        if run:
            messages.append(UserMessage(_results(run, start, answers, mint)))
        return Decoded(messages, dict(row), frozenset(mint.minted), format=self.name)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.llamafactory.flatten import flatten_llamafactory

        return flatten_llamafactory(column)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        if decoded.format != self.name:
            messages = without_origins(messages)
        row = dict(decoded.row)
        weighted = _weighted(decoded.row.get(self.column))
        out: list[Row] = []
        calls: tuple[ToolCall, ...] = ()  # the calls the next tool messages answer by position
        for message in messages:
            if isinstance(message, SystemMessage):
                out.append(_system_out(message, weighted))
            elif isinstance(message, AssistantMessage):
                out.append(_assistant_out(message, weighted))
                calls = message.tool_calls
            else:
                results = [p for p in message.content if isinstance(p, ToolResult)]
                out.extend(_results_out(results, calls, weighted))
                others = [p for p in message.content if not isinstance(p, ToolResult)]
                if others or not results:
                    out.append(_message_out(message.origin, "user", _items_out(others), weighted))
                calls = ()
        row[self.column] = out
        return row


# ---------------------------------------------------------------------------------------------
# decode


def _item(value: object, path: str) -> tuple[Mapping[str, Any], str]:
    """A content item and its type."""
    item = expect_object(value, path)
    return item, required_str(item, "type", path)


def _value(item: Mapping[str, Any], path: str) -> str:
    return required_str(item, "value", path)


def _system_text(content: list[Any], path: str) -> str:
    texts = []
    for k, value in enumerate(content):
        item_path = f"{path}.content[{k}]"
        item, type_ = _item(value, item_path)
        if type_ != "text":
            raise malformed(item_path, f'a system message holds only text items, not "{type_}"')
        texts.append(_value(item, item_path))
    return join_texts(texts)


def _user_part(value: object, path: str) -> Text | Media:
    item, type_ = _item(value, path)
    if type_ == "text":
        return Text(_value(item, path), origin=item)
    if type_ in ("reasoning", "tool_call"):
        raise malformed(path, f'a "{type_}" item belongs to an assistant message')
    return _media(item, type_, path)


def _media(item: Mapping[str, Any], type_: str, path: str) -> Media:
    if type_ in MEDIA_KINDS and item.get("value") is None:
        raise malformed(path, 'missing "value"')
    data = {key: value for key, value in item.items() if key != "type"}
    return Media(MEDIA_KINDS.get(type_, type_), data)


def _assistant_parts(
    content: list[Any], path: str, i: int, mint: IdMinter
) -> tuple[AssistantPart, ...]:
    parts: list[AssistantPart] = []
    for k, value in enumerate(content):
        item_path = f"{path}.content[{k}]"
        item, type_ = _item(value, item_path)
        if type_ == "text":
            parts.append(Text(_value(item, item_path), origin=item))
        elif type_ == "reasoning":
            parts.append(Reasoning((ReasoningText(_value(item, item_path)),)))
        elif type_ == "tool_call":
            name, arguments, raw = read_call(_value(item, item_path), item_path)
            parts.append(ToolCall(mint(f"call_{i}_{k}"), name, arguments, raw, origin=item))
        else:
            parts.append(_media(item, type_, item_path))
    return tuple(parts)


def _results(
    run: list[tuple[Mapping[str, Any], str]],
    start: int,
    answers: tuple[ToolCall, ...],
    mint: IdMinter,
) -> tuple[ToolResult, ...]:
    """A run of tool messages: the k-th answers the k-th call of the turn before; one message
    whose one text is a JSON list of one item per call answers them all."""
    contents = []
    for obj, path in run:
        content = expect_list(obj.get("content"), f"{path}.content")
        contents.append(tuple(_user_part(c, f"{path}.content[{k}]") for k, c in enumerate(content)))
    if len(run) == 1 and len(answers) >= 2 and _one_text(contents[0]) is not None:
        texts = split_list(_one_text(contents[0]), len(answers))
        if texts is not None:
            return tuple(
                ToolResult(c.id, (Text(t),), c.name, origin=run[0][0])
                for c, t in zip(answers, texts, strict=True)
            )
    results = []
    for k, ((obj, _), parts) in enumerate(zip(run, contents, strict=True)):
        if k < len(answers):
            call_id, name = answers[k].id, answers[k].name
        else:
            call_id, name = mint(f"result_{start + k}"), None  # answers nothing: an orphan
        results.append(ToolResult(call_id, parts, name, origin=obj))
    return tuple(results)


def _one_text(parts: tuple[Text | Media, ...]) -> str | None:
    return parts[0].text if len(parts) == 1 and isinstance(parts[0], Text) else None


# ---------------------------------------------------------------------------------------------
# encode


def _weighted(items: object) -> bool:
    """Whether the row's messages carry `loss_weight`: then fresh ones get one too."""
    return isinstance(items, list) and any(
        isinstance(item, Mapping) and WEIGHT in item for item in items
    )


def _message_out(
    origin: Mapping[str, Any] | None, role: str, content: list[Row], weighted: bool
) -> Row:
    if origin is None:
        out: Row = {"role": role, "content": content}
        if weighted:
            out[WEIGHT] = 1.0 if role == "assistant" else 0.0
        return out
    out = dict(origin)
    out["content"] = content  # equal to the origin's where nothing changed
    return out


def _system_out(message: SystemMessage, weighted: bool) -> Row:
    origin = message.origin
    if origin is not None:
        try:
            same = (
                _system_text(expect_list(origin.get("content"), "content"), "") == message.content
            )
        except DecodeError:
            same = False
        if same:
            return dict(origin)
    return _message_out(origin, "system", [{"type": "text", "value": message.content}], weighted)


def _items_out(parts: Sequence[Any]) -> list[Row]:
    out: list[Row] = []
    for part in parts:
        if isinstance(part, Text):
            item = dict(part.origin) if part.origin is not None else {"type": "text"}
            item["value"] = part.text
            out.append(item)
        elif isinstance(part, Media):
            type_ = _MEDIA_TYPES.get(part.kind, part.kind)
            out.append({"type": type_, **part.data})
        elif isinstance(part, Reasoning):
            texts = (p.text for p in part.content if isinstance(p, ReasoningText))
            out.append({"type": "reasoning", "value": join_texts(texts)})
        elif isinstance(part, ToolCall):
            out.append(_call_out(part))
    return out


def _call_out(call: ToolCall) -> Row:
    origin = call.origin
    if origin is not None and isinstance(origin.get("value"), str):
        try:
            was: tuple[str, Any, str | None] | None = read_call(origin["value"], "")
        except DecodeError:
            was = None
        if was == (call.name, call.arguments, call.raw_arguments):
            return dict(origin)
    arguments = call.raw_arguments if call.raw_arguments is not None else call.arguments
    value = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    out = dict(origin) if origin is not None else {"type": "tool_call"}
    out["value"] = value
    return out


def _assistant_out(message: AssistantMessage, weighted: bool) -> Row:
    return _message_out(message.origin, "assistant", _items_out(message.content), weighted)


def _results_out(
    results: list[ToolResult], calls: tuple[ToolCall, ...], weighted: bool
) -> Iterator[Row]:
    if not results:
        return
    # Results answer by position: put them in call order (stable, so results read from a row
    # keep their order; results of no call go last).
    order = {c.id: k for k, c in reversed(list(enumerate(calls)))}
    results = sorted(results, key=lambda r: order.get(r.call, len(calls)))
    origin = results[0].origin
    if (
        len(results) >= 2
        and origin is not None
        and all(r.origin is origin for r in results)
        and [r.call for r in results] == [c.id for c in calls]
    ):
        # One message held them all as a JSON list: written back as it was when unchanged.
        texts = [join_texts(p.text for p in r.content if isinstance(p, Text)) for r in results]
        content = origin.get("content")
        was = content[0].get("value") if isinstance(content, list) and len(content) == 1 else None
        if split_list(was, len(texts)) == texts:
            yield dict(origin)
            return
    for result in results:
        shared = any(r.origin is result.origin for r in results if r is not result)
        if result.origin is not None and not shared:
            yield _message_out(result.origin, "tool", _items_out(result.content), weighted)
        else:  # fresh, or one of several read from one message: a message of its own
            yield _message_out(None, "tool", _items_out(result.content), weighted)
